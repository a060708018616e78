# frozen_string_literal: true

# Instructions per TLS handshake, per HTTP/2 request and per HTTP/1.1 static
# request (W4), counted by valgrind's callgrind, for the gateway and its
# peers in the same run:
# nginx (Debian's, `master_process off` so the one process serving is the
# one counted) and h2o (Debian's, one thread). Instruction counts do not move
# with the load of a shared machine, where CPU time and req/s do.
#
#   ruby tools/bench/h2_instructions.rb [GATEWAY_BIN=build/gateway] [HANDSHAKES=300] [N=20000]
#        [SERVERS=gateway,nginx,h2o] [WORKLOADS=tls,h2c,h2tls,h2tlsstatic] [KEEP=/tmp/dumps]
#   rake bench:h2_instructions
#
# Each server runs under callgrind on free loopback ports with its own
# temporary config; after a warm-up its counters are zeroed, the load runs,
# the counters are dumped and Ir is divided by the count:
#   tls    ab -n HANDSHAKES -c 10, no keep-alive, ECDSA P-256 certificate:
#          Ir per handshake (with its one GET of a 22-byte body)
#   h2c       h2load -c 10 -m 10 -n N, prior knowledge: Ir per request; the
#             gateway answers from a Ruby handler (as in bench:h2), nginx
#             with `return 200` (no script), h2o from its mruby handler
#             (mruby.handler): a script against a script
#   h2static  the same, each serving the 22-byte file (gateway root:, nginx
#             root, h2o file.dir): the same work on every side
#   h2tls     h2c's handlers over TLS (ALPN h2; its 10 handshakes included)
#   h2tlsstatic  h2static's file over TLS (the same)
#   h1static  W4 in instructions: HTTP/1.1 keep-alive, h2load --h1 -c 10 -n N,
#             each serving the 22-byte file (nginx with sendfile and
#             open_file_cache, as bench:static configures it)
#   h1fastcgi W6 in instructions: the same load through a FastCGI location
#             to php-fpm echoing a line over a unix socket, kept connections
#             (nginx with fastcgi_keep_conn and keepalive, as bench:fastcgi);
#             php-fpm itself is not counted. Gateway and nginx only.
# Writes build/bench/h2_instructions.{md,json}.
require 'fileutils'
require 'json'
require 'openssl'
require 'socket'
require 'tmpdir'
require_relative 'common'

module GatewayBench
  class H2Instructions
    BODY = "hello, world from h2!\n" # 22 bytes
    SERVERS = %w[gateway nginx h2o].freeze
    WORKLOADS = %w[tls h2c h2static h2tls h2tlsstatic h1static h1fastcgi].freeze

    def initialize(root: File.expand_path('../..', __dir__), env: ENV)
      @root = root
      @bin = File.expand_path(env.fetch('GATEWAY_BIN', 'build/gateway'), root)
      raise Error, "no executable #{@bin}" unless File.executable?(@bin)

      @hs = Integer(env.fetch('HANDSHAKES', '300'))
      @n = Integer(env.fetch('N', '20000'))
      @servers = env.fetch('SERVERS', SERVERS.join(',')).split(',')
      @loads = env.fetch('WORKLOADS', WORKLOADS.join(',')).split(',')
      @keep = env['KEEP']
      FileUtils.mkdir_p(@keep) if @keep
    end

    def run
      %w[valgrind callgrind_control ab h2load openssl].each do |t|
        raise Error, "#{t} is not installed (setup.sh)" unless system("command -v #{t} >/dev/null")
      end
      res = {}
      Dir.mktmpdir('gw-h2instr-') do |certs|
        cert(certs)
        @servers.each do |s|
          res[s] = {}
          # ab's TLS connections to Debian's h2o fail half the time: no h2o handshake row;
          # h2o's FastCGI keeps no connections: no h2o FastCGI row
          @loads.each { |w| res[s][w] = measure(s, w, certs) unless s == 'h2o' && %w[tls h1fastcgi].include?(w) }
        end
      end
      report(res)
    end

    private

    def cert(dir)
      system('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
             '-keyout', "#{dir}/site.key", '-out', "#{dir}/site.pem", '-days', '2', '-subj', '/CN=localhost',
             out: File::NULL, err: File::NULL) or raise Error, 'openssl req failed'
    end

    def tls?(workload) = %w[tls h2tls h2tlsstatic].include?(workload)
    def static?(workload) = %w[h2static h2tlsstatic h1static].include?(workload)

    # [argv, path]: the server's command line, written into dir.
    def server(name, port, workload, dir, certs)
      tls = tls?(workload)
      static = static?(workload)
      fcgi = workload == 'h1fastcgi'
      File.write("#{dir}/index.txt", BODY)
      case name
      when 'gateway'
        opts = tls ? %(, tls: { cert: "#{certs}/site.pem", key: "#{certs}/site.key" }) : ''
        root = if static then %(location "/", root: "#{dir}")
               elsif fcgi then %(location "/", fastcgi: "unix:#{dir}/php.sock", script_filename: "#{dir}/echo.php")
               else %(location "/" do "#{BODY.chomp}\\n" end)
               end
        File.write("#{dir}/gw.rb", <<~RUBY)
          server listen: "127.0.0.1:#{port}", http2: true#{opts} do
            location "/pid" do Gateway.pid.to_s end
            #{root}
          end
        RUBY
        [[@bin, '-f', "#{dir}/gw.rb"], static ? '/index.txt' : '/']
      when 'nginx'
        listen = if tls then "ssl http2; ssl_certificate #{certs}/site.pem; ssl_certificate_key #{certs}/site.key; " \
                             'ssl_protocols TLSv1.2 TLSv1.3'
                 elsif workload.start_with?('h1') then '' # nginx's cleartext http2 port speaks only h2
                 else 'http2'
                 end
        answer = if static then "root #{dir};"
                 elsif fcgi then "include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME #{dir}/echo.php; " \
                                 'fastcgi_keep_conn on; fastcgi_pass php;'
                 else %(return 200 "#{BODY.chomp}\\n";)
                 end
        argv = Callgrind.nginx(dir, <<~NGINX)
          keepalive_requests 1000000; # its default (1000) ends each h2load connection half-way
          default_type text/plain;
          sendfile on; open_file_cache max=1000 inactive=60s;
          #{fcgi ? "upstream php { server unix:#{dir}/php.sock; keepalive 16; }" : ''}
          server { listen 127.0.0.1:#{port} #{listen};
                   location / { #{answer} } }
        NGINX
        [argv, static ? '/index.txt' : '/']
      when 'h2o'
        ssl = tls ? ", ssl: { certificate-file: #{certs}/site.pem, key-file: #{certs}/site.key }" : ''
        File.write("#{dir}/h2o.conf", <<~YAML)
          listen: { host: 127.0.0.1, port: #{port}#{ssl} }
          num-threads: 1
          #{Process.uid.zero? ? 'user: root' : ''}
          access-log: /dev/null
          error-log: #{dir}/error.log
          pid-file: #{dir}/h2o.pid
          hosts:
            default:
              paths:
                /:
                  #{h2o_answer(static, dir)}
        YAML
        [['h2o', '-c', "#{dir}/h2o.conf"], static ? '/index.txt' : '/']
      else raise Error, "unknown server #{name}"
      end
    end

    # h2o's answer under /: the file (file.dir) or, like the gateway's Ruby
    # handler, its mruby handler returning the same body.
    def h2o_answer(static, dir)
      return "file.dir: #{dir}" if static

      "mruby.handler: |\n          Proc.new { |env| [200, {\"content-type\" => \"text/plain\"}, [#{BODY.inspect}]] }"
    end

    def get(port, tls, path)
      sock = TCPSocket.new('127.0.0.1', port)
      io = sock
      if tls
        ctx = OpenSSL::SSL::SSLContext.new
        ctx.verify_mode = OpenSSL::SSL::VERIFY_NONE
        io = OpenSSL::SSL::SSLSocket.new(sock, ctx)
        io.connect
      end
      io.write("GET #{path} HTTP/1.0\r\nHost: b\r\n\r\n")
      io.read.split("\r\n\r\n", 2)
    ensure
      io&.close rescue nil
      sock&.close
    end

    # Waits for the server to answer (valgrind starts slowly): the gateway's
    # /pid (its worker's), the peers' port (nginx's h2c port speaks only h2).
    def wait_up(port, tls, path)
      300.times do
        return TCPSocket.new('127.0.0.1', port).close if path.nil?

        head, body = get(port, tls, path)
        return body if head&.start_with?('HTTP/1.') && head.include?(' 200 ')
      rescue SystemCallError, OpenSSL::SSL::SSLError, IOError
        sleep 0.1
      end
      raise Error, "no answer on #{port}"
    end

    def load(workload, url, count)
      argv = case workload
             when 'tls' then ['ab', '-q', '-n', count.to_s, '-c', '10', url]
             when 'h1static', 'h1fastcgi' then ['h2load', '--h1', '-c', '10', '-n', count.to_s, url]
             else ['h2load', '-c', '10', '-m', '10', '-n', count.to_s, url]
             end
      out = IO.popen(argv, err: %i[child out], &:read)
      r = workload == 'tls' ? Load.ab(out) : Load.h2load(out)
      unless r[:ok] == count && r[:failures].zero?
        raise Error, "#{argv.join(' ')}: #{r[:ok]} of #{count} succeeded (#{Load.cells(r)} errors | non-2xx | timeouts):\n#{out[-600..] || out}"
      end

      out
    end

    def measure(name, workload, certs)
      dir = Dir.mktmpdir("gw-h2instr-#{name}-")
      port = Util.free_port
      # more children than the 10 connections the front keeps
      fpm = Callgrind.php_fpm(dir, 12) if workload == 'h1fastcgi'
      argv, path = server(name, port, workload, dir, certs)
      pid = Callgrind.spawn(argv, dir)
      body = wait_up(port, tls?(workload), name == 'gateway' ? '/pid' : nil)
      target = name == 'gateway' ? body.to_i : pid
      url = "#{tls?(workload) ? 'https' : 'http'}://127.0.0.1:#{port}#{path}"
      count = workload == 'tls' ? @hs : @n
      load(workload, url, [count / 10, 20].max) # warm-up
      ir = Callgrind.count(target, dir, @keep && File.join(@keep, "#{name}-#{workload}.callgrind")) do
        load(workload, url, count)
      end
      ir.to_f / count
    ensure
      Callgrind.stop(pid, fpm)
      FileUtils.rm_rf(dir) if dir
    end

    def report(res)
      label = { 'tls' => 'TLS handshake (ab, no keep-alive, P-256)',
                'h2c' => 'h2c request (h2load -c10 -m10): Ruby handler, nginx `return 200`, h2o mruby.handler',
                'h2static' => 'h2c request, the same 22-byte file',
                'h2tls' => 'h2 over TLS request (h2load -c10 -m10), the h2c row\'s handlers',
                'h2tlsstatic' => 'h2 over TLS request, the same 22-byte file',
                'h1static' => 'HTTP/1.1 request, the same file (h2load --h1 -c10)',
                'h1fastcgi' => 'HTTP/1.1 request through FastCGI to php-fpm, unix socket (h2load --h1 -c10)' }
      peers = @servers - ['gateway']
      lines = ['| Ir per | ' + @servers.join(' | ') + ' | ' + peers.map { |p| "gateway/#{p}" }.join(' | ') + ' |',
               '|---|' + ('--:|' * (@servers.size + peers.size))]
      @loads.each do |w|
        cells = @servers.map { |s| res[s][w] ? res[s][w].round.to_s : '-' }
        cells += peers.map { |p| res.dig('gateway', w) && res[p][w] ? format('%.2f', res['gateway'][w] / res[p][w]) : '-' }
        lines << "| #{label[w]} | #{cells.join(' | ')} |"
      end
      lines << '' << 'Every count had all its requests succeed (2xx; ab: no failed request): a load with any ' \
                     'error, non-2xx or timeout stops the run instead of leaving a row.'
      Callgrind.write_report(@root, 'h2_instructions', lines.join("\n") + "\n", res)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  env = ENV.to_h.merge(ARGV.map { |a| a.split('=', 2) }.to_h)
  GatewayBench::H2Instructions.new(env: env).run
end
