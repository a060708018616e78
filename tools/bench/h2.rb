# frozen_string_literal: true

# rake bench:h2 - HTTP/2 and TLS, side by side (server pinned to SERVER_CPU,
# load to LOAD_CPU, under the shared CPU lock), peers compared like for like:
#
#   W5 h2c    h2load -c 100 -m 100 -n N (H2_REQUESTS, default 200000) on a
#             22-byte body, two kinds of answer:
#               script  the gateway's Ruby handler vs nginx `return 200` vs
#                       h2o's mruby handler (mruby.handler, a Rack-style Proc)
#               file    the gateway's static file (root:) vs nginx (root) vs
#                       h2o (file.dir), the same 22-byte file
#   W5 TLS    the same rows as h2 over TLS (h2load, ALPN h2), N / 2 requests
#   W2 h1     wrk -t1 -c100 on the gateway's Ruby handler (the HTTP/1.1 number
#             W5 is read against)
#   TLS       ab -n HANDSHAKES (default 5000) -c 50 without keep-alive on
#             https with an ECDSA P-256 certificate: gateway vs nginx
#
# Reports per row req/s counting successful (2xx) requests only, the
# failures (errors, non-2xx, timeouts; a row with any is marked), and the
# server's CPU µs per successful request (utime+stime of the server and its
# children); writes build/bench/h2.{md,json}.
require 'open3'
require_relative 'common'

module GatewayBench
  class H2
    include Util

    BODY = "hello, world from h2!\n" # 22 bytes
    KINDS = {
      'script' => { path: '/', peers: { 'gateway' => 'Ruby handler', 'nginx' => '`return 200`', 'h2o' => 'mruby.handler' } },
      'file' => { path: '/static/index.txt', peers: { 'gateway' => 'static file (root:)', 'nginx' => 'static file (root)',
                                                      'h2o' => 'static file (file.dir)' } }
    }.freeze

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

    # Runs the load (argv) pinned to the load CPU, at most 300 s; [output, server CPU s].
    def measure(srv, argv)
      t0 = cpu_ticks(srv.pid)
      out, = Open3.capture2e('taskset', '-c', @r.load_cpu.to_s, 'timeout', '300', *argv)
      [out, (cpu_ticks(srv.pid) - t0).to_f / clk_tck]
    end

    def with_cpu(res, cpu)
      res.merge(us_per_req: res[:ok].positive? ? cpu * 1e6 / res[:ok] : nil)
    end

    def h2load(srv, url, n)
      argv = ['h2load', '-c', '100', '-m', '100', '-n', n.to_s, url]
      out, cpu = measure(srv, argv)
      with_cpu(Load.h2load(out), cpu).merge(cmd: argv.join(' '))
    end

    def ab(srv, url, n)
      argv = ['ab', '-n', n.to_s, '-c', '50', url]
      out, cpu = measure(srv, argv)
      with_cpu(Load.ab(out), cpu).merge(cmd: argv.join(' '))
    end

    def cert(dir)
      system('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
             '-keyout', "#{dir}/site.key", '-out', "#{dir}/site.pem", '-days', '2', '-subj', '/CN=localhost',
             out: File::NULL, err: File::NULL) or raise Error, 'openssl req failed'
    end

    # The 22-byte file every server serves at /static/index.txt.
    def docroot
      @docroot ||= begin
        d = @r.scratch('docroot')
        FileUtils.mkdir_p(File.join(d, 'static'))
        File.write(File.join(d, 'static', 'index.txt'), BODY)
        d
      end
    end

    # Both kinds, h2c then TLS, on one server: res[[kind, proto, server]].
    def rows(res, name, srv, port, tport)
      KINDS.each do |kind, k|
        h2load(srv, "http://127.0.0.1:#{port}#{k[:path]}", 10_000) # warm-up
        res[[kind, 'h2c', name]] = h2load(srv, "http://127.0.0.1:#{port}#{k[:path]}", @n)
        res[[kind, 'h2 TLS', name]] = h2load(srv, "https://127.0.0.1:#{tport}#{k[:path]}", @n / 2)
      end
    end

    def run
      ensure_pkgs(%w[nghttp2-client nginx-light h2o apache2-utils wrk openssl])
      res = {}
      extra = {}
      @r.with_cpu_lock do
        certdir = @r.scratch('certs')
        cert(certdir)
        tls = %(tls: { cert: "#{certdir}/site.pem", key: "#{certdir}/site.key" })
        # -- gateway
        port = free_port
        tport = free_port
        conf = <<~RUBY
          server listen: "127.0.0.1:#{port}", http2: true do
            location "/static", root: #{docroot.inspect}
            location "/" do "#{BODY.chomp}\\n" end
          end
          server listen: "127.0.0.1:#{tport}", #{tls} do
            location "/static", root: #{docroot.inspect}
            location "/" do "#{BODY.chomp}\\n" end
          end
        RUBY
        srv = @r.start_gateway('gateway', @bin, conf, port)
        rows(res, 'gateway', srv, port, tport)
        wrk = @r.run_wrk(%w[-t1 -c100], "http://127.0.0.1:#{port}/", 5)
        extra['gateway W2 h1 (wrk -t1 -c100, Ruby handler)'] = Load.wrk(wrk[:out]).merge(cmd: wrk[:cmd])
        extra['gateway TLS handshakes (ab -c50, no keep-alive)'] = ab(srv, "https://127.0.0.1:#{tport}/", @hs)
        @r.stop(srv)
        # -- nginx (1.22: http2 on the listen line; h2c only with http2 on a non-ssl listener)
        port = free_port
        tport = free_port
        loc = %(location / { return 200 "#{BODY.chomp}\\n"; } location /static/ { root #{docroot}; })
        srv = @r.start_nginx('nginx', port, <<~NGINX)
          keepalive_requests 1000000;
          server { listen 127.0.0.1:#{port} http2; #{loc} }
          server { listen 127.0.0.1:#{tport} ssl http2; ssl_certificate #{certdir}/site.pem;
                   ssl_certificate_key #{certdir}/site.key; ssl_protocols TLSv1.2 TLSv1.3;
                   #{loc} }
        NGINX
        rows(res, 'nginx', srv, port, tport)
        extra['nginx TLS handshakes (ab -c50, no keep-alive)'] = ab(srv, "https://127.0.0.1:#{tport}/", @hs)
        @r.stop(srv)
        # -- h2o (h2c by prior knowledge on a plain listener; mruby.handler and file.dir)
        dir = @r.scratch('h2o')
        port = free_port
        tport = free_port
        File.write(File.join(dir, 'h2o.conf'), <<~YAML)
          num-threads: 1
          user: root
          access-log: /dev/null
          error-log: #{dir}/error.log
          listen: { host: 127.0.0.1, port: #{port} }
          listen:
            host: 127.0.0.1
            port: #{tport}
            ssl:
              certificate-file: #{certdir}/site.pem
              key-file: #{certdir}/site.key
          hosts:
            default:
              paths:
                /static:
                  file.dir: #{docroot}/static
                /:
                  mruby.handler: |
                    Proc.new do |env|
                      [200, {"content-type" => "text/plain"}, [#{BODY.inspect}]]
                    end
        YAML
        h2o = `sh -c 'command -v h2o'`.strip
        srv = @r.start('h2o', [h2o, '-c', File.join(dir, 'h2o.conf')], port: port, dir: dir, binary: h2o)
        rows(res, 'h2o', srv, port, tport)
        @r.stop(srv)
      end
      report(res, extra)
    ensure
      @r.stop_all
      FileUtils.rm_rf(@docroot) if @docroot
    end

    def cell(v, digits = 0)
      v ? format("%.#{digits}f", v) : '-'
    end

    def report(res, extra)
      h2o_ver = `h2o --version 2>/dev/null`[/version (\S+)/, 1]
      lines = ["bench:h2 — #{Time.now.utc.strftime('%F %H:%M UTC')}, load average #{File.read('/proc/loadavg').split.first(3).join(' ')}, " \
               "`h2load -c100 -m100 -n #{@n}` (TLS: `-n #{@n / 2}`), a #{BODY.bytesize}-byte body; " \
               "nginx #{`nginx -v 2>&1`[%r{nginx/(\S+)}, 1]}, h2o #{h2o_ver} (mruby: yes).", '',
               "Like for like: each group compares the same kind of answer — `script`: the gateway's Ruby handler, nginx's " \
               '`return 200` (no script: the floor) and h2o\'s mruby handler; `file`: the same file from each server. ' \
               'req/s counts successful (2xx) requests only; a row with any failure is marked ⚠.', '',
               "| answer | protocol | server | handler | req/s | server CPU µs/req | #{Load::FAIL_HEAD} | req/s gateway/this |",
               "|---|---|---|---|--:|--:|#{Load::FAIL_ALIGN}|--:|"]
      res.group_by { |(kind, proto, _), _| [kind, proto] }.each do |(kind, proto), rs|
        gw = res[[kind, proto, 'gateway']]
        rs.each do |(_, _, name), v|
          ratio = gw && name != 'gateway' && v[:rps].to_f.positive? ? format('%.2f×', gw[:rps].to_f / v[:rps]) : ''
          lines << "| #{kind} | #{proto} | #{Load.label(name, v)} | #{KINDS[kind][:peers][name]} | #{cell(v[:rps])} | " \
                   "#{cell(v[:us_per_req], 1)} | #{Load.cells(v)} | #{ratio} |"
        end
      end
      lines += ['', "| run | req/s | server CPU µs/req | #{Load::FAIL_HEAD} |", "|---|--:|--:|#{Load::FAIL_ALIGN}|"]
      extra.each { |k, v| lines << "| #{Load.label(k, v)} | #{cell(v[:rps])} | #{cell(v[:us_per_req], 1)} | #{Load.cells(v)} |" }
      g = res[%w[script h2c gateway]]
      w2 = extra.find { |k, _| k.start_with?('gateway W2') }&.last
      lines << ''
      lines << "W5 h2c Ruby handler / gateway W2 HTTP/1.1 = #{(g[:rps].to_f / w2[:rps]).round(2)}×" if g && w2&.dig(:rps).to_f.positive?
      hs = extra.values_at(*extra.keys.grep(/TLS handshakes/))
      if hs.size == 2 && hs.all? { |v| v[:rps].to_f.positive? }
        lines << "TLS handshakes: gateway / nginx = #{(hs[0][:rps] / hs[1][:rps]).round(2)}×"
      end
      data = { rows: res.map { |(kind, proto, name), v| v.merge(kind: kind, proto: proto, server: name) }, extra: extra }
      @r.write_report('h2', lines.join("\n") + "\n", data)
    end
  end
end
