# examples/tarantool.lua (the Tarantool of examples/tarantool.rb and of
# `rake bench:tarantool`): its Lua HTTP/1.1 responder behind the gateway's
# proxy_pass over real sockets (keep-alive reuse of the upstream connection,
# process_request's body and x-a header, the same answer as the iproto
# path), and on its own: keep-alive, requests split across reads, bodies
# by Content-Length, HTTP/1.0, and bad input answered and closed.
require_relative 'spec_helper'
require_relative 'tarantool_helper'

RSpec.describe 'examples/tarantool.lua: the HTTP responder on Tarantool' do
  before(:all) { @tnt = TarantoolExample.new }
  after(:all) { @tnt&.destroy }

  def conn
    GatewaySpec::Conn.new(@tnt.http_port)
  end

  # [accepted connections, requests served] so far, over iproto through the gateway.
  def counts
    http_get(@port, '/counts').body.split.map(&:to_i)
  end

  describe 'behind the gateway' do
    before(:each) do
      @port = free_port
      start_gateway(<<~RUBY, ports: @port)
        tarantool :tnt, servers: ["#{@tnt.addr}"], pool: 1, timeout: 2.0
        upstream :tarantool_http, servers: ["127.0.0.1:#{@tnt.http_port}"], keepalive: 4
        server listen: "127.0.0.1:#{@port}", workers: 1 do
          location "/counts" do
            Async::Tarantool[:tnt].eval("return http_accepted, http_served").join(" ")
          end
          location "/tnt" do
            status, headers, body = Async::Tarantool[:tnt].call("process_request", [{ "path" => "/tnt" }]).first
            [status, headers, [body]]
          end
          location "/http", proxy_pass: "http://tarantool_http"
          location "/break" do
            Async::Tarantool[:tnt].eval("saved_pr = process_request; process_request = function(req) " \\
                                        "if req.path == '/http/odd' then return {42} end error('boom') end")
            "broken"
          end
          location "/mend" do
            Async::Tarantool[:tnt].eval("process_request = saved_pr")
            "mended"
          end
        end
      RUBY
    end

    it 'proxy_pass answers process_request\'s body and x-a header, over one kept-alive upstream connection' do
      accepted0, served0 = counts
      20.times do |i|
        r = http_get(@port, "/http/#{i}?q=#{i}")
        expect([r.status, r['x-a'], r.body, r['content-length']]).to eq([200, '1', 'body', '4'])
      end
      c = GatewaySpec::Conn.new(@port)
      5.times do
        c.request('POST', '/http/post', {}, 'x' * 100)
        r = c.read_response
        expect([r.status, r['x-a'], r.body]).to eq([200, '1', 'body'])
      end
      c.close
      accepted, served = counts
      expect(served - served0).to eq(25)
      expect(accepted - accepted0).to eq(1), 'the 25 requests should reuse one upstream connection'
    end

    it 'a process_request that raises or answers no {status, headers, body}: 500, the connection kept' do
      c = conn
      expect(http_get(@port, '/break').body).to eq('broken')
      begin
        %w[/http/boom /http/odd].each do |path|
          c.request('GET', path)
          r = c.read_response
          expect([r.status, r['x-a'], r['connection']]).to eq([500, nil, nil])
        end
      ensure
        expect(http_get(@port, '/mend').body).to eq('mended')
      end
      c.request('GET', '/http/ok')
      expect([c.read_response.status, c.closed?(within: 0.2)]).to eq([200, false])
      c.close
    end

    it 'answers what the iproto path answers' do
      via_http = http_get(@port, '/http')
      via_iproto = http_get(@port, '/tnt')
      expect([via_http.status, via_http['x-a'], via_http.body]).to eq([via_iproto.status, via_iproto['x-a'], via_iproto.body])
      expect(via_iproto.body).to eq('body')
    end
  end

  describe 'on its own' do
    it 'keeps an HTTP/1.1 connection alive, reads a head split across writes and a Content-Length body' do
      c = conn
      3.times do
        c.request('GET', '/a')
        r = c.read_response
        expect([r.status, r['x-a'], r.body, r['connection']]).to eq([200, '1', 'body', nil])
      end
      "GET /slow HTTP/1.1\r\nHost: x\r\nX-Long: #{'v' * 50}\r\n\r\n".scan(/.{1,7}/m).each do |piece|
        c.write(piece)
        sleep 0.005
      end
      expect(c.read_response.body).to eq('body')
      # A body the next request follows in the same write: the body is consumed, both are answered.
      c.write("POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /q HTTP/1.1\r\n\r\n")
      expect([c.read_response.body, c.read_response.body]).to eq(%w[body body])
      expect(c.closed?(within: 0.3)).to be(false)
      c.close
    end

    it 'HEAD: the length, no body; Connection: close and HTTP/1.0 close after the answer, unless kept alive' do
      c = conn
      c.request('HEAD', '/')
      r = c.read_response(head: true)
      expect([r.status, r['content-length'], r.body]).to eq([200, '4', ''])
      c.request('GET', '/', { 'Connection' => 'close' })
      expect(c.read_response['connection']).to eq('close')
      expect(c.closed?).to be(true)
      c = conn
      c.write("GET / HTTP/1.0\r\n\r\n")
      expect(c.read_response.body).to eq('body')
      expect(c.closed?).to be(true)
      c = conn
      c.write("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
      r = c.read_response
      expect([r.body, r['connection']]).to eq(%w[body keep-alive]) # a 1.0 client must be told
      expect(c.closed?(within: 0.3)).to be(false)
      c.close
    end

    {
      'a malformed request line' => ["GET /\r\n\r\n", 400],
      'a header line without a colon' => ["GET / HTTP/1.1\r\nBad Header\r\n\r\n", 400],
      'a control character in a header' => ["GET / HTTP/1.1\r\nX-A: a\x01b\r\n\r\n", 400],
      'a bad Content-Length' => ["POST / HTTP/1.1\r\nContent-Length: 4x\r\n\r\n", 400],
      'a head over 8 KiB' => ["GET / HTTP/1.1\r\nX-A: #{'a' * 9000}\r\n\r\n", 431],
      'more than 64 header lines' => ["GET / HTTP/1.1\r\n#{(1..65).map { |i| "X-#{i}: v\r\n" }.join}\r\n", 431],
      'a body over 1 MiB' => ["POST / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n", 413],
      'Transfer-Encoding' => ["POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501]
    }.each do |what, (bytes, status)|
      it "#{what}: #{status}, then the connection is closed" do
        c = conn
        c.write(bytes)
        r = c.read_response
        expect([r.status, r['connection']]).to eq([status, 'close'])
        expect(r['x-a']).to be_nil
        expect(c.closed?).to be(true)
      end
    end

    it 'a client that closes mid-head or mid-body is dropped; the responder keeps serving' do
      c = conn
      c.write("GET / HTTP/1.1\r\nHo")
      c.close
      c = conn
      c.write("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
      c.close
      c = conn
      c.request('GET', '/')
      expect(c.read_response.body).to eq('body')
      c.close
    end
  end
end
