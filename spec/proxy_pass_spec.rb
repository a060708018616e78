# proxy_pass: locations that hand the request to an upstream. URL mapping
# (nginx semantics), what crosses the proxy in each direction (status,
# headers, bodies; hop-by-hop fields never; X-Forwarded-* and Host added),
# how upstream failures are answered (502, 504, never a fake 200), framing
# corner cases (HTTP/1.0 close-delimited, HEAD, 204/304, 100 Continue), the
# keep-alive pool (reuse, stale idle connections), unix-socket upstreams,
# and a slow upstream not delaying a fast request.
#
# Each example boots its own gateway from an inline config whose upstreams
# are scripted fakes inside the example.
require_relative 'spec_helper'

# gateway_with: a single-worker server with /pid and /fast, which every
# example may use.
RSpec.describe 'proxy_pass', gateway: { fast: true } do
  # A fake unix-socket upstream (the harness only has TCP ones): answers
  # every request on a connection with `respond.(peer, req)`.
  class ProxyUnixFake
    attr_reader :path

    def initialize(path, &respond)
      @path = path
      @server = UNIXServer.new(path)
      @threads = []
      @errors = []
      @acceptor = Thread.new do
        loop do
          sock = @server.accept
          @threads << Thread.new(sock) do |s|
            peer = GatewaySpec::FakeUpstream::Peer.new(s, 0)
            while (req = peer.read_request(timeout: 30))
              respond.call(peer, req)
            end
          rescue StandardError => e
            @errors << "unix fake upstream: #{e.class}: #{e.message}"
          ensure
            s.close unless s.closed?
          end
        end
      rescue IOError, Errno::EBADF
        nil
      end
    end

    def stop
      @server.close unless @server.closed?
      @acceptor.join(2)
      @threads.each { |t| t.kill unless t.join(2) }
      @errors
    end
  end

  after(:each) do
    errs = (@unix_fakes || []).flat_map(&:stop)
    expect(errs).to be_empty
  end

  # A keep-alive fake upstream that records every request it reads in
  # @seen and answers with `respond.(peer, req)` (default: 200 naming the
  # request).
  def recording_upstream(&respond)
    @seen = Queue.new
    respond ||= ->(peer, req) { peer.respond(200, { 'X-Up' => 'yes' }, "up:#{req.method} #{req.target}") }
    fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        @seen << req
        respond.call(peer, req)
      end
    end
  end

  # The next request the recording upstream read.
  def upstream_request(timeout: 5)
    poll('the upstream to receive a request', timeout: timeout) { !@seen.empty? }
    @seen.pop
  end

  # Closes a socket with SO_LINGER 0: the peer sees a reset, not a FIN.
  def reset!(sock)
    sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack('ii'))
    sock.close
  end

  def quietly
    yield
  rescue Errno::EPIPE, Errno::ECONNRESET, IOError
    nil
  end

  # ---------------------------------------------------------------------------
  describe 'URL mapping' do
    it 'replaces the location prefix by the path of the URL ("/p/a?q=1" -> "/x/a?q=1")' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p/a?q=1')
      expect(r.status).to eq(200)
      expect(upstream_request.target).to eq('/x/a?q=1')
    end

    it 'maps the bare prefix to the path of the URL ("/p" -> "/x")' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      http_get(@port, '/p')
      expect(upstream_request.target).to eq('/x')
    end

    it 'with a trailing slash on both sides strips the prefix ("/s/a/b" -> "/a/b")' do
      up = recording_upstream
      gateway_with(%(location "/s/", proxy_pass: "http://127.0.0.1:#{up.port}/"))
      http_get(@port, '/s/a/b?z=9')
      expect(upstream_request.target).to eq('/a/b?z=9')
    end

    it 'passes the request-target unchanged when the URL has no path' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}"))
      http_get(@port, '/p/a?q=1')
      expect(upstream_request.target).to eq('/p/a?q=1')
    end

    it 'sends the client method upstream' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      http_request(@port, 'DELETE', '/p/item/7')
      req = upstream_request
      expect([req.method, req.target]).to eq(['DELETE', '/x/item/7'])
    end
  end

  # ---------------------------------------------------------------------------
  describe 'what comes back' do
    it "passes the upstream's status, headers and body to the client" do
      up = recording_upstream do |peer, _req|
        body = '{"ok":true}'
        peer.write("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nX-Custom: v1\r\n" \
                   "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}")
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p/made')
      expect(r.status).to eq(201)
      expect(r['content-type']).to eq('application/json')
      expect(r['x-custom']).to eq('v1')
      expect(r.count('set-cookie')).to eq(2)
      expect(r['content-length']).to eq('11')
      expect(r.body).to eq('{"ok":true}')
    end

    it "passes an upstream 404 or 500 through as it is (not turned into 502)" do
      up = recording_upstream do |peer, req|
        req.target.end_with?('missing') ? peer.respond(404, {}, 'nope') : peer.respond(500, {}, 'boom')
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      expect([http_get(@port, '/p/missing').then { |r| [r.status, r.body] }]).to eq([[404, 'nope']])
      expect([http_get(@port, '/p/err').then { |r| [r.status, r.body] }]).to eq([[500, 'boom']])
    end

    # Bodies stream (spec/proxy_streaming_spec.rb): an unknown length goes to
    # an HTTP/1.1 client chunked, re-framed by the gateway, never passed through.
    it 'delivers a chunked upstream body whole, re-chunked by the gateway (one framing, no Content-Length)' do
      up = recording_upstream do |peer, _req|
        peer.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p')
      expect(r.status).to eq(200)
      expect(r['transfer-encoding']).to eq('chunked')
      expect(r['content-length']).to be_nil
      expect(r.body).to eq('hello world')
    end

    it 'a 256 KiB upstream body arrives intact' do
      big = (0...256 * 1024).map { |i| (97 + i % 26).chr }.join
      up = recording_upstream { |peer, _req| peer.respond(200, {}, big) }
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p/big', timeout: 10)
      expect(r.status).to eq(200)
      expect(r.body.bytesize).to eq(big.bytesize)
      expect(r.body == big).to be(true)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'request bodies' do
    it 'a Content-Length body from the client reaches the upstream with a Content-Length' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_request(@port, 'POST', '/p/form', { 'Content-Type' => 'text/plain' }, 'hello body')
      expect(r.status).to eq(200)
      req = upstream_request
      expect(req.method).to eq('POST')
      expect(req['content-length']).to eq('10')
      expect(req['transfer-encoding']).to be_nil
      expect(req.body).to eq('hello body')
    end

    it 'a 512 KiB request body reaches the upstream intact' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      big = (0...512 * 1024).map { |i| (65 + i % 26).chr }.join
      r = http_request(@port, 'PUT', '/p/big', {}, big, timeout: 10)
      expect(r.status).to eq(200)
      req = upstream_request
      expect(req['content-length']).to eq(big.bytesize.to_s)
      expect(req.body == big).to be(true)
    end

    it 'a chunked body from the client goes on re-chunked by the gateway (no extensions, no trailers)' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      c = connect(@port)
      c.write("POST /p/up HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" \
              "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
      expect(c.read_response.status).to eq(200)
      req = upstream_request
      expect(req['transfer-encoding']).to eq('chunked')
      expect(req['content-length']).to be_nil
      expect(req['x-trailer']).to be_nil
      expect(req.body).to eq('hello world')
    end

    it 'with request_buffering: true a chunked body reaches the upstream de-chunked, with a Content-Length' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x", request_buffering: true))
      c = connect(@port)
      c.write("POST /p/up HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" \
              "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
      expect(c.read_response.status).to eq(200)
      req = upstream_request
      expect(req['transfer-encoding']).to be_nil
      expect(req['content-length']).to eq('11')
      expect(req.body).to eq('hello world')
    end
  end

  # ---------------------------------------------------------------------------
  describe 'hop-by-hop fields' do
    it 'are not forwarded to the upstream, nor any field the Connection header names' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p/h', { 'Connection' => 'close, x-secret', 'X-Secret' => '1', 'Keep-Alive' => 'timeout=300',
                                    'TE' => 'trailers', 'Upgrade' => 'websocket', 'Proxy-Connection' => 'keep-alive',
                                    'X-Kept' => 'kept' })
      expect(r.status).to eq(200)
      req = upstream_request
      %w[x-secret keep-alive te upgrade proxy-connection transfer-encoding].each do |name|
        expect(req[name]).to be_nil, "#{name} reached the upstream: #{req.headers.inspect}"
      end
      expect(req['connection'].to_s).not_to match(/x-secret/i)
      expect(req['x-kept']).to eq('kept')
    end

    it 'Transfer-Encoding from the client is not relayed: the gateway frames the body itself' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"
                     location "/b", proxy_pass: "http://127.0.0.1:#{up.port}/x", request_buffering: true))
      %w[/p /b].each do |path|
        c = connect(@port)
        c.write("POST #{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding:  Chunked \r\nConnection: close\r\n\r\n" \
                "3\r\nabc\r\n0\r\n\r\n")
        c.read_response
        req = upstream_request
        te = req.headers.select { |k, _| k.casecmp?('transfer-encoding') }.map(&:last)
        expect(te).to eq(path == '/p' ? ['chunked'] : [])
        expect(req.body).to eq('abc')
      end
    end

    it 'are not passed back to the client, nor any field the upstream Connection header names' do
      up = recording_upstream do |peer, _req|
        peer.write("HTTP/1.1 200 OK\r\nConnection: x-up-secret\r\nX-Up-Secret: 1\r\nKeep-Alive: timeout=5\r\n" \
                   "Upgrade: h2c\r\nProxy-Connection: keep-alive\r\nTrailer: X-T\r\nX-Kept: kept\r\n" \
                   "Content-Length: 2\r\n\r\nok")
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p')
      expect(r.status).to eq(200)
      expect(r.body).to eq('ok')
      %w[x-up-secret keep-alive upgrade proxy-connection trailer].each do |name|
        expect(r[name]).to be_nil, "#{name} reached the client: #{r.head}"
      end
      expect(r['connection'].to_s).not_to match(/x-up-secret/i)
      expect(r['x-kept']).to eq('kept')
    end
  end

  # ---------------------------------------------------------------------------
  describe 'X-Forwarded-* and Host' do
    it 'X-Forwarded-For is the client address when the client sent none' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      http_get(@port, '/p')
      expect(upstream_request['x-forwarded-for']).to eq('127.0.0.1')
    end

    it 'X-Forwarded-For appends the client address to an existing value' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      http_get(@port, '/p', 'X-Forwarded-For' => '10.0.0.1')
      req = upstream_request
      expect(req['x-forwarded-for']).to eq('10.0.0.1, 127.0.0.1')
      expect(req.headers.count { |k, _| k.casecmp?('x-forwarded-for') }).to eq(1)
    end

    it 'X-Forwarded-For keeps every client-sent line: two lines + the client address' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      http_get(@port, '/p', 'X-Forwarded-For' => ['10.0.0.1', '10.0.0.2'])
      expect(upstream_request['x-forwarded-for']).to eq('10.0.0.1, 10.0.0.2, 127.0.0.1')
    end

    it 'no Via is added unless the location asks for it' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p')
      expect(upstream_request['via']).to be_nil
      expect(r['via']).to be_nil
    end

    it 'via: true adds "1.1 gateway" to Via both ways, after what the client and the upstream sent' do
      up = recording_upstream do |peer, _req|
        peer.respond(200, { 'Via' => '1.0 origin' }, 'ok')
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x", via: true))
      r = http_get(@port, '/p', 'Via' => '1.1 client-proxy')
      req = upstream_request
      expect(req['via']).to eq('1.1 client-proxy, 1.1 gateway')
      expect(req.headers.count { |k, _| k.casecmp?('via') }).to eq(1)
      expect(r['via']).to eq('1.0 origin, 1.1 gateway')
    end

    it 'via: "NAME" names this hop, also for req.proxy_pass from a handler' do
      up = recording_upstream
      gateway_with(%(location "/h", via: "edge-1" do |req| req.proxy_pass("http://127.0.0.1:#{up.port}/x") end))
      r = http_get(@port, '/h')
      expect(upstream_request['via']).to eq('1.1 edge-1')
      expect(r['via']).to eq('1.1 edge-1')
    end

    it 'via: with a space or on a status location is a config error naming the line' do
      [%(location "/p", proxy_pass: "http://127.0.0.1:9/", via: "a b"), %(location "/s", status: true, via: true)].each do |loc|
        status, out, path = check_config(%(server listen: "127.0.0.1:#{free_port}" do\n  #{loc}\nend\n))
        expect(status).to eq(1), out
        expect(out).to include("#{path}:2")
        expect(out).to include('via')
      end
    end

    it 'X-Forwarded-Proto is http (a client-sent value is replaced)' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      http_get(@port, '/p', 'X-Forwarded-Proto' => 'https')
      expect(upstream_request['x-forwarded-proto']).to eq('http')
    end

    it "X-Forwarded-Host is the client's Host" do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      http_get(@port, '/p', 'Host' => 'shop.example:8443')
      expect(upstream_request['x-forwarded-host']).to eq('shop.example:8443')
    end

    it 'Host is the upstream\'s "127.0.0.1:PORT" by default' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      http_get(@port, '/p', 'Host' => 'shop.example')
      req = upstream_request
      expect(req['host']).to eq("127.0.0.1:#{up.port}")
      expect(req.headers.count { |k, _| k.casecmp?('host') }).to eq(1)
    end

    it "Host is the client's Host with pass_host: true" do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x", pass_host: true))
      http_get(@port, '/p', 'Host' => 'shop.example')
      req = upstream_request
      expect(req['host']).to eq('shop.example')
      expect(req.headers.count { |k, _| k.casecmp?('host') }).to eq(1)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'upstream failures' do
    it 'connection refused -> 502' do
      dead = free_port
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{dead}/x"))
      r = http_get(@port, '/p')
      expect(r.status).to eq(502)
      expect(@gw.log).to match(/connection refused/)
    end

    it 'an upstream that resets the connection before answering -> 502' do
      up = fake_upstream do |peer|
        peer.read_request
        reset!(peer.sock)
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p')
      expect(r.status).to eq(502)
    end

    it 'an upstream that closes without answering -> 502' do
      up = fake_upstream do |peer|
        peer.read_request
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      expect(http_get(@port, '/p').status).to eq(502)
    end

    it 'a garbage status line from the upstream -> 502' do
      up = fake_upstream do |peer|
        peer.read_request
        quietly { peer.write("HELLO THERE\r\nContent-Length: 2\r\n\r\nhi") }
        IO.select([peer.sock], nil, nil, 5)
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p')
      expect(r.status).to eq(502)
      expect(r.body).not_to include('hi')
    end

    it 'an upstream response with both Content-Length and Transfer-Encoding -> 502' do
      up = fake_upstream do |peer|
        peer.read_request
        quietly { peer.write("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n") }
        IO.select([peer.sock], nil, nil, 5)
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      expect(http_get(@port, '/p').status).to eq(502)
    end

    it 'an upstream response with two different Content-Lengths -> 502' do
      up = fake_upstream do |peer|
        peer.read_request
        quietly { peer.write("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde") }
        IO.select([peer.sock], nil, nil, 5)
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      expect(http_get(@port, '/p').status).to eq(502)
    end

    it 'an upstream that never answers -> 504 after the group timeout: 0.5 (within ~0.5-2 s)' do
      up = fake_upstream do |peer|
        peer.read_request
        IO.select([peer.sock], nil, nil, 10)
      end
      gateway_with(%(location "/p", proxy_pass: "http://u/"),
                   %(upstream :u, servers: ["127.0.0.1:#{up.port}"], timeout: 0.5))
      r, took = timed { http_get(@port, '/p', timeout: 10) }
      expect(r.status).to eq(504)
      expect(took).to be >= 0.45
      expect(took).to be < 2.0 * GatewaySpec::SLACK
    end

    it 'an upstream that closes mid-body never yields a complete 200 to the client' do
      up = fake_upstream do |peer|
        peer.read_request
        quietly { peer.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789") }
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      raw = raw_request(@port, build_request('GET', '/p', 'Connection' => 'close'))
      head, body = raw.split("\r\n\r\n", 2)
      status = head.to_s[%r{\AHTTP/1\.\d (\d{3})}, 1].to_i
      if status == 200
        declared = head[/^content-length:\s*(\d+)/i, 1]
        expect(declared).not_to be_nil, "a 200 without Content-Length: #{raw.inspect}"
        expect(body.to_s.bytesize).to be < declared.to_i, "a complete 200 built from a truncated body: #{raw.inspect}"
      else
        expect(status).to eq(502), raw.inspect
      end
    end

    it 'a chunked upstream body cut before its last chunk never yields a complete 200' do
      up = fake_upstream do |peer|
        peer.read_request
        quietly { peer.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n") }
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      raw = raw_request(@port, build_request('GET', '/p', 'Connection' => 'close'))
      head, body = raw.split("\r\n\r\n", 2)
      status = head.to_s[%r{\AHTTP/1\.\d (\d{3})}, 1].to_i
      if status == 200
        declared = head[/^content-length:\s*(\d+)/i, 1]
        expect(declared && body.to_s.bytesize >= declared.to_i).to be_falsey,
                                                                   "a complete 200 built from a truncated body: #{raw.inspect}"
      else
        expect(status).to eq(502), raw.inspect
      end
    end
  end

  # ---------------------------------------------------------------------------
  describe 'framing' do
    it 'an HTTP/1.0 close-delimited upstream response reaches an HTTP/1.1 client whole, chunked' do
      up = fake_upstream do |peer|
        peer.read_request
        peer.write("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nclose-delimited body")
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p')
      expect(r.status).to eq(200)
      expect(r['transfer-encoding']).to eq('chunked')
      expect(r['content-length']).to be_nil
      expect(r.body).to eq('close-delimited body')
    end

    it 'HEAD through the proxy: no body, and the connection stays usable' do
      up = recording_upstream do |peer, req|
        if req.method == 'HEAD'
          peer.write("HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Type: text/plain\r\n\r\n")
        else
          peer.respond(200, {}, 'hello world')
        end
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      c = connect(@port)
      c.request('HEAD', '/p/h')
      h = c.read_response(head: true)
      expect(h.status).to eq(200)
      c.request('GET', '/p/g', 'Connection' => 'close')
      g = c.read_response
      expect([g.status, g.body]).to eq([200, 'hello world'])
      expect(upstream_request.method).to eq('HEAD')
    end

    it "HEAD through the proxy keeps the upstream's Content-Length: 11, the length a GET would have (RFC 9110 §8.6, 9.3.2)" do
      up = recording_upstream do |peer, _req|
        peer.write("HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Type: text/plain\r\n\r\n")
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_request(@port, 'HEAD', '/p/h')
      expect(r.status).to eq(200)
      expect(r['content-length']).to eq('11')
    end

    it 'an upstream 204 reaches the client without a body' do
      up = recording_upstream { |peer, _req| peer.write("HTTP/1.1 204 No Content\r\nX-Up: 204\r\n\r\n") }
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      c = connect(@port)
      c.request('GET', '/p/a')
      r = c.read_response
      expect(r.status).to eq(204)
      expect(r['x-up']).to eq('204')
      expect(r['content-length']).to be_nil
      c.request('GET', '/fast', 'Connection' => 'close')
      expect(c.read_response.body).to eq('fast') # nothing stray between the two
    end

    it 'an upstream 304 reaches the client without a body' do
      up = recording_upstream { |peer, _req| peer.write("HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n") }
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      c = connect(@port)
      c.request('GET', '/p/a', 'If-None-Match' => '"v1"')
      r = c.read_response
      expect(r.status).to eq(304)
      expect(r['etag']).to eq('"v1"')
      c.request('GET', '/fast', 'Connection' => 'close')
      expect(c.read_response.body).to eq('fast')
      expect(upstream_request['if-none-match']).to eq('"v1"')
    end

    it 'an upstream "100 Continue" before the 200 is skipped: the client sees the 200' do
      up = recording_upstream do |peer, _req|
        peer.write("HTTP/1.1 100 Continue\r\n\r\n")
        sleep 0.05 # the interim and the final response arrive in separate reads
        peer.respond(200, {}, 'after-continue')
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_request(@port, 'POST', '/p', {}, 'data')
      expect([r.status, r.body]).to eq([200, 'after-continue'])
    end

    it 'an upstream "100 Continue" and the 200 in one packet: the client sees the 200' do
      up = recording_upstream do |peer, _req|
        peer.write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal")
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      r = http_get(@port, '/p')
      expect([r.status, r.body]).to eq([200, 'final'])
    end
  end

  # ---------------------------------------------------------------------------
  describe 'the keep-alive pool' do
    it '20 sequential requests through the proxy open at most 2 upstream connections' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      20.times do |i|
        r = http_get(@port, "/p/#{i}")
        expect([r.status, r.body]).to eq([200, "up:GET /x/#{i}"])
      end
      expect(up.accepted).to be <= 2
    end

    it '20 requests on one client keep-alive connection also share upstream connections' do
      up = recording_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      c = connect(@port)
      20.times do |i|
        c.request('GET', "/p/#{i}")
        expect(c.read_response.body).to eq("up:GET /x/#{i}")
      end
      expect(up.accepted).to be <= 2
    end

    # Answers one request per connection, then closes it (without saying
    # Connection: close): the pooled connection goes stale while idle.
    def once_upstream
      @closed = Queue.new
      fake_upstream do |peer|
        req = peer.read_request
        peer.respond(200, {}, "once:#{req.method} #{req.target}") if req
        peer.sock.close
        @closed << peer.index
      end
    end

    it 'an idle pooled connection closed by the upstream is detected: the next GET still succeeds' do
      up = once_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      expect(http_get(@port, '/p/1').body).to eq('once:GET /x/1')
      poll('the upstream to close its connection') { @closed.size >= 1 }
      r = http_get(@port, '/p/2')
      expect([r.status, r.body]).to eq([200, 'once:GET /x/2'])
      expect(up.accepted).to eq(2)
    end

    it 'an idle pooled connection closed by the upstream is detected: the next POST still succeeds' do
      up = once_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      expect(http_get(@port, '/p/1').body).to eq('once:GET /x/1')
      poll('the upstream to close its connection') { @closed.size >= 1 }
      r = http_request(@port, 'POST', '/p/2', {}, 'payload')
      expect([r.status, r.body]).to eq([200, 'once:POST /x/2'])
    end

    it 'stays correct over 10 rounds of the upstream closing every connection after one response' do
      up = once_upstream
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      10.times do |i|
        r = http_get(@port, "/p/#{i}")
        expect([r.status, r.body]).to eq([200, "once:GET /x/#{i}"]), "round #{i}"
      end
    end
  end

  # ---------------------------------------------------------------------------
  describe 'unix socket upstreams' do
    it 'a group server "unix:/path" is reached over the unix socket' do
      seen = Queue.new
      fake = ProxyUnixFake.new(File.join(spec_dir, 'up.sock')) do |peer, req|
        seen << req
        peer.respond(200, { 'X-Via' => 'unix' }, "unix:#{req.method} #{req.target}")
      end
      (@unix_fakes ||= []) << fake
      gateway_with(%(location "/p", proxy_pass: "http://u/x"),
                   %(upstream :u, servers: ["unix:#{fake.path}"]))
      r = http_get(@port, '/p/a?q=1')
      expect([r.status, r['x-via'], r.body]).to eq([200, 'unix', 'unix:GET /x/a?q=1'])
      3.times { expect(http_get(@port, '/p/b').status).to eq(200) }
      expect(seen.size).to eq(4)
    end

    it 'a unix socket nobody listens on -> 502' do
      gateway_with(%(location "/p", proxy_pass: "http://u/x"),
                   %(upstream :u, servers: ["unix:#{File.join(spec_dir, 'nobody.sock')}"]))
      expect(http_get(@port, '/p').status).to eq(502)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'configuration' do
    def location_config(url)
      <<~RUBY
        server listen: "127.0.0.1:#{free_port}" do
          location "/ok" do "ok" end
          location "/p", proxy_pass: "#{url}"
        end
      RUBY
    end

    # A proxy_pass: URL the core can never serve must fail `gateway -t`
    # (exit 1, "FILE:LINE: message" naming the URL), like nginx's
    # "invalid port in upstream" / "host not found in upstream".
    {
      'a port that is not a number' => 'http://127.0.0.1:notaport/x',
      'a port with trailing junk' => 'http://127.0.0.1:8080abc/x',
      'a port above 65535' => 'http://127.0.0.1:70000/x',
      'no host' => 'http:///x',
    }.each do |what, url|
      it "proxy_pass: with #{what} (#{url}) is a config error" do
        status, out, path = check_config(location_config(url))
        expect(status).to eq(1), "gateway -t accepted #{url.inspect}: #{out}"
        expect(out).to include("#{path}:3")
      end
    end

    it 'proxy_pass: to a group defined after the server block is accepted' do
      config = <<~RUBY
        server listen: "127.0.0.1:#{free_port}" do
          location "/p", proxy_pass: "http://later/"
        end
        upstream :later, servers: ["127.0.0.1:9"]
      RUBY
      status, out, = check_config(config)
      expect(status).to eq(0), out
    end

    it 'proxy_pass: "unix:/path" is either rejected by gateway -t or reaches the unix socket' do
      fake = ProxyUnixFake.new(File.join(spec_dir, 'direct.sock')) do |peer, req|
        peer.respond(200, {}, "direct:#{req.target}")
      end
      (@unix_fakes ||= []) << fake
      status, = check_config(location_config("unix:#{fake.path}"))
      if status == 0
        gateway_with(%(location "/p", proxy_pass: "unix:#{fake.path}"))
        r = http_get(@port, '/p/a')
        expect([r.status, r.body]).to eq([200, 'direct:/p/a'])
      else
        expect(status).to eq(1)
      end
    end
  end

  # ---------------------------------------------------------------------------
  describe 'non-blocking' do
    it 'a proxied request waiting on a slow upstream (1 s) does not delay a fast request on the same worker' do
      arrived = Queue.new
      up = fake_upstream do |peer|
        peer.read_request
        arrived << true
        IO.select([peer.sock], nil, nil, 1)
        quietly { peer.respond(200, {}, 'slow') }
      end
      gateway_with(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}/x"))
      slow = connect(@port)
      slow.request('GET', '/p', 'Connection' => 'close')
      poll('the slow request to reach the upstream') { !arrived.empty? }
      fast, took = timed { http_get(@port, '/fast') }
      expect([fast.status, fast.body]).to eq([200, 'fast'])
      expect(took).to be < 0.5 * GatewaySpec::SLACK # the upstream holds the slow one 1 s
      expect(slow.read_response.body).to eq('slow')
    end
  end
end
