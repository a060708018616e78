# real_ip: the client's address from a header that trusted proxies set
# (docs/fleet.md), with nginx's set_real_ip_from / real_ip_header /
# real_ip_recursive semantics, and RFC 7239 Forwarded.
require_relative 'spec_helper'

RSpec.describe 'real_ip' do
  def start(real_ip, extra = '', ready: true)
    @port = free_port
    @access = File.join(spec_dir, 'access.log')
    @up = fake_upstream do |peer|
      while (req = peer.read_request)
        peer.respond(200, {}, "xff=#{req['X-Forwarded-For']}")
      end
    end
    @gw = start_gateway(<<~RUBY, ports: @port, ready: ready)
      access_log "#{@access}", format: '$remote_addr|$realip_remote_addr|$request'
      server listen: "127.0.0.1:#{@port}", real_ip: #{real_ip}#{extra} do
        location "/" do |req| "addr=\#{req.remote_addr}" end
        location "/up", proxy_pass: "http://127.0.0.1:#{@up.port}"
      end
    RUBY
  end

  def addr(headers)
    http_get(@port, '/', headers).body.delete_prefix('addr=')
  end

  it 'X-Forwarded-For, not recursive (nginx default): the rightmost entry when the peer is trusted' do
    start('{ from: ["127.0.0.0/8"] }')
    expect(addr('X-Forwarded-For' => '203.0.113.5')).to eq('203.0.113.5')
    expect(addr('X-Forwarded-For' => '203.0.113.5, 10.1.1.1')).to eq('10.1.1.1')
    expect(addr({})).to eq('127.0.0.1')
    expect(addr('X-Forwarded-For' => 'unknown')).to eq('127.0.0.1')
    poll('the access log') { File.exist?(@access) && File.read(@access).include?('203.0.113.5|127.0.0.1|GET / HTTP/1.1') }
  end

  it 'recursive: skips trusted addresses from the right, over several fields' do
    start('{ from: ["127.0.0.0/8", "10.0.0.0/8"], header: "X-Forwarded-For", recursive: true }')
    expect(addr('X-Forwarded-For' => '198.51.100.1, 203.0.113.5, 10.1.1.1, 10.2.2.2')).to eq('203.0.113.5')
    expect(addr('X-Forwarded-For' => '10.3.3.3, 10.1.1.1')).to eq('10.3.3.3') # all trusted: the leftmost
    c = connect(@port)
    c.write("GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.7\r\nX-Forwarded-For: 10.9.9.9\r\n\r\n")
    expect(c.read_response.body).to eq('addr=203.0.113.7')
    c.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n") # the next request on the connection is judged afresh
    expect(c.read_response.body).to eq('addr=127.0.0.1')
    c.close
  end

  it 'ignores the header from a peer that is not trusted' do
    start('{ from: ["10.0.0.0/8"] }')
    expect(addr('X-Forwarded-For' => '203.0.113.5')).to eq('127.0.0.1')
  end

  it 'the real address is what X-Forwarded-For appends upstream' do
    start('{ from: "127.0.0.1" }')
    r = http_get(@port, '/up', 'X-Forwarded-For' => '198.51.100.9')
    expect(r.body).to eq('xff=198.51.100.9, 198.51.100.9') # as nginx's $proxy_add_x_forwarded_for
  end

  it 'Forwarded (RFC 7239): for= with a quoted IPv6 address and port; obfuscated and unknown nodes end the walk' do
    start('{ from: ["127.0.0.1", "10.0.0.0/8"], header: "Forwarded", recursive: true }')
    expect(addr('Forwarded' => 'for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.2')).to eq('2001:db8:cafe::17')
    expect(addr('Forwarded' => 'for=192.0.2.60;proto=http;by=203.0.113.43')).to eq('192.0.2.60')
    expect(addr('Forwarded' => 'for=192.0.2.60, for=_hidden, for=10.0.0.7')).to eq('10.0.0.7')
    expect(addr('Forwarded' => 'for=unknown')).to eq('127.0.0.1')
    expect(addr('X-Forwarded-For' => '192.0.2.1')).to eq('127.0.0.1') # another header: not read
  end

  it 'X-Real-IP (one address)' do
    start('{ from: ["127.0.0.1"], header: "X-Real-IP" }')
    expect(addr('X-Real-IP' => '192.0.2.44')).to eq('192.0.2.44')
  end

  it 'with proxy_protocol: trust is judged on the address the PROXY header carried' do
    start('{ from: ["192.0.2.0/24"] }', ', proxy_protocol: true', ready: false)
    sock = Socket.tcp('127.0.0.1', @port, connect_timeout: 2)
    sock.write("PROXY TCP4 192.0.2.1 127.0.0.1 1 2\r\nGET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.99\r\nConnection: close\r\n\r\n")
    expect(parse_response(sock.read).body).to eq('addr=203.0.113.99')
    sock.close
    poll('the access log') { File.exist?(@access) && File.read(@access).include?('203.0.113.99|127.0.0.1|GET /') }
  end

  it 'rejects bad values at FILE:LINE' do
    [['real_ip: { from: ["10.0.0.0/8"], recursive: 1 }', 'server: real_ip: recursive must be true or false'],
     ['real_ip: { header: "X-Forwarded-For" }', 'server: real_ip: from: (the trusted proxies) is required'],
     ['real_ip: { from: ["10.0.0.0/8"], headers: "x" }', 'server: real_ip: unknown key :headers'],
     ['real_ip: { from: ["not-an-ip"] }', 'server: real_ip: from must be an address or range'],
     ['real_ip: { from: "10.0.0.0/8", header: "Bad Header" }', 'server: real_ip: header must be a header name'],
     ['real_ip: ["10.0.0.0/8"]', 'server: real_ip must be a Hash']].each do |opts, msg|
      status, output, path = check_config("# real ip\nserver listen: #{free_port}, #{opts} do\n  location(\"/\") { \"x\" }\nend\n")
      expect(status).to eq(1), output
      expect(output).to include("#{path}:2: #{msg}")
    end
  end
end
