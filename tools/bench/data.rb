# frozen_string_literal: true

# `rake bench:data`: one Redis GET per request (wrk -t1 -c100), side by side
# in one run, each server pinned to SERVER_CPU (1), wrk and redis-server to
# LOAD_CPU (0):
#
#   gateway W2 hello      location "/hello" do "ok" end
#   gateway redis.get     location "/redis" do R.get("k") end   (R = Async::Redis, pool 100)
#   OpenResty redis GET   nginx + libnginx-mod-http-lua, tools/bench/resp.lua over cosockets
#                         (keep-alive pool of 100)
#   gateway rate limit, fixed address / through Sentinel
#                         the fleet example's limit (a pipeline of INCR and EXPIRE) on a client
#                         of the address, and on one that found the same redis-server through a
#                         redis-server --sentinel watching it (issue #26: within ±5%)
#
# Per contestant: a 1 s warm-up, then DURATION (5) seconds measured; req/s,
# p50/p99 and the server's CPU µs per request (utime+stime of its processes
# over the window / requests); ROUNDS (3) rounds, medians reported. Writes
# build/bench/data.md.
require_relative 'common'

module GatewayBench
  class Data
    include Util

    def initialize(root:, env: ENV)
      @root = root
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @duration = env_int(env, 'DURATION', 5)
      @rounds = env_int(env, 'ROUNDS', 3)
      @run = Runner.new(root: root, env: env, tag: 'data')
    end

    def log(msg)
      @run.log(msg)
    end

    def start_redis
      @redis_port = free_port
      dir = @run.scratch('redis')
      @redis_pid = Process.spawn('taskset', '-c', @run.load_cpu.to_s, 'redis-server', '--port', @redis_port.to_s,
                                 '--bind', HOST, '--save', '', '--appendonly', 'no', '--dir', dir,
                                 '--daemonize', 'no', in: File::NULL, out: File.join(dir, 'redis.log'), err: %i[child out])
      deadline = monotonic + 10
      sleep 0.05 until accepts?(@redis_port) || monotonic > deadline
      s = TCPSocket.new(HOST, @redis_port)
      s.write("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n")
      s.gets
      s.close
    end

    def stop_redis
      [@sentinel_pid, @redis_pid].compact.each do |pid|
        signal(:TERM, pid)
        wait_exit(pid, 5)
      end
    end

    # One sentinel watching the bench's redis as "bench" (quorum 1), on the load core.
    def start_sentinel
      @sentinel_port = free_port
      dir = @run.scratch('sentinel')
      conf = File.join(dir, 'sentinel.conf')
      File.write(conf, "port #{@sentinel_port}\nbind #{HOST}\ndir #{dir}\nsentinel monitor bench #{HOST} #{@redis_port} 1\n")
      @sentinel_pid = Process.spawn('taskset', '-c', @run.load_cpu.to_s, 'redis-server', conf, '--sentinel',
                                    in: File::NULL, out: File.join(dir, 'sentinel.log'), err: %i[child out])
      deadline = monotonic + 10
      sleep 0.05 until accepts?(@sentinel_port) || monotonic > deadline
      raise Error, "redis sentinel did not start on #{@sentinel_port}" unless accepts?(@sentinel_port)
    end

    def contestants
      gw = lambda do |port|
        <<~RUBY
          R = Async::Redis.new("#{HOST}:#{@redis_port}", pool: 100)
          S = Async::Redis.new(sentinels: ["#{HOST}:#{@sentinel_port}"], master_name: "bench", pool: 100)
          def limit(r)
            r.pipeline { |p| p.incr("rl"); p.expire("rl", 60) }.first > 0 ? "ok" : "no"
          end
          server listen: "#{HOST}:#{port}", workers: 1 do
            location "/hello" do "ok" end
            location "/redis" do R.get("k") end
            location "/limit" do limit(R) end
            location "/limit_sentinel" do limit(S) end
          end
        RUBY
      end
      openresty = lambda do |port|
        <<~NGINX
          lua_package_path "#{File.join(@root, 'tools/bench')}/?.lua;;";
          server {
              listen #{HOST}:#{port} reuseport;
              location /redis {
                  content_by_lua_block {
                      local v, err = require("resp").get("#{HOST}", #{@redis_port}, "k")
                      if not v then ngx.status = 502 ngx.say(err) return end
                      ngx.print(v)
                  }
              }
          }
        NGINX
      end
      [['gateway W2 hello', :gateway, gw, '/hello', 'ok'],
       ['gateway redis.get', :gateway, gw, '/redis', 'value'],
       ['OpenResty redis GET', :nginx, openresty, '/redis', 'value'],
       ['gateway rate limit, fixed address', :gateway, gw, '/limit', 'ok'],
       ['gateway rate limit, through Sentinel', :gateway, gw, '/limit_sentinel', 'ok']]
    end

    # nginx + the Lua module, one worker; body is the http {} content.
    def start_openresty(name, port, body)
      dir = @run.scratch(name)
      conf = File.join(dir, 'nginx.conf')
      File.write(conf, <<~NGINX)
        load_module /usr/lib/nginx/modules/ndk_http_module.so;
        load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
        daemon off;
        master_process on;
        worker_processes 1;
        user root;
        pid #{dir}/nginx.pid;
        error_log #{dir}/error.log warn;
        events { worker_connections 4096; }
        http {
            access_log off;
            client_body_temp_path #{dir};
            default_type text/plain;
        #{body.gsub(/^/, '    ')}
        }
      NGINX
      bin = `sh -c 'command -v nginx'`.strip
      @run.start(name, [bin, '-p', dir, '-e', "#{dir}/error.log", '-c', conf], port: port, dir: dir, binary: bin)
    end

    def measure(name, kind, conf, path, want)
      port = free_port
      srv = kind == :gateway ? @run.start_gateway(name.tr(' ', '-'), @bin, conf.call(port), port) : start_openresty('openresty', port, conf.call(port))
      url = "http://#{HOST}:#{port}#{path}"
      body = Net::HTTP.get(URI(url))
      raise Error, "#{name}: #{path} answered #{body.inspect}, want #{want.inspect}" unless body == want

      @run.run_wrk(%w[-t1 -c100], url, 1)
      sleep 0.3
      pids = [srv.pid] + descendants(srv.pid)
      t0 = pids.sum { |p| ticks(p) || 0 }
      r = @run.run_wrk(%w[-t1 -c100], url, @duration)
      t1 = pids.sum { |p| ticks(p) || 0 }
      w = Runner.parse_wrk(r[:out])
      raise Error, "#{name}: wrk failed:\n#{r[:out]}" unless w[:requests]&.positive?

      us = (t1 - t0).to_f / clk_tck * 1e6 / w[:requests]
      log format('%-22s %9.0f req/s  %6.1f µs/req  p50 %.2f ms  p99 %.2f ms  errors %d', name, w[:rps], us,
                 w[:p50_ms] || 0, w[:p99_ms] || 0, w[:errors])
      { rps: w[:rps], us: us, p50: w[:p50_ms], p99: w[:p99_ms], **w.slice(:errors, :non2xx, :timeouts, :failures), cmd: r[:cmd] }
    ensure
      @run.stop(srv) if srv
    end

    def run
      require 'net/http'
      Util.ensure_pkgs(%w[wrk nginx libnginx-mod-http-lua redis-server], log: method(:log))
      results = Hash.new { |h, k| h[k] = [] }
      @run.with_cpu_lock do
        start_redis
        start_sentinel
        @rounds.times do |i|
          log "round #{i + 1} of #{@rounds}"
          contestants.each { |c| results[c[0]] << measure(*c) }
        end
      ensure
        stop_redis
        @run.stop_all
      end
      report(results)
    end

    def report(results)
      med = ->(name, k) { median(results[name].map { |r| r[k] }) }
      hello = med.call('gateway W2 hello', :us)
      rows = results.keys.map do |name|
        fails = Load.sum(results[name])
        format('| %s | %.0f | %.1f | %.2f | %.2f | %s | %s |', Load.label(name, fails), med.call(name, :rps), med.call(name, :us),
               med.call(name, :p50), med.call(name, :p99), name == 'gateway W2 hello' ? '—' : format('%+.1f', med.call(name, :us) - hello),
               Load.cells(fails))
      end
      gw = med.call('gateway redis.get', :rps)
      orr = med.call('OpenResty redis GET', :rps)
      md = +"# bench:data (median of #{@rounds} rounds, wrk -t1 -c100, #{@duration} s each)\n\n"
      md << "#{Time.now.utc.strftime('%F %H:%M UTC')}, load average #{File.read('/proc/loadavg').split.first(3).join(' ')}; " \
            "command: `#{results.values.flatten.first&.dig(:cmd)}`. req/s counts successful (2xx) requests only; " \
            "failures are summed over the rounds, a row with any is marked ⚠.\n\n"
      md << "| contestant | req/s | server CPU µs/req | p50 ms | p99 ms | µs/req above W2 hello | #{Load::FAIL_HEAD} |\n" \
            "|---|--:|--:|--:|--:|--:|#{Load::FAIL_ALIGN}|\n"
      md << rows.join("\n") << "\n\n"
      md << format("gateway redis.get / OpenResty: %.2f× throughput\n", gw / orr)
      md << format("rate limit through Sentinel / fixed address: %.3f× server CPU per request\n",
                   med.call('gateway rate limit, through Sentinel', :us) / med.call('gateway rate limit, fixed address', :us))
      File.write(File.join(@run.out_dir, 'data.md'), md)
      puts md
    end
  end
end

if $PROGRAM_NAME == __FILE__
  GatewayBench::Data.new(root: File.expand_path('../..', __dir__)).run
end
