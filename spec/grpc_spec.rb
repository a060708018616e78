# gRPC through the edge: grpc_pass / proxy_pass "h2c://" forward HTTP/2
# streams to an HTTP/2 upstream (http2_client.c, an nghttp2 client session):
# unary and streaming calls both ways with flow control, metadata and
# trailers (grpc-status) passed through, deadlines, and gRPC-shaped failures
# (grpc-status 14 UNAVAILABLE / 4 DEADLINE_EXCEEDED) instead of HTML 502s.
# A real gRPC server and client (Debian's python3-grpcio; stubs made with
# python3-grpc-tools from spec/support/grpc_echo.proto into a temporary
# folder), spec/support/grpc_peer.py; hostile upstreams in
# spec/support/h2_upstream_hostile.py (python3-h2). Every peer runs on a free
# port and is stopped by PID.
require 'json'
require 'open3'
require 'socket'
require 'tmpdir'
require_relative 'spec_helper'

# gateway_with: an h2c-capable single-worker server.
RSpec.describe 'gRPC (HTTP/2 upstreams)', gateway: { server: 'http2: true, workers: 1' } do
  PY_GRPC = File.exist?('/usr/bin/python3') ? '/usr/bin/python3' : 'python3' # Debian's, with python3-grpcio
  GRPC_SUPPORT = File.join(__dir__, 'support')

  before(:all) do
    _, st = Open3.capture2e(PY_GRPC, '-c', 'import grpc, grpc_tools, h2')
    skip 'python3-grpcio / python3-grpc-tools / python3-h2 are not installed (./setup.sh)' unless st.success?
    @stubs = Dir.mktmpdir('gateway-grpc-stubs-')
    out, st = Open3.capture2e(PY_GRPC, '-m', 'grpc_tools.protoc', "-I#{GRPC_SUPPORT}", "--python_out=#{@stubs}",
                              "--grpc_python_out=#{@stubs}", File.join(GRPC_SUPPORT, 'grpc_echo.proto'))
    raise "protoc: #{out}" unless st.success?
  end

  after(:all) { FileUtils.rm_rf(@stubs) if @stubs }

  after(:each) do
    (@peer_pids || []).each do |pid|
      Process.kill('KILL', pid)
      Process.wait(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end

  # Spawns a peer that prints "ready" once it listens; returns [pid, output reader].
  def spawn_peer(*args)
    r, w = IO.pipe
    pid = Process.spawn(PY_GRPC, *args, out: w, err: w)
    w.close
    (@peer_pids ||= []) << pid
    line = r.wait_readable(15) && r.gets
    raise "#{args.first} did not start: #{line.inspect}" unless line&.start_with?('ready')
    [pid, r]
  end

  # cert: "DIR/server" serves TLS with DIR/server.pem and DIR/server.key (grpcs).
  def start_upstream(max_streams: nil, cert: nil)
    port = free_port
    extra = cert ? [(max_streams || 0).to_s, cert] : [max_streams&.to_s].compact
    pid, = spawn_peer(File.join(GRPC_SUPPORT, 'grpc_peer.py'), 'server', @stubs, port.to_s, *extra)
    [port, pid]
  end

  def start_hostile(scenario)
    port = free_port
    pid, out = start_hostile_on(port, scenario)
    [port, pid, out]
  end

  def start_hostile_on(port, scenario)
    spawn_peer(File.join(GRPC_SUPPORT, 'h2_upstream_hostile.py'), port.to_s, scenario)
  end

  # One scenario of grpc_peer.py's client against the gateway: its JSON.
  def call(scenario, port: @port, ca: nil, timeout: 60)
    args = [File.join(GRPC_SUPPORT, 'grpc_peer.py'), 'client', @stubs, "127.0.0.1:#{port}", scenario]
    args << ca if ca
    out, = Open3.capture2e('timeout', timeout.to_s, PY_GRPC, *args)
    line = out.lines.reverse.find { |l| l.start_with?('{') }
    raise "grpc_peer.py client #{scenario}: #{out}" unless line
    JSON.parse(line)
  end

  def plain_get(path, port: @port)
    TCPSocket.open('127.0.0.1', port) do |s|
      s.write("GET #{path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
      s.read
    end
  end

  def expect_alive
    expect(@gw.alive?).to be(true)
    expect(plain_get('/pid')).to start_with('HTTP/1.1 200')
  end

  describe 'calls through grpc_pass on an h2c listener' do
    before(:each) do
      @up, @up_pid = start_upstream
      gateway_with(%(location "/gwtest.Echo/", grpc_pass: "127.0.0.1:#{@up}", max_body: 16 * 1024 * 1024))
    end

    it 'passes a unary call, its metadata both ways and its trailers' do
      r = call('unary')
      expect(r).to include('text' => 'hi|http', 'count' => 3, 'initial' => 'm1', 'trailing' => 't-m1')
    end

    it 'passes the status code and message the server set (NOT_FOUND)' do
      expect(call('not_found')).to eq('code' => 'NOT_FOUND', 'details' => 'no such thing')
    end

    it 'streams server-side, client-side and both ways (interleaved)' do
      expect(call('server_stream')['texts']).to eq((0...50).map(&:to_s))
      expect(call('client_stream')).to eq('text' => '20 messages', 'count' => 20_000)
      expect(call('bidi')['texts']).to eq((0...10).map { |i| "M#{i}" })
    end

    it 'carries messages of several MB each way (flow control)' do
      r = call('large')
      expect(r).to eq('same' => true, 'count' => 4 * 1024 * 1024, 'stream' => [3 * 1024 * 1024] * 3,
                      'stream_same' => true)
    end

    it 'ends a call the server finished while the client still streams (full duplex)' do
      expect(call('early_end')).to eq('texts' => ['M0'], 'code' => 'OK')
      expect(call('unary')['text']).to eq('hi|http')
    end

    it 'does not let a slow reader of one call stall the other calls on its upstream connection' do
      r = call('slow_reader')
      expect(r['slow_still_running']).to be(true) # the unary calls ran while it was stalled
      expect(r['slow_got']).to eq(40)
      expect(r['worst_ms']).to be < 1000 * GatewaySpec::SLACK
      expect(r['peers']).to eq(1)
    end

    it 'runs 100 concurrent calls over one upstream connection' do
      r = call('concurrent')
      expect(r).to eq('ok' => 100, 'distinct' => 100, 'peers' => 1)
    end

    it 'ends a call whose server sleeps past the deadline with DEADLINE_EXCEEDED' do
      t0 = GatewaySpec.now
      expect(call('deadline')['code']).to eq('DEADLINE_EXCEEDED')
      expect(GatewaySpec.now - t0).to be < slack(2.5)
      expect(call('unary')['text']).to eq('hi|http') # the connection still serves
    end

    it 'answers UNAVAILABLE when the upstream is killed in the middle of a stream, and serves the next call' do
      r = call('killed')
      expect(r['code']).to eq('UNAVAILABLE')
      expect_alive
      expect(call('unary')['code']).to eq('UNAVAILABLE') # nothing listens there any more
      expect_alive
    end
  end

  it "opens another upstream connection when one is full (the server's SETTINGS_MAX_CONCURRENT_STREAMS)" do
    @up, = start_upstream(max_streams: 10)
    gateway_with(%(location "/", grpc_pass: "127.0.0.1:#{@up}"))
    r = call('concurrent_slow')
    expect(r['ok']).to eq(100)
    expect(r['peers']).to be_between(10, 12) # 100 calls at once, 10 per connection (+ the first, before SETTINGS)
  end

  it 'answers UNAVAILABLE (HTTP 200, grpc-status 14) when the upstream is down; 502 for non-gRPC requests' do
    down = free_port
    gateway_with(%(location "/", grpc_pass: "127.0.0.1:#{down}"))
    expect(call('unary')).to eq('code' => 'UNAVAILABLE', 'details' => 'connection refused')
    File.binwrite("#{spec_dir}/empty.grpc", "\0\0\0\0\0") # one empty message
    out, = Open3.capture2e('curl', '-sS', '--http2-prior-knowledge', '-D', '-', '-o', '/dev/null',
                           '-H', 'content-type: application/grpc', '--data-binary', "@#{spec_dir}/empty.grpc",
                           "http://127.0.0.1:#{@port}/gwtest.Echo/Unary")
    expect(out).to match(%r{^HTTP/2 200}).and include('grpc-status: 14').and include('content-type: application/grpc')
    expect(plain_get('/plain')).to start_with('HTTP/1.1 502')
  end

  # The client would wait 10 s (curl --max-time 10); only the gateway's own
  # grpc-timeout timer can end the call at 0.5 s, the upstream never answers.
  it 'answers DEADLINE_EXCEEDED itself within grpc-timeout when the upstream ignores the deadline' do
    up = free_port
    _, out = start_hostile_on(up, 'ignore_deadline')
    gateway_with(%(location "/gwtest.Echo/", grpc_pass: "127.0.0.1:#{up}")) # not "/": the readiness probe would hang too
    File.binwrite("#{spec_dir}/empty.grpc", "\0\0\0\0\0")
    (head, err, st), secs = timed do
      Open3.capture3('curl', '-sS', '--max-time', '10', '--http2-prior-knowledge', '-D', '-', '-o', '/dev/null',
                     '-H', 'content-type: application/grpc', '-H', 'te: trailers', '-H', 'grpc-timeout: 500m',
                     '--data-binary', "@#{spec_dir}/empty.grpc", "http://127.0.0.1:#{@port}/gwtest.Echo/Unary")
    end
    expect(st.success?).to be(true), err
    expect(head).to match(%r{^HTTP/2 200}).and include('grpc-status: 4')
    expect(secs).to be >= 0.45 # not before the deadline
    expect(secs).to be < 0.5 + slack(1.0)
    seen = []
    seen << out.gets while seen.size < 5 && !seen.last.to_s.start_with?('grpc-timeout') && out.wait_readable(slack(5))
    expect(seen.last.to_s.strip).to match(/\Agrpc-timeout \d+[mu]\z/), seen.inspect # the deadline went upstream too
  end

  it 'answers DEADLINE_EXCEEDED (grpc-status 4) when the upstream times out' do
    @up, = start_upstream
    gateway_with(%(location "/", proxy_pass: "h2c://slow"),
                 %(upstream :slow, servers: ["h2c://127.0.0.1:#{@up}"], timeout: 0.3))
    out, = Open3.capture2e('timeout', '20', PY_GRPC, '-c', <<~PY)
      import sys; sys.path.insert(0, #{@stubs.inspect})
      import grpc, grpc_echo_pb2 as pb, grpc_echo_pb2_grpc as pbg
      stub = pbg.EchoStub(grpc.insecure_channel("127.0.0.1:#{@port}"))
      try:
          stub.Unary(pb.Msg(text="slow", sleep_ms=2000), timeout=10)
          print("OK")
      except grpc.RpcError as e:
          print(e.code().name, e.details())
    PY
    expect(out.strip).to eq('DEADLINE_EXCEEDED upstream timed out')
    expect(@gw.log).to include('upstream timed out')
  end

  it 'serves gRPC over a TLS listener (h2 by ALPN) too' do
    out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                              '-nodes', '-keyout', "#{spec_dir}/s.key", '-out', "#{spec_dir}/s.pem", '-days', '2',
                              '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost')
    raise out unless st.success?
    @up, = start_upstream
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: [@port])
      server listen: "127.0.0.1:#{@port}", tls: { cert: "s.pem", key: "s.key" } do
        location "/", grpc_pass: "127.0.0.1:#{@up}"
      end
    RUBY
    ca = "#{spec_dir}/s.pem"
    expect(call('unary', ca: ca)).to include('text' => 'hi|https', 'initial' => 'm1', 'trailing' => 't-m1')
    expect(call('bidi', ca: ca)['texts'].size).to eq(10)
    expect(call('not_found', ca: ca)['code']).to eq('NOT_FOUND')
  end

  it 'lets a script route by /package.Service/Method and set metadata both ways' do
    @up, = start_upstream
    gateway_with(<<~RUBY)
      location "/gwtest.Echo/", header_filter: ->(req) { req.headers_out["x-edge"] = "edge-1" } do |req|
        if req.uri == "/gwtest.Echo/Unary"
          req.headers["x-req"] = "from-script" unless req.headers["x-req"]
          req.proxy_pass "h2c://127.0.0.1:#{@up}"
        else
          req.respond(200, { "content-type" => "application/grpc", "grpc-status" => "12", "grpc-message" => "not routed" })
        end
      end
    RUBY
    r = call('unary')
    expect(r).to include('text' => 'hi|http', 'initial' => 'm1', 'edge' => 'edge-1')
    expect(call('server_stream')).to eq('code' => 'UNIMPLEMENTED', 'details' => 'not routed')
  end

  describe 'hostile upstreams' do
    it 'answers UNAVAILABLE to a protocol error from the upstream, without crashing' do
      port, = start_hostile('bad_frame')
      gateway_with(%(location "/", grpc_pass: "127.0.0.1:#{port}"))
      2.times { expect(call('unary')['code']).to eq('UNAVAILABLE') }
      expect_alive
      expect(@gw.log).to include('invalid upstream response')
    end

    it 'answers UNAVAILABLE to an upstream that does not speak HTTP/2' do
      port, = start_hostile('garbage')
      gateway_with(%(location "/", grpc_pass: "127.0.0.1:#{port}"))
      expect(call('unary')['code']).to eq('UNAVAILABLE')
      expect_alive
    end

    it 'retries a stream the upstream refused with GOAWAY on a new connection' do
      port, _, out = start_hostile('goaway')
      gateway_with(%(location "/", grpc_pass: "127.0.0.1:#{port}"))
      expect(call('unary')).to include('text' => 'retried')
      lines = []
      lines << out.gets.chomp while out.wait_readable(0.5) && lines.size < 2
      expect(lines).to eq(['conn 1', 'conn 2'])
    end
  end

  it "passes an HTTP/2 client's request trailers on after its streamed body" do
    port, = start_hostile('echo')
    gateway_with(%(location "/", grpc_pass: "127.0.0.1:#{port}"))
    out, = Open3.capture2e('timeout', '20', PY_GRPC, '-c', <<~PY)
      import socket, h2.connection, h2.config, h2.events
      s = socket.create_connection(("127.0.0.1", #{@port}))
      c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
      c.initiate_connection()
      c.send_headers(1, [(":method", "POST"), (":path", "/gwtest.Echo/Unary"), (":scheme", "http"),
                         (":authority", "t"), ("content-type", "application/grpc"), ("te", "trailers")])
      c.send_data(1, b"\\x00\\x00\\x00\\x00\\x00")
      c.send_headers(1, [("x-checksum", "abc"), ("x-count", "1")], end_stream=True)
      s.sendall(c.data_to_send())
      body, trailers, done = b"", [], False
      while not done:
          data = s.recv(65536)
          if not data:
              break
          for ev in c.receive_data(data):
              if isinstance(ev, h2.events.DataReceived):
                  body += ev.data
                  c.acknowledge_received_data(ev.flow_controlled_length, 1)
              elif isinstance(ev, h2.events.TrailersReceived):
                  trailers = ev.headers
              elif isinstance(ev, h2.events.StreamEnded):
                  done = True
          s.sendall(c.data_to_send())
      print(body[7:].decode(), dict(trailers).get(b"grpc-status"))
    PY
    expect(out.strip).to eq("trailers:x-checksum=abc,x-count=1 b'0'")
  end

  describe 'plain HTTP to an h2c upstream' do
    before(:each) do
      @port = free_port
      @inner = free_port
      @gw = start_gateway(<<~RUBY, ports: [@port, @inner])
        server listen: "127.0.0.1:#{@port}", http2: true do
          location "/", proxy_pass: "h2c://127.0.0.1:#{@inner}"
        end
        server listen: "127.0.0.1:#{@inner}", http2: true do
          location "/v" do |req| "\#{req.http_version} \#{req.method} \#{req.headers['x-a']} \#{req.body.bytesize}" end
          location "/big" do "y" * 1_000_000 end
          location "/missing" do [404, {}, ["no"]] end
        end
      RUBY
    end

    it 'forwards HTTP/2 and HTTP/1.1 clients over HTTP/2, bodies both ways' do
      expect(curl('--http2-prior-knowledge', '-H', 'x-a: 1', "http://127.0.0.1:#{@port}/v")).to eq('HTTP/2.0 GET 1 0')
      expect(curl('-H', 'x-a: 2', '--data-binary', 'abc', "http://127.0.0.1:#{@port}/v")).to eq('HTTP/2.0 POST 2 3')
      File.binwrite("#{spec_dir}/up.bin", 'u' * 300_000)
      expect(curl('-H', 'Transfer-Encoding: chunked', '--data-binary', "@#{spec_dir}/up.bin", "http://127.0.0.1:#{@port}/v"))
        .to eq('HTTP/2.0 POST  300000') # an HTTP/1.1 chunked body, streamed upstream
      expect(curl('--http2-prior-knowledge', "http://127.0.0.1:#{@port}/big").bytesize).to eq(1_000_000)
      expect(curl('-o', '/dev/null', '-w', '%{http_code}', "http://127.0.0.1:#{@port}/missing")).to eq('404')
    end

    it 'answers 502 to a non-gRPC request when the h2c upstream is down' do
      @gw.stop
      down = free_port
      gateway_with(%(location "/", proxy_pass: "h2c://127.0.0.1:#{down}"))
      expect(curl('--http2-prior-knowledge', '-o', '/dev/null', '-w', '%{http_code}', "http://127.0.0.1:#{@port}/x")).to eq('502')
    end
  end

  it 'ends a chunked HTTP/1.1 response with the trailers when the client sent TE: trailers' do
    @up, = start_upstream
    gateway_with(%(location "/", grpc_pass: "127.0.0.1:#{@up}"))
    msg = "\x0a\x02hi".b # Msg{text: "hi"}
    frame = "\0".b + [msg.bytesize].pack('N') + msg
    ask = lambda do |te|
      TCPSocket.open('127.0.0.1', @port) do |s|
        s.write("POST /gwtest.Echo/Unary HTTP/1.1\r\nHost: t\r\nContent-Type: application/grpc\r\n#{te}" \
                "Content-Length: #{frame.bytesize}\r\nConnection: close\r\n\r\n" + frame)
        s.read
      end
    end
    with = ask.call("TE: trailers\r\n")
    expect(with).to start_with("HTTP/1.1 200").and include("Transfer-Encoding: chunked")
    expect(with).to end_with("\r\n0\r\ngrpc-status: 0\r\n\r\n")
    without = ask.call('')
    expect(without).to start_with("HTTP/1.1 200")
    expect(without).to end_with("\r\n0\r\n\r\n")
    expect(without).not_to include('grpc-status')
  end

  # grpcs:// and h2://: the HTTP/2 client over TLS (tls_client.c, ALPN h2
  # only), with the same tls_* settings as https:// upstreams. Certificates
  # are made here: a test CA signing one for localhost/127.0.0.1, and one
  # for another name.
  describe 'over TLS (grpcs://, h2://)' do
    def make_certs(dir)
      ec = %w[-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes]
      Dir.chdir(dir) do
        run = lambda do |*args|
          out, st = Open3.capture2e('openssl', *args)
          raise "openssl #{args.first}: #{out}" unless st.success?
        end
        run.call('req', '-x509', *ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=gateway grpcs CA')
        { 'server' => ['localhost', 'DNS:localhost,IP:127.0.0.1'], 'wrong' => ['other.example', 'DNS:other.example'] }
          .each do |base, (cn, san)|
          run.call('req', '-new', *ec, '-keyout', "#{base}.key", '-out', "#{base}.csr", '-subj', "/CN=#{cn}")
          File.write("#{base}.ext", "subjectAltName=#{san}\n")
          run.call('x509', '-req', '-in', "#{base}.csr", '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
                   '-days', '2', '-out', "#{base}.pem", '-extfile', "#{base}.ext")
        end
      end
    end

    before(:each) do
      @dir = spec_dir
      make_certs(@dir)
    end

    def tls_counters
      w = JSON.parse(http_request(@port, 'GET', '/status', {}, nil, timeout: 10).body)['workers'].first
      [w['upstream_tls_handshakes'], w['upstream_tls_resumed']]
    end

    it 'passes unary and bidi calls to a TLS gRPC server (grpc_pass "grpcs://", tls_ca:)' do
      @up, = start_upstream(cert: "#{@dir}/server")
      gateway_with(<<~RUBY)
        location "/status", status: true
        location "/gwtest.Echo/", grpc_pass: "grpcs://127.0.0.1:#{@up}", tls_ca: "#{@dir}/ca.pem"
      RUBY
      expect(call('unary')).to include('text' => 'hi|http', 'count' => 3, 'initial' => 'm1', 'trailing' => 't-m1')
      expect(call('bidi')['texts']).to eq((0...10).map { |i| "M#{i}" })
      expect(call('not_found')).to eq('code' => 'NOT_FOUND', 'details' => 'no such thing')
      expect(call('concurrent')).to eq('ok' => 100, 'distinct' => 100, 'peers' => 1) # one TLS connection
      GatewaySpec.poll('the TLS counters', timeout: 5) { tls_counters.first == 1 }
    end

    it 'passes calls from a script: req.proxy_pass("h2://...") with the location\'s tls_ca:' do
      @up, = start_upstream(cert: "#{@dir}/server")
      gateway_with(<<~RUBY)
        location "/gwtest.Echo/", tls_ca: "#{@dir}/ca.pem" do |req|
          req.proxy_pass("h2://127.0.0.1:#{@up}")
        end
      RUBY
      expect(call('unary')).to include('text' => 'hi|http', 'trailing' => 't-m1')
      expect(call('server_stream')['texts']).to eq((0...50).map(&:to_s))
    end

    it 'never lets calls with other TLS settings share a connection' do
      @up, = start_upstream(cert: "#{@dir}/server")
      # the same server twice: a group with its own settings, and the location's tls_ca:
      gateway_with(<<~RUBY, %(upstream :lax, servers: ["h2://127.0.0.1:#{@up}"], tls_verify: false))
        location "/gwtest.Echo/", tls_ca: "#{@dir}/ca.pem" do |req|
          req.proxy_pass(req.headers["x-req"] == "m1" ? "h2://127.0.0.1:#{@up}" : "h2://lax")
        end
      RUBY
      expect(call('unary')['text']).to eq('hi|http') # x-req: m1, the location's settings
      expect(call('concurrent')).to eq('ok' => 100, 'distinct' => 100, 'peers' => 2) # the group's: another connection
    end

    it 'resumes the TLS session on the next connection to the server' do
      @up, = start_upstream(max_streams: 10, cert: "#{@dir}/server")
      gateway_with(<<~RUBY)
        location "/status", status: true
        location "/", proxy_pass: "h2://127.0.0.1:#{@up}", tls_ca: "#{@dir}/ca.pem"
      RUBY
      expect(call('unary')['text']).to eq('hi|http') # the first connection: a full handshake, then a ticket
      r = call('concurrent_slow') # 100 calls at once, 10 per connection: more connections
      expect(r['ok']).to eq(100)
      expect(r['peers']).to be >= 10
      GatewaySpec.poll('the TLS counters', timeout: 5) do
        h, res = tls_counters
        h >= 10 && res >= 1
      end
    end

    it 'refuses a server the default (system) CAs do not know: UNAVAILABLE, 502, and a log line' do
      @up, = start_upstream(cert: "#{@dir}/server")
      gateway_with(%(location "/", grpc_pass: "grpcs://127.0.0.1:#{@up}"))
      expect(call('unary')).to eq('code' => 'UNAVAILABLE', 'details' => 'upstream TLS handshake failed')
      expect(plain_get('/plain')).to start_with('HTTP/1.1 502')
      expect(@gw.log).to match(/h2 upstream 127\.0\.0\.1@127\.0\.0\.1:#{@up}: TLS handshake failed: certificate verify failed/)
      expect_alive
    end

    it 'accepts any certificate with tls_verify: false' do
      @up, = start_upstream(cert: "#{@dir}/wrong")
      gateway_with(%(location "/", grpc_pass: "grpcs://127.0.0.1:#{@up}", tls_verify: false))
      expect(call('unary')['text']).to eq('hi|http')
    end

    it 'checks the name: a certificate for another name fails; tls_server_name: names the one to check' do
      @up, = start_upstream(cert: "#{@dir}/wrong")
      gateway_with(%(location "/gwtest.Echo/", grpc_pass: "grpcs://127.0.0.1:#{@up}", tls_ca: "#{@dir}/ca.pem"))
      expect(call('unary')['code']).to eq('UNAVAILABLE')
      expect(@gw.log).to match(/TLS handshake failed: certificate verify failed: IP address mismatch/)
      # an h2:// group whose tls_server_name: other.example is what is checked (and sent as SNI)
      gateway_with(%(location "/gwtest.Echo/", grpc_pass: "named"),
                   %(upstream :named, servers: ["h2://127.0.0.1:#{@up}"], tls_ca: "#{@dir}/ca.pem", tls_server_name: "other.example"))
      expect(call('unary')['text']).to eq('hi|http')
      expect(@gw.log).not_to include('TLS handshake failed')
    end

    it 'fails clearly when the server does not select h2 by ALPN (a TLS listener without HTTP/2)' do
      back = free_port
      start_gateway(<<~RUBY, ports: [back], name: 'back.rb')
        server listen: "127.0.0.1:#{back}", tls: { cert: "#{@dir}/server.pem", key: "#{@dir}/server.key" }, http2: false do
          location "/" do "http/1.1 only" end
        end
      RUBY
      gateway_with(<<~RUBY)
        location "/gwtest.Echo/", grpc_pass: "grpcs://127.0.0.1:#{back}", tls_ca: "#{@dir}/ca.pem"
        location "/plain", proxy_pass: "h2://127.0.0.1:#{back}", tls_ca: "#{@dir}/ca.pem"
      RUBY
      expect(call('unary')).to eq('code' => 'UNAVAILABLE', 'details' => 'upstream does not speak HTTP/2 over TLS (ALPN)')
      expect(plain_get('/plain')).to start_with('HTTP/1.1 502')
      expect(@gw.log).to include("h2 upstream 127.0.0.1@127.0.0.1:#{back}: the server did not select h2 by ALPN (it selected no protocol)")
      expect_alive
    end

    it 'answers DEADLINE_EXCEEDED / 504 when the handshake does not finish within connect_timeout' do
      silent = TCPServer.new('127.0.0.1', 0) # accepts (the kernel does) and never answers
      port = silent.addr[1]
      gateway_with(%(location "/", proxy_pass: "h2://hang"),
                   %(upstream :hang, servers: ["h2://127.0.0.1:#{port}"], connect_timeout: 0.5, tls_verify: false))
      t0 = GatewaySpec.now
      expect(call('unary')).to eq('code' => 'DEADLINE_EXCEEDED', 'details' => 'upstream TLS handshake timed out')
      expect(GatewaySpec.now - t0).to be < slack(5)
      expect(plain_get('/plain')).to start_with('HTTP/1.1 504')
      expect(@gw.log).to include("h2 upstream 127.0.0.1@127.0.0.1:#{port}: TLS handshake timed out")
    ensure
      silent&.close
    end

    it 'proxies curl --http2 through proxy_pass "h2://" to the gateway\'s own TLS+h2 listener, bodies both ways' do
      back = free_port
      start_gateway(<<~RUBY, ports: [back], name: 'back.rb')
        server listen: "127.0.0.1:#{back}", tls: { cert: "#{@dir}/server.pem", key: "#{@dir}/server.key" } do
          location "/echo" do |req| "\#{req.http_version} \#{req.scheme} \#{req.body.bytesize} \#{req.body[0, 4]}" end
          location "/big" do |req| "0123456789abcdef" * 65_536 end
        end
      RUBY
      gateway_with(%(location "/", proxy_pass: "h2://localhost:#{back}", tls_ca: "#{@dir}/ca.pem"))
      File.binwrite("#{@dir}/body.bin", 'abcd' + ('x' * 300_000))
      out, st = Open3.capture2e('curl', '-sS', '--http2-prior-knowledge', '--data-binary', "@#{@dir}/body.bin",
                                "http://127.0.0.1:#{@port}/echo")
      expect(st.success?).to be(true), out
      expect(out).to eq('HTTP/2.0 https 300004 abcd')
      out, = Open3.capture2e('curl', '-sS', '--http2-prior-knowledge', "http://127.0.0.1:#{@port}/big")
      expect(out.bytesize).to eq(16 * 65_536)
      expect(plain_get('/echo')).to start_with('HTTP/1.1 200')
    end
  end

  it 'rejects a malformed grpcs:// target at load, naming FILE:LINE' do
    path = write_config(<<~RUBY)
      server listen: #{free_port} do
        location "/", grpc_pass: "grpcs://127.0.0.1:50051/x"
      end
    RUBY
    r = run_gateway('-t', '-f', path)
    expect(r.exitstatus).to eq(1), r.output
    expect(r.output).to match(/^#{Regexp.escape(path)}:2: .*grpc_pass must be/), r.output
  end
end
