# HTTPS upstreams: proxy_pass "https://...", https:// servers of an upstream
# group, req.proxy_pass and Async::HTTP.sub_request to https:// URLs.
# Certificates are made here with `openssl` (a test CA signing a server
# certificate for localhost/127.0.0.1, a self-signed one, one for a wrong
# name, and a client certificate); the TLS peers are nginx (started here on
# free ports, with its own prefix, stopped by PID), the gateway's own TLS
# listener, and small Ruby sockets that hang or answer garbage.
require_relative 'spec_helper'
require 'json'
require 'open3'
require 'openssl'
require 'socket'
require 'timeout'

module HTTPSUpstreamHelpers
  def openssl!(*args)
    out, st = Open3.capture2e('openssl', *args)
    raise "openssl #{args.first} failed: #{out}" unless st.success?
  end

  # ca.pem/ca.key; server.pem (localhost, 127.0.0.1, signed by the CA);
  # self.pem (self-signed, same names); wrong.pem (other.example, by the CA);
  # client.pem (a client certificate by the CA).
  def make_certs(dir)
    ec = %w[-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes]
    Dir.chdir(dir) do
      openssl!('req', '-x509', *ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=gateway spec CA')
      { 'server' => ['localhost', 'DNS:localhost,IP:127.0.0.1'],
        'wrong' => ['other.example', 'DNS:other.example'],
        'client' => ['spec-client', 'DNS:spec-client'] }.each do |base, (cn, san)|
        openssl!('req', '-new', *ec, '-keyout', "#{base}.key", '-out', "#{base}.csr", '-subj', "/CN=#{cn}")
        File.write("#{base}.ext", "subjectAltName=#{san}\n")
        openssl!('x509', '-req', '-in', "#{base}.csr", '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
                 '-days', '2', '-out', "#{base}.pem", '-extfile', "#{base}.ext")
      end
      openssl!('req', '-x509', *ec, '-keyout', 'self.key', '-out', 'self.pem', '-days', '2', '-subj', '/CN=localhost',
               '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1')
    end
  end

  # One nginx with a TLS server per port (name => port); every answer says
  # what the upstream saw of the connection.
  def start_nginx(dir, ports)
    info = 'return 200 "sni=$ssl_server_name reused=$ssl_session_reused conn=$connection ' \
           'n=$connection_requests proto=$ssl_protocol alpn=$ssl_alpn_protocol client=$ssl_client_s_dn ' \
           'uri=$request_uri host=$host\n";'
    server = lambda do |port, cert, extra = ''|
      <<~NGINX
        server {
          listen 127.0.0.1:#{port} ssl;
          ssl_certificate #{dir}/#{cert}.pem;
          ssl_certificate_key #{dir}/#{cert}.key;
          #{extra.include?('ssl_protocols') ? '' : 'ssl_protocols TLSv1.2 TLSv1.3;'}
          #{extra}
          location / { #{info} }
        }
      NGINX
    end
    GatewaySpec.start_nginx_peer(dir, <<~NGINX, ports.values)
      default_type text/plain;
      keepalive_requests 10000;
      #{server.call(ports[:ca], 'server')}
      #{server.call(ports[:self], 'self')}
      #{server.call(ports[:wrong], 'wrong')}
      #{server.call(ports[:mtls], 'server', "ssl_verify_client on; ssl_client_certificate #{dir}/ca.pem;")}
      #{server.call(ports[:fresh], 'server', 'keepalive_timeout 0;')}
      #{server.call(ports[:short], 'server', 'keepalive_timeout 1s;')}
      #{server.call(ports[:fresh12], 'server', 'keepalive_timeout 0; ssl_protocols TLSv1.2;')}
    NGINX
  end

  def stop_pid(pid)
    return unless pid
    Process.kill('TERM', pid)
    Process.waitpid(pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  end

  # A TCP peer on a free port that accepts and then either says nothing
  # (:hang) or answers plain HTTP instead of a TLS handshake (:garbage).
  class Peer
    attr_reader :port, :accepted

    def initialize(mode)
      @server = TCPServer.new('127.0.0.1', 0)
      @port = @server.addr[1]
      @accepted = 0
      @socks = []
      @thread = Thread.new do
        loop do
          s = @server.accept
          @accepted += 1
          @socks << s
          if mode == :garbage
            s.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello") rescue nil
            s.close
          end
        end
      rescue IOError, SystemCallError
        nil
      end
    end

    def stop
      @server.close rescue nil
      @thread.join(2)
      @socks.each { |s| s.close rescue nil }
    end
  end

  # A TLS peer (Ruby's OpenSSL) that reads a request head and answers
  # `reply`, then closes the TCP connection without a close_notify.
  class AbruptTLSPeer
    attr_reader :port

    def initialize(dir, reply)
      tcp = TCPServer.new('127.0.0.1', 0)
      @port = tcp.addr[1]
      ctx = OpenSSL::SSL::SSLContext.new
      ctx.cert = OpenSSL::X509::Certificate.new(File.read(File.join(dir, 'server.pem')))
      ctx.key = OpenSSL::PKey.read(File.read(File.join(dir, 'server.key')))
      @server = OpenSSL::SSL::SSLServer.new(tcp, ctx)
      @thread = Thread.new do
        loop do
          s = @server.accept
          head = +''
          head << s.readpartial(4096) until head.include?("\r\n\r\n")
          s.write(reply)
          s.to_io.close # no close_notify
        rescue OpenSSL::SSL::SSLError, EOFError, Errno::ECONNRESET
          next
        end
      rescue IOError, SystemCallError
        nil
      end
    end

    def stop
      @server.close rescue nil
      @thread.join(2)
    end
  end
end

RSpec.describe 'HTTPS upstreams' do
  include HTTPSUpstreamHelpers

  before(:all) do
    @dir = Dir.mktmpdir('gateway-https-')
    make_certs(@dir)
    @np = { ca: free_port, self: free_port, wrong: free_port, mtls: free_port, fresh: free_port, short: free_port,
            fresh12: free_port }
    @nginx = start_nginx(@dir, @np)
    @hang = HTTPSUpstreamHelpers::Peer.new(:hang)
    @garbage = HTTPSUpstreamHelpers::Peer.new(:garbage)
  end

  after(:all) do
    stop_pid(@nginx)
    @hang&.stop
    @garbage&.stop
    FileUtils.rm_rf(@dir) if @dir
  end

  before(:each) do
    @tls_port = free_port
    @port = free_port
    ca = "#{@dir}/ca.pem"
    FileUtils.cp(ca, File.join(spec_dir, 'relative-ca.pem')) # next to the config: tls_ca: "relative-ca.pem"
    @gw = start_gateway(<<~RUBY, ports: @port)
      upstream :tlsgroup, servers: ["https://127.0.0.1:#{@np[:ca]}"], tls_ca: "#{ca}"
      upstream :plainlisted, servers: ["127.0.0.1:#{@np[:ca]}"], tls_ca: "#{ca}"
      upstream :mixed, servers: ["127.0.0.1:#{free_port}", "https://127.0.0.1:#{@np[:ca]}"], tls_ca: "#{ca}"
      upstream :hanging, servers: ["https://127.0.0.1:#{@hang.port}"], connect_timeout: 1, tls_verify: false
      upstream :halfbad, servers: ["https://127.0.0.1:#{@np[:self]}", "https://127.0.0.1:#{@np[:ca]}"], tls_ca: "#{ca}",
               max_fails: 1, fail_timeout: 30
      server listen: "127.0.0.1:#{@port}" do
        location "/ca/", proxy_pass: "https://127.0.0.1:#{@np[:ca]}/", tls_ca: "relative-ca.pem"
        location "/short/", proxy_pass: "https://127.0.0.1:#{@np[:short]}/", tls_ca: "#{ca}"
        location "/status", status: true
        location "/default/", proxy_pass: "https://127.0.0.1:#{@np[:ca]}/"
        location "/noverify/", proxy_pass: "https://127.0.0.1:#{@np[:self]}/", tls_verify: false
        location "/selfsigned/", proxy_pass: "https://127.0.0.1:#{@np[:self]}/", tls_ca: "#{ca}"
        location "/wrongname/", proxy_pass: "https://127.0.0.1:#{@np[:wrong]}/", tls_ca: "#{ca}"
        location "/wrongsni/", proxy_pass: "https://127.0.0.1:#{@np[:ca]}/", tls_ca: "#{ca}", tls_server_name: "nothere.example"
        location "/sni/", proxy_pass: "https://127.0.0.1:#{@np[:ca]}/", tls_ca: "#{ca}", tls_server_name: "localhost"
        location "/mtls/", proxy_pass: "https://127.0.0.1:#{@np[:mtls]}/", tls_ca: "#{ca}",
                 tls_cert: "#{@dir}/client.pem", tls_key: "#{@dir}/client.key"
        location "/nocert/", proxy_pass: "https://127.0.0.1:#{@np[:mtls]}/", tls_ca: "#{ca}"
        location "/fresh/", proxy_pass: "https://127.0.0.1:#{@np[:fresh]}/", tls_ca: "#{ca}"
        location "/fresh12/", proxy_pass: "https://127.0.0.1:#{@np[:fresh12]}/", tls_ca: "#{ca}"
        location "/group/", proxy_pass: "http://tlsgroup/"
        location "/plaingroup/", proxy_pass: "https://plainlisted/"
        location "/mixed/", proxy_pass: "http://mixed/"
        location "/halfbad/", proxy_pass: "http://halfbad/"
        location "/hang/", proxy_pass: "http://hanging/"
        location "/garbage/", proxy_pass: "https://127.0.0.1:#{@garbage.port}/", tls_verify: false
        location "/gw/", proxy_pass: "https://127.0.0.1:#{@tls_port}/", tls_ca: "#{ca}", tls_server_name: "localhost"
        location "/script", tls_ca: "#{ca}" do |req|
          req.proxy_pass("https://127.0.0.1:#{@np[:ca]}/from-script")
        end
        location "/sub", tls_ca: "#{ca}" do |req|
          r = Async::HTTP.sub_request("https://127.0.0.1:#{@np[:ca]}/from-sub")
          "sub \#{r.status} \#{r.body}"
        end
        location "/sub-default" do |req|
          begin
            r = Async::HTTP.sub_request("https://127.0.0.1:#{@np[:ca]}/x")
            "status \#{r.status}"
          rescue => e
            "\#{e.class}: \#{e.message}"
          end
        end
      end
    RUBY
  end

  # The gateway's own TLS listener as an upstream (request and response bodies).
  def start_tls_upstream
    start_gateway(<<~RUBY, ports: [], name: 'back.rb')
      server listen: "127.0.0.1:#{@tls_port}", tls: { cert: "#{@dir}/server.pem", key: "#{@dir}/server.key" } do
        location "/echo" do |req| "\#{req.body.bytesize} \#{req.body[0, 8]} \#{req.body[-8, 8]}" end
        location "/big" do |req| "0123456789abcdef" * 262_144 end
        location "/sni" do |req| "sni=\#{req.tls_server_name.inspect}" end
      end
    RUBY
    GatewaySpec.poll('the TLS upstream to listen', timeout: 10) { port_open?(@tls_port) }
  end

  def get(path, **headers)
    http_request(@port, 'GET', path, headers, nil, timeout: 10)
  end

  def field(body, name)
    body[/#{name}=(\S*)/, 1]
  end

  it 'proxies to an HTTPS upstream verified with tls_ca: (relative to the config; TLS 1.3, ALPN http/1.1, the path mapped)' do
    r = get('/ca/a/b?q=1')
    expect(r.status).to eq(200)
    expect(field(r.body, 'proto')).to eq('TLSv1.3')
    expect(field(r.body, 'alpn')).to eq('http/1.1')
    expect(field(r.body, 'uri')).to eq('/a/b?q=1')
    expect(field(r.body, 'host')).to eq('127.0.0.1')
  end

  it 'refuses the test CA with the default verification (system CAs): 502 and a log line with the reason' do
    r = get('/default/')
    expect(r.status).to eq(502)
    GatewaySpec.poll('the log line') { @gw.log.include?('certificate verify failed') }
    expect(@gw.log).to match(/upstream 127\.0\.0\.1@127\.0\.0\.1:#{@np[:ca]}: TLS handshake failed: certificate verify failed: unable to get local issuer certificate/)
  end

  it 'tls_verify: false accepts a self-signed certificate; with tls_ca: it is refused (502, "self-signed certificate")' do
    expect(get('/noverify/').status).to eq(200)
    expect(get('/selfsigned/').status).to eq(502)
    GatewaySpec.poll('the log line') { @gw.log.include?('certificate verify failed: self-signed certificate') }
    expect(@gw.log).to include("127.0.0.1:#{@np[:self]}: TLS handshake failed: certificate verify failed: self-signed certificate")
  end

  it 'refuses a certificate for another name (the URL\'s IP, or tls_server_name:): 502' do
    expect(get('/wrongname/').status).to eq(502)
    expect(get('/wrongsni/').status).to eq(502)
    GatewaySpec.poll('the log lines') { @gw.log.scan(/certificate verify failed: [^\n]*(mismatch|IP address)/).size >= 2 }
  end

  it 'sends SNI: tls_server_name: to nginx, and the name to the gateway\'s own TLS listener; none for an IP literal' do
    expect(field(get('/sni/').body, 'sni')).to eq('localhost')
    expect(field(get('/ca/').body, 'sni')).to eq('')
    start_tls_upstream
    r = get('/gw/sni')
    expect(r.status).to eq(200)
    expect(r.body).to eq('sni="localhost"')
  end

  it 'keeps TLS connections alive: 30 requests, at most 2 upstream connections' do
    conns = 30.times.map do
      r = get('/ca/')
      expect(r.status).to eq(200)
      field(r.body, 'conn')
    end
    expect(conns.uniq.size).to be <= 2
    expect(conns.uniq.size).to be < conns.size
  end

  it 'drops an idle TLS connection the upstream closed (close_notify), then a GET and a POST get new ones' do
    first = get('/short/')
    expect(first.status).to eq(200)
    sleep 1.6 # nginx keepalive_timeout 1s: close_notify and FIN on the idle pooled connection
    r = get('/short/')
    expect(r.status).to eq(200)
    expect(field(r.body, 'conn')).not_to eq(field(first.body, 'conn'))
    expect(field(r.body, 'reused')).to eq('r')
    sleep 1.6
    r = http_request(@port, 'POST', '/short/', {}, 'not idempotent', timeout: 10)
    expect(r.status).to eq(200)
    expect(@gw.log).not_to include('/short/ to')
  end

  it 'resumes the TLS session on a new connection (nginx closes each one)' do
    seen = 4.times.map do
      r = get('/fresh/')
      expect(r.status).to eq(200)
      [field(r.body, 'conn'), field(r.body, 'reused')]
    end
    expect(seen.map(&:first).uniq.size).to eq(4) # a new connection each time
    expect(seen.drop(1).map(&:last)).to all(eq('r'))
    tls = lambda do # the status page: counters published by the worker (at most a second old)
      w = JSON.parse(get('/status').body)['workers'].find { |x| x['port'] == @port }
      [w['upstream_tls_handshakes'], w['upstream_tls_resumed']]
    end
    GatewaySpec.poll('the TLS counters', timeout: 5) { tls.call == [4, 3] }
    seen = 3.times.map { field(get('/fresh12/').body, 'reused') } # TLS 1.2: the session comes with the handshake
    expect(seen.drop(1)).to eq(%w[r r])
    expect(field(get('/fresh12/').body, 'proto')).to eq('TLSv1.2')
  end

  it 'presents a client certificate (tls_cert:/tls_key:) to an upstream that requires one' do
    r = get('/mtls/')
    expect(r.status).to eq(200)
    expect(field(r.body, 'client')).to eq('CN=spec-client')
    expect(get('/nocert/').status).to eq(400) # nginx: "No required SSL certificate was sent"
  end

  it 'streams a request body up and a large response down (the gateway\'s TLS listener as upstream)' do
    start_tls_upstream
    body = ('a'..'z').to_a.join * 40_000 # ~1 MB
    r = http_request(@port, 'POST', '/gw/echo', { 'Content-Type' => 'text/plain' }, body, timeout: 20)
    expect(r.status).to eq(200)
    expect(r.body).to eq("#{body.bytesize} #{body[0, 8]} #{body[-8, 8]}")
    r = http_request(@port, 'GET', '/gw/big', {}, nil, timeout: 20)
    expect(r.status).to eq(200)
    expect(r.body.bytesize).to eq(16 * 262_144)
    expect(r.body).to eq('0123456789abcdef' * 262_144)
  end

  it 'a client that leaves mid-response closes the TLS upstream connection; the next requests are served' do
    start_tls_upstream
    3.times do
      c = connect(@port)
      c.write("GET /gw/big HTTP/1.1\r\nHost: x\r\n\r\n")
      got = +''
      Timeout.timeout(5 * GatewaySpec::SLACK) { got << c.sock.readpartial(65_536) while got.bytesize < 100_000 }
      c.close
    end
    expect(get('/gw/sni').body).to eq('sni="localhost"')
    expect(http_request(@port, 'GET', '/gw/big', {}, nil, timeout: 20).body.bytesize).to eq(16 * 262_144)
  end

  it 'uses https:// servers of an upstream group (or all, for proxy_pass "https://GROUP/"), and tries the next server after a refused one' do
    r = get('/group/g')
    expect(r.status).to eq(200)
    expect(field(r.body, 'uri')).to eq('/g')
    2.times { expect(get('/mixed/m').status).to eq(200) }
    r = get('/plaingroup/p') # proxy_pass "https://GROUP/": every server of the group over TLS, as nginx
    expect([r.status, field(r.body, 'uri')]).to eq([200, '/p'])
  end

  it 'a server whose certificate is refused counts as a connect failure: the next one answers, it is marked down' do
    3.times { expect(get('/halfbad/h').status).to eq(200) }
    GatewaySpec.poll('the log lines') { @gw.log.include?("server https://127.0.0.1:#{@np[:self]} marked down") }
    expect(@gw.log.scan("127.0.0.1:#{@np[:self]}: TLS handshake failed: certificate verify failed").size).to eq(1)
  end

  it 'pools connections per TLS server name: the SNI of each request is its own, never a pooled neighbour\'s' do
    20.times do |i|
      path, want = i.even? ? ['/ca/', ''] : ['/sni/', 'localhost']
      r = get(path)
      expect([r.status, field(r.body, 'sni')]).to eq([200, want])
    end
  end

  it 'req.proxy_pass("https://...") and Async::HTTP.sub_request("https://...") use the location\'s tls_ca:' do
    r = get('/script')
    expect(r.status).to eq(200)
    expect(field(r.body, 'uri')).to eq('/from-script')
    r = get('/sub')
    expect(r.status).to eq(200)
    expect(r.body).to start_with('sub 200 sni=')
    expect(r.body).to include('uri=/from-sub')
    expect(get('/sub-default').body).to eq('Gateway::UpstreamError: upstream TLS handshake failed')
  end

  it 'an upstream closing mid-response (no close_notify) cuts the response short; a close-delimited one is whole' do
    cut = HTTPSUpstreamHelpers::AbruptTLSPeer.new(@dir, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
    whole = HTTPSUpstreamHelpers::AbruptTLSPeer.new(@dir, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end")
    @gw.stop
    @gw = start_gateway(<<~RUBY, ports: @port)
      server listen: "127.0.0.1:#{@port}" do
        location "/cut/", proxy_pass: "https://127.0.0.1:#{cut.port}/", tls_ca: "#{@dir}/ca.pem"
        location "/whole/", proxy_pass: "https://127.0.0.1:#{whole.port}/", tls_ca: "#{@dir}/ca.pem"
      end
    RUBY
    raw = raw_request(@port, "GET /cut/ HTTP/1.1\r\nHost: x\r\n\r\n", read_timeout: 5)
    head, body = raw.split("\r\n\r\n", 2)
    expect(head).to start_with('HTTP/1.1 200')
    expect(head).to include('Content-Length: 100')
    expect(body).to eq('0123456789') # then the client's connection closed: never a fake complete response
    GatewaySpec.poll('the log line') { @gw.log.include?('upstream closed connection prematurely after the response began') }
    r = get('/whole/')
    expect([r.status, r.body]).to eq([200, 'to the end'])
  ensure
    cut&.stop
    whole&.stop
  end

  it 'passes a WebSocket handshake to an https:// upstream over TLS (a non-101 answer is relayed as it is)' do
    # nginx here speaks no WebSocket: its 200 comes back whole, and shows the
    # handshake went over the verified TLS connection (spec/websocket_wss_upstream_spec.rb
    # has the real wss:// tunnels)
    r = get('/ca/ws', 'Connection' => 'Upgrade', 'Upgrade' => 'websocket', 'Sec-WebSocket-Version' => '13',
            'Sec-WebSocket-Key' => 'dGhlIHNhbXBsZSBub25jZQ==')
    expect(r.status).to eq(200)
    expect(r.body).to match(/proto=TLSv1\.[23] /)
    expect(@gw.log).not_to include('not supported')
  end

  it 'answers 504 when the upstream accepts but never completes the handshake' do
    t0 = GatewaySpec.now
    r = get('/hang/')
    expect(r.status).to eq(504)
    expect(GatewaySpec.now - t0).to be < 4 * GatewaySpec::SLACK
    GatewaySpec.poll('the log line') { @gw.log.include?('TLS handshake timed out') }
  end

  it 'answers 502 when the upstream sends plain HTTP instead of TLS' do
    expect(get('/garbage/').status).to eq(502)
    GatewaySpec.poll('the log line') { @gw.log.include?("127.0.0.1:#{@garbage.port}: TLS handshake failed") }
    expect(get('/ca/').status).to eq(200) # and the gateway goes on
  end

  it 'names FILE:LINE for a tls_ca: file that does not exist' do
    status, out, path = check_config(<<~RUBY)
      server listen: "127.0.0.1:#{free_port}" do
        location "/", proxy_pass: "https://127.0.0.1:1/", tls_ca: "missing-ca.pem"
      end
    RUBY
    expect(status).to eq(1)
    expect(out).to match(/#{Regexp.escape(path)}:2: location \/: tls_ca \S*missing-ca\.pem/)
  end
end
