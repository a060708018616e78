# TLS on the server side: certificates (ECDSA and RSA) made here with
# `openssl req`, SNI, protocol versions, resumption, plain HTTP on a TLS
# port, the handshake timeout, certificates at start-up and on reload.
require_relative 'spec_helper'
require 'json'
require 'openssl'
require 'open3'
require 'timeout'

module TLSSpecHelpers
  # A self-signed certificate for `names` (the first is the CN); returns
  # [cert_path, key_path] inside dir.
  def make_cert(dir, base, names, type: :ec)
    cert = File.join(dir, "#{base}.pem")
    key = File.join(dir, "#{base}.key")
    newkey = type == :ec ? %w[-newkey ec -pkeyopt ec_paramgen_curve:P-256] : %w[-newkey rsa:2048]
    san = names.map { |n| "DNS:#{n}" }.join(',')
    out, st = Open3.capture2e('openssl', 'req', '-x509', *newkey, '-nodes', '-keyout', key, '-out', cert,
                              '-days', '2', '-subj', "/CN=#{names.first}", '-addext', "subjectAltName=#{san}")
    raise "openssl req failed: #{out}" unless st.success?
    [cert, key]
  end

  def ssl_context(ca: nil, version: nil, session: nil)
    ctx = OpenSSL::SSL::SSLContext.new
    if ca
      ctx.verify_mode = OpenSSL::SSL::VERIFY_PEER
      store = OpenSSL::X509::Store.new
      Array(ca).each { |c| store.add_file(c) }
      ctx.cert_store = store
    else
      ctx.verify_mode = OpenSSL::SSL::VERIFY_NONE
    end
    if version
      ctx.min_version = version
      ctx.max_version = version
    end
    ctx.session_cache_mode = OpenSSL::SSL::SSLContext::SESSION_CACHE_CLIENT if session
    ctx
  end

  # Connects with TLS; the block gets the SSLSocket.
  def tls_connect(port, hostname: nil, ca: nil, version: nil, session: nil)
    tcp = Socket.tcp('127.0.0.1', port, connect_timeout: 2)
    ssl = OpenSSL::SSL::SSLSocket.new(tcp, ssl_context(ca: ca, version: version))
    ssl.hostname = hostname if hostname
    ssl.session = session if session
    ssl.sync_close = true
    Timeout.timeout(5 * GatewaySpec::SLACK) { ssl.connect }
    return ssl unless block_given?
    begin
      yield ssl
    ensure
      ssl.close rescue nil
    end
  end

  # One HTTP/1.1 request over TLS, Connection: close: [status, headers, body].
  def tls_get(port, path, hostname: 'localhost', ca: nil, version: nil, headers: {}, body: nil, method: 'GET')
    tls_connect(port, hostname: hostname, ca: ca, version: version) do |ssl|
      tls_exchange(ssl, path, method: method, headers: headers.merge('Connection' => 'close'), body: body)
    end
  end

  def tls_exchange(ssl, path, method: 'GET', headers: {}, body: nil)
    h = { 'Host' => 'localhost' }.merge(headers)
    h['Content-Length'] = body.bytesize.to_s if body
    ssl.write("#{method} #{path} HTTP/1.1\r\n#{h.map { |k, v| "#{k}: #{v}\r\n" }.join}\r\n#{body}")
    head = +''
    Timeout.timeout(10 * GatewaySpec::SLACK) do
      head << ssl.readpartial(65_536) until head.include?("\r\n\r\n")
      head, rest = head.split("\r\n\r\n", 2)
      lines = head.split("\r\n")
      status = lines.shift.split(' ')[1].to_i
      hdrs = lines.map { |l| l.split(': ', 2) }.to_h { |k, v| [k.downcase, v] }
      len = hdrs['content-length'].to_i
      rest << ssl.readpartial(65_536) while rest.bytesize < len
      [status, hdrs, rest]
    end
  end
end

RSpec.describe 'TLS' do
  include TLSSpecHelpers

  INFO = 'location "/" do |req| [200, {}, ["#{req.scheme} #{req.tls?} #{req.tls_protocol} #{req.tls_cipher} #{req.tls_server_name.inspect} #{req.http_version}"]] end'

  def start_tls(tls_opts, body = INFO, server_opts: '', prelude: '')
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      #{prelude}
      server listen: "127.0.0.1:#{@port}", tls: #{tls_opts}#{server_opts} do
        #{body}
      end
    RUBY
  end

  describe 'with an ECDSA P-256 certificate' do
    before(:each) do
      @cert, @key = make_cert(spec_dir, 'site', %w[localhost])
      start_tls(%({ cert: "site.pem", key: "site.key" }))
    end

    it 'curl verifies it (paths relative to the config file) and the script sees https, TLS 1.3 and the SNI name' do
      out, st = Open3.capture2e('curl', '-sS', '--http1.1', '--cacert', @cert, "https://localhost:#{@port}/x")
      expect(st).to be_success, out
      expect(out).to match(/\Ahttps true TLSv1\.3 TLS_\S+ "localhost" HTTP\/1\.1\z/)
    end

    it 'speaks TLS 1.2 with a modern ECDHE-ECDSA AEAD cipher, and refuses a real TLS 1.1 ClientHello with a protocol_version alert' do
      status, _, body = tls_get(@port, '/', ca: @cert, version: OpenSSL::SSL::TLS1_2_VERSION)
      expect(status).to eq(200)
      expect(body).to match(/\Ahttps true TLSv1\.2 ECDHE-ECDSA-(AES\d+-GCM-SHA\d+|CHACHA20-POLY1305) /)
      # SECLEVEL=0: Debian's OpenSSL 3 otherwise may refuse TLS 1.1 itself
      # ("no protocols available") before sending anything. The ClientHello
      # goes out; the server's protocol_version alert (70) comes back. (With
      # the server's minimum version removed it answers handshake_failure (40).)
      out, = Open3.capture2e('timeout', '10', 'openssl', 's_client', '-connect', "127.0.0.1:#{@port}",
                             '-tls1_1', '-cipher', 'DEFAULT:@SECLEVEL=0', stdin_data: '')
      expect(out).not_to match(/no protocols available/i)
      expect(out).to match(/written [1-9]\d* bytes/) # a ClientHello was sent
      expect(out).to match(/tlsv1 alert protocol version.*SSL alert number 70/)
      expect(out).to match(/Cipher is \(NONE\)/)
    end

    it 'keeps the connection alive across requests, and moves large bodies both ways' do
      tls_connect(@port, hostname: 'localhost', ca: @cert) do |ssl|
        2.times do
          status, _, body = tls_exchange(ssl, '/')
          expect([status, body[0, 10]]).to eq([200, 'https true'])
        end
      end
    end

    it 'answers plain HTTP on the TLS port with a 400 and closes (never hangs)' do
      raw = raw_request(@port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", read_timeout: 3)
      expect(raw).to start_with("HTTP/1.1 400 Bad Request\r\n")
      expect(raw).to include('The plain HTTP request was sent to HTTPS port')
    end

    it 'resumes a session (tickets) on a new connection' do
      session = nil
      tls_connect(@port, hostname: 'localhost', ca: @cert, version: OpenSSL::SSL::TLS1_2_VERSION) do |ssl|
        tls_exchange(ssl, '/')
        session = ssl.session
      end
      tls_connect(@port, hostname: 'localhost', ca: @cert, version: OpenSSL::SSL::TLS1_2_VERSION, session: session) do |ssl|
        expect(ssl.session_reused?).to be(true)
        expect(tls_exchange(ssl, '/')[0]).to eq(200)
      end
    end

    it 'openssl s_client completes a handshake and gets an answer' do
      out, = Open3.capture2e('openssl', 's_client', '-connect', "127.0.0.1:#{@port}", '-servername', 'localhost',
                             '-CAfile', @cert, '-quiet', '-verify_return_error',
                             stdin_data: "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
      expect(out).to include('HTTP/1.1 200 OK')
      expect(out).to include('https true')
    end
  end

  describe 'reading and closing' do
    before(:each) do
      @cert, @key = make_cert(spec_dir, 'site', %w[localhost])
      start_tls(%({ cert: "site.pem", key: "site.key" }), <<~'RUBY')
        location "/status", status: true
        location "/slow" do Async.sleep(0.3); "slow" end
        location "/len" do |req| "#{req.method} #{req.body.to_s.bytesize}" end
      RUBY
    end

    def tls_active_connections
      j = JSON.parse(tls_get(@port, '/status')[2])
      j['workers'].find { |w| w['pid'] == j['served_by'] }['connections_active']
    end

    # OpenSSL reads ahead (whole socket buffers, many records): pipelined
    # requests behind a slow one (the reading stops while its backlog is
    # large, then resumes) and a large body, in 1 KiB records sent back to
    # back, are all answered in order.
    it 'answers pipelined requests behind a slow one and a large body, sent as many records in one burst' do
      body = 'x' * 100_000
      pad = 'p' * 900
      tls_connect(@port, hostname: 'localhost', ca: @cert) do |ssl|
        reqs = "GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n" \
               "POST /len HTTP/1.1\r\nHost: localhost\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}" +
               (1..100).map { "GET /len HTTP/1.1\r\nHost: localhost\r\nX-Pad: #{pad}\r\n\r\n" }.join
        reqs.bytes.each_slice(1024) { |b| ssl.write(b.pack('C*')) }
        got = +''
        Timeout.timeout(10 * GatewaySpec::SLACK) { got << ssl.readpartial(65_536) until got.scan('HTTP/1.1 200').size == 102 && got.end_with?('GET 0') }
        expect(got.scan(/\r\n\r\n(slow|POST \d+|GET \d+)/).flatten).to eq(['slow', "POST #{body.bytesize}"] + ['GET 0'] * 100)
      end
    end

    # nginx's behaviour: no lingering (shutdown, draining reads, a timer)
    # when nothing can follow the request.
    it 'closes at once after a Connection: close response to a request read whole, with a close_notify' do
      ssl = tls_connect(@port, hostname: 'localhost', ca: @cert)
      begin
        ssl.write("GET /len HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        got = +''
        Timeout.timeout(5 * GatewaySpec::SLACK) { (chunk = ssl.read(4096)) ? got << chunk : break while true }
        expect(got).to end_with("\r\n\r\nGET 0") # then a clean EOF: the close_notify came
        # the client keeps its end open: the gateway holds nothing for it (only the status request is active)
        poll('the closed connection to be gone', timeout: 1) { tls_active_connections == 1 }
      ensure
        ssl.close rescue nil
      end
    end
  end

  it 'serves an RSA certificate, and large bodies both ways' do
    make_cert(spec_dir, 'rsa', %w[localhost], type: :rsa)
    start_tls(%({ cert: "rsa.pem", key: "rsa.key" }), <<~'RUBY')
      location "/big" do |req| "x" * 1_000_000 end
      location "/echo" do |req| "#{req.body.bytesize} #{req.body[-16, 16]}" end
    RUBY
    status, _, body = tls_get(@port, '/big', ca: File.join(spec_dir, 'rsa.pem'))
    expect([status, body.bytesize]).to eq([200, 1_000_000])
    payload = ('0123456789abcdef' * 37_500) + 'the last 16 byte'
    status, _, body = tls_get(@port, '/echo', method: 'POST', body: payload)
    expect([status, body]).to eq([200, "600016 the last 16 byte"])
  end

  it 'chooses the certificate by SNI, exact or wildcard, with the first as the default' do
    make_cert(spec_dir, 'a', %w[a.example])
    make_cert(spec_dir, 'b', %w[*.b.example])
    start_tls(%([{ server_name: "a.example", cert: "a.pem", key: "a.key" }, { server_name: "*.b.example", cert: "b.pem", key: "b.key" }]))
    cn = ->(host) { tls_connect(@port, hostname: host) { |s| s.peer_cert.subject.to_s } }
    expect(cn.call('a.example')).to eq('/CN=a.example')
    expect(cn.call('x.b.example')).to eq('/CN=*.b.example')
    expect(cn.call('other.example')).to eq('/CN=a.example')
    _, _, body = tls_get(@port, '/', hostname: 'x.b.example')
    expect(body).to include('"x.b.example"')
  end

  it 'protocols: ["TLSv1.3"] refuses TLS 1.2' do
    make_cert(spec_dir, 'site', %w[localhost])
    start_tls(%({ cert: "site.pem", key: "site.key", protocols: ["TLSv1.3"] }))
    expect { tls_get(@port, '/', version: OpenSSL::SSL::TLS1_2_VERSION) }.to raise_error(OpenSSL::SSL::SSLError)
    expect(tls_get(@port, '/')[2]).to include('TLSv1.3')
  end

  it 'closes a connection whose handshake does not finish within header_timeout, and logs failures at info' do
    make_cert(spec_dir, 'site', %w[localhost])
    start_tls(%({ cert: "site.pem", key: "site.key" }), server_opts: ', limits: { header_timeout: 0.5 }',
              prelude: 'error_log :stderr, level: :info')
    c = connect(@port)
    c.write("\x16\x03\x01\x00") # the start of a ClientHello, never finished
    expect(c.closed?(within: 3)).to be(true)
    c2 = connect(@port)
    c2.write("\x16\x03\x01\x00\x05garba")
    expect(c2.closed?(within: 3)).to be(true)
    poll('the handshake failure in the log') { @gw.log.include?('TLS handshake failed') }
    expect(tls_get(@port, '/')[0]).to eq(200) # the worker serves on
  end

  it 'sets X-Forwarded-Proto: https for proxy_pass' do
    make_cert(spec_dir, 'site', %w[localhost])
    up = fake_upstream do |peer|
      req = peer.read_request
      peer.respond(200, {}, "proto=#{req['x-forwarded-proto']}")
    end
    start_tls(%({ cert: "site.pem", key: "site.key" }), %(location "/", proxy_pass: "http://127.0.0.1:#{up.port}"))
    expect(tls_get(@port, '/p')[2]).to eq('proto=https')
  end

  describe 'certificates at start-up and on reload' do
    it 'a missing or bad certificate is a FILE:LINE: error with -t and at start-up' do
      File.write(File.join(spec_dir, 'bad.pem'), "not a certificate\n")
      make_cert(spec_dir, 'site', %w[localhost])
      status, out, path = check_config(<<~RUBY)
        # a comment
        server listen: 18999, tls: { cert: "bad.pem", key: "site.key" } do
          location "/" do "x" end
        end
      RUBY
      expect(status).to eq(1)
      expect(out).to match(/#{Regexp.escape(path)}:2: server listen 18999: tls cert .*bad\.pem: /)
      status, out, path = check_config(<<~RUBY)
        server listen: 18999, tls: { cert: "site.pem", key: "missing.key" } do
          location "/" do "x" end
        end
      RUBY
      expect(status).to eq(1)
      expect(out).to match(/#{Regexp.escape(path)}:1: server listen 18999: tls key .*missing\.key/)
      status, out, = check_config(%(server listen: 18999, tls: { cert: "site.pem" } do location "/" do "x" end end))
      expect(status).to eq(1)
      expect(out).to include('tls: key: must be a file path')
    end

    it 're-reads the certificate on reload; a bad one is logged and the running config keeps serving' do
      make_cert(spec_dir, 'site', %w[localhost])
      start_tls(%({ cert: "site.pem", key: "site.key" }))
      first = tls_connect(@port, hostname: 'localhost') { |s| s.peer_cert.to_der }
      make_cert(spec_dir, 'site', %w[localhost]) # a new key pair in place
      @gw.signal('HUP')
      poll('the new certificate') { tls_connect(@port, hostname: 'localhost') { |s| s.peer_cert.to_der } != first }
      second = tls_connect(@port, hostname: 'localhost') { |s| s.peer_cert.to_der }
      File.write(File.join(spec_dir, 'site.key'), "broken\n")
      @gw.signal('HUP')
      poll('the reload error in the log') { @gw.log.include?('tls key') }
      expect(tls_connect(@port, hostname: 'localhost') { |s| s.peer_cert.to_der }).to eq(second)
      expect(tls_get(@port, '/')[0]).to eq(200)
    end
  end
end
