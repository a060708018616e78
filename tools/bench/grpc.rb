# frozen_string_literal: true

# `rake bench:grpc`: unary gRPC calls (gwtest.Echo/Unary, a 64-byte message)
# sent by h2load (a gRPC-framed body, `content-type: application/grpc`,
# `te: trailers`) directly to the Python gRPC server (spec/support/
# grpc_peer.py, Debian's python3-grpcio), through the gateway (`grpc_pass:`)
# and through nginx (`grpc_pass grpc://`, `keepalive 64`), one worker each pinned to
# SERVER_CPU; the upstream and h2load share LOAD_CPU. The Python server
# bounds the rate for all three, so the figure to compare is the proxy's CPU
# time per call (utime + stime of its worker over the run). Writes
# build/bench/grpc.md and build/bench/grpc.json.
#
# A call succeeds only with grpc-status 0, which travels in the trailers
# (or, for a proxy's own error, a trailers-only HEADERS frame with :status
# 200) and h2load does not read. So a call is counted as a success only when
# both h2load saw 2xx and the upstream answered it OK: the Python server counts
# the calls it answered OK (grpc_peer.py's "served", read before and after the
# run), and calls/s = min(h2load's 2xx, the upstream's count) / seconds. The
# 2xx calls beyond the upstream's count are the calls a proxy answered itself
# with grpc-status ≠ 0 (14 unavailable, 4 deadline exceeded...): they are the
# `grpc-status ≠ 0` column. A sample of GRPC_SAMPLE calls (50) through
# `nghttp -v` after the run shows the grpc-status values themselves.
#
# Environment: GRPC_CALLS (20000), GRPC_SAMPLE (50), GRPC_CONNS (10), GRPC_STREAMS (10 per
# connection), GRPC_TLS (1: the upstream serves TLS with a CA-signed
# certificate made here; the gateway's `grpc_pass: "grpcs://"` and nginx's
# `grpc_pass grpcs://` verify it and reuse sessions), GATEWAY_BIN,
# SERVER_CPU (1), LOAD_CPU (0), CPU_LOCK, BENCH_OUT.

require 'json'
require 'open3'
require 'shellwords'
require 'tmpdir'
require_relative 'common'

module GatewayBench
  class GRPC
    include Util

    PY = File.exist?('/usr/bin/python3') ? '/usr/bin/python3' : 'python3'

    def initialize(root:, env: ENV)
      @root = root
      @calls = env_int(env, 'GRPC_CALLS', 20_000)
      @conns = env_int(env, 'GRPC_CONNS', 10)
      @streams = env_int(env, 'GRPC_STREAMS', 10)
      @sample = env_int(env, 'GRPC_SAMPLE', 50)
      @tls = env['GRPC_TLS'] == '1'
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @run = Runner.new(root: root, env: env, tag: 'grpc')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      Util.ensure_pkgs(%w[nginx nghttp2-client python3-grpcio python3-grpc-tools], log: method(:log))
      dir = Dir.mktmpdir('gateway-bench-grpc-')
      rows = []
      begin
        body = request_file(dir)
        up_pid, up = start_upstream(dir)
        begin
          %w[direct gateway nginx].each do |name|
            rows << measure(name, up, body)
          rescue Error => e
            log "#{name}: #{e.message}"
            rows << { server: name, error: e.message.lines.first.strip }
          ensure
            @run.stop_all
          end
        ensure
          Process.kill('KILL', up_pid)
          Process.wait(up_pid)
        end
      ensure
        FileUtils.rm_rf(dir)
      end
      write(rows)
      rows
    end

    # One gRPC message: Msg{text: "bench", data: 64 bytes}, length-prefixed.
    def request_file(dir)
      msg = "\x0a\x05bench".b + "\x12\x40".b + ('b' * 64)
      path = File.join(dir, 'unary.grpc')
      File.binwrite(path, "\0".b + [msg.bytesize].pack('N') + msg)
      path
    end

    def start_upstream(dir)
      support = File.join(@root, 'spec/support')
      out, st = Open3.capture2e(PY, '-m', 'grpc_tools.protoc', "-I#{support}", "--python_out=#{dir}",
                                "--grpc_python_out=#{dir}", File.join(support, 'grpc_echo.proto'))
      raise Error, "protoc: #{out}" unless st.success?

      port = free_port
      r, w = IO.pipe
      tls = @tls ? ['0', make_certs(dir)] : []
      pid = Process.spawn('taskset', '-c', @run.load_cpu.to_s, PY, File.join(support, 'grpc_peer.py'), 'server', dir,
                          port.to_s, *tls, out: w, err: w)
      w.close
      line = r.wait_readable(15) && r.gets
      raise Error, "grpc_peer.py server did not start: #{line.inspect}" unless line&.start_with?('ready')

      @stubs = dir
      [pid, port]
    end

    # The calls the upstream has answered OK so far (grpc_peer.py client ... served).
    def served(up)
      out, st = Open3.capture2e(PY, File.join(@root, 'spec/support/grpc_peer.py'), 'client', @stubs, "#{HOST}:#{up}",
                                'served', *(@tls ? [@ca] : []))
      n = st.success? && (JSON.parse(out.lines.last)['served'] rescue nil)
      raise Error, "grpc_peer.py client served: #{out.lines.last(3).join}" unless n

      n
    end

    # grpc-status of GRPC_SAMPLE calls read by nghttp -v (its trailers or
    # trailers-only headers): { "0" => 49, "14" => 1, "none" => 0 }.
    def sample_status(port, body, scheme)
      return {} unless @sample.positive? && command?('nghttp')

      cmd = ['timeout', '60', 'nghttp', '-nv', '-m', @sample.to_s, '-H', 'content-type: application/grpc', '-H', 'te: trailers',
             '-d', body, "#{scheme}://#{HOST}:#{port}/gwtest.Echo/Unary"]
      out = IO.popen([*cmd, err: %i[child out]], &:read)
      codes = out.scan(/grpc-status: (\d+)/).flatten.tally
      codes['none'] = @sample - codes.values.sum if codes.values.sum < @sample
      codes
    end

    # GRPC_TLS: a CA (dir/ca.pem) and the upstream's certificate for
    # localhost/127.0.0.1 signed by it; returns the certificate's prefix.
    def make_certs(dir)
      ec = %w[-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes]
      Dir.chdir(dir) do
        [['req', '-x509', *ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=bench CA'],
         ['req', '-new', *ec, '-keyout', 'up.key', '-out', 'up.csr', '-subj', '/CN=localhost'],
         ['x509', '-req', '-in', 'up.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2',
          '-out', 'up.pem', '-extfile', 'up.ext']].each do |args|
          File.write('up.ext', "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
          out, st = Open3.capture2e('openssl', *args)
          raise Error, "openssl #{args.first}: #{out}" unless st.success?
        end
      end
      @ca = File.join(dir, 'ca.pem')
      File.join(dir, 'up')
    end

    def start_server(name, port, up)
      if name == 'gateway'
        pass = @tls ? %("grpcs://127.0.0.1:#{up}", tls_ca: "#{@ca}") : %("127.0.0.1:#{up}")
        @run.start_gateway(name, @bin, <<~RUBY, port)
          server listen: "#{HOST}:#{port}", workers: 1, http2: true do
            location "/", grpc_pass: #{pass}
          end
        RUBY
      else
        # keepalive: reused upstream connections (nginx sends one call per
        # upstream connection at a time; without it, one connection per call)
        @run.start_nginx(name, port, <<~NGINX)
          upstream grpc_up { server 127.0.0.1:#{up}; keepalive 64; }
          server {
              listen #{HOST}:#{port} http2;
              # its default (1000) ends each h2load connection half-way: the rest counted as errors
              keepalive_requests 1000000;
              location / { #{@tls ? "grpc_pass grpcs://grpc_up; grpc_ssl_verify on; grpc_ssl_trusted_certificate #{@ca}; grpc_ssl_name localhost; " \
                                    'grpc_ssl_session_reuse on;' : 'grpc_pass grpc://grpc_up;'} }
          }
        NGINX
      end
    end

    def h2load(port, body, n, scheme = 'http')
      cmd = ['taskset', '-c', @run.load_cpu.to_s, 'timeout', '120', 'h2load', '-n', n.to_s, '-c', @conns.to_s,
             '-m', @streams.to_s, '-H', 'content-type: application/grpc', '-H', 'te: trailers', '-d', body,
             "#{scheme}://#{HOST}:#{port}/gwtest.Echo/Unary"]
      out = IO.popen([*cmd, err: %i[child out]], &:read)
      r = Load.h2load(out)
      raise Error, "h2load failed:\n#{out.lines.last(12).join}" unless r[:seconds] && r[:total].positive?

      r.merge(cmd: Shellwords.join(cmd.drop(3)))
    end

    def measure(name, up, body)
      port = up
      worker = nil
      scheme = @tls && name == 'direct' ? 'https' : 'http' # the proxies listen in clear text (h2c)
      if name != 'direct'
        port = free_port
        srv = start_server(name, port, up)
        worker = children(srv.pid).find { |k| runs?(k, srv.binary) }
        raise Error, "#{name}: no worker under #{srv.pid}" unless worker
      end
      h2load(port, body, 500, scheme) # warm-up: connections made, caches hot
      row = nil
      @run.with_cpu_lock do
        s0 = served(up)
        t0 = worker && ticks(worker)
        res = h2load(port, body, @calls, scheme)
        cpu_s = worker ? (ticks(worker) - t0).to_f / clk_tck : nil
        upstream_ok = served(up) - s0
        ok = [res[:ok], upstream_ok].min
        row = { server: name, **res, h2load_2xx: res[:ok], upstream_ok: upstream_ok, ok: ok, requests: ok,
                grpc_failed: res[:ok] - ok, failures: res[:failures] + res[:ok] - ok,
                calls_per_s: (ok / res[:seconds]).round,
                cpu_s: cpu_s&.round(2),
                cpu_us_per_call: cpu_s && ok.positive? ? (cpu_s * 1e6 / ok).round(1) : nil }
        row[:sample] = sample_status(port, body, scheme)
      end
      log "#{name}: #{row.inspect}"
      row
    end

    def write(rows)
      md = +"# bench:grpc#{@tls ? ' (grpcs: TLS to the upstream)' : ''} — #{@calls} unary gRPC calls (h2load -c#{@conns} -m#{@streams}, 64-byte message)\n\n"
      md << "#{Time.now.utc.strftime('%F %H:%M UTC')}, load average #{File.read('/proc/loadavg').split.first(3).join(' ')}; " \
            "command: `#{rows.find { |r| r[:cmd] }&.dig(:cmd)}`.\n\n"
      md << 'calls/s counts calls that succeeded: HTTP 2xx at h2load *and* answered OK (grpc-status 0) by the upstream, ' \
            "which counts them; a row with any failure is marked ⚠. `grpc-status ≠ 0`: calls answered 2xx that the upstream " \
            "did not answer OK (a proxy's own 14, 4...). The sample: grpc-status of #{@sample} calls read by `nghttp -v` after the run.\n\n"
      md << "| path | calls/s | proxy CPU µs per call | #{Load::FAIL_HEAD} | grpc-status ≠ 0 | sampled grpc-status |\n" \
            "|---|---:|---:|#{Load::FAIL_ALIGN}|--:|---|\n"
      rows.each do |r|
        md << (r[:error] ? "| #{r[:server]} ⚠ | error: #{r[:error]} | | | | | | |\n" :
                           "| #{Load.label(r[:server], r)} | #{r[:calls_per_s]} | #{r[:cpu_us_per_call] || '-'} | #{Load.cells(r)} | " \
                           "#{r[:grpc_failed]} | #{(r[:sample] || {}).map { |k, v| "#{k}: #{v}" }.join(', ')} |\n")
      end
      by = rows.to_h { |r| [r[:server], r] }
      d, g, n = by.values_at('direct', 'gateway', 'nginx')
      if d && g && d[:calls_per_s] && g[:calls_per_s]
        md << "\ngateway / direct: calls/s #{(g[:calls_per_s].to_f / d[:calls_per_s]).round(2)}\n"
      end
      if g && n && g[:cpu_us_per_call] && n[:cpu_us_per_call]
        md << "gateway / nginx: calls/s #{(g[:calls_per_s].to_f / n[:calls_per_s]).round(2)}, " \
              "CPU per call #{(g[:cpu_us_per_call] / n[:cpu_us_per_call]).round(2)}\n"
      end
      md << "\nThe Python gRPC server bounds the rate on every path; compare the proxies' CPU per call.\n"
      @run.write_report('grpc', md, rows)
    end
  end
end
