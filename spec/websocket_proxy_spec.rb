# WebSocket proxying: a proxy_pass location (or req.proxy_pass from a
# script) passes the Upgrade handshake to the upstream on a fresh connection;
# a 101 makes both connections a byte tunnel (tunnel.c) with back-pressure,
# half-close, an idle timeout (tunnel_timeout:) and clean teardown. A real
# client and a real upstream: Python's websockets (Debian's
# python3-websockets), spec/support/ws_client.py and ws_echo.py, started by
# the examples on free ports and stopped by PID.
require 'digest'
require 'json'
require 'open3'
require_relative 'spec_helper'
require_relative 'websocket_helper'

# gateway_with: one worker, /pid and /status; memory measured (rss_env).
RSpec.describe 'WebSocket proxying', gateway: { status: true, rss: true } do
  include WebSocketHelper

  before(:all) { require_python_modules('websockets') }

  after(:each) { stop_echoes }

  # Runs ws_client.py MODE against path; returns its output (stdout+stderr).
  def ws_client(path, mode, arg = nil, timeout: 60)
    run_ws_client("ws://127.0.0.1:#{@port}#{path}", mode, arg, timeout: timeout)
  end

  def my_status
    own_status(@port)
  end

  alias_method :expect_torn_down, :expect_tunnels_torn_down

  it 'echoes text, binary and a 1 MiB message through the tunnel, and relays the 101' do
    up = start_echo
    gateway_with(%(location "/ws", proxy_pass: "http://127.0.0.1:#{up}"))
    expect(ws_client('/ws', 'echo')).to include('ok echo')
    expect_torn_down
    # The handshake as the client sees it.
    c = connect(@port)
    c.write("GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" \
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    res = c.read_response
    expect(res.status).to eq(101)
    expect(res['upgrade']).to match(/websocket/i)
    expect(res['connection']).to match(/upgrade/i)
    key = 'dGhlIHNhbXBsZSBub25jZQ=='
    expect(res['sec-websocket-accept']).to eq([Digest::SHA1.digest("#{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11")].pack('m0'))
    c.close
    expect_torn_down
  end

  it 'carries 50 concurrent WebSockets, then closes them all (no fd leak)' do
    up = start_echo
    gateway_with(%(location "/ws", proxy_pass: "http://127.0.0.1:#{up}"))
    pid = worker_pid
    ws_client('/ws', 'echo') # warm up (lazy allocations)
    expect_torn_down
    fds = open_fds(pid)
    expect(ws_client('/ws', 'concurrent', 50)).to include('ok concurrent 50')
    expect_torn_down(fds, pid)
  end

  it 'tears down cleanly when the client closes and when the server closes' do
    up = start_echo
    gateway_with(%(location "/ws", proxy_pass: "http://127.0.0.1:#{up}"))
    pid = worker_pid
    fds = open_fds(pid)
    expect(ws_client('/ws', 'close_client')).to include('ok close_client 1000')
    expect_torn_down(fds, pid)
    expect(ws_client('/ws', 'close_server')).to include('ok close_server 1000')
    expect_torn_down(fds, pid)
  end

  it 'passes WebSockets through req.proxy_pass from a script' do
    up = start_echo
    gateway_with(<<~RUBY)
      location "/app" do |req|
        req.headers["x-token"] == "no" ? [403, {}, "no"] : req.proxy_pass("http://127.0.0.1:#{up}")
      end
    RUBY
    expect(ws_client('/app/chat', 'echo')).to include('ok echo')
    expect_torn_down
  end

  it 'answers 502 when the upstream refuses the connection' do
    closed = free_port
    gateway_with(%(location "/ws", proxy_pass: "http://127.0.0.1:#{closed}"))
    expect(ws_client('/ws', 'handshake')).to include('status 502')
    expect_torn_down
  end

  it 'relays an upstream answer other than 101 as a normal response, without the upgrade' do
    seen = Queue.new
    up = fake_upstream do |peer|
      req = peer.read_request(timeout: 10)
      seen << req
      peer.respond(200, {}, 'not a websocket')
    end
    gateway_with(%(location "/ws", proxy_pass: "http://127.0.0.1:#{up.port}"))
    expect(ws_client('/ws', 'handshake')).to include('status 200')
    req = seen.pop
    expect(req['upgrade']).to eq('websocket')
    expect(req['connection']).to match(/upgrade/i)
    expect(req['sec-websocket-key']).not_to be_nil
    # A plain request on the same location keeps the hop-by-hop rules.
    res = http_get(@port, '/ws', 'Upgrade' => 'h2c', 'Connection' => 'Upgrade')
    expect(res.status).to eq(200)
    req = seen.pop
    expect(req['upgrade']).to be_nil
    expect(res['connection']).to eq('close') # the rest would be read as another protocol
    expect_torn_down
  end

  it 'closes a tunnel idle for tunnel_timeout: (both sides)' do
    up = start_echo
    gateway_with(%(location "/ws", proxy_pass: "http://127.0.0.1:#{up}", tunnel_timeout: 1))
    out = ws_client('/ws', 'idle')
    expect(out).to match(/ok idle closed after (\d+\.\d)/)
    expect(out[/after (\d+\.\d)/, 1].to_f).to be_between(0.8, slack(3.0))
    expect_torn_down
  end

  it 'rejects a bad tunnel_timeout: at start-up' do
    path = write_config(%(server listen: "127.0.0.1:#{free_port}" do\n  location "/ws", proxy_pass: "http://127.0.0.1:1", tunnel_timeout: -1\nend\n))
    r = run_gateway('-t', '-f', path)
    expect(r.exitstatus).to eq(1)
    expect(r.output).to match(/tunnel_timeout: must be a number of seconds/)
  end

  it 'keeps memory bounded when the client reads slowly (64 MiB pushed by the upstream)' do
    up = start_echo
    gateway_with(%(location "/ws", proxy_pass: "http://127.0.0.1:#{up}"))
    pid = worker_pid
    ws_client('/ws', 'echo') # warm up
    # the client reads nothing for 3 s while the upstream floods
    out, growth = slow_reader_rss_growth(pid, [WebSocketHelper::PY, File.join(WebSocketHelper::SUPPORT, 'ws_client.py'),
                                               "ws://127.0.0.1:#{@port}/ws", 'slow', (64 << 20).to_s],
                                         cue: 'paused', samples: 30)
    expect(out).to include("ok slow #{64 << 20}")
    expect(growth).to be < 8 * 1024
    expect_torn_down
  end
end
