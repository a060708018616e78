# HTTP/1.1 `Upgrade: h2c` (RFC 7540 §3.2) on an `http2: true` cleartext
# listener: 101, then HTTP/2 with the request as stream 1 (curl --http2,
# nghttp -u and raw sockets); requests with a body, bad HTTP2-Settings and
# listeners without http2 stay HTTP/1.1.
require_relative 'spec_helper'
require 'open3'

RSpec.describe 'HTTP/1.1 Upgrade: h2c' do
  before(:each) do
    @port = free_port
    @plain = free_port
    @gw = start_gateway(<<~'RUBY'.gsub('PORT1', @port.to_s).gsub('PORT2', @plain.to_s), ports: [@port, @plain])
      access_log :stderr
      server listen: "127.0.0.1:PORT1", http2: true do
        location "/v" do |req| "#{req.http_version} #{req.method} #{req.headers['host']} up=#{req.headers['upgrade'].inspect} s=#{req.headers['http2-settings'].inspect}" end
        location "/echo" do |req| "#{req.http_version} #{req.body.bytesize}" end
        location "/sleep" do Async.sleep(0.3); "slept" end
        location "/big" do "b" * 200_000 end
      end
      server listen: "127.0.0.1:PORT2" do
        location "/v" do |req| "#{req.http_version} #{req.method}" end
      end
    RUBY
  end

  it 'answers 101 and then the request over HTTP/2 as stream 1 (curl --http2)' do
    out = curl('--http2', '-D', '-', "http://127.0.0.1:#{@port}/v")
    expect(out).to start_with("HTTP/1.1 101 Switching Protocols\r\n")
    expect(out).to include("Upgrade: h2c\r\n", "HTTP/2 200")
    # The hop-by-hop fields of the upgrade are not the stream's.
    expect(out).to end_with("HTTP/2.0 GET 127.0.0.1:#{@port} up=nil s=nil")
    expect(@gw.log).to include('"GET /v HTTP/2.0" 200')
  end

  it 'upgrades HEAD and a large response; the connection goes on as HTTP/2 (nghttp -u)' do
    head = curl('--http2', '-I', "http://127.0.0.1:#{@port}/v")
    expect(head).to include('HTTP/2 200', "content-length: #{"HTTP/2.0 HEAD 127.0.0.1:#{@port} up=nil s=nil".bytesize}")
    expect(curl('--http2', "http://127.0.0.1:#{@port}/big")).to eq('b' * 200_000)
    # nghttp -u: the upgrade carries the first URI; the other streams follow on the same connection.
    _, t = timed do
      @out, st = Open3.capture2e('nghttp', '-u', '-v', '-n', *(1..3).map { |i| "http://127.0.0.1:#{@port}/sleep?#{i}" })
      expect(st).to be_success
    end
    expect(@out).to include('HTTP Upgrade response', 'HTTP Upgrade success')
    statuses = @out.scan(/recv \(stream_id=(\d+)\) :status: 200/).flatten
    expect(statuses.size).to eq(3)
    expect(statuses).to include('1') # the upgraded request
    expect(t).to be < slack(1.5) # multiplexed after the upgrade, not one after the other
  end

  it 'upgrades over a raw socket, with the preface in the same write' do
    c = connect(@port)
    c.write("GET /v HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n" \
            "HTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n" \
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + [0, 0, 4, 0, 0].pack('nCCCN')) # an empty SETTINGS frame
    data = +''.b
    poll('the HTTP/2 response after the 101', timeout: 5) do
      data << c.sock.read_nonblock(65_536, exception: false).then { |r| r.is_a?(String) ? r : '' }
      data.include?('up=nil')
    end
    expect(data).to start_with("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
    # After the 101: a SETTINGS frame (type 4 on stream 0) comes first.
    frame = data.byteslice(data.index("\r\n\r\n") + 4, 9).bytes
    expect(frame[3]).to eq(4)
  end

  it 'serves a request with a body over HTTP/1.1 instead' do
    out = curl('--http2', '-D', '-', '--data-binary', 'abcde', "http://127.0.0.1:#{@port}/echo")
    expect(out).to start_with('HTTP/1.1 200')
    expect(out).to end_with('HTTP/1.1 5')
  end

  it 'ignores the upgrade when HTTP2-Settings is missing, doubled or not base64url' do
    bad = ['Connection: Upgrade\r\nUpgrade: h2c\r\n',
           'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABk\r\nHTTP2-Settings: AAMAAABk\r\n',
           'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AA+MAAABk=\r\n',
           'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAA\r\n'] # 4 bytes: not whole settings
    bad.each do |fields|
      res = raw_request(@port, "GET /v HTTP/1.1\r\nHost: x\r\n#{fields.gsub('\r\n', "\r\n")}\r\n")
      expect(res).to start_with("HTTP/1.1 200 OK\r\n"), fields
      expect(res).to include('HTTP/1.1 GET x up="h2c"')
    end
  end

  it 'ignores Upgrade: h2c from an HTTP/1.0 client' do
    res = raw_request(@port, "GET /v HTTP/1.0\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n" \
                             "HTTP2-Settings: AAMAAABk\r\n\r\n")
    expect(res).to start_with('HTTP/1.1 200 OK')
    expect(res).to include('HTTP/1.0 GET x up="h2c"')
  end

  it 'closes an upgraded connection whose preface does not come within header_timeout' do
    port = free_port
    gw = start_gateway(<<~RUBY, ports: port)
      access_log :stderr
      server listen: "127.0.0.1:#{port}", http2: true, limits: { header_timeout: 1 } do
        location "/v" do "v" end
      end
    RUBY
    c = connect(port)
    c.write("GET /v HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABk\r\n\r\n")
    t = c.wait_closed(within: 4 * GatewaySpec::SLACK)
    expect(t).not_to be_nil
    expect(t).to be_between(0.9, 3.5 * GatewaySpec::SLACK)
    expect(c.pending).to start_with("HTTP/1.1 101 Switching Protocols\r\n")
    expect(gw.log).not_to include('"GET /v HTTP') # the request never ran
  end

  it 'ignores Upgrade: h2c on a listener without http2' do
    out = curl('--http2', '-D', '-', "http://127.0.0.1:#{@plain}/v")
    expect(out).to start_with('HTTP/1.1 200')
    expect(out).to end_with('HTTP/1.1 GET')
  end
end
