# frozen_string_literal: true

# `rake bench:https_upstream`: proxying to an HTTPS upstream over kept-alive
# TLS connections, the gateway (`proxy_pass: "https://..."`, `tls_ca:`) next
# to nginx (`proxy_pass https://` to an `upstream` block with `keepalive 128`,
# `proxy_ssl_session_reuse on`, `proxy_ssl_verify on`), one worker each
# pinned to SERVER_CPU. The upstream is an nginx TLS server answering a
# 16-byte body (a CA and a certificate made here with `openssl`), re-pinned
# to LOAD_CPU with wrk so that the server CPU holds only the front. The
# figure to compare is the front worker's CPU time per request (utime +
# stime over the run). Writes build/bench/https_upstream.{md,json}.
#
# Environment: CONNS (50), DURATION (5), ROUNDS (3), GATEWAY_BIN,
# SERVER_CPU (1), LOAD_CPU (0), CPU_LOCK, BENCH_OUT.

require 'json'
require 'open3'
require 'time'
require_relative 'common'

module GatewayBench
  class HTTPSUpstream
    include Util

    def initialize(root:, env: ENV)
      @root = root
      @conns = env_int(env, 'CONNS', 50)
      @rounds = env_int(env, 'ROUNDS', 3)
      @duration = env_int(env, 'DURATION', 5) # wrk takes whole seconds
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      @run = Runner.new(root: root, env: env, tag: 'https_upstream')
    end

    def log(msg)
      @run.log(msg)
    end

    def run
      Util.ensure_pkgs(%w[nginx wrk], log: method(:log))
      @certs = make_certs
      up_port = free_port
      backend = start_backend(up_port)
      rows = @run.rounds(@rounds, [['gateway'], ['nginx']], nil, keep: backend) { |name, _| measure(name, up_port) }
      write(rows)
      rows
    end

    def openssl(*args)
      out, st = Open3.capture2e('openssl', *args)
      raise Error, "openssl #{args.first}: #{out}" unless st.success?
    end

    # ca.pem, and server.pem/server.key for 127.0.0.1 signed by it.
    def make_certs
      dir = @run.scratch('certs')
      ec = %w[-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes]
      Dir.chdir(dir) do
        openssl('req', '-x509', *ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=bench CA')
        openssl('req', '-new', *ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost')
        File.write('server.ext', "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
                '-days', '2', '-out', 'server.pem', '-extfile', 'server.ext')
      end
      dir
    end

    def start_backend(port)
      srv = @run.start_nginx('upstream', port, <<~NGINX)
        server {
            listen #{HOST}:#{port} ssl;
            ssl_certificate #{@certs}/server.pem;
            ssl_certificate_key #{@certs}/server.key;
            keepalive_requests 1000000;
            location / { return 200 "hello from https\\n"; }
        }
      NGINX
      @run.pin_to_load(srv) # next to the load, off the server CPU: only the front is measured there
      srv
    end

    def start_front(name, port, up)
      if name == 'gateway'
        @run.start_gateway(name, @bin, <<~RUBY, port)
          server listen: "#{HOST}:#{port}", workers: 1 do
            location "/", proxy_pass: "https://127.0.0.1:#{up}", tls_ca: "#{@certs}/ca.pem"
          end
        RUBY
      else
        @run.start_nginx(name, port, <<~NGINX)
          upstream tlsup {
              server 127.0.0.1:#{up};
              keepalive 128;
          }
          server {
              listen #{HOST}:#{port};
              location / {
                  proxy_pass https://tlsup;
                  proxy_http_version 1.1;
                  proxy_set_header Connection "";
                  proxy_ssl_session_reuse on;
                  proxy_ssl_verify on;
                  proxy_ssl_name localhost; # nginx checks a DNS name (the gateway: the IP entry)
                  proxy_ssl_trusted_certificate #{@certs}/ca.pem;
              }
          }
        NGINX
      end
    end

    def measure(name, up)
      port = free_port
      srv = start_front(name, port, up)
      worker = @run.worker_of(srv)
      url = "http://#{HOST}:#{port}/"
      args = ['-t1', "-c#{@conns}"]
      @run.run_wrk(args, url, 1) # warm-up: connections and sessions
      row = { server: name }.merge(@run.cpu_per_request(name, worker, args, url, @duration))
      log "#{name}: #{row.inspect}"
      row
    end

    def write(rows)
      ok = rows.reject { |r| r[:error] }
      med = lambda do |name, key|
        xs = ok.select { |r| r[:server] == name }.map { |r| r[key] }.compact
        xs.empty? ? nil : median(xs)
      end
      md = +"# bench:https_upstream — proxy to an HTTPS upstream, keep-alive, wrk -t1 -c#{@conns}, #{@duration} s\n\n"
      md << "#{Time.now.utc.iso8601}, medians of #{@rounds} rounds, server CPU #{@run.server_cpu}, load CPU #{@run.load_cpu}\n\n"
      md << "req/s counts successful (2xx) requests only; failures are summed over the rounds, a row with any is marked ⚠.\n\n"
      md << "| server | req/s | server CPU µs/req | p99 ms | #{Load::FAIL_HEAD} |\n|---|---:|---:|---:|#{Load::FAIL_ALIGN}|\n"
      %w[gateway nginx].each do |name|
        errs = Load.sum(ok.select { |r| r[:server] == name })
        md << "| #{Load.label(name, errs)} | #{med.call(name, :rps)&.round} | #{med.call(name, :cpu_us_per_req)} | #{med.call(name, :p99_ms)&.round(2)} | #{Load.cells(errs)} |\n"
      end
      g = med.call('gateway', :cpu_us_per_req)
      n = med.call('nginx', :cpu_us_per_req)
      if g && n
        md << "\nserver CPU per request, gateway / nginx: #{(g / n).round(2)}; req/s gateway / nginx: " \
              "#{(med.call('gateway', :rps).to_f / med.call('nginx', :rps)).round(2)}\n"
      end
      rows.select { |r| r[:error] }.each { |r| md << "\n#{r[:server]} round #{r[:round]}: error: #{r[:error]}\n" }
      @run.write_report('https_upstream', md, rows)
    end
  end
end
