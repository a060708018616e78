# frozen_string_literal: true

# `rake bench:script` (standalone: `ruby tools/bench/script.rb`): issue 13's
# scripting targets, the gateway against nginx + Lua (OpenResty's module,
# Debian's libnginx-mod-http-lua on LuaJIT, with lua-cjson), side by side,
# each server one worker pinned to SERVER_CPU (1), wrk on LOAD_CPU (0):
#
#   json   POST /transform with a 4 KB JSON document (an API response: 14
#          records with nested objects, arrays, floats, UTF-8); the handler
#          parses it, keeps 4 fields of each record (one upper-cased, one
#          computed) and answers the new document as JSON. wrk -t1 -c100.
#          Target: gateway CPU per request <= nginx + Lua's.
#
# Both answers are checked to be the same document before measuring. Then,
# ROUNDS times (3), alternating gateway and nginx-lua: a 1 s wrk warm-up,
# 0.5 s settle and the measured wrk (DURATION, 5 s) holding CPU_LOCK. Server
# CPU µs per request: utime+stime of the server's processes over the
# measured window / requests completed (as bench:paired). The median per
# server is reported. Writes build/bench/script.{md,json}.
#
# Environment: NEW (build/gateway), ROUNDS (3), DURATION (5), WARMUP (1),
# SERVER_CPU, LOAD_CPU, CPU_LOCK, BENCH_OUT. nginx, libnginx-mod-http-lua,
# lua-cjson and wrk are installed with apt-get when missing.

require 'json'
require 'net/http'
require_relative 'common'

module GatewayBench
  class Script
    include Util

    LUA_MODULES = '/usr/lib/nginx/modules'
    LUA_CPATH = '/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;;'

    # The document wrk POSTs: 4 KB (just under), the shape of an API response.
    def self.document
      data = (0...14).map do |i|
        { 'id' => i, 'name' => "user #{i} \u00fcn\u00efc\u00f8de", 'email' => "user#{i}@example.com",
          'active' => i.even?, 'score' => (i * 3.14159).round(5), 'tags' => %w[alpha beta gamma].first(1 + i % 3),
          'address' => { 'street' => "#{i} Main Street", 'city' => 'Springfield', 'zip' => format('%05d', i * 7),
                         'geo' => { 'lat' => 40.7128 + i / 1000.0, 'lng' => -74.006 - i / 1000.0 } },
          'created_at' => format('2024-01-%02dT12:34:56Z', 1 + i % 28), 'note' => nil }
      end
      { 'status' => 'ok', 'request_id' => 'a1b2c3d4-e5f6', 'page' => { 'number' => 1, 'size' => 14, 'total' => 1234 },
        'data' => data }
    end

    # The transformation, as every server does it (for the check).
    def self.transform(doc)
      items = doc['data'].map do |r|
        { 'id' => r['id'], 'name' => r['name'].upcase(:ascii), 'total' => r['score'] * 2, 'city' => r['address']['city'] }
      end
      { 'request_id' => doc['request_id'], 'count' => items.size, 'items' => items }
    end

    GATEWAY_HANDLER = <<~'RUBY'
      location "/transform" do |req|
        doc = JSON.parse(req.body)
        items = doc["data"].map do |r|
          { "id" => r["id"], "name" => r["name"].upcase, "total" => r["score"] * 2, "city" => r["address"]["city"] }
        end
        [200, { "content-type" => "application/json" },
         [JSON.generate({ "request_id" => doc["request_id"], "count" => items.size, "items" => items })]]
      end
    RUBY

    # cjson keeps no key order; the check compares documents, not text.
    LUA_HANDLER = <<~'LUA'
      location = /transform {
          client_body_buffer_size 64k;
          default_type application/json;
          content_by_lua_block {
              ngx.req.read_body()
              local doc = cjson.decode(ngx.req.get_body_data())
              local items = {}
              for i, r in ipairs(doc.data) do
                  items[i] = { id = r.id, name = string.upper(r.name), total = r.score * 2, city = r.address.city }
              end
              ngx.print(cjson.encode({ request_id = doc.request_id, count = #items, items = items }))
          }
      }
    LUA

    def initialize(root:, env: ENV)
      @root = root
      @bin = File.expand_path(env.fetch('NEW', 'build/gateway'), root)
      raise Error, "NEW=#{@bin} is not an executable file" unless File.file?(@bin) && File.executable?(@bin)

      @rounds = env_int(env, 'ROUNDS', 3)
      @duration = env_int(env, 'DURATION', 5)
      @warmup = env_int(env, 'WARMUP', 1)
      @run = Runner.new(root: root, env: env, tag: 'script')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      Util.ensure_pkgs(%w[wrk nginx libnginx-mod-http-lua lua-cjson], log: method(:log))
      doc = self.class.document
      body = JSON.generate(doc)
      dir = @run.scratch('script-wrk')
      File.write(File.join(dir, 'doc.json'), body)
      wrk_lua = File.join(dir, 'post.lua')
      File.write(wrk_lua, <<~LUA)
        local f = io.open("#{File.join(dir, 'doc.json')}", "rb")
        wrk.method = "POST"
        wrk.body = f:read("*a")
        f:close()
        wrk.headers["Content-Type"] = "application/json"
      LUA
      log "document: #{body.bytesize} bytes"
      t0 = monotonic
      runs = []
      begin
        servers = { 'gateway' => start_gateway, 'nginx-lua' => start_nginx_lua }
        want = self.class.transform(doc)
        servers.each { |name, srv| check(name, srv.port, body, want) }
        @rounds.times do |i|
          servers.each do |name, srv|
            r = @run.with_cpu_lock { measure(srv, "http://#{HOST}:#{srv.port}/transform", wrk_lua) }
            runs << { round: i + 1, server: name }.merge(r)
            log format('round %d %-9s %8.0f req/s  server %6.1f µs/req%s', i + 1, name, r[:rps] || 0, r[:server_us] || 0,
                       r[:failures].to_i.positive? ? "  ⚠ #{r[:failures]} failed" : '')
          end
        end
      ensure
        @run.stop_all
      end
      res = { meta: meta(body.bytesize, monotonic - t0), runs: runs, summary: summarize(runs) }
      write(res)
      res
    end

    def start_gateway
      port = free_port
      conf = "server listen: \"#{HOST}:#{port}\", workers: 1 do\n#{GATEWAY_HANDLER.gsub(/^/, '  ')}end\n"
      srv = @run.start_gateway('gateway', @bin, conf, port)
      log "gateway pid #{srv.pid} on #{HOST}:#{port}"
      srv
    end

    def start_nginx_lua
      port = free_port
      main = "load_module #{LUA_MODULES}/ndk_http_module.so;\nload_module #{LUA_MODULES}/ngx_http_lua_module.so;"
      http = <<~NGINX
        lua_package_cpath "#{LUA_CPATH}";
        init_by_lua_block { cjson = require "cjson" }
        keepalive_requests 1000000;
        server {
            listen #{HOST}:#{port} backlog=4096;
        #{LUA_HANDLER.gsub(/^/, '    ')}
        }
      NGINX
      srv = @run.start_nginx('nginx-lua', port, http, main: main)
      log "nginx-lua pid #{srv.pid} on #{HOST}:#{port}"
      srv
    end

    def check(name, port, body, want)
      res = Net::HTTP.start(HOST, port, open_timeout: 2, read_timeout: 5) do |h|
        h.post('/transform', body, 'Content-Type' => 'application/json')
      end
      got = res.code == '200' ? (JSON.parse(res.body) rescue nil) : nil
      return if got == want

      raise Error, "#{name}: POST /transform answered #{res.code} #{res.body[0, 300].inspect}, not the expected document"
    end

    def pids_of(srv)
      [srv.pid] + descendants(srv.pid).select { |k| runs?(k, srv.binary) }
    end

    def measure(srv, url, wrk_lua)
      args = ['-t1', '-c100', '-s', wrk_lua]
      @run.run_wrk(args, url, @warmup) if @warmup.positive?
      sleep 0.5
      pids = pids_of(srv)
      t0 = pids.to_h { |p| [p, ticks(p)] }
      w = @run.run_wrk(args, url, @duration)
      t1 = pids.to_h { |p| [p, ticks(p)] }
      p = Runner.parse_wrk(w[:out])
      reqs = p[:requests].to_i
      tk = t0.sum { |pid, t| t && t1[pid] ? t1[pid] - t : 0 }
      { rps: p[:rps]&.round(1), requests: reqs, p50_ms: p[:p50_ms], p99_ms: p[:p99_ms],
        **p.slice(:errors, :non2xx, :timeouts, :failures),
        server_us: reqs.positive? ? (tk * 1e6 / clk_tck / reqs).round(2) : nil, cmd: w[:cmd] }
    end

    def summarize(runs)
      runs.group_by { |r| r[:server] }.to_h do |name, rs|
        [name, { rps: median(rs.map { |r| r[:rps] }), server_us: median(rs.map { |r| r[:server_us] }),
                 **Load.sum(rs) }]
      end
    end

    def meta(doc_bytes, elapsed)
      {
        started: Time.now.utc.iso8601, elapsed_s: elapsed.round(1), gateway: @bin,
        gateway_version: `#{@bin} -v 2>&1`.lines.first.to_s.strip,
        nginx: `nginx -v 2>&1`.strip.sub(/.*: /, ''),
        lua_module: `dpkg-query -W -f='${Version}' libnginx-mod-http-lua 2>/dev/null`,
        lua_cjson: `dpkg-query -W -f='${Version}' lua-cjson 2>/dev/null`,
        document_bytes: doc_bytes, rounds: @rounds, duration_s: @duration, warmup_s: @warmup,
        server_cpu: @run.server_cpu, load_cpu: @run.load_cpu, clk_tck: clk_tck,
        git: `git -C #{@root} rev-parse --short HEAD 2>/dev/null`.strip
      }
    end

    def f(v, fmt = '%.1f')
      v.nil? ? '—' : format(fmt, v)
    end

    def markdown(res)
      m = res[:meta]
      s = +"# bench:script — a 4 KB JSON body parsed, transformed, answered\n\n"
      s << "- POST of a #{m[:document_bytes]}-byte document, wrk -t1 -c100 (CPU #{m[:load_cpu]}); each server one " \
           "worker on CPU #{m[:server_cpu]}; #{m[:rounds]} rounds alternating, #{m[:warmup_s]} s warm-up, " \
           "#{m[:duration_s]} s measured. #{m[:started]}, git #{m[:git]}.\n"
      s << "- gateway: `#{m[:gateway]}` (#{m[:gateway_version]}), JSON on YAJL. nginx-lua: nginx #{m[:nginx]}, " \
           "libnginx-mod-http-lua #{m[:lua_module]} (LuaJIT), lua-cjson #{m[:lua_cjson]}.\n\n"
      s << "req/s counts successful (2xx) requests only; failures are summed over the rounds, a row with any is marked ⚠.\n\n"
      s << "| server | req/s (median) | server CPU µs/req (median) | #{Load::FAIL_HEAD} |\n|---|--:|--:|#{Load::FAIL_ALIGN}|\n"
      res[:summary].each do |name, sm|
        s << "| #{Load.label(name, sm)} | #{f(sm[:rps], '%.0f')} | **#{f(sm[:server_us])}** | #{Load.cells(sm)} |\n"
      end
      g = res[:summary].dig('gateway', :server_us)
      n = res[:summary].dig('nginx-lua', :server_us)
      if g && n
        s << "\ngateway / nginx-lua CPU per request: **#{format('%.2f', g / n)}** " \
             "(target: <= 1.00, issue 13).\n"
      end
      s << "\n| round | server | req/s | p50 ms | p99 ms | #{Load::FAIL_HEAD} | server µs/req |\n|--:|---|--:|--:|--:|#{Load::FAIL_ALIGN}|--:|\n"
      res[:runs].each do |r|
        s << "| #{r[:round]} | #{Load.label(r[:server], r)} | #{f(r[:rps], '%.0f')} | #{f(r[:p50_ms], '%.2f')} | " \
             "#{f(r[:p99_ms], '%.2f')} | #{Load.cells(r)} | #{f(r[:server_us])} |\n"
      end
      s << "\nserver µs/req: utime+stime of the server's processes (master and worker) over the measured " \
           "window / successful requests (clock ticks of #{(1e6 / m[:clk_tck]).round} µs).\n"
      s
    end

    def write(res)
      md = markdown(res)
      @run.write_report('script', md, res)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  begin
    GatewayBench::Script.new(root: File.expand_path('../..', __dir__)).run
  rescue GatewayBench::Error => e
    abort "bench:script: #{e.message}"
  end
end
