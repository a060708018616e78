# WebSocket handlers written in Ruby (`websocket:` locations): RFC 6455 done
# in C (ws_frame.c, websocket.c, ws_handler.c), Gateway::WebSocket in Ruby.
# A real client (Debian's python3-websockets, spec/support/ws_script_client.py)
# over ws:// and wss://, and a raw socket for what no polite client sends:
# unmasked, reserved and oversized frames, bad UTF-8, a peer that never reads,
# bad handshakes. Also proxied WebSockets on a TLS listener (tunnel.c with a
# TLS client side). Every peer is started here on a free port, stopped by PID.
require 'json'
require 'open3'
require 'openssl'
require 'socket'
require_relative 'spec_helper'

RSpec.describe 'WebSocket handlers in Ruby' do
  WS_PY = File.exist?('/usr/bin/python3') ? '/usr/bin/python3' : 'python3' # Debian's, with python3-websockets
  WS_SCRIPT_SUPPORT = File.join(__dir__, 'support')

  before(:all) do
    _, st = Open3.capture2e(WS_PY, '-c', 'import websockets')
    skip 'python3-websockets is not installed (./setup.sh)' unless st.success?
  end

  after(:each) do
    (@peer_pids || []).each do |pid|
      Process.kill('TERM', pid)
      Process.wait(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end

  # With /pid and /status (config_with).
  WS_SCRIPT_LOCATIONS = <<~'RUBY'
    location "/count" do $sent.to_i.to_s end
    location "/echo", websocket: ->(ws, req) {
      while (m = ws.receive)
        ws.send(m, binary: ws.last_binary?)
      end
    }
    location "/small", websocket_max_message: 1000, websocket: ->(ws, req) {
      while (m = ws.receive)
        ws.send(m)
      end
    }
    location "/info", websocket_protocols: ["chat", "superchat"], websocket: ->(ws, req) {
      ws.send("#{req.uri} #{req.headers_in['x-who']} #{ws.protocol.inspect} #{req.scheme}")
      ws.receive
    }
    location "/slow", websocket: ->(ws, req) {
      m = ws.receive
      Async.sleep(0.05)
      r = Async::HTTP.sub_request("/pid")
      ws.send("slept #{m} #{r.status}")
      ws.receive
    }
    location "/boom", websocket: ->(ws, req) {
      m = ws.receive
      raise "boom on #{m}"
    }
    location "/bye", websocket: ->(ws, req) {
      ws.receive
      ws.close(4000, "bye now")
      ws.receive
    }
    location "/sink", websocket: ->(ws, req) {
      $sink = ws
      ws.receive
    }
    location "/blast" do
      chunk = "y" * 65536
      ok = 0
      40.times { ok += 1 if $sink.send(chunk, binary: true) }
      "#{ok} #{$sink.closed?}"
    end
    location "/flood", tunnel_timeout: 1, websocket: ->(ws, req) {
      chunk = "x" * 65536
      while ws.send(chunk, binary: true)
        $sent = $sent.to_i + 1
      end
    }
  RUBY

  def start(tls: false)
    server = +'workers: 1'
    if tls
      @cert, key = make_cert
      server << %(, tls: { cert: "#{@cert}", key: "#{key}" })
    end
    gateway_with("#{WS_SCRIPT_LOCATIONS}\n#{@extra}", server: server, status: true)
  end

  def make_cert
    cert = File.join(spec_dir, 'ws.pem')
    key = File.join(spec_dir, 'ws.key')
    out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                              '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=localhost')
    raise "openssl req failed: #{out}" unless st.success?
    [cert, key]
  end

  def client(path, mode, arg = nil, scheme: 'ws', timeout: 40)
    args = [WS_PY, File.join(WS_SCRIPT_SUPPORT, 'ws_script_client.py'), "#{scheme}://127.0.0.1:#{@port}#{path}", mode]
    args << arg.to_s if arg
    out, = Open3.capture2e({ 'WS_CA' => @cert.to_s }, 'timeout', timeout.to_s, *args)
    out
  end

  def status_of_worker
    j = JSON.parse(http_get(@port, '/status').body)
    j['workers'].find { |w| w['pid'] == j['served_by'] }
  end

  # -- a raw client ------------------------------------------------------------

  def raw_connect(path = '/echo', headers = nil, rcvbuf: nil, early: '')
    s = Socket.new(:INET, :STREAM)
    s.setsockopt(Socket::SOL_SOCKET, Socket::SO_RCVBUF, rcvbuf) if rcvbuf
    s.connect(Socket.sockaddr_in(@port, '127.0.0.1'))
    headers ||= { 'Upgrade' => 'websocket', 'Connection' => 'Upgrade', 'Sec-WebSocket-Version' => '13',
                  'Sec-WebSocket-Key' => [Random.bytes(16)].pack('m0') }
    s.write("GET #{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers.map { |k, v| "#{k}: #{v}\r\n" }.join + "\r\n" + early)
    s
  end

  def read_head(s)
    head = +''
    head << read_n(s, 1) until head.end_with?("\r\n\r\n")
    head
  end

  def upgraded(path = '/echo', **kw)
    s = raw_connect(path, **kw)
    head = read_head(s)
    expect(head).to start_with('HTTP/1.1 101 '), head
    s
  end

  def read_n(s, n, timeout: 5)
    buf = +''
    while buf.bytesize < n
      raise "timed out reading #{n} bytes (#{buf.bytesize} got)" unless s.wait_readable(timeout)
      chunk = s.read_nonblock(n - buf.bytesize, exception: false)
      return nil if chunk.nil? # EOF
      buf << chunk unless chunk == :wait_readable
    end
    buf
  end

  def frame(opcode, payload, fin: true, rsv: 0, mask: true)
    payload = payload.b
    n = payload.bytesize
    m = mask ? 0x80 : 0
    len = if n < 126 then [n | m].pack('C')
          elsif n < 65_536 then [126 | m, n].pack('Cn')
          else [127 | m, n].pack('CQ>')
          end
    key = mask ? Random.bytes(4) : ''
    body = mask ? payload.bytes.each_with_index.map { |b, i| b ^ key.getbyte(i % 4) }.pack('C*') : payload
    [(fin ? 0x80 : 0) | (rsv << 4) | opcode].pack('C') + len + key + body
  end

  # The next server frame: [opcode, payload], or nil at EOF.
  def read_frame(s, timeout: 5)
    h = read_n(s, 2, timeout: timeout) or return nil
    b0, b1 = h.unpack('CC')
    expect(b1 & 0x80).to eq(0), 'a server frame must not be masked'
    n = b1 & 0x7f
    n = read_n(s, 2).unpack1('n') if n == 126
    n = read_n(s, 8).unpack1('Q>') if n == 127
    [b0 & 0x0f, n.zero? ? '' : read_n(s, n, timeout: timeout)]
  end

  # The server sends a close frame with code, then closes the connection.
  def expect_close(s, code)
    op, payload = read_frame(s)
    expect(op).to eq(8)
    expect(payload.unpack1('n')).to eq(code), "close payload #{payload.inspect}"
    expect(s.wait_readable(3) && s.read_nonblock(10, exception: false)).to be_nil, 'the server should close the socket'
  ensure
    s.close
  end

  describe 'over ws://' do
    before(:each) { start }

    it 'echoes text, binary and fragmented messages, answers pings and closes with 1000' do
      out = client('/echo', 'echo')
      expect(out).to include('pong')
      expect(out).to include('ok echo 1000')
    end

    it 'picks the first subprotocol of the client that the location offers, and sees the request' do
      out = client('/info?x=1', 'protocol', 'superchat')
      expect(out).to include('protocol superchat')
      expect(out).to include('first /info  "superchat" http')
      expect(out).to include('ok protocol')
    end

    it 'lets a handler wait on Async.sleep and Async::HTTP between messages' do
      s = upgraded('/slow')
      s.write(frame(1, 'zz'))
      expect(read_frame(s)).to eq([1, 'slept zz 200'])
      s.write(frame(8, [1000].pack('n')))
      expect_close(s, 1000)
    end

    it 'closes with the code and reason of ws.close' do
      out = client('/bye', 'closed_by_server')
      expect(out).to include('ok closed 4000 bye now')
    end

    it 'closes with 1011 when the handler raises, logs it, and serves on' do
      out = client('/boom', 'closed_by_server', 'kaboom')
      expect(out).to include('ok closed 1011')
      poll('the error log line') { @gw.log.include?('raised RuntimeError: boom on kaboom') }
      expect(client('/echo', 'echo')).to include('ok echo 1000')
      poll('the sessions to end') { status_of_worker['websockets_active'].zero? }
    end

    it 'answers a ping with its payload and a close in the middle of a fragmented message with a close' do
      s = upgraded
      s.write(frame(9, 'abc'))
      expect(read_frame(s)).to eq([10, 'abc'])
      s.write(frame(1, 'part', fin: false))
      s.write(frame(8, [1001].pack('n') + 'going'))
      expect_close(s, 1001)
    end

    {
      'an unmasked client frame' => [->(t) { t.frame(1, 'hi', mask: false) }, 1002],
      'an unknown opcode' => [->(t) { t.frame(3, 'hi') }, 1002],
      'reserved bits' => [->(t) { t.frame(1, 'hi', rsv: 4) }, 1002],
      'a 126-byte ping' => [->(t) { t.frame(9, 'p' * 126) }, 1002],
      'a fragmented ping' => [->(t) { t.frame(9, 'p', fin: false) }, 1002],
      'a continuation with no message' => [->(t) { t.frame(0, 'x') }, 1002],
      'invalid UTF-8' => [->(t) { t.frame(1, "ok \xff".b) }, 1007],
      'UTF-8 broken across fragments' => [->(t) { t.frame(1, "a\xe2\x82".b, fin: false) + t.frame(0, '(') }, 1007]
    }.each do |what, (bytes, code)|
      it "closes with #{code} on #{what}" do
        s = upgraded
        s.write(bytes.call(self))
        expect_close(s, code)
      end
    end

    it 'says 1001 going away to open connections when the worker stops' do
      s = upgraded
      s.write(frame(1, 'x'))
      expect(read_frame(s)).to eq([1, 'x'])
      @gw.signal('TERM')
      expect_close(s, 1001)
    end

    it 'takes frames sent right behind the handshake, in the same write' do
      s = raw_connect('/echo', { 'Upgrade' => 'websocket', 'Connection' => 'Upgrade', 'Sec-WebSocket-Version' => '13',
                                 'Sec-WebSocket-Key' => 'dGhlIHNhbXBsZSBub25jZQ==' }, early: frame(1, 'early') + frame(9, 'p'))
      expect(read_head(s)).to start_with('HTTP/1.1 101 ')
      expect(read_frame(s)).to eq([1, 'early'])
      expect(read_frame(s)).to eq([10, 'p'])
      s.write(frame(8, ''))
      op, payload = read_frame(s)
      expect([op, payload]).to eq([8, '']) # no code given: none echoed
      s.close
    end

    it 'accepts UTF-8 split across fragments' do
      s = upgraded
      s.write(frame(1, "a\xe2\x82".b, fin: false) + frame(0, "\xac".b))
      expect(read_frame(s)).to eq([1, "a\u20ac".b])
      s.write(frame(8, [1000].pack('n')))
      expect_close(s, 1000)
    end

    it 'closes with 1009 on a frame over websocket_max_message, before its payload' do
      s = upgraded('/small')
      s.write(frame(2, 'x' * 1000))
      expect(read_frame(s)).to eq([1, 'x' * 1000]) # exactly the limit passes
      s.write([0x82, 0x80 | 127, 1 << 40].pack('CCQ>') + 'mask') # a terabyte announced
      expect_close(s, 1009)
    end

    it 'closes with 1009 on a fragmented message over the limit' do
      s = upgraded('/small')
      s.write(frame(2, 'x' * 600, fin: false) + frame(0, 'y' * 600))
      expect_close(s, 1009)
    end

    it 'does not buffer without bound for a peer that never reads, and closes it on the idle timeout' do
      s = upgraded('/flood', rcvbuf: 4096)
      sleep 0.5
      sent = http_get(@port, '/count').body.to_i
      sleep 0.5
      expect(http_get(@port, '/count').body.to_i).to eq(sent), 'the handler should be parked in ws.send'
      # 64 KiB messages: the 256 KiB high water mark plus what the kernel buffers hold
      expect(sent * 65_536).to be < 16 << 20
      poll('the idle timeout to close it', timeout: 5) { status_of_worker['websockets_active'].zero? }
      s.close
      expect(http_get(@port, '/count').body.to_i).to eq(sent)
    end

    it "closes with 1008 a connection that another fiber's sends pushed over 1 MiB, and refuses more" do
      s = upgraded('/sink', rcvbuf: 4096)
      sleep 0.2
      ok, closed = http_get(@port, '/blast').body.split
      expect(ok.to_i).to be_between(1, 39) # 2.5 MiB offered; about 1 MiB and what the kernel holds taken
      expect(closed).to eq('true')
      payload = +''
      while (f = read_frame(s, timeout: 10))
        break if f[0] == 8

        payload << f[1]
      end
      expect(f && f[1].unpack1('n')).to eq(1008)
      expect(payload.bytesize % 65_536).to eq(0)
      s.close
    end

    {
      'no Upgrade' => [{ 'Sec-WebSocket-Version' => '13', 'Sec-WebSocket-Key' => 'dGhlIHNhbXBsZSBub25jZQ==' }, 426],
      'version 8' => [{ 'Upgrade' => 'websocket', 'Connection' => 'Upgrade', 'Sec-WebSocket-Version' => '8',
                        'Sec-WebSocket-Key' => 'dGhlIHNhbXBsZSBub25jZQ==' }, 426],
      'a bad key' => [{ 'Upgrade' => 'websocket', 'Connection' => 'Upgrade', 'Sec-WebSocket-Version' => '13',
                        'Sec-WebSocket-Key' => 'short' }, 400],
      'no key' => [{ 'Upgrade' => 'websocket', 'Connection' => 'Upgrade', 'Sec-WebSocket-Version' => '13' }, 400]
    }.each do |what, (headers, status)|
      it "refuses a handshake with #{what} (#{status})" do
        r = http_get(@port, '/echo', headers)
        expect(r.status).to eq(status)
        expect(r['sec-websocket-version']).to eq('13') if status == 426
        expect(http_get(@port, '/pid').status).to eq(200)
      end
    end

    it 'answers the RFC 6455 example key with its accept value' do
      s = raw_connect('/echo', { 'Upgrade' => 'websocket', 'Connection' => 'Upgrade', 'Sec-WebSocket-Version' => '13',
                                 'Sec-WebSocket-Key' => 'dGhlIHNhbXBsZSBub25jZQ==' })
      head = read_head(s)
      expect(head).to include("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n")
      s.close
    end
  end

  {
    'websocket: 5' => /websocket: must be a Proc taking \(ws, req\)/,
    'websocket: ->(ws, req) {}, proxy_pass: "http://127.0.0.1:1"' => /websocket: is the location's content/,
    'websocket: ->(ws, req) {}, websocket_max_message: 0' => /websocket_max_message: must be a number of bytes/,
    'websocket: ->(ws, req) {}, websocket_protocols: ["a b"]' => /websocket_protocols: must be an Array of tokens/,
    'websocket_protocols: ["chat"] do "x" end' => /need websocket:/
  }.each do |opts, message|
    it "rejects #{opts} at start-up, naming the file and line" do
      path = write_config(%(server listen: "127.0.0.1:#{free_port}" do\n  location "/ws", #{opts}\nend\n))
      r = run_gateway('-t', '-f', path)
      expect(r.exitstatus).to eq(1)
      expect(r.output).to match(message)
      expect(r.output).to include("#{File.basename(path)}:2")
    end
  end

  describe 'over wss://' do
    it 'runs the same handlers on a TLS listener' do
      start(tls: true)
      expect(client('/echo', 'echo', scheme: 'wss')).to include('ok echo 1000')
      expect(client('/boom', 'closed_by_server', 'x', scheme: 'wss')).to include('ok closed 1011')
      expect(client('/info', 'protocol', 'chat', scheme: 'wss')).to include('first /info  "chat" https')
    end

    it 'proxies WebSockets on a TLS listener (proxy_pass)' do
      r, w = IO.pipe
      pid = Process.spawn(WS_PY, File.join(WS_SCRIPT_SUPPORT, 'ws_echo.py'), out: w, err: w)
      w.close
      (@peer_pids ||= []) << pid
      raise 'ws_echo.py did not start' unless r.wait_readable(10)
      up = r.gets.to_i
      r.close
      @extra = %(location "/up", proxy_pass: "http://127.0.0.1:#{up}")
      start(tls: true)
      expect(client('/up', 'echo', scheme: 'wss')).to include('ok echo 1000')
      expect(client('/up', 'closed_by_server', 'close-me', scheme: 'wss')).to include('ok closed 1000 bye')
    end
  end
end
