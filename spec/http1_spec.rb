# HTTP/1.1 server semantics: persistence, pipelining, request bodies,
# 100-continue, HEAD, mandatory response headers.
require_relative 'spec_helper'

RSpec.describe 'HTTP/1.1' do
  before(:each) do
    @port = free_port
    start_gateway(<<~'RUBY'.sub('PORT', @port.to_s), ports: @port)
      server listen: "127.0.0.1:PORT" do
        location "/echo-body" do |req| "got:#{req.body}" end
        location "/hello" do "hello" end
        location "/boom" do raise "boom" end
        location "/" do |req| req.path end
      end
    RUBY
  end

  it 'keeps an HTTP/1.1 connection alive by default (two requests on one connection)' do
    c = connect(@port)
    c.request('GET', '/one')
    r1 = c.read_response
    expect([r1.status, r1.body]).to eq([200, '/one'])
    expect(r1['connection'].to_s).not_to match(/close/i)
    c.request('GET', '/two')
    r2 = c.read_response
    expect([r2.status, r2.body]).to eq([200, '/two'])
    expect(c.closed?(within: 0.2)).to be(false)
  end

  it 'closes an HTTP/1.0 connection after the response' do
    c = connect(@port)
    c.write("GET /old HTTP/1.0\r\n\r\n")
    r = c.read_response
    expect([r.status, r.body]).to eq([200, '/old'])
    expect(c.closed?(within: 2)).to be(true)
  end

  it 'keeps an HTTP/1.0 connection with Connection: keep-alive open and says so' do
    c = connect(@port)
    c.write("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    r = c.read_response
    expect([r.status, r.body]).to eq([200, '/a'])
    expect(r['connection']).to match(/\Akeep-alive\z/i)
    expect(r['content-length']).to eq('2')
    c.write("GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    expect(c.read_response.body).to eq('/b')
  end

  it 'honours Connection: close on HTTP/1.1' do
    c = connect(@port)
    c.write("GET /bye HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    r = c.read_response
    expect([r.status, r.body]).to eq([200, '/bye'])
    expect(r['connection']).to match(/close/i)
    expect(c.closed?(within: 2)).to be(true)
    expect(c.pending).to eq('')
  end

  it 'answers three pipelined requests sent in one write, in order' do
    c = connect(@port)
    c.write(%w[/p1 /p2 /p3].map { |p| build_request('GET', p) }.join)
    bodies = 3.times.map { c.read_response }.map { |r| [r.status, r.body] }
    expect(bodies).to eq([[200, '/p1'], [200, '/p2'], [200, '/p3']])
  end

  it 'answers pipelined requests with bodies in between, in order' do
    c = connect(@port)
    c.write(build_request('POST', '/echo-body', {}, 'first') +
            build_request('GET', '/mid') +
            build_request('POST', '/echo-body', {}, 'second'))
    bodies = 3.times.map { c.read_response.body }
    expect(bodies).to eq(['got:first', '/mid', 'got:second'])
  end

  it 'receives a chunked request body' do
    c = connect(@port)
    c.write("POST /echo-body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" \
            "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n")
    r = c.read_response
    expect([r.status, r.body]).to eq([200, 'got:hello world'])
  end

  it 'receives a chunked request body with trailers and keeps the connection usable' do
    c = connect(@port)
    c.write("POST /echo-body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" \
            "3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n")
    expect(c.read_response.body).to eq('got:abc')
    c.request('GET', '/after')
    expect(c.read_response.body).to eq('/after')
  end

  it 'sends 100 Continue for Expect: 100-continue before the body is sent, then the response' do
    c = connect(@port)
    c.write("POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    interim = c.read_response(timeout: 3)
    expect(interim.status).to eq(100)
    expect(interim.version).to eq('1.1')
    c.write('hello')
    r = c.read_response
    expect([r.status, r.body]).to eq([200, 'got:hello'])
  end

  it 'answers HEAD with the GET headers (Content-Length of the GET body) and no body' do
    get = http_get(@port, '/hello')
    c = connect(@port)
    c.request('HEAD', '/hello')
    r = c.read_response(head: true)
    expect(r.status).to eq(200)
    expect(r['content-length']).to eq(get['content-length'])
    expect(r['content-length']).to eq('5')
    expect(r['content-type']).to eq(get['content-type'])
    # No body bytes: the next response on the connection starts right away.
    c.request('GET', '/next')
    r2 = c.read_response
    expect([r2.status, r2.body]).to eq([200, '/next'])
  end

  {
    'a 200' => ['/hello', 200], 'a handler error 500' => ['/boom', 500]
  }.each do |what, (path, status)|
    it "puts Date and Server headers on every response (#{what})" do
      r = http_get(@port, path)
      expect(r.status).to eq(status)
      expect(r['date']).to match(/\A(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT\z/)
      expect(r['server']).to match(/\S/)
      expect(r.count('date')).to eq(1)
    end
  end

  it 'puts Date and Server headers on an error response generated by the gateway (400)' do
    bytes = raw_request(@port, "NOT A REQUEST\r\n\r\n")
    r = parse_response(bytes)
    expect(r.status).to eq(400)
    expect(r['date']).not_to be_nil
    expect(r['server']).not_to be_nil
  end
end

# A connection's parser goes back to the worker's spares when it is idle:
# one left mid-line (a client's stray CRLF after its request) must not reach
# the next connection (found by fuzz_request).
RSpec.describe 'HTTP/1.1 parser reuse' do
  it 'a stray empty line after a request does not spoil the next connection' do
    port = free_port
    start_gateway(<<~RUBY, ports: port)
      server listen: "127.0.0.1:#{port}" do
        location "/" do "ok" end
      end
    RUBY
    a = connect(port)
    a.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n\r")
    expect(a.read_response.body).to eq('ok')
    sleep 0.05 # a's connection goes idle and gives its parts back
    3.times do
      b = connect(port)
      b.request('GET', '/', { 'Host' => 'x' })
      r = b.read_response
      expect([r.status, r.body]).to eq([200, 'ok'])
      b.close
    end
    a.write("\nGET / HTTP/1.1\r\nHost: x\r\n\r\n") # a's own empty line ends, its next request is served
    expect(a.read_response.body).to eq('ok')
  end
end
