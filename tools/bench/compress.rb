# frozen_string_literal: true

# `rake bench:compress`: a 10 KB JSON answer through proxy_pass, compressed
# on the fly, the gateway (`compress: { encodings: [...], level: { gzip: 1 } }`)
# next to nginx (`gzip on; gzip_comp_level 1; gzip_types application/json`),
# one worker each pinned to SERVER_CPU, both proxying with keep-alive to the
# same upstream (an nginx serving the file, re-pinned to LOAD_CPU with wrk so
# that the server CPU holds only the front). wrk sends `Accept-Encoding:
# <coding>`; every front is first checked to answer with that
# Content-Encoding. The figure to compare is the front worker's CPU time per
# request (utime + stime over the run), gzip row against gzip row; the
# gateway's br and zstd rows stand beside it (nginx has no on-the-fly br or
# zstd in Debian), and an identity row of each shows what compressing costs.
# Writes build/bench/compress.{md,json}.
#
# Environment: CONNS (50), DURATION (5), ROUNDS (2), GATEWAY_BIN,
# SERVER_CPU (1), LOAD_CPU (0), CPU_LOCK, BENCH_OUT.

require 'json'
require 'open3'
require 'time'
require_relative 'common'

module GatewayBench
  class Compress
    include Util

    # [front, coding]: what each row measures.
    CASES = [%w[gateway gzip], %w[nginx gzip], %w[gateway br], %w[gateway zstd], %w[gateway identity],
             %w[nginx identity]].freeze

    def initialize(root:, env: ENV)
      @root = root
      @conns = env_int(env, 'CONNS', 50)
      @rounds = env_int(env, 'ROUNDS', 2)
      @duration = env_int(env, 'DURATION', 5)
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @run = Runner.new(root: root, env: env, tag: 'compress')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      Util.ensure_pkgs(%w[nginx wrk curl], log: method(:log))
      @data = @run.scratch('data')
      recs = []
      i = 0
      while (recs.sum(&:bytesize) + recs.size + 2) < 10_000 # records until the array is about 10 KB
        i += 1
        recs << %({"id":#{i},"name":"user #{i}","email":"user#{i}@example.com","active":#{i.odd?},"score":#{i * 37 % 1000}})
      end
      json = "[#{recs.join(',')}]"
      File.write(File.join(@data, 'data.json'), json)
      @size = json.bytesize
      up_port = free_port
      backend = start_backend(up_port)
      rows = []
      begin
        @rounds.times do |round|
          CASES.each do |name, coding|
            rows << measure(name, coding, up_port).merge(round: round + 1)
          rescue Error => e
            log "#{name} #{coding}: #{e.message}"
            rows << { server: name, coding: coding, round: round + 1, error: e.message.lines.first.strip }
          ensure
            @run.stop_except(backend)
          end
        end
      ensure
        @run.stop_all
      end
      write(rows)
      rows
    end

    def start_backend(port)
      srv = @run.start_nginx('upstream', port, <<~NGINX)
        server {
            listen #{HOST}:#{port};
            keepalive_requests 1000000;
            location / { default_type application/json; root #{@data}; }
        }
      NGINX
      @run.pin_to_load(srv)
      srv
    end

    def start_front(name, port, up)
      if name == 'gateway'
        @run.start_gateway(name, @bin, <<~RUBY, port)
          server listen: "#{HOST}:#{port}", workers: 1 do
            location "/", proxy_pass: "http://127.0.0.1:#{up}/",
                          compress: { encodings: [:gzip, :br, :zstd], level: { gzip: 1, br: 1, zstd: 1 } }
          end
        RUBY
      else
        @run.start_nginx(name, port, <<~NGINX)
          upstream jsonup {
              server 127.0.0.1:#{up};
              keepalive 128;
          }
          server {
              listen #{HOST}:#{port};
              gzip on;
              gzip_comp_level 1;
              gzip_types application/json;
              location / {
                  proxy_pass http://jsonup;
                  proxy_http_version 1.1;
                  proxy_set_header Connection "";
              }
          }
        NGINX
      end
    end

    # The front answers with the coding asked for (and the body decodes).
    def check(name, coding, url)
      out, st = Open3.capture2('curl', '-sS', '--max-time', '10', '--compressed', '-D', '-', '-H',
                               "Accept-Encoding: #{coding}", url)
      raise Error, "#{name}: curl failed" unless st.success?

      head, body = out.split("\r\n\r\n", 2)
      got = head[/^content-encoding: *(\S+)/i, 1] || 'identity'
      raise Error, "#{name}: asked #{coding}, answered #{got}" unless got == coding
      raise Error, "#{name}: the #{coding} body does not decode to the file" unless body.bytesize == @size
    end

    def measure(name, coding, up)
      port = free_port
      srv = start_front(name, port, up)
      worker = @run.worker_of(srv)
      url = "http://#{HOST}:#{port}/data.json"
      check(name, coding, url)
      args = ['-t1', "-c#{@conns}", '-H', "Accept-Encoding: #{coding}"]
      @run.run_wrk(args, url, 1) # warm-up: connections, contexts
      row = { server: name, coding: coding }.merge(@run.cpu_per_request(name, worker, args, url, @duration))
      log "#{name} #{coding}: #{row.inspect}"
      row
    end

    def write(rows)
      ok = rows.reject { |r| r[:error] }
      med = lambda do |name, coding, key|
        xs = ok.select { |r| r[:server] == name && r[:coding] == coding }.map { |r| r[key] }.compact
        xs.empty? ? nil : median(xs).round(1)
      end
      load = File.read('/proc/loadavg').split.first(3).join(' ')
      md = +"# bench:compress — #{@size} B JSON through proxy_pass, compressed on the fly, wrk -t1 -c#{@conns}, #{@duration} s\n\n"
      md << "#{Time.now.utc.iso8601}, medians of #{@rounds} rounds, server CPU #{@run.server_cpu}, load CPU " \
            "#{@run.load_cpu}, load average at the end #{load}\n\n"
      md << "| server | coding | req/s | server CPU µs/req | p99 ms | errors | non-2xx | timeouts |\n|---|---|---:|---:|---:|---:|---:|---:|\n"
      CASES.each do |name, coding|
        sel = ok.select { |r| r[:server] == name && r[:coding] == coding }
        errs = sel.sum { |r| r[:errors].to_i }
        bad = sel.sum { |r| r[:non2xx].to_i }
        late = sel.sum { |r| r[:timeouts].to_i }
        md << "| #{name} | #{coding} | #{med.call(name, coding, :rps)&.round} | #{med.call(name, coding, :cpu_us_per_req)} | " \
              "#{med.call(name, coding, :p99_ms)} | #{errs} | #{bad} | #{late} |\n"
      end
      g = med.call('gateway', 'gzip', :cpu_us_per_req)
      n = med.call('nginx', 'gzip', :cpu_us_per_req)
      md << "\ngzip level 1, server CPU per request, gateway / nginx: #{(g / n).round(2)} (target <= 0.9)\n" if g && n
      rows.select { |r| r[:error] }.each { |r| md << "\n#{r[:server]} #{r[:coding]} round #{r[:round]}: error: #{r[:error]}\n" }
      @run.write_report('compress', md, rows)
    end
  end
end
