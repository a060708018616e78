# WebSockets over HTTP/2 (RFC 8441): SETTINGS_ENABLE_CONNECT_PROTOCOL, the
# extended CONNECT with :protocol websocket on h2c (an `http2: true`
# listener) and h2 (TLS, ALPN), proxied to an HTTP/1.1 WebSocket upstream
# (proxy_pass: the gateway makes the Upgrade handshake) and scripted
# (websocket: blocks), flow control as back-pressure, errors for other
# CONNECTs, a client's RST_STREAM tearing the upstream down, other streams
# served meanwhile. The client is spec/support/h2_ws_client.py (Debian's
# python3-h2), the upstream spec/support/ws_echo.py (python3-websockets);
# both are started here on free ports and stopped by PID.
require 'json'
require 'open3'
require_relative 'spec_helper'
require_relative 'websocket_helper'

RSpec.describe 'WebSockets over HTTP/2 (RFC 8441)' do
  include WebSocketHelper

  before(:all) { require_python_modules('h2', 'websockets') }

  after(:each) { stop_echoes }

  def make_cert
    @cert = File.join(spec_dir, 'site.pem')
    key = File.join(spec_dir, 'site.key')
    out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                              '-nodes', '-keyout', key, '-out', @cert, '-days', '2', '-subj', '/CN=localhost',
                              '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1')
    raise "openssl req failed: #{out}" unless st.success?
    key
  end

  # One h2c listener and one TLS listener (h2 by ALPN), the same locations.
  def start(extra = '')
    @up = start_echo
    key = make_cert
    @port = free_port
    @tls_port = free_port
    locations = <<~RUBY
      location "/ws", proxy_pass: "http://127.0.0.1:#{@up}"
      location "/echo", websocket: ->(ws, req) {
        while (m = ws.receive)
          ws.send(m, binary: ws.last_binary?)
        end
      }
      location "/plain" do "not a websocket" end
      #{extra}
    RUBY
    tls = %(workers: 1, tls: { cert: "#{@cert}", key: "#{key}" })
    @gw = start_gateway(config_with(locations, port: @port, server: 'http2: true, workers: 1', status: true) +
                        config_with(locations, port: @tls_port, server: tls, status: true),
                        ports: [@port, @tls_port], env: rss_env)
  end

  def h2ws(mode, path, arg = nil, tls: false, timeout: 60)
    args = [WebSocketHelper::PY, File.join(WebSocketHelper::SUPPORT, 'h2_ws_client.py'), (tls ? @tls_port : @port).to_s, mode, path]
    args << arg.to_s if arg
    env = tls ? { 'H2_TLS_CA' => @cert } : {}
    out, = Open3.capture2e(env, 'timeout', timeout.to_s, *args)
    out
  end

  def my_status
    own_status(@port)
  end

  def expect_torn_down
    poll('the tunnels and WebSockets to be gone', timeout: 5) do
      s = my_status
      s['tunnels_active'].zero? && s['websockets_active'].zero? && s['h2_connections_active'].zero?
    end
  end

  it 'advertises SETTINGS_ENABLE_CONNECT_PROTOCOL on h2c and h2' do
    start
    expect(h2ws('settings', '/')).to include('enable_connect_protocol 1', 'ok settings')
    expect(h2ws('settings', '/', tls: true)).to include('enable_connect_protocol 1', 'ok settings')
  end

  [false, true].each do |tls|
    over = tls ? 'h2 (TLS, ALPN)' : 'h2c'

    it "proxies a WebSocket over #{over} to an HTTP/1.1 upstream, other streams served meanwhile" do
      start
      out = h2ws('echo', '/ws', tls: tls)
      expect(out).to include('status 200', 'other stream 200', 'close 8 1000', 'ended True reset None', 'ok echo')
      expect_torn_down
    end

    it "runs a websocket: block over #{over}" do
      start
      out = h2ws('echo', '/echo', tls: tls)
      expect(out).to include('status 200', 'other stream 200', 'close 8 1000', 'ok echo')
      expect_torn_down
    end
  end

  it 'answers a CONNECT without :protocol 405 and an unknown :protocol 501' do
    start
    expect(h2ws('status', '/ws', 'plain')).to include('status 405')
    expect(h2ws('status', '/ws', 'chat-over-h2')).to include('status 501')
    expect(h2ws('status', '/echo', 'plain', tls: true)).to include('status 405')
    expect_torn_down
  end

  it 'answers a non-101 upstream as a normal response (the stream is not a WebSocket)' do
    up = fake_upstream do |peer|
      req = peer.read_request(timeout: 10)
      peer.respond(403, {}, "no #{req.method} #{req['upgrade']} #{req['sec-websocket-key'].to_s.size}")
    end
    start(%(location "/deny", proxy_pass: "http://127.0.0.1:#{up.port}"))
    out = h2ws('status', '/deny')
    expect(out).to include('status 403')
    expect_torn_down
  end

  it "checks the upstream's 101 (its Sec-WebSocket-Accept answers the gateway's key), else 502" do
    seen = Queue.new
    up = fake_upstream do |peer|
      req = peer.read_request(timeout: 10)
      seen << req
      peer.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
                 "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n") # the RFC's example, not our key's
      sleep 1
    end
    start(%(location "/bogus", proxy_pass: "http://127.0.0.1:#{up.port}"))
    expect(h2ws('status', '/bogus')).to include('status 502')
    req = seen.pop
    expect(req.method).to eq('GET')
    expect(req['upgrade']).to eq('websocket')
    expect(req['connection']).to match(/upgrade/i)
    expect(req['sec-websocket-version']).to eq('13')
    expect(req['sec-websocket-key'].to_s.unpack1('m0').bytesize).to eq(16)
    poll('the log line') { @gw.log.include?('no valid Sec-WebSocket-Accept') }
    expect_torn_down
  end

  it "tears the upstream down when the client resets the stream (the connection goes on)" do
    start
    pid = worker_pid
    fds = open_fds(pid)
    # the client keeps its connection 2 s after the reset: the tunnel must go meanwhile
    Open3.popen2e(WebSocketHelper::PY, File.join(WebSocketHelper::SUPPORT, 'h2_ws_client.py'), @port.to_s, 'reset', '/ws', '2') do |_i, io, wait|
      out = +''
      out << io.gets.to_s until out.include?('ok reset') || io.eof?
      expect(out).to include('other stream 200', 'ok reset')
      poll('the tunnel to be gone while the connection stays', timeout: 1.5) do
        s = my_status
        s['tunnels_active'].zero? && s['h2_connections_active'] == 1
      end
      wait.value
    end
    expect(h2ws('reset', '/echo')).to include('ok reset')
    expect_torn_down
    poll('the sockets to be closed', timeout: 5) { open_fds(pid) <= fds }
  end

  it 'keeps memory bounded when the client opens no window (32 MiB pushed by the upstream)' do
    start
    pid = worker_pid
    h2ws('echo', '/ws') # warm up
    # the client reads nothing for 3 s while the upstream floods
    out, growth = slow_reader_rss_growth(pid, [WebSocketHelper::PY, File.join(WebSocketHelper::SUPPORT, 'h2_ws_client.py'),
                                               @port.to_s, 'slow', '/ws', (32 << 20).to_s],
                                         cue: 'status', samples: 25)
    expect(out).to include("ok slow #{32 << 20}")
    expect(growth).to be < 8 * 1024 # KiB
    expect_torn_down
  end

  it 'resets open WebSocket streams at a graceful stop (GOAWAY), and the worker exits' do
    start
    out = +''
    Open3.popen2e(WebSocketHelper::PY, File.join(WebSocketHelper::SUPPORT, 'h2_ws_client.py'), @port.to_s, 'hold', '/ws', '10') do |_i, io, wait|
      out << io.gets.to_s until out.include?('holding') || io.eof?
      expect(my_status['tunnels_active']).to eq(1)
      t = Time.now
      @gw.signal('QUIT')
      expect(@gw.wait_exit(5)).not_to be_nil
      expect(Time.now - t).to be < slack(4)
      out << io.read.to_s
      wait.value
    end
    expect(out).to include('goaway', 'connection closed', 'ok hold')
    expect(out).not_to include('stream open connection open')
  end
end
