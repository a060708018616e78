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
# COUNT=instructions counts instead of timing (valgrind's callgrind, which
# the machine's load does not move): each front serves under callgrind (nginx
# with `master_process off`, so the process counted is the one serving);
# after a warm-up its counters are zeroed, N requests are sent (h2load --h1
# -c 10, HTTP/1.1 keep-alive: what wrk sends) and Ir per request is split
# into zlib's (libz.so) and the rest. Writes build/bench/compress_instructions.{md,json}.
#
# Environment: CONNS (50), DURATION (5), ROUNDS (2), GATEWAY_BIN,
# SERVER_CPU (1), LOAD_CPU (0), CPU_LOCK, BENCH_OUT; COUNT=instructions,
# N (5000), KEEP (a folder for the callgrind dumps).

require 'fileutils'
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
      @count = env['COUNT']
      @n = env_int(env, 'N', 5000)
      @keep = env['KEEP']
      @run = Runner.new(root: root, env: env, tag: 'compress')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      return count_instructions if @count == 'instructions'

      Util.ensure_pkgs(%w[nginx wrk curl], log: method(:log))
      write_data
      up_port = free_port
      backend = start_backend(up_port)
      rows = @run.rounds(@rounds, CASES, :coding, keep: backend) { |name, coding| measure(name, coding, up_port) }
      write(rows)
      rows
    end

    def write_data
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

    # The gateway's config (its worker's pid at /pid, for callgrind) and
    # nginx's http{} body: the same front in both modes.
    def gateway_conf(port, up)
      <<~RUBY
        server listen: "#{HOST}:#{port}", workers: 1 do
          location "/pid" do Gateway.pid.to_s end
          location "/", proxy_pass: "http://127.0.0.1:#{up}/",
                        compress: { encodings: [:gzip, :br, :zstd], level: { gzip: 1, br: 1, zstd: 1 } }
        end
      RUBY
    end

    def nginx_conf(port, up)
      <<~NGINX
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

    def start_front(name, port, up)
      if name == 'gateway'
        @run.start_gateway(name, @bin, gateway_conf(port, up), port)
      else
        @run.start_nginx(name, port, nginx_conf(port, up))
      end
    end

    # -- COUNT=instructions ---------------------------------------------------

    def count_instructions
      %w[valgrind callgrind_control callgrind_annotate h2load nginx curl].each do |t|
        raise Error, "#{t} is not installed (setup.sh)" unless command?(t)
      end
      write_data
      up_port = free_port
      start_backend(up_port)
      rows = []
      begin
        CASES.each do |name, coding|
          rows << { server: name, coding: coding }.merge(count_one(name, coding, up_port))
          log "#{name} #{coding}: #{rows.last.inspect}"
        end
      ensure
        @run.stop_all
      end
      write_instructions(rows)
      rows
    end

    # Ir per request of one front and coding: total, in libz.so, the rest.
    def count_one(name, coding, up)
      dir = Dir.mktmpdir("gw-compress-instr-#{name}-")
      port = free_port
      argv = if name == 'gateway'
               File.write("#{dir}/gw.rb", gateway_conf(port, up))
               [@bin, '-f', "#{dir}/gw.rb"]
             else
               Callgrind.nginx(dir, "keepalive_requests 1000000;\n#{nginx_conf(port, up)}")
             end
      pid = Callgrind.spawn(argv, dir)
      target = wait_callgrind(name, port, pid)
      url = "http://#{HOST}:#{port}/data.json"
      check(name, coding, url)
      h2load(url, coding, [@n / 10, 100].max) # warm-up: connections, contexts
      dump = File.join(@keep || dir, "#{name}-#{coding}.callgrind")
      FileUtils.mkdir_p(File.dirname(dump))
      ir = Callgrind.count(target, dir, dump) { h2load(url, coding, @n) }
      fns = self_ir(dump)
      zlib = fns.sum { |(_, obj), n| obj.start_with?('libz.so') ? n : 0 }.to_f / @n
      mem = fns.sum { |(fn, _), n| fn.match?(/__mem(set|cpy|move)/) ? n : 0 }.to_f / @n
      { n: @n, ir_per_req: (ir.to_f / @n).round, zlib_ir_per_req: zlib.round, other_ir_per_req: (ir.to_f / @n - zlib).round,
        mem_ir_per_req: mem.round }
    ensure
      Callgrind.stop(pid)
      FileUtils.rm_rf(dir) if dir
    end

    # The process to count: the gateway's worker (its /pid), nginx itself.
    def wait_callgrind(name, port, pid)
      600.times do
        if name == 'gateway'
          out, st = Open3.capture2('curl', '-sS', '--max-time', '5', "http://#{HOST}:#{port}/pid", err: File::NULL)
          return out.to_i if st.success? && out.to_i.positive?
        elsif accepts?(port)
          return pid
        end
        sleep 0.1
      end
      raise Error, "#{name} did not answer on #{port} under callgrind"
    end

    # n requests over 10 kept HTTP/1.1 connections; all must succeed (a
    # failed request costs other instructions, and Ir is divided by n).
    def h2load(url, coding, n)
      argv = ['h2load', '--h1', '-c', '10', '-n', n.to_s, '-H', "Accept-Encoding: #{coding}", url]
      out = IO.popen(argv, err: %i[child out], &:read)
      r = Load.h2load(out)
      return if r[:ok] == n && r[:failures].zero?

      raise Error, "#{argv.join(' ')}: #{r[:ok]} of #{n} succeeded (#{Load::FAIL_HEAD}: #{Load.cells(r)})"
    end

    # Self cost (Ir) per function in a dump: { [function, object file] => Ir }.
    def self_ir(dump)
      out = IO.popen(['callgrind_annotate', '--inclusive=no', '--threshold=100', '--auto=no', dump], err: File::NULL, &:read)
      by = Hash.new(0)
      out.each_line do |l|
        m = l.match(/^\s*([\d,]+)\s.*?:(\S+) \[(\S+)\]\s*$/) or next
        by[[m[2], File.basename(m[3])]] += m[1].delete(',').to_i
      end
      by
    end

    def write_instructions(rows)
      md = +"# bench:compress COUNT=instructions — #{@size} B JSON through proxy_pass, compressed on the fly, " \
            "h2load --h1 -c 10 -n #{@n}, callgrind\n\n#{Time.now.utc.iso8601}\n\n"
      md << "| server | coding | Ir/req | in zlib | outside zlib | of which libc memset/memcpy |\n|---|---|---:|---:|---:|---:|\n"
      rows.each do |r|
        md << "| #{r[:server]} | #{r[:coding]} | #{r[:ir_per_req]} | #{r[:zlib_ir_per_req]} | #{r[:other_ir_per_req]} | " \
              "#{r[:mem_ir_per_req]} |\n"
      end
      md << "\nUnder valgrind a `rep stosb`/`rep movsb` counts once per byte: a large memset/memcpy (zlib's hash " \
            "table cleared by deflateReset, a 10 KB body copied whole) weighs far more in Ir than in time.\n"
      g = rows.find { |r| r[:server] == 'gateway' && r[:coding] == 'gzip' }
      n = rows.find { |r| r[:server] == 'nginx' && r[:coding] == 'gzip' }
      md << "\ngzip level 1, Ir per request, gateway / nginx: #{(g[:ir_per_req].to_f / n[:ir_per_req]).round(3)}\n" if g && n
      @run.write_report('compress_instructions', md, rows)
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
      med = ->(name, coding, key) { median_of(ok, key, server: name, coding: coding) }
      md = +"# bench:compress — #{@size} B JSON through proxy_pass, compressed on the fly, wrk -t1 -c#{@conns}, #{@duration} s\n\n"
      md << "#{@run.conditions(@rounds)}\n\n"
      md << "req/s and CPU per request count 2xx answers only; #{Load::FAIL_HEAD} summed over the rounds, a row with any " \
            "marked ⚠ (docs/bench.md).\n\n"
      md << "| server | coding | req/s | server CPU µs/req | user + sys µs/req | p99 ms | #{Load::FAIL_HEAD} |\n" \
            "|---|---|---:|---:|---:|---:|#{Load::FAIL_ALIGN}|\n"
      CASES.each do |name, coding|
        fails = Load.sum(ok.select { |r| r[:server] == name && r[:coding] == coding })
        md << "| #{Load.label(name, fails)} | #{coding} | #{med.call(name, coding, :rps)&.round} | " \
              "#{med.call(name, coding, :cpu_us_per_req)} | #{med.call(name, coding, :user_us_per_req)} + " \
              "#{med.call(name, coding, :sys_us_per_req)} | #{med.call(name, coding, :p99_ms)} | #{Load.cells(fails)} |\n"
      end
      g = med.call('gateway', 'gzip', :cpu_us_per_req)
      n = med.call('nginx', 'gzip', :cpu_us_per_req)
      md << "\ngzip level 1, server CPU per request, gateway / nginx: #{(g / n).round(2)} (target <= 0.9)\n" if g && n
      rows.select { |r| r[:error] }.each { |r| md << "\n#{r[:server]} #{r[:coding]} round #{r[:round]}: error: #{r[:error]}\n" }
      @run.write_report('compress', md, rows)
    end
  end
end
