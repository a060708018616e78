# frozen_string_literal: true

# rake bench:h2 - HTTP/2 and TLS, side by side (server pinned to SERVER_CPU,
# load to LOAD_CPU, under the shared CPU lock):
#
#   W5 h2c    h2load -c 100 -m 100 -n N (H2_REQUESTS, default 200000) on a
#             22-byte body: the gateway (a Ruby handler, `http2: true`), nginx
#             (`listen ... http2`, `return 200`), h2o (file.dir)
#   W2 h1     wrk -t1 -c100 (the gateway's HTTP/1.1 number W5 is read against)
#   TLS       ab -n HANDSHAKES (default 5000) -c 50 without keep-alive on
#             https with an ECDSA P-256 certificate: gateway vs nginx
#
# Reports req/s, the server's CPU µs per request (utime+stime of the server
# and its children), and writes build/bench/h2.{md,json}.
require 'open3'
require_relative 'common'

module GatewayBench
  class H2
    include Util

    BODY = "hello, world from h2!\n" # 22 bytes

    def initialize(root:, env: ENV)
      @root = root
      @env = env
      @bin = env.fetch('GATEWAY_BIN')
      @n = env_int(env, 'H2_REQUESTS', 200_000)
      @hs = env_int(env, 'HANDSHAKES', 5000)
      @r = Runner.new(root: root, env: env, tag: 'h2')
    end

    def cpu_ticks(pid)
      ([pid] + descendants(pid)).sum { |p| ticks(p) || 0 }
    end

    # Runs the load (argv) pinned to the load CPU; [output, server CPU s].
    def measure(srv, argv)
      t0 = cpu_ticks(srv.pid)
      out, = Open3.capture2e('taskset', '-c', @r.load_cpu.to_s, *argv)
      [out, (cpu_ticks(srv.pid) - t0).to_f / clk_tck]
    end

    def h2load(srv, url, n)
      out, cpu = measure(srv, ['h2load', '-c', '100', '-m', '100', '-n', n.to_s, url])
      rps = out[/finished in [\d.]+m?s, ([\d.]+) req\/s/, 1].to_f
      ok = out[/(\d+) succeeded/, 1].to_i
      { rps: rps, ok: ok, us_per_req: ok.positive? ? cpu * 1e6 / ok : nil }
    end

    def ab(srv, url, n)
      out, cpu = measure(srv, ['ab', '-n', n.to_s, '-c', '50', url])
      rps = out[/Requests per second:\s+([\d.]+)/, 1].to_f
      failed = out[/Failed requests:\s+(\d+)/, 1].to_i
      { rps: rps, failed: failed, us_per_req: cpu * 1e6 / n }
    end

    def cert(dir)
      system('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
             '-keyout', "#{dir}/site.key", '-out', "#{dir}/site.pem", '-days', '2', '-subj', '/CN=localhost',
             out: File::NULL, err: File::NULL) or raise Error, 'openssl req failed'
    end

    def run
      ensure_pkgs(%w[nghttp2-client nginx-light h2o apache2-utils wrk openssl])
      res = {}
      @r.with_cpu_lock do
        certdir = @r.scratch('certs')
        cert(certdir)
        # -- gateway
        port = free_port
        tport = free_port
        conf = <<~RUBY
          server listen: "127.0.0.1:#{port}", http2: true do
            location "/" do "#{BODY.chomp}\\n" end
          end
          server listen: "127.0.0.1:#{tport}", tls: { cert: "#{certdir}/site.pem", key: "#{certdir}/site.key" } do
            location "/" do "#{BODY.chomp}\\n" end
          end
        RUBY
        srv = @r.start_gateway('gateway', @bin, conf, port)
        h2load(srv, "http://127.0.0.1:#{port}/", 10_000) # warm-up
        res['gateway W5 h2c'] = h2load(srv, "http://127.0.0.1:#{port}/", @n)
        wrk = @r.run_wrk(%w[-t1 -c100], "http://127.0.0.1:#{port}/", 5)
        res['gateway W2 h1'] = { rps: wrk[:out][/Requests\/sec:\s+([\d.]+)/, 1].to_f }
        res['gateway W5 h2 TLS'] = h2load(srv, "https://127.0.0.1:#{tport}/", @n / 2)
        res['gateway TLS handshakes'] = ab(srv, "https://127.0.0.1:#{tport}/", @hs)
        @r.stop(srv)
        # -- nginx (1.22: http2 on the listen line; h2c only with http2 on a non-ssl listener)
        port = free_port
        tport = free_port
        srv = @r.start_nginx('nginx', port, <<~NGINX)
          server { listen 127.0.0.1:#{port} http2; location / { return 200 "#{BODY.chomp}\\n"; } }
          server { listen 127.0.0.1:#{tport} ssl http2; ssl_certificate #{certdir}/site.pem;
                   ssl_certificate_key #{certdir}/site.key; ssl_protocols TLSv1.2 TLSv1.3;
                   location / { return 200 "#{BODY.chomp}\\n"; } }
        NGINX
        h2load(srv, "http://127.0.0.1:#{port}/", 10_000)
        res['nginx W5 h2c'] = h2load(srv, "http://127.0.0.1:#{port}/", @n)
        res['nginx W5 h2 TLS'] = h2load(srv, "https://127.0.0.1:#{tport}/", @n / 2)
        res['nginx TLS handshakes'] = ab(srv, "https://127.0.0.1:#{tport}/", @hs)
        @r.stop(srv)
        # -- h2o (file.dir; h2c by prior knowledge on a plain listener)
        dir = @r.scratch('h2o')
        File.write(File.join(dir, 'index.txt'), BODY)
        port = free_port
        File.write(File.join(dir, 'h2o.conf'), <<~YAML)
          listen: { host: 127.0.0.1, port: #{port} }
          num-threads: 1
          access-log: /dev/null
          hosts:
            default:
              paths:
                /:
                  file.dir: #{dir}
        YAML
        h2o = `sh -c 'command -v h2o'`.strip
        srv = @r.start('h2o', [h2o, '-c', File.join(dir, 'h2o.conf')], port: port, dir: dir, binary: h2o)
        h2load(srv, "http://127.0.0.1:#{port}/index.txt", 10_000)
        res['h2o W5 h2c'] = h2load(srv, "http://127.0.0.1:#{port}/index.txt", @n)
        @r.stop(srv)
      end
      report(res)
    ensure
      @r.stop_all
    end

    def report(res)
      lines = ['| run | req/s | server CPU µs/req |', '|---|--:|--:|']
      res.each { |k, v| lines << "| #{k} | #{v[:rps].round} | #{v[:us_per_req] ? v[:us_per_req].round(1) : '-'} |" }
      best = [res['nginx W5 h2c'], res['h2o W5 h2c']].compact.map { |v| v[:rps] }.max
      g = res['gateway W5 h2c'][:rps]
      lines << ''
      lines << "W5 h2c: gateway / best peer = #{(g / best).round(2)}x; W5 / gateway W2 = #{(g / res['gateway W2 h1'][:rps]).round(2)}x"
      hs = res['gateway TLS handshakes'][:rps] / res['nginx TLS handshakes'][:rps]
      lines << "TLS handshakes: gateway / nginx = #{hs.round(2)}x"
      text = lines.join("\n")
      @r.write_report('h2', text + "\n", res)
    end
  end
end
