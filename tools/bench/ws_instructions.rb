# frozen_string_literal: true

# `rake bench:ws_instructions`: instructions per proxied WebSocket echo,
# counted by valgrind's callgrind, the gateway (`proxy_pass:`) next to nginx
# (`proxy_pass` with the Upgrade headers, `master_process off` so the one
# process serving is the one counted) in the same run. bench:ws's CPU per
# message moves with the machine's load; instructions do not.
#
# An echo upstream (spec/support/ws_echo.py) and the load
# (tools/bench/ws_load.py: WS_CONNS WebSockets, WS_SIZE-byte messages, each
# waiting for its echo, for DURATION s) are Python's websockets. Per server:
# start it under callgrind on a free port, warm up, zero its counters, run
# the load, dump, and divide Ir by the messages echoed (each is relayed
# twice: to the upstream and back). User-space instructions only: the
# system calls a relay makes are on top (strace -c shows them).
#
# Environment: WS_CONNS (20), WS_SIZE (64), DURATION (6), GATEWAY_BIN, KEEP=dir
# (keep the dumps). Writes build/bench/ws_instructions.{md,json}.
require 'fileutils'
require 'json'
require 'socket'
require 'tmpdir'
require_relative 'common'

module GatewayBench
  class WsInstructions
    include Util

    PY = File.exist?('/usr/bin/python3') ? '/usr/bin/python3' : 'python3' # Debian's, with python3-websockets

    def initialize(root:, env: ENV)
      @root = root
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @conns = env_int(env, 'WS_CONNS', 20)
      @size = env_int(env, 'WS_SIZE', 64)
      @secs = env_int(env, 'DURATION', 6)
      @keep = env['KEEP']
      FileUtils.mkdir_p(@keep) if @keep
    end

    def run
      %w[valgrind callgrind_control nginx].each do |t|
        raise Error, "#{t} is not installed (setup.sh)" unless system("command -v #{t} >/dev/null")
      end
      res = {}
      with_echo do |up|
        res['gateway'] = measure('gateway', up)
        res['nginx'] = measure('nginx', up)
      end
      report(res)
    end

    private

    def with_echo
      r, w = IO.pipe
      pid = Process.spawn(PY, File.join(@root, 'spec/support/ws_echo.py'), out: w, err: File::NULL)
      w.close
      port = r.gets.to_i
      raise Error, 'ws_echo.py printed no port' unless port.positive?

      yield port
    ensure
      Callgrind.stop(pid)
      r&.close
    end

    # [argv, pid to count: nil = the spawned process (nginx), else a proc
    # reading the gateway's worker pid].
    def server(name, port, up, dir)
      if name == 'gateway'
        File.write("#{dir}/gw.rb", <<~RUBY)
          server listen: "127.0.0.1:#{port}", workers: 1 do
            location "/pid" do Gateway.pid.to_s end
            location "/ws", proxy_pass: "http://127.0.0.1:#{up}"
          end
        RUBY
        return [@bin, '-f', "#{dir}/gw.rb"]
      end
      Callgrind.nginx(dir, <<~NGINX)
        server { listen 127.0.0.1:#{port};
                 location /pid { return 200 "0"; }
                 location /ws { proxy_pass http://127.0.0.1:#{up}; proxy_http_version 1.1;
                                proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection "upgrade";
                                proxy_read_timeout 300s; } }
      NGINX
    end

    # The body of GET /pid once the server answers (valgrind starts slowly).
    def pid_of(port)
      300.times do
        s = TCPSocket.new('127.0.0.1', port)
        s.write("GET /pid HTTP/1.0\r\nHost: b\r\n\r\n")
        head, body = s.read.split("\r\n\r\n", 2)
        s.close
        return body.to_i if head&.include?(' 200 ')
      rescue SystemCallError
        sleep 0.1
      end
      raise Error, "no answer on #{port}"
    end

    def load(port, secs)
      out = IO.popen([PY, File.join(@root, 'tools/bench/ws_load.py'), "ws://127.0.0.1:#{port}/ws", @conns.to_s,
                      @size.to_s, secs.to_s], err: %i[child out], &:read)
      n = out[/messages (\d+)/, 1].to_i
      fails = out.match(/errors (\d+) rejected (\d+) timeouts (\d+)/)&.captures&.map(&:to_i)&.sum
      raise Error, "ws_load.py: #{out[-400..] || out}" unless n.positive? && fails&.zero?

      n
    end

    def measure(name, up)
      dir = Dir.mktmpdir("gw-wsinstr-#{name}-")
      port = Util.free_port
      pid = Callgrind.spawn(server(name, port, up, dir), dir)
      worker = pid_of(port)
      target = name == 'gateway' ? worker : pid
      load(port, 2) # warm-up
      msgs = nil
      ir = Callgrind.count(target, dir, @keep && File.join(@keep, "#{name}-ws.callgrind")) { msgs = load(port, @secs) }
      { messages: msgs, ir: ir, ir_per_message: ir.to_f / msgs }
    ensure
      Callgrind.stop(pid)
      FileUtils.rm_rf(dir) if dir
    end

    def report(res)
      g = res['gateway'][:ir_per_message]
      n = res['nginx'][:ir_per_message]
      text = "| Ir per proxied WebSocket echo (#{@conns} connections, #{@size}-byte messages) | gateway | nginx | " \
             "gateway/nginx |\n|---|--:|--:|--:|\n| | #{g.round} | #{n.round} | #{format('%.2f', g / n)} |\n"
      Callgrind.write_report(@root, 'ws_instructions', text, res)
    end
  end
end
