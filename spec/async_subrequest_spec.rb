# Async::HTTP: sub-requests to internal locations (dispatched in-process
# through the same server's router) and to absolute http:// URLs (the
# non-blocking upstream client with its keep-alive pool); start/join, all,
# last_response, the ngx_mruby form, body filters on proxy_pass locations,
# errors as rescuable exceptions, and clients vanishing mid-sub-request.
require_relative 'spec_helper'

RSpec.describe 'Async::HTTP sub-requests' do
  before(:each) do
    @port = free_port
    @sibling = free_port
    @dead = free_port # nothing listens there
    # Keep-alive upstream that describes what it received.
    @up = fake_upstream do |peer|
      while (req = peer.read_request(timeout: 60))
        body = if req.target.start_with?('/page')
                 'hello from upstream'
               else
                 "up:#{req.method} #{req.target} x-y=#{req['x-y']} body=#{req.body}"
               end
        peer.respond(200, { 'X-Up' => 'yes', 'Content-Type' => 'text/plain' }, body)
      end
    end
    # Reads the request, then never answers (until the gateway hangs up).
    @silent = fake_upstream do |peer|
      peer.read_request(timeout: 10)
      IO.select([peer.sock], nil, nil, 10 * GatewaySpec::SLACK)
    end
    # Reads the request, reports when the gateway hangs up, answers late.
    @hangups = Queue.new
    @hold = fake_upstream do |peer|
      peer.read_request(timeout: 10)
      t = GatewaySpec.now
      gone = IO.select([peer.sock], nil, nil, 3 * GatewaySpec::SLACK)
      @hangups << (gone ? GatewaySpec.now - t : nil)
      begin
        peer.respond(200, {}, 'held-late')
      rescue Errno::EPIPE, Errno::ECONNRESET, IOError
        nil
      end
    end
    # Answers one request per connection, then closes it without saying so
    # (no Connection: close): the gateway's pooled connection goes stale.
    @once = fake_upstream do |peer|
      req = peer.read_request(timeout: 10)
      peer.respond(200, {}, "once:#{req.target}") if req
    end
    sibling = config_with(<<~'RUBY', port: @sibling)
      location "/sleep200ms" do Async.sleep 0.2; "sibling-late" end
      location "/hello" do "sibling-hello" end
    RUBY
    config = <<~'RUBY'
      # --- targets ---
      location "/target" do |req|
        [201, {"x-from" => "target", "content-type" => "text/x-target"}, ["target-body q=#{req.query}"]]
      end
      location "/echo" do |req|
        "#{req.method}|#{req.headers["x-y"]}|#{req.body}"
      end
      # /nap?NAME-MS: sleeps MS milliseconds, answers NAME.
      location "/nap" do |req|
        name, ms = req.query.split("-")
        Async.sleep(ms.to_i / 1000.0)
        name
      end

      # --- callers ---
      location "/sub_target" do
        r = Async::HTTP.sub_request("/target")
        "#{r.status}|#{r.code}|#{r.headers["x-from"]}|#{r.headers["content-type"]}|#{r.body}|#{r["code"]}|#{r["body"]}"
      end
      location "/sub_query" do
        Async::HTTP.sub_request("/target?a=1&b=two").body
      end
      location "/sub_missing" do
        r = Async::HTTP.sub_request("/nowhere/at/all")
        "#{r.class}|#{r.status}"
      end
      location "/sub_echo" do
        r = Async::HTTP.sub_request("/echo", method: "POST", headers: {"x-y" => "hdr-value"}, body: "payload-bytes")
        r.body
      end
      location "/url_sub" do
        r = Async::HTTP.sub_request("http://127.0.0.1:UP/n")
        "#{r.status}|#{r.headers["x-up"]}|#{r.body}"
      end
      location "/url_sub_echo" do
        r = Async::HTTP.sub_request("http://127.0.0.1:UP/e?q=1", method: "PUT", headers: {"x-y" => "h"}, body: "data")
        r.body
      end
      location "/url_once" do
        Async::HTTP.sub_request("http://127.0.0.1:ONCE/o").body
      end
      location "/url_sibling" do
        Async::HTTP.sub_request("http://127.0.0.1:SIBLING/hello").body
      end
      location "/refused" do
        begin
          Async::HTTP.sub_request("http://127.0.0.1:DEAD/x")
          "no error"
        rescue Gateway::UpstreamError => e
          "#{e.class}|#{e.is_a?(Gateway::Error)}"
        end
      end
      location "/silent" do
        begin
          Async::HTTP.sub_request("http://127.0.0.1:SILENT/x", timeout: 0.3)
          "no error"
        rescue Gateway::TimeoutError => e
          "#{e.class}|#{e.is_a?(Gateway::Error)}"
        end
      end
      location "/internal_timeout" do
        begin
          Async::HTTP.sub_request("/nap?late-2000", timeout: 0.3)
          "no error"
        rescue Gateway::TimeoutError => e
          e.class.to_s
        end
      end
      location "/tiny_timeout" do
        begin
          Async::HTTP.sub_request("/nap?late-2000", timeout: 0.0004)
          "no error"
        rescue Gateway::TimeoutError => e
          e.class.to_s
        end
      end
      location "/bad_args" do
        [[:sym], ["/x", { body: 5 }], ["/x", { timeout: 0 }], ["/x", { timeout: "1" }],
         ["/x", { timeout: 100_000 }], ["/x", { method: :brew }], ["ftp://x/"]].map do |target, opts|
          begin
            Async::HTTP.sub_request(*[target].flatten, **(opts || {}))
            "no error"
          rescue ArgumentError => e
            e.message
          end
        end.join("\n")
      end
      location "/self" do
        r = Async::HTTP.sub_request("/self")
        "self:#{r.status}"
      end
      location "/depth" do |req|
        n = req.query.to_i
        n == 0 ? "bottom" : Async::HTTP.sub_request("/depth?#{n - 1}").body
      end
      location "/all3" do
        Async::HTTP.all(["/nap?a-1000", "/nap?b-1000", "/nap?c-1000"]).map { |r| r.body }.join(",")
      end
      location "/all_order" do
        Async::HTTP.all(["/nap?first-300", "/nap?second-20", "/nap?third-150"]).map { |r| r.body }.join(",")
      end
      location "/all_mixed" do
        t = Async::HTTP.start("/nap?task-50")
        rs = Async::HTTP.all(["http://127.0.0.1:SIBLING/hello", t, "/target?m"])
        rs.map { |r| "#{r.status}:#{r.body}" }.join(",")
      end
      location "/start_join" do
        t1 = Async::HTTP.start("/nap?one-1000")
        t2 = Async::HTTP.start("/nap?two-1000")
        t3 = Async::HTTP.start("/nap?three-1000")
        "#{t3.join.body},#{t2.join.body},#{t1.join.body}"
      end
      location "/last" do
        Async::HTTP.sub_request("/target?last")
        r = Async::HTTP.last_response
        "#{r.status}|#{r.body}"
      end
      location "/ngx_args" do
        Nginx::Async::HTTP.sub_request "/target", "x=1&y=2"
        Nginx::Async::HTTP.last_response.body
      end
      location "/twice" do |req|
        req.headers_out.add("Set-Cookie", "a=1")
        req.headers_out.add("Set-Cookie", "b=2")
        req.headers_out["X-One"] = "1"
        "two"
      end
      location "/sub_twice" do
        h = Async::HTTP.sub_request("/twice").headers
        "#{h["set-cookie"]}|#{h["X-One"]}|#{h.keys.sort.join(",")}"
      end
      location "/ngx_compat" do
        Nginx::Async::HTTP.sub_request "/target?ngx"
        res = Nginx::Async::HTTP.last_response
        Nginx.rputs res.body
      end
      location "/sub_slow" do
        Async::HTTP.sub_request("/nap?slow-200").body
      end
      location "/sub_slow_marked" do
        Gateway.log(:notice, "sub-request-in-flight")
        Async::HTTP.sub_request("/nap?marked-1000").body
      end
      location "/all_slow" do
        Async::HTTP.all(["/nap?a-200", "http://127.0.0.1:SIBLING/sleep200ms", "/nap?c-100"]).map { |r| r.body }.join(",")
      end
      location "/url_sub_held" do
        Async::HTTP.sub_request("http://127.0.0.1:HOLD/held").body
      end
      location "/url_sub_slow" do
        Async::HTTP.sub_request("http://127.0.0.1:SIBLING/sleep200ms").body
      end

      # --- body filters on proxied responses ---
      location "/f_upcase", proxy_pass: "http://127.0.0.1:UP/page",
                            body_filter: ->(body, req) { body.upcase }
      location "/f_keep", proxy_pass: "http://127.0.0.1:UP/page",
                          body_filter: ->(body, req) { a = 1 }
      location "/f_async", proxy_pass: "http://127.0.0.1:UP/page",
                           body_filter: ->(body, req) {
                             Async.sleep 0.01
                             Async::HTTP.sub_request("/target?f").body + "+" + body
                           }
    RUBY
    { 'SIBLING' => @sibling, 'PORT' => @port, 'UP' => @up.port, 'DEAD' => @dead, 'SILENT' => @silent.port, 'HOLD' => @hold.port, 'ONCE' => @once.port }
      .each { |k, v| config = config.gsub(k, v.to_s) }
    gateway_with(config, sibling, port: @port, ports: [@sibling], fast: true)
  end

  def get_ok(path, timeout: 5)
    r = http_get(@port, path, timeout: timeout)
    expect(r.status).to eq(200), "#{path}: #{r.inspect}"
    r.body
  end

  it 'an internal sub-request returns the status, headers and body of the target location' do
    expect(get_ok('/sub_target')).to eq('201|201|target|text/x-target|target-body q=|201|target-body q=')
  end

  it 'the query string of an internal target reaches it' do
    expect(get_ok('/sub_query')).to eq('target-body q=a=1&b=two')
  end

  it 'an internal sub-request to a missing location is a 404 Response, not an error' do
    expect(get_ok('/sub_missing')).to eq('Async::HTTP::Response|404')
  end

  it 'method:, headers: and body: reach an internal target' do
    expect(get_ok('/sub_echo')).to eq('POST|hdr-value|payload-bytes')
  end

  it 'a URL sub-request reaches a fake upstream and returns its response' do
    expect(get_ok('/url_sub')).to eq('200|yes|up:GET /n x-y= body=')
  end

  it 'method:, headers: and body: reach a URL target' do
    expect(get_ok('/url_sub_echo')).to eq('up:PUT /e?q=1 x-y=h body=data')
  end

  it 'a URL sub-request reaches another server block of the same config' do
    expect(get_ok('/url_sibling')).to eq('sibling-hello')
  end

  it '10 sequential URL sub-requests reuse the upstream connection (at most 2 connections)' do
    10.times { expect(get_ok('/url_sub')).to eq('200|yes|up:GET /n x-y= body=') }
    expect(@up.accepted).to be <= 2
  end

  it 'a pooled connection the upstream closed silently is not a failed sub-request (stale connection retried)' do
    5.times { |i| expect(get_ok('/url_once')).to eq('once:/o'), "sub-request #{i + 1}" }
    expect(@once.accepted).to eq(5)
  end

  it 'connection refused raises Gateway::UpstreamError, rescuable in the handler' do
    expect(get_ok('/refused')).to eq('Gateway::UpstreamError|true')
  end

  it 'an upstream that never answers raises Gateway::TimeoutError after timeout: 0.3' do
    body, took = timed { get_ok('/silent', timeout: 10) }
    expect(body).to eq('Gateway::TimeoutError|true')
    expect(took).to be >= 0.28
    expect(took).to be < 1.0 * GatewaySpec::SLACK
  end

  it 'timeout: applies to an internal sub-request as well' do
    body, took = timed { get_ok('/internal_timeout', timeout: 10) }
    expect(body).to eq('Gateway::TimeoutError')
    expect(took).to be >= 0.28
    expect(took).to be < 1.0 * GatewaySpec::SLACK
  end

  it 'a timeout: below one millisecond still times out (it is not "no timeout")' do
    body, took = timed { get_ok('/tiny_timeout', timeout: 10) }
    expect(body).to eq('Gateway::TimeoutError')
    expect(took).to be < 1.0 * GatewaySpec::SLACK
  end

  it 'bad arguments raise ArgumentError naming what is wrong, before anything is sent' do
    r = http_get(@port, '/bad_args')
    expect(r.status).to eq(200)
    expect(r.body.split("\n")).to eq([
      'sub_request: target must be a String, got :sym',
      'sub_request: body must be a String',
      'sub_request: timeout must be a positive number',
      'sub_request: timeout must be a positive number',
      'sub_request: timeout must be at most 86400 seconds',
      'sub_request: unsupported method BREW',
      'sub_request: target must be a location path ("/x") or an http://, https://, h2c:// or h2:// URL, got ftp://x/'
    ])
  end

  it 'nested sub-requests (a chain 10 deep) work' do
    expect(get_ok('/depth?10')).to eq('bottom')
  end

  # 16 deep the sub-request raises: that level's location answers 500, the
  # one above it 200 "self:500", and every level above that 200 "self:200".
  it 'a location that sub-requests itself is cut off 16 deep: 200 "self:200", the cut logged, the worker keeps serving' do
    pid = worker_pid(@port)
    begin
      r = http_get(@port, '/self', timeout: 3)
      expect([r.status, r.body]).to eq([200, 'self:200'])
      expect(@gw.log).to include('sub-request to /self: nested 16 deep (does a location sub-request itself?)')
      expect(http_get(@port, '/fast', timeout: 2).body).to eq('fast')
    rescue GatewaySpec::TimeoutError
      # A wedged worker allocates without bound and ignores SIGTERM: end it now.
      Process.kill('KILL', pid) unless process_gone?(pid)
      raise
    end
    expect(worker_pid(@port)).to eq(pid)
  end

  # Overlap: 1 s each, so 1 s + slack(0.5) stays under the serial 3 s for
  # any slack below 4.
  it 'Async::HTTP.all runs 3 sub-requests of 1 s each in parallel (< 1 s + 0.5 s x slack in all, serially 3 s), results in order' do
    body, took = timed { get_ok('/all3') }
    expect(body).to eq('a,b,c')
    expect(took).to be >= 1.0
    expect(took).to be < 1.0 + slack(0.5)
  end

  it 'Async::HTTP.all returns the responses in the given order, not in completion order' do
    expect(get_ok('/all_order')).to eq('first,second,third')
  end

  it 'Async::HTTP.all accepts URLs, internal paths and started Tasks together' do
    expect(get_ok('/all_mixed')).to eq('200:sibling-hello,200:task,201:target-body q=m')
  end

  it 'Async::HTTP.start returns Tasks that run in parallel; join returns each Response' do
    body, took = timed { get_ok('/start_join') }
    expect(body).to eq('three,two,one')
    expect(took).to be < 1.0 + slack(0.5) # 3 x 1 s: serially 3 s
  end

  it 'Async::HTTP.last_response is the latest sub-request Response' do
    expect(get_ok('/last')).to eq('201|target-body q=last')
  end

  it 'Nginx::Async::HTTP.sub_request(path, args) sends args as the query string, as ngx_mruby' do
    expect(get_ok('/ngx_args')).to eq('target-body q=x=1&y=2')
  end

  it 'a response header repeated by the target is one field in res.headers, joined with ", "' do
    expect(get_ok('/sub_twice')).to start_with('a=1, b=2|1|')
  end

  it 'the ngx_mruby form Nginx::Async::HTTP.sub_request + last_response works' do
    expect(get_ok('/ngx_compat')).to eq('target-body q=ngx')
  end

  it 'a sub-request in flight (1 s) does not delay a fast request on the same single worker' do
    slow = connect(@port)
    slow.request('GET', '/sub_slow_marked', 'Connection' => 'close')
    poll('the slow request to be in its handler', timeout: 3) { @gw.log.include?('sub-request-in-flight') }
    fast, took = timed { http_get(@port, '/fast') }
    expect([fast.status, fast.body]).to eq([200, 'fast'])
    expect(took).to be < slack(0.5) # the sub-request takes 1 s; the pending check below is the proof
    expect(IO.select([slow.sock], nil, nil, 0)).to be_nil, 'the slow response came before its sub-request ended'
    expect(slow.read_response.body).to eq('marked')
  end

  it 'a body_filter returning a String replaces the proxied body' do
    r = http_get(@port, '/f_upcase')
    expect([r.status, r.body]).to eq([200, 'HELLO FROM UPSTREAM'])
    expect(r['content-length']).to eq('HELLO FROM UPSTREAM'.bytesize.to_s) if r['content-length']
  end

  it 'a body_filter returning a non-String keeps the proxied body' do
    r = http_get(@port, '/f_keep')
    expect([r.status, r.body]).to eq([200, 'hello from upstream'])
  end

  it 'a body_filter may call Async.sleep and Async::HTTP.sub_request' do
    r = http_get(@port, '/f_async')
    expect([r.status, r.body]).to eq([200, 'target-body q=f+hello from upstream'])
  end

  def abort_many(path, times)
    req = build_request('GET', path)
    deadline = GatewaySpec.now + 60 * GatewaySpec::SLACK
    times.times do |i|
      raise 'the abort loop took too long' if GatewaySpec.now > deadline
      s = Socket.new(:INET, :STREAM)
      s.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack('ii')) if i.odd?
      s.connect(Socket.sockaddr_in(@port, '127.0.0.1'))
      begin
        s.write(req)
      rescue Errno::EPIPE, Errno::ECONNRESET
        nil
      end
      s.close
    end
  end

  it '1000 clients aborting during an internal sub-request leave the same worker alive and serving' do
    pid = worker_pid(@port)
    abort_many('/sub_slow', 1000)
    # Sleeps as long as the abandoned sub-requests: all of them are over when it answers.
    expect(get_ok('/sub_slow', timeout: 10)).to eq('slow')
    expect(get_ok('/sub_target')).to start_with('201|')
    expect(worker_pid(@port)).to eq(pid)
    expect(@gw.log).not_to match(GatewaySpec::SANITIZER_REPORT)
    expect(@gw.log).not_to match(GatewaySpec::CRASH_REPORT)
  end

  it 'a client abort during a URL sub-request hangs up on the upstream at once (the exchange is cancelled)' do
    c = connect(@port)
    c.request('GET', '/url_sub_held')
    poll('the upstream to get the sub-request', timeout: 3) { @hold.accepted == 1 }
    c.sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack('ii'))
    c.close
    hung_up_after = @hangups.pop
    expect(hung_up_after).not_to be_nil, 'the gateway kept the upstream exchange of a vanished client'
    expect(hung_up_after).to be < 1.0 * GatewaySpec::SLACK
    expect(get_ok('/fast')).to eq('fast')
  end

  it '1000 clients aborting during a URL sub-request leave both workers alive and serving' do
    pid = worker_pid(@port)
    sibling_pid = worker_pid(@sibling)
    abort_many('/url_sub_slow', 1000)
    expect(get_ok('/url_sub_slow', timeout: 10)).to eq('sibling-late')
    expect(get_ok('/url_sub')).to eq('200|yes|up:GET /n x-y= body=')
    expect(worker_pid(@port)).to eq(pid)
    expect(worker_pid(@sibling)).to eq(sibling_pid)
    expect(@gw.log).not_to match(GatewaySpec::SANITIZER_REPORT)
    expect(@gw.log).not_to match(GatewaySpec::CRASH_REPORT)
  end

  it '1000 clients aborting during Async::HTTP.all (internal and URL targets) leave the same worker alive and serving' do
    pid = worker_pid(@port)
    abort_many('/all_slow', 1000)
    expect(get_ok('/all_slow', timeout: 10)).to eq('a,sibling-late,c')
    expect(worker_pid(@port)).to eq(pid)
    expect(@gw.log).not_to match(GatewaySpec::SANITIZER_REPORT)
    expect(@gw.log).not_to match(GatewaySpec::CRASH_REPORT)
  end

  it 'aborting clients whose pipelined requests wait behind a sub-request leave the worker serving' do
    pid = worker_pid(@port)
    req = build_request('GET', '/sub_slow') * 3
    300.times do |i|
      s = Socket.new(:INET, :STREAM)
      s.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack('ii')) if i.odd?
      s.connect(Socket.sockaddr_in(@port, '127.0.0.1'))
      begin
        s.write(req)
      rescue Errno::EPIPE, Errno::ECONNRESET
        nil
      end
      s.close
    end
    expect(get_ok('/sub_slow', timeout: 10)).to eq('slow')
    expect(worker_pid(@port)).to eq(pid)
  end
end
