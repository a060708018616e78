# Upgrade heads are the protocol's (request.h: gw_protocol_t.upgrade): a
# websocket: handler and a proxied WebSocket only set the answer (101,
# Upgrade, Sec-WebSocket-*, the upstream's end-to-end fields); HTTP/1.1
# (http1_server.c) writes a "101 Switching Protocols" head with exactly those fields
# and Connection: Upgrade, nothing else (no Content-Length, Date, Server),
# and the upstream's first bytes right after it; HTTP/2 (http2_server.c) a 200 without
# the fields it forbids or RFC 8441 drops. The HTTP/2 client is
# spec/support/h2_ws_client.py (python3-h2), the upstream a FakeUpstream.
require 'digest'
require 'open3'
require_relative 'spec_helper'
require_relative 'websocket_helper'

RSpec.describe 'Upgrade heads written by the protocol' do
  include WebSocketHelper

  before(:all) { require_python_modules('h2') }

  let(:key) { 'dGhlIHNhbXBsZSBub25jZQ==' }

  def accept_for(key)
    [Digest::SHA1.digest("#{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11")].pack('m0')
  end

  # An upstream answering every WebSocket handshake with a 101 that carries
  # an end-to-end field, a Content-Length the gateway must not relay, and
  # bytes of the new protocol in the same write.
  def start_upstream
    @up = fake_upstream do |peer|
      req = peer.read_request(timeout: 10) or next
      peer.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
                 "Sec-WebSocket-Accept: #{accept_for(req['sec-websocket-key'])}\r\nX-Upstream: one\r\n" \
                 "Content-Length: 0\r\n\r\n\x81\x05early")
      sleep 2
    end
  end

  def start
    start_upstream
    gateway_with(<<~RUBY, server: 'http2: true, workers: 1')
      location "/chat", websocket_protocols: ["chat", "superchat"], websocket: ->(ws, req) {
        ws.receive
      }
      location "/ws", proxy_pass: "http://127.0.0.1:#{@up.port}"
    RUBY
  end

  def handshake(path, extra = '')
    c = connect(@port)
    c.write("GET #{path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" \
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: #{key}\r\n#{extra}\r\n")
    [c, c.read_response(timeout: 10)]
  end

  def h2_head(path, protocol = nil)
    args = [WebSocketHelper::PY, File.join(WebSocketHelper::SUPPORT, 'h2_ws_client.py'), @port.to_s, 'head', path]
    args << protocol if protocol
    out, = Open3.capture2e('timeout', '30', *args)
    expect(out).to include('ok head')
    out.lines.grep(/\Afield /).map { |l| l.split(' ', 3).drop(1).map(&:strip) }.to_h
  end

  it "writes a websocket: handler's 101 over HTTP/1.1 from its fields (subprotocol included), nothing else" do
    start
    c, res = handshake('/chat', "Sec-WebSocket-Protocol: superchat\r\n")
    expect(res.status).to eq(101)
    expect(res.reason).to eq('Switching Protocols')
    expect(res.header_lines).to contain_exactly(['Connection', 'Upgrade'], ['Upgrade', 'websocket'],
                                                ['Sec-WebSocket-Accept', accept_for(key)],
                                                ['Sec-WebSocket-Protocol', 'superchat'])
    expect(c.pending).to eq('')
    c.close
  end

  it "relays a proxied 101 over HTTP/1.1: the upstream's fields, no Content-Length, its first bytes after the head" do
    start
    c, res = handshake('/ws')
    expect(res.status).to eq(101)
    expect(res.reason).to eq('Switching Protocols')
    expect(res.header_lines).to contain_exactly(['Connection', 'Upgrade'], ['Upgrade', 'websocket'],
                                                ['Sec-WebSocket-Accept', accept_for(key)], ['X-Upstream', 'one'])
    got = c.pending
    got += c.read_all(timeout: 1) if got.bytesize < 7
    expect(got.b).to start_with("\x81\x05early".b)
    c.close
  end

  it 'answers both over HTTP/2 with a 200 that keeps the fields but those HTTP/2 and RFC 8441 drop' do
    start
    chat = h2_head('/chat', 'superchat')
    expect(chat).to include(':status' => '200', 'sec-websocket-protocol' => 'superchat')
    expect(chat.keys).not_to include('upgrade', 'connection', 'sec-websocket-accept', 'content-length')
    proxied = h2_head('/ws')
    expect(proxied).to include(':status' => '200', 'x-upstream' => 'one')
    expect(proxied.keys).not_to include('upgrade', 'connection', 'sec-websocket-accept', 'content-length')
  end
end
