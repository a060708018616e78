# frozen_string_literal: true

# `rake bench:seed` (WORKLOADS=w1,w2,w3; `rake bench:w1`, `bench:w2`,
# `bench:w3` run one): the project's headline workloads against their peers,
# in one run on this machine, each server pinned to SERVER_CPU (1) and wrk to
# LOAD_CPU (0), under the shared CPU lock:
#
#   W1 the seed   examples/async.rb as shipped (ports changed to free ones):
#                 its non-blocking and blocking endpoints, front and backend
#                 (two workers) on the server CPU; against build/probe (the
#                 same flow in C on libevent, `rake bench:probe_build`) and
#                 nginx + Lua (Debian's libnginx-mod-http-lua: a front doing
#                 ngx.location.capture to a proxy_pass location, keepalive,
#                 and the blocking twin with LuaSocket; its own backend, a
#                 second nginx + Lua answering "done" after ngx.sleep(0.01))
#   W2 hello      the gateway's Ruby handler answering "ok" vs nginx
#                 `return 200 "ok"`
#   W3 proxy      the gateway's proxy_pass vs nginx proxy_pass, both with an
#                 upstream keepalive of 256 connections, to the same backend
#                 (a 1-worker nginx `return 200 "ok"`, also on the server CPU)
#
# Every load is `wrk -t1 -c100 --timeout 5s -dDURATION` after a 1 s warm-up; the
# contestants of a workload take turns, ROUNDS times, the order reversed
# every other round. Per run: req/s counting successful (2xx) requests only,
# errors, non-2xx and timeouts, and the server CPU µs per successful request
# (utime + stime from /proc of every process of that contestant: front and
# backend). The tables show medians; the failures are summed over the
# rounds. Writes build/bench/seed.md (date, `uptime`, commands) and seed.json.
#
# Environment: WORKLOADS (w1,w2,w3), ROUNDS (3), DURATION (5), GATEWAY_BIN,
# PROBE (build/probe), SERVER_CPU, LOAD_CPU, CPU_LOCK, BENCH_OUT.

require 'etc'
require 'net/http'
require_relative 'common'

module GatewayBench
  class Seed
    include Util

    NB = '/async_http_sub_request_with_proxy_pass'
    BLOCKING = '/http_sub_request_with_proxy_pass'
    # wrk's default 2 s timeout would cut the blocking rows, whose requests
    # wait ~100 x 10 ms in the queue by design
    WRK = %w[-t1 -c100 --timeout 5s].freeze
    LUA_MODULES = '/usr/lib/nginx/modules'
    LUA_CPATH = '/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;;'
    WORKLOADS = {
      'w1' => 'W1 the seed (examples/async.rb), non-blocking and blocking',
      'w2' => 'W2 hello: a handler answering "ok"',
      'w3' => 'W3 proxy: proxy_pass to one backend, upstream keepalive 256'
    }.freeze

    def initialize(root:, env: ENV)
      @root = root
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @probe = File.expand_path(env.fetch('PROBE', 'build/probe'), root)
      @rounds = env_int(env, 'ROUNDS', 3)
      @duration = env_int(env, 'DURATION', 5)
      @workloads = env.fetch('WORKLOADS', WORKLOADS.keys.join(',')).downcase.split(/[,\s]+/).reject(&:empty?)
      unknown = @workloads - WORKLOADS.keys
      raise Error, "unknown WORKLOADS #{unknown.join(', ')}; known: #{WORKLOADS.keys.join(', ')}" unless unknown.empty?
      raise Error, 'ROUNDS and DURATION must be positive' unless @rounds.positive? && @duration.positive?

      @run = Runner.new(root: root, env: env, tag: 'seed')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      Util.ensure_pkgs(%w[wrk nginx libnginx-mod-http-lua lua-socket], log: method(:log))
      t0 = Time.now
      uptime = `uptime`.strip
      results = {}
      @run.with_cpu_lock do
        @workloads.each do |w|
          results[w] = workload(w)
        ensure
          @run.stop_all
        end
      end
      write(results, t0, uptime, `uptime`.strip)
    ensure
      @run.stop_all
    end

    # A contestant: name, peer note, the servers it runs (for CPU), the URL,
    # the body it must answer.
    Contestant = Struct.new(:name, :note, :servers, :url, :body, keyword_init: true)

    def workload(w)
      log "#{w}: #{WORKLOADS[w]}"
      cs = send("contestants_#{w}")
      cs.each { |c| check(c) }
      runs = Hash.new { |h, k| h[k] = [] }
      @rounds.times do |i|
        order = i.odd? ? cs.reverse : cs
        order.each { |c| runs[c.name] << measure(w, i + 1, c) }
      end
      { title: WORKLOADS[w], contestants: cs.map { |c| { name: c.name, note: c.note } }, runs: runs }
    end

    def check(c)
      res = Net::HTTP.start(HOST, URI(c.url).port, open_timeout: 2, read_timeout: 10) { |h| h.get(URI(c.url).path) }
      return if res.code == '200' && res.body.to_s.chomp == c.body

      raise Error, "#{c.name}: #{c.url} answered #{res.code} #{res.body.inspect}, want 200 #{c.body.inspect}"
    end

    def cpu_ticks(servers)
      servers.sum { |s| ([s.pid] + descendants(s.pid)).sum { |p| ticks(p) || 0 } }
    end

    def measure(w, round, c)
      @run.run_wrk(WRK, c.url, 1) # warm-up
      sleep 0.5
      t0 = cpu_ticks(c.servers)
      r = @run.run_wrk(WRK, c.url, @duration)
      cpu_s = (cpu_ticks(c.servers) - t0).to_f / clk_tck
      l = Load.wrk(r[:out])
      row = l.slice(:rps, :ok, :errors, :non2xx, :timeouts, :failures, :p50_ms, :p99_ms)
             .merge(cmd: r[:cmd], cpu_s: cpu_s, us_per_req: l[:ok].positive? ? cpu_s * 1e6 / l[:ok] : nil)
      log format('%s round %d %-28s %9.1f req/s  %7.1f µs/req  failures %d', w, round, c.name, row[:rps].to_f,
                 row[:us_per_req].to_f, row[:failures])
      row
    end

    # ------------------------------------------------------------ W1

    def contestants_w1
      cs = []
      front, back = free_ports(2)
      conf = async_example(File.join(@root, 'examples/async.rb'), front: front, back: back)

      gw = @run.start_gateway('gateway-seed', @bin, conf, front)
      cs << Contestant.new(name: 'gateway non-blocking', note: 'Async::HTTP.sub_request (examples/async.rb)', servers: [gw],
                           url: "http://#{HOST}:#{front}#{NB}", body: 'done')
      cs << Contestant.new(name: 'gateway blocking', note: 'HttpRequest.new.get (examples/async.rb)', servers: [gw],
                           url: "http://#{HOST}:#{front}#{BLOCKING}", body: 'done')
      if File.executable?(@probe)
        pf, pb = free_ports(2)
        probe = @run.start('probe', [@probe, '--front-port', pf.to_s, '--backend-port', pb.to_s], port: pf,
                                                                                                 dir: @run.scratch('probe'), binary: @probe)
        cs << Contestant.new(name: 'C probe', note: 'the same flow in C on libevent (build/probe)', servers: [probe],
                             url: "http://#{HOST}:#{pf}#{NB}", body: 'done')
      else
        log "C probe: #{@probe} is not built (rake bench:probe_build): its row is left out"
      end
      lb = free_port
      backend = start_lua('lua-backend', lb, <<~NGINX)
        server {
            listen #{HOST}:#{lb} backlog=4096;
            location /mruby { content_by_lua_block { ngx.sleep(0.01) ngx.say("done") } }
        }
      NGINX
      lf = free_port
      lua = start_lua('lua-front', lf, <<~NGINX)
        upstream lua_backend { server #{HOST}:#{lb}; keepalive 256; }
        server {
            listen #{HOST}:#{lf} backlog=4096;
            location = /sub_req_proxy_pass {
                internal;
                proxy_http_version 1.1;
                proxy_set_header Connection "";
                proxy_pass http://lua_backend/mruby;
            }
            location = #{NB} {
                content_by_lua_block {
                    local res = ngx.location.capture("/sub_req_proxy_pass")
                    ngx.print(res.body)
                }
            }
            location = #{BLOCKING} {
                content_by_lua_block {
                    local http = require "socket.http"
                    local body = http.request("http://#{HOST}:#{lb}/mruby")
                    ngx.print(body)
                }
            }
        }
      NGINX
      cs << Contestant.new(name: 'nginx + Lua non-blocking', note: 'ngx.location.capture to proxy_pass, keepalive 256',
                           servers: [lua, backend], url: "http://#{HOST}:#{lf}#{NB}", body: 'done')
      cs << Contestant.new(name: 'nginx + Lua blocking', note: 'LuaSocket socket.http.request', servers: [lua, backend],
                           url: "http://#{HOST}:#{lf}#{BLOCKING}", body: 'done')
      cs
    end

    # nginx + the Lua module (and LuaSocket on its cpath), one worker.
    def start_lua(name, port, http)
      main = "load_module #{LUA_MODULES}/ndk_http_module.so;\nload_module #{LUA_MODULES}/ngx_http_lua_module.so;"
      @run.start_nginx(name, port, "lua_package_cpath \"#{LUA_CPATH}\";\nkeepalive_requests 1000000;\n#{http}", main: main)
    end

    # ------------------------------------------------------------ W2

    def contestants_w2
      gp = free_port
      gw = @run.start_gateway('gateway-hello', @bin, <<~RUBY, gp)
        server listen: "#{HOST}:#{gp}", workers: 1 do
          location "/hello" do
            "ok"
          end
        end
      RUBY
      np = free_port
      ngx = @run.start_nginx('nginx-hello', np, <<~NGINX)
        keepalive_requests 1000000;
        server { listen #{HOST}:#{np} backlog=4096; location /hello { return 200 "ok"; } }
      NGINX
      [Contestant.new(name: 'gateway', note: 'Ruby handler `location "/hello" do "ok" end`', servers: [gw],
                      url: "http://#{HOST}:#{gp}/hello", body: 'ok'),
       Contestant.new(name: 'nginx', note: '`return 200 "ok"` (no script: the floor)', servers: [ngx],
                      url: "http://#{HOST}:#{np}/hello", body: 'ok')]
    end

    # ------------------------------------------------------------ W3

    def contestants_w3
      bp = free_port
      @run.start_nginx('w3-backend', bp, <<~NGINX)
        keepalive_timeout 65;
        keepalive_requests 1000000;
        server { listen #{HOST}:#{bp} backlog=4096; location / { return 200 "ok"; } }
      NGINX
      gp = free_port
      gw = @run.start_gateway('gateway-proxy', @bin, <<~RUBY, gp)
        upstream :w3, servers: ["#{HOST}:#{bp}"], keepalive: 256

        server listen: "#{HOST}:#{gp}", workers: 1 do
          location "/proxy", proxy_pass: "http://w3/"
        end
      RUBY
      np = free_port
      ngx = @run.start_nginx('nginx-proxy', np, <<~NGINX)
        keepalive_requests 1000000;
        upstream w3 { server #{HOST}:#{bp}; keepalive 256; keepalive_requests 1000000; }
        server {
            listen #{HOST}:#{np} backlog=4096;
            location /proxy { proxy_http_version 1.1; proxy_set_header Connection ""; proxy_pass http://w3/; }
        }
      NGINX
      # the backend's CPU is the same work for both: only the front is counted
      [Contestant.new(name: 'gateway', note: 'proxy_pass, upstream keepalive: 256', servers: [gw],
                      url: "http://#{HOST}:#{gp}/proxy", body: 'ok'),
       Contestant.new(name: 'nginx', note: 'proxy_pass, upstream keepalive 256, HTTP/1.1', servers: [ngx],
                      url: "http://#{HOST}:#{np}/proxy", body: 'ok')]
    end

    # ------------------------------------------------------------ report

    def f(v, digits = 0)
      v ? format("%.#{digits}f", v) : '-'
    end

    def write(results, t0, uptime0, uptime1)
      md = +"# bench:seed — W1–W3 against their peers\n\n"
      md << "- date: #{t0.utc.strftime('%F %H:%M UTC')}; machine: #{Etc.nprocessors} CPUs, " \
            "#{File.read('/proc/cpuinfo')[/model name\s*:\s*(.+)/, 1]}\n"
      md << "- load: before `#{uptime0}`; after `#{uptime1}`\n"
      md << "- command: `rake bench:seed WORKLOADS=#{@workloads.join(',')} ROUNDS=#{@rounds} DURATION=#{@duration}`; " \
            "servers pinned with `taskset -c #{@run.server_cpu}`, wrk with `taskset -c #{@run.load_cpu}`\n"
      md << "- each run: `wrk -t1 -c100 --timeout 5s -d#{@duration}s --latency URL` after a 1 s warm-up; contestants alternate, " \
            "#{@rounds} round(s), the order reversed every other round; medians below\n"
      md << "- req/s counts successful (2xx) requests only; failures are summed over the rounds and a row with any is " \
            "marked ⚠; server CPU µs per successful request from /proc (utime + stime of every process the row names)\n"
      results.each do |w, res|
        md << "\n## #{res[:title]}\n\n"
        md << "| contestant | what | req/s | server CPU µs/req | p99 ms | #{Load::FAIL_HEAD} | req/s per round |\n" \
              "|---|---|--:|--:|--:|#{Load::FAIL_ALIGN}|---|\n"
        med = {}
        res[:contestants].each do |c|
          rs = res[:runs][c[:name]]
          fails = Load.sum(rs)
          med[c[:name]] = { rps: median(rs.map { |r| r[:rps] }), us: median(rs.map { |r| r[:us_per_req] }) }
          md << "| #{Load.label(c[:name], fails)} | #{c[:note]} | #{f(med[c[:name]][:rps], 1)} | #{f(med[c[:name]][:us], 1)} | " \
                "#{f(median(rs.map { |r| r[:p99_ms] }), 2)} | #{Load.cells(fails)} | #{rs.map { |r| f(r[:rps]) }.join(', ')} |\n"
        end
        md << "\n" << ratios(w, med) << notes(w)
      end
      @run.write_report('seed', md, { date: t0.utc.iso8601, uptime: [uptime0, uptime1], rounds: @rounds,
                                      duration: @duration, server_cpu: @run.server_cpu, load_cpu: @run.load_cpu,
                                      workloads: results })
    end

    def ratio(med, a, b, key)
      x = med.dig(a, key)
      y = med.dig(b, key)
      x && y && y.positive? ? format('%.3f×', x / y) : 'n/a'
    end

    def ratios(w, med)
      case w
      when 'w1'
        "Ratios (medians): non-blocking req/s gateway / C probe #{ratio(med, 'gateway non-blocking', 'C probe', :rps)}, " \
          "gateway / nginx + Lua #{ratio(med, 'gateway non-blocking', 'nginx + Lua non-blocking', :rps)}; server CPU per " \
          "request gateway / nginx + Lua #{ratio(med, 'gateway non-blocking', 'nginx + Lua non-blocking', :us)}; blocking " \
          "gateway / nginx + Lua #{ratio(med, 'gateway blocking', 'nginx + Lua blocking', :rps)}.\n"
      else
        "Ratios (medians): req/s gateway / nginx #{ratio(med, 'gateway', 'nginx', :rps)}; server CPU per request " \
          "gateway / nginx #{ratio(med, 'gateway', 'nginx', :us)}.\n"
      end
    end

    def notes(w)
      case w
      when 'w1'
        "\nEach W1 row runs its own front and backend on the server CPU (the gateway's two workers, the probe's two " \
          "processes, the two nginx + Lua servers) and its CPU per request counts both. Little's law bounds the " \
          "non-blocking rate at 100 / 10 ms = 10,000 req/s and the blocking one at 100 req/s.\n"
      when 'w3'
        "\nThe backend (one nginx worker, also on the server CPU) is shared; only the front's CPU is counted.\n"
      else ''
      end
    end
  end
end
