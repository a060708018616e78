# Proxied WebSockets to a wss:// (https://) upstream: the handshake goes over
# TLS (tls_client.c, verified as for any HTTPS upstream), and after the 101
# the upstream side of the tunnel reads and writes through that TLS state.
# The upstream is Python's websockets (spec/support/ws_echo.py with a
# certificate), signed by a CA made here with `openssl`; the client is
# spec/support/ws_client.py, over ws:// and over wss:// to a TLS listener.
require 'json'
require 'open3'
require_relative 'spec_helper'
require_relative 'websocket_helper'

RSpec.describe 'WebSocket proxying to a wss:// upstream' do
  include WebSocketHelper

  before(:all) { require_python_modules('websockets') }

  after(:each) { stop_echoes }

  def openssl!(*args)
    out, st = Open3.capture2e('openssl', *args)
    raise "openssl #{args.first} failed: #{out}" unless st.success?
  end

  # ca.pem, and server.pem/server.key for localhost and 127.0.0.1 signed by it.
  def make_certs
    dir = spec_dir
    ec = %w[-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes]
    Dir.chdir(dir) do
      openssl!('req', '-x509', *ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=ws spec CA')
      openssl!('req', '-new', *ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost')
      File.write('server.ext', "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
      openssl!('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
               '-days', '2', '-out', 'server.pem', '-extfile', 'server.ext')
    end
    @ca = File.join(dir, 'ca.pem')
    @cert = File.join(dir, 'server.pem')
    @key = File.join(dir, 'server.key')
  end

  # Starts the TLS echo upstream; returns its port.
  def start_wss_echo
    start_echo('0', @cert, @key)
  end

  # The tunnels under test on @port (a TLS listener when `tls`), after a
  # plain single-worker server on @plain_port with /pid and /status.
  def wss_gateway(locations, tls: false)
    @plain_port = free_port
    gateway_with(locations, config_with('', port: @plain_port, status: true),
                 ports: [@plain_port], rss: true, pid: false,
                 server: tls ? %(tls: { cert: "#{@cert}", key: "#{@key}" }) : '')
  end

  def ws_client(path, mode, arg = nil, scheme: 'ws', timeout: 60)
    run_ws_client("#{scheme}://127.0.0.1:#{@port}#{path}", mode, arg, timeout: timeout, env: { 'SSL_CERT_FILE' => @ca })
  end

  def my_status
    own_status(@plain_port)
  end

  alias_method :expect_torn_down, :expect_tunnels_torn_down

  before(:each) { make_certs }

  it 'echoes text, binary and a 1 MiB message through a verified wss:// upstream' do
    up = start_wss_echo
    wss_gateway(%(location "/ws", proxy_pass: "https://127.0.0.1:#{up}", tls_ca: "#{@ca}"))
    pid = worker_pid(@plain_port)
    expect(ws_client('/ws', 'echo')).to include('ok echo')
    expect_torn_down
    fds = open_fds(pid)
    expect(ws_client('/ws', 'concurrent', 20)).to include('ok concurrent 20')
    expect(ws_client('/ws', 'close_client')).to include('ok close_client 1000')
    expect(ws_client('/ws', 'close_server')).to include('ok close_server 1000')
    expect_torn_down(fds, pid)
  end

  it 'answers 502 when the upstream certificate does not verify (no tls_ca:)' do
    up = start_wss_echo
    wss_gateway(%(location "/ws", proxy_pass: "https://127.0.0.1:#{up}"))
    expect(ws_client('/ws', 'handshake')).to include('status 502')
    expect_torn_down
    poll('the reason in the log', timeout: 5) { @gw.log.match?(/certificate verify failed/) }
  end

  it 'passes an upstream group of https:// servers' do
    up = start_wss_echo
    wss_gateway(<<~RUBY)
      upstream :wss, servers: ["https://127.0.0.1:#{up}"], tls_ca: "#{@ca}"
      location "/ws", proxy_pass: "http://wss"
    RUBY
    expect(ws_client('/ws', 'echo')).to include('ok echo')
    expect_torn_down
  end

  it 'joins a wss:// client (TLS listener) to a wss:// upstream' do
    up = start_wss_echo
    wss_gateway(%(location "/ws", proxy_pass: "https://127.0.0.1:#{up}", tls_ca: "#{@ca}"), tls: true)
    expect(ws_client('/ws', 'echo', scheme: 'wss')).to include('ok echo')
    expect(ws_client('/ws', 'close_server', scheme: 'wss')).to include('ok close_server 1000')
    expect_torn_down
  end

  it 'keeps memory bounded when the client reads slowly (32 MiB pushed over TLS)' do
    up = start_wss_echo
    wss_gateway(%(location "/ws", proxy_pass: "https://127.0.0.1:#{up}", tls_ca: "#{@ca}"))
    pid = worker_pid(@plain_port)
    ws_client('/ws', 'echo') # warm up
    out, growth = slow_reader_rss_growth(pid, [WebSocketHelper::PY, File.join(WebSocketHelper::SUPPORT, 'ws_client.py'),
                                               "ws://127.0.0.1:#{@port}/ws", 'slow', (32 << 20).to_s],
                                         cue: 'paused', samples: 30)
    expect(out).to include("ok slow #{32 << 20}")
    expect(growth).to be < 8 * 1024 # KiB: the flood waits in the upstream, not in the gateway
    expect_torn_down
  end
end
