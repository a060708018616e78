# frozen_string_literal: true

# `rake bench:ws`: echo over proxied WebSockets, the gateway
# (`proxy_pass:`) next to nginx (`proxy_pass` with `proxy_http_version 1.1`
# and the Upgrade/Connection headers set), one worker each, pinned to
# SERVER_CPU. The upstream (spec/support/ws_echo.py) and the load
# (tools/bench/ws_load.py: WS_CONNS connections, each sending a WS_SIZE-byte
# message and waiting for its echo, for DURATION s) are Python's websockets
# pinned to LOAD_CPU, so the message rate is bounded by the Python peers for
# both servers alike; the server figure to compare is its CPU time per
# message (utime + stime of the worker over the run). A third row is the
# gateway answering the echo itself, a `websocket:` location's Ruby block
# (gateway-ruby: no upstream).
#
# Then idle memory: WS_IDLE_CONNS (10,000) WebSockets opened from this
# process and left idle — the Ruby handler parked in ws.receive, and proxied
# by the gateway and by nginx to tools/bench/ws_idle_upstream.py (raw
# asyncio, pinned to LOAD_CPU) — and the worker's RSS before and after
# (the max of 3 reads 200 ms apart): bytes per idle WebSocket = the growth
# / N. A proxied WebSocket takes two sockets in the worker, so its N is at
# most (the fd limit - 100) / 2. Writes build/bench/ws.md and ws.json.
#
# Environment: WS_CONNS (100), WS_SIZE (64), DURATION (5), WS_IDLE_CONNS
# (10000, 0: skip the idle part), GATEWAY_BIN, SERVER_CPU (1), LOAD_CPU (0),
# CPU_LOCK, BENCH_OUT.

require 'json'
require 'socket'
require_relative 'common'

module GatewayBench
  class WebSocket
    include Util

    PY = File.exist?('/usr/bin/python3') ? '/usr/bin/python3' : 'python3'

    def initialize(root:, env: ENV)
      @root = root
      @conns = env_int(env, 'WS_CONNS', 100)
      @size = env_int(env, 'WS_SIZE', 64)
      @duration = Float(env.fetch('DURATION', '5'))
      @idle = env_int(env, 'WS_IDLE_CONNS', 10_000)
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @run = Runner.new(root: root, env: env, tag: 'ws')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      Util.ensure_pkgs(%w[nginx python3-websockets], log: method(:log))
      rows = []
      echo_pid, echo_port = start_echo
      begin
        %w[gateway gateway-ruby nginx].each do |name|
          rows << measure(name, echo_port)
        rescue Error => e
          log "#{name}: #{e.message}"
          rows << { server: name, error: e.message.lines.first.strip }
        ensure
          @run.stop_all
        end
      ensure
        Process.kill('TERM', echo_pid)
        Process.wait(echo_pid)
      end
      idle = @idle.positive? ? idle_rows : []
      write(rows, idle)
      rows
    end

    def idle_rows
      rows = []
      up_pid, up_port = start_echo('tools/bench/ws_idle_upstream.py')
      begin
        %w[gateway-ruby gateway nginx].each do |name|
          rows << measure_idle(name, up_port)
        rescue Error, SystemCallError => e
          log "idle #{name}: #{e.message}"
          rows << { server: name, error: e.message.lines.first.strip }
        ensure
          @run.stop_all
        end
      ensure
        Process.kill('TERM', up_pid)
        Process.wait(up_pid)
      end
      rows
    end

    def start_echo(script = 'spec/support/ws_echo.py')
      r, w = IO.pipe
      pid = Process.spawn('prlimit', "--nofile=#{@run.nofile}", 'taskset', '-c', @run.load_cpu.to_s, PY,
                          File.join(@root, script), out: w, err: w)
      w.close
      raise Error, 'ws_echo.py did not start' unless r.wait_readable(10)

      port = r.gets.to_i
      r.close
      [pid, port]
    end

    def start_server(name, port, up)
      if name == 'gateway'
        @run.start_gateway(name, @bin, <<~RUBY, port)
          server listen: "#{HOST}:#{port}", workers: 1 do
            location "/", proxy_pass: "http://127.0.0.1:#{up}", tunnel_timeout: 300
          end
        RUBY
      elsif name == 'gateway-ruby'
        @run.start_gateway(name, @bin, <<~RUBY, port)
          server listen: "#{HOST}:#{port}", workers: 1 do
            location "/", tunnel_timeout: 300, websocket: ->(ws, req) {
              while (m = ws.receive)
                ws.send(m, binary: ws.last_binary?)
              end
            }
          end
        RUBY
      else
        @run.start_nginx(name, port, <<~NGINX, worker_connections: 4 * [@idle, @conns].max + 64) # two sockets per WebSocket, with room
          server {
              listen #{HOST}:#{port};
              location / {
                  proxy_pass http://127.0.0.1:#{up};
                  proxy_http_version 1.1;
                  proxy_set_header Upgrade $http_upgrade;
                  proxy_set_header Connection "upgrade";
                  proxy_read_timeout 300s;
              }
          }
        NGINX
      end
    end

    def measure(name, up)
      port = free_port
      srv = start_server(name, port, up)
      worker = children(srv.pid).find { |k| runs?(k, srv.binary) }
      raise Error, "#{name}: no worker under #{srv.pid}" unless worker

      load = ['taskset', '-c', @run.load_cpu.to_s, PY, File.join(@root, 'tools/bench/ws_load.py'),
              "ws://#{HOST}:#{port}/", @conns.to_s, @size.to_s]
      IO.popen([*load, '1', err: %i[child out]], &:read) # warm-up
      row = nil
      @run.with_cpu_lock do
        t0 = ticks(worker)
        out = IO.popen([*load, @duration.to_s, err: %i[child out]], &:read)
        t1 = ticks(worker)
        m = out.match(/messages (\d+) seconds ([\d.]+) errors (\d+) rejected (\d+) timeouts (\d+)/)
        raise Error, "#{name}: the load failed:\n#{out}" unless m

        msgs = m[1].to_i
        secs = m[2].to_f
        cpu_s = (t1 - t0).to_f / clk_tck
        e, rej, t = m.captures.drop(2).map(&:to_i)
        row = { server: name, messages: msgs, seconds: secs, msgs_per_s: (msgs / secs).round,
                errors: e, non2xx: rej, timeouts: t, failures: e + rej + t,
                cpu_s: cpu_s.round(2), cpu_us_per_msg: msgs.positive? ? (cpu_s * 1e6 / msgs).round(1) : nil }
      end
      log "#{name}: #{row.inspect}"
      row
    end

    def max_rss(pid)
      3.times.map { sleep 0.2; rss_kib(pid)[:rss] }.max
    end

    # n raw WebSocket handshakes on port, each read up to its 101; the sockets.
    def open_idle(port, n)
      socks = []
      n.times.each_slice(250) do |batch|
        fresh = batch.map do
          s = Socket.tcp(HOST, port, connect_timeout: 10)
          s.write("GET / HTTP/1.1\r\nHost: #{HOST}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
                  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: #{[Random.bytes(16)].pack('m0')}\r\n\r\n")
          socks << s
          s
        end
        fresh.each do |s|
          head = +''
          until head.include?("\r\n\r\n")
            raise Error, "no 101 after #{socks.size} connections" unless s.wait_readable(10)

            chunk = s.read_nonblock(4096, exception: false)
            raise Error, "closed after #{socks.size} connections: #{head.inspect}" if chunk.nil?

            head << chunk unless chunk == :wait_readable
          end
          raise Error, "not upgraded: #{head.lines.first}" unless head.start_with?('HTTP/1.1 101')
        end
      end
      socks
    end

    def measure_idle(name, up)
      n = name == 'gateway-ruby' ? @idle : [@idle, (@run.nofile - 100) / 2].min
      port = free_port
      srv = start_server(name, port, up)
      worker = children(srv.pid).find { |k| runs?(k, srv.binary) }
      raise Error, "#{name}: no worker under #{srv.pid}" unless worker

      open_idle(port, 20).each(&:close) # warm-up
      sleep 0.5
      before = max_rss(worker)
      socks = open_idle(port, n)
      sleep 1
      after = max_rss(worker)
      socks.each(&:close)
      row = { server: name, conns: n, rss_before_kib: before, rss_after_kib: after,
              bytes_per_conn: ((after - before) * 1024.0 / n).round }
      log "idle #{name}: #{row.inspect}"
      row
    end

    def write(rows, idle = [])
      gw = rows.find { |r| r[:server] == 'gateway' }
      ng = rows.find { |r| r[:server] == 'nginx' }
      rb = rows.find { |r| r[:server] == 'gateway-ruby' }
      md = +"# bench:ws — echo over #{@conns} proxied WebSockets, #{@size}-byte messages, #{@duration} s\n\n"
      md << "messages/s counts echoes that came back equal to what was sent; errors: connections lost or a wrong echo, " \
            "non-2xx: handshakes refused with an HTTP status, timeouts: an echo not back in 10 s (a row with any is marked ⚠).\n\n"
      md << "| server | messages/s | server CPU µs per message | #{Load::FAIL_HEAD} |\n|---|---:|---:|#{Load::FAIL_ALIGN}|\n"
      rows.each do |r|
        md << (r[:error] ? "| #{r[:server]} ⚠ | error: #{r[:error]} | | | | |\n" :
                           "| #{Load.label(r[:server], r)} | #{r[:msgs_per_s]} | #{r[:cpu_us_per_msg]} | #{Load.cells(r)} |\n")
      end
      if gw && ng && gw[:msgs_per_s] && ng[:msgs_per_s]
        md << "\ngateway / nginx: messages/s #{(gw[:msgs_per_s].to_f / ng[:msgs_per_s]).round(2)}, " \
              "CPU per message #{(gw[:cpu_us_per_msg].to_f / ng[:cpu_us_per_msg]).round(2)}\n"
      end
      if rb && gw && rb[:msgs_per_s] && gw[:msgs_per_s]
        md << "gateway-ruby (a websocket: block answers) / gateway (proxied): messages/s " \
              "#{(rb[:msgs_per_s].to_f / gw[:msgs_per_s]).round(2)}\n"
      end
      md << "\nThe peers (Python) bound the rate for both servers; compare the CPU per message.\n"
      unless idle.empty?
        md << "\n## idle WebSockets: worker RSS growth per connection\n\n"
        md << "| server | connections | RSS before KiB | RSS after KiB | bytes per idle WebSocket |\n|---|---:|---:|---:|---:|\n"
        idle.each do |r|
          md << (r[:error] ? "| #{r[:server]} | error: #{r[:error]} | | | |\n" :
                 "| #{r[:server]} | #{r[:conns]} | #{r[:rss_before_kib]} | #{r[:rss_after_kib]} | #{r[:bytes_per_conn]} |\n")
        end
        ng_idle = idle.find { |r| r[:server] == 'nginx' && r[:bytes_per_conn] }
        if ng_idle&.dig(:bytes_per_conn)&.positive?
          idle.each do |r|
            next unless r[:bytes_per_conn] && r[:server] != 'nginx'

            md << "#{r[:server]} / nginx: #{(r[:bytes_per_conn].to_f / ng_idle[:bytes_per_conn]).round(2)}\n"
          end
        end
      end
      @run.write_report('ws', md, { echo: rows, idle: idle })
    end
  end
end
