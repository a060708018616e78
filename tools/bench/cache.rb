# frozen_string_literal: true

# `rake bench:cache`: the response cache's hit path, the gateway
# (`cache :api, memory:, path:, max_size:` and `cache: { zone: :api, valid:
# { 200 => 600 } }` on a proxy_pass location) next to nginx (`proxy_cache`
# with `proxy_cache_valid 200 600s`, `sendfile on`), one worker each pinned
# to SERVER_CPU, both in front of the same upstream (an nginx serving the
# files with no Cache-Control, re-pinned to LOAD_CPU with wrk, so the server
# CPU holds only the front). Two bodies: 1 KB (wrk -t1 -cCONNS: req/s and
# the front worker's CPU µs per request) and 1 MB (wrk -t1 -cBIG_CONNS:
# bytes/s). Every front is first checked to answer a HIT with the upstream's
# exact bytes (X-Cache-Status on both), so the runs measure hits only.
# Writes build/bench/cache.{md,json}.
#
# Environment: CONNS (100), BIG_CONNS (10), DURATION (5), ROUNDS (2),
# GATEWAY_BIN, SERVER_CPU (1), LOAD_CPU (0), CPU_LOCK, BENCH_OUT.

require 'json'
require 'open3'
require 'time'
require_relative 'common'

module GatewayBench
  class Cache
    include Util

    FILES = { '1k' => 1024, '1m' => 1024 * 1024 }.freeze
    CASES = [%w[gateway 1k], %w[nginx 1k], %w[gateway 1m], %w[nginx 1m]].freeze

    def initialize(root:, env: ENV)
      @root = root
      @conns = env_int(env, 'CONNS', 100)
      @big_conns = env_int(env, 'BIG_CONNS', 10)
      @rounds = env_int(env, 'ROUNDS', 2)
      @duration = env_int(env, 'DURATION', 5)
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @run = Runner.new(root: root, env: env, tag: 'cache')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      Util.ensure_pkgs(%w[nginx wrk curl], log: method(:log))
      @data = @run.scratch('data')
      @bodies = FILES.to_h do |name, size|
        body = Random.new(size).bytes(size)
        File.binwrite(File.join(@data, "#{name}.bin"), body)
        [name, body]
      end
      up_port = free_port
      backend = start_backend(up_port)
      rows = @run.rounds(@rounds, CASES, :size, keep: backend) { |name, size| measure(name, size, up_port) }
      write(rows)
      rows
    end

    def start_backend(port)
      srv = @run.start_nginx('upstream', port, <<~NGINX)
        server {
            listen #{HOST}:#{port};
            keepalive_requests 1000000;
            location / { default_type application/octet-stream; root #{@data}; }
        }
      NGINX
      @run.pin_to_load(srv)
      srv
    end

    def start_front(name, port, up)
      if name == 'gateway'
        cache_dir = File.join(@run.scratch('gateway-cache'), 'api')
        @run.start_gateway(name, @bin, <<~RUBY, port)
          cache :api, memory: "64m", path: "#{cache_dir}", max_size: "1g"
          server listen: "#{HOST}:#{port}", workers: 1 do
            location "/", proxy_pass: "http://127.0.0.1:#{up}/", cache: { zone: :api, valid: { 200 => 600 } }
          end
        RUBY
      else
        cache_dir = File.join(@run.scratch('nginx-cache'), 'api')
        @run.start_nginx(name, port, <<~NGINX)
          sendfile on;
          proxy_cache_path #{cache_dir} levels=1:2 keys_zone=api:64m max_size=1g inactive=60m use_temp_path=off;
          upstream cacheup {
              server 127.0.0.1:#{up};
              keepalive 128;
          }
          server {
              listen #{HOST}:#{port};
              keepalive_requests 1000000;
              location / {
                  proxy_pass http://cacheup;
                  proxy_http_version 1.1;
                  proxy_set_header Connection "";
                  proxy_cache api;
                  proxy_cache_valid 200 600s;
                  add_header X-Cache-Status $upstream_cache_status;
              }
          }
        NGINX
      end
    end

    # The first request fills the cache; the next ones must be HITs with the
    # upstream's bytes.
    def check(name, size, url)
      status = nil
      3.times do
        out, st = Open3.capture2('curl', '-sS', '--max-time', '10', '-D', '-', url, binmode: true)
        raise Error, "#{name}: curl failed" unless st.success?

        head, body = out.split("\r\n\r\n", 2)
        status = head[/^x-cache-status: *(\S+)/i, 1]
        raise Error, "#{name}: #{size}: another body (#{body.to_s.bytesize} bytes)" unless body == @bodies[size]
      end
      raise Error, "#{name}: #{size}: the third request was #{status.inspect}, not a HIT" unless status == 'HIT'
    end

    def measure(name, size, up)
      port = free_port
      srv = start_front(name, port, up)
      worker = @run.worker_of(srv)
      url = "http://#{HOST}:#{port}/#{size}.bin"
      check(name, size, url)
      args = ['-t1', "-c#{size == '1k' ? @conns : @big_conns}"]
      @run.run_wrk(args, url, 1) # warm-up: connections, the page cache
      row = { server: name, size: size }.merge(@run.cpu_per_request(name, worker, args, url, @duration))
      row[:mb_per_s] = (row[:rps].to_f * FILES[size] / 1e6).round(1) if row[:rps]
      log "#{name} #{size}: #{row.inspect}"
      row
    end

    def write(rows)
      ok = rows.reject { |r| r[:error] }
      med = ->(name, size, key) { median_of(ok, key, server: name, size: size) }
      md = +"# bench:cache — cache hits through proxy_pass, gateway `cache:` vs nginx `proxy_cache`, #{@duration} s runs\n\n"
      md << "#{@run.conditions(@rounds)}; 1k: wrk -t1 -c#{@conns}, 1m: wrk -t1 -c#{@big_conns}\n\n"
      md << "| server | body | req/s | MB/s | server CPU µs/req | p99 ms | #{Load::FAIL_HEAD} |\n" \
            "|---|---|--:|--:|--:|--:|#{Load::FAIL_ALIGN}|\n"
      CASES.each do |name, size|
        fails = Load.sum(ok.select { |r| r[:server] == name && r[:size] == size })
        md << "| #{Load.label(name, fails)} | #{size} | #{med.call(name, size, :rps)&.round} | #{med.call(name, size, :mb_per_s)} | " \
              "#{med.call(name, size, :cpu_us_per_req)} | #{med.call(name, size, :p99_ms)} | #{Load.cells(fails)} |\n"
      end
      ratio = lambda do |size, key|
        g = med.call('gateway', size, key)
        n = med.call('nginx', size, key)
        g && n && n.positive? ? (g / n).round(2) : nil
      end
      md << "\n1 KB hits, req/s gateway / nginx: #{ratio.call('1k', :rps)} (target >= 1.2); " \
            "server CPU µs/req gateway / nginx: #{ratio.call('1k', :cpu_us_per_req)} (target < 1)\n"
      md << "1 MB hits, bytes/s gateway / nginx: #{ratio.call('1m', :rps)} (target >= 1); " \
            "server CPU µs/req gateway / nginx: #{ratio.call('1m', :cpu_us_per_req)}\n"
      rows.select { |r| r[:error] }.each { |r| md << "\n#{r[:server]} #{r[:size]} round #{r[:round]}: error: #{r[:error]}\n" }
      @run.write_report('cache', md, rows)
    end
  end
end
