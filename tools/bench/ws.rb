# frozen_string_literal: true

# `rake bench:ws`: echo over proxied WebSockets, the gateway
# (`proxy_pass:`) next to nginx (`proxy_pass` with `proxy_http_version 1.1`
# and the Upgrade/Connection headers set), one worker each, pinned to
# SERVER_CPU. The upstream (spec/support/ws_echo.py) and the load
# (tools/bench/ws_load.py: WS_CONNS connections, each sending a WS_SIZE-byte
# message and waiting for its echo, for DURATION s) are Python's websockets
# pinned to LOAD_CPU, so the message rate is bounded by the Python peers for
# both servers alike; the server figure to compare is its CPU time per
# message (utime + stime of the worker over the run). Writes
# build/bench/ws.md and build/bench/ws.json.
#
# Environment: WS_CONNS (100), WS_SIZE (64), DURATION (5), GATEWAY_BIN,
# SERVER_CPU (1), LOAD_CPU (0), CPU_LOCK, BENCH_OUT.

require 'json'
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
        %w[gateway nginx].each do |name|
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
      write(rows)
      rows
    end

    def start_echo
      r, w = IO.pipe
      pid = Process.spawn('taskset', '-c', @run.load_cpu.to_s, PY, File.join(@root, 'spec/support/ws_echo.py'),
                          out: w, err: w)
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
            location "/", proxy_pass: "http://127.0.0.1:#{up}"
          end
        RUBY
      else
        @run.start_nginx(name, port, <<~NGINX)
          server {
              listen #{HOST}:#{port};
              location / {
                  proxy_pass http://127.0.0.1:#{up};
                  proxy_http_version 1.1;
                  proxy_set_header Upgrade $http_upgrade;
                  proxy_set_header Connection "upgrade";
                  proxy_read_timeout 60s;
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
        m = out.match(/messages (\d+) seconds ([\d.]+)/)
        raise Error, "#{name}: the load failed:\n#{out}" unless m

        msgs = m[1].to_i
        secs = m[2].to_f
        cpu_s = (t1 - t0).to_f / clk_tck
        row = { server: name, messages: msgs, seconds: secs, msgs_per_s: (msgs / secs).round,
                cpu_s: cpu_s.round(2), cpu_us_per_msg: msgs.positive? ? (cpu_s * 1e6 / msgs).round(1) : nil }
      end
      log "#{name}: #{row.inspect}"
      row
    end

    def write(rows)
      gw = rows.find { |r| r[:server] == 'gateway' }
      ng = rows.find { |r| r[:server] == 'nginx' }
      md = +"# bench:ws — echo over #{@conns} proxied WebSockets, #{@size}-byte messages, #{@duration} s\n\n"
      md << "| server | messages/s | server CPU µs per message |\n|---|---:|---:|\n"
      rows.each do |r|
        md << (r[:error] ? "| #{r[:server]} | error: #{r[:error]} | |\n" : "| #{r[:server]} | #{r[:msgs_per_s]} | #{r[:cpu_us_per_msg]} |\n")
      end
      if gw && ng && gw[:msgs_per_s] && ng[:msgs_per_s]
        md << "\ngateway / nginx: messages/s #{(gw[:msgs_per_s].to_f / ng[:msgs_per_s]).round(2)}, " \
              "CPU per message #{(gw[:cpu_us_per_msg].to_f / ng[:cpu_us_per_msg]).round(2)}\n"
      end
      md << "\nThe peers (Python) bound the rate for both servers; compare the CPU per message.\n"
      @run.write_report('ws', md, rows)
    end
  end
end
