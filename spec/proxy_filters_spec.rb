# header_filter: on a proxied location, Ruby runs on the upstream's response
# head before it goes to the client (status and headers may change; async
# calls allowed), streamed or buffered, alone or with a body_filter.
require_relative 'spec_helper'

RSpec.describe 'proxy_pass header_filter' do
  before(:each) do
    @up = fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        if req.target.start_with?('/big')
          body = 'b' * (1024 * 1024)
          peer.respond(200, { 'X-Up' => 'yes' }, body)
        elsif req.method == 'HEAD'
          peer.write("HTTP/1.1 200 OK\r\nX-Up: yes\r\nContent-Length: 42\r\n\r\n")
        else
          peer.respond(200, { 'X-Up' => 'yes' }, "up:#{req.target}")
        end
      end
    end
    gateway_with(<<~RUBY, 'error_log :stderr, level: :info')
      location "/plain", proxy_pass: "http://127.0.0.1:#{@up.port}",
               header_filter: ->(req) {
                 req.headers_out["X-Filtered"] = req.headers_out["X-Up"] + "!"
                 req.status = 203 if req.status == 200
               }
      location "/big", proxy_pass: "http://127.0.0.1:#{@up.port}",
               header_filter: ->(req) { req.headers_out["X-Filtered"] = "big" }
      location "/slow", proxy_pass: "http://127.0.0.1:#{@up.port}",
               header_filter: ->(req) { Async.sleep(1.0); req.headers_out["X-Slept"] = "1.0" }
      location "/raise", proxy_pass: "http://127.0.0.1:#{@up.port}",
               header_filter: ->(req) { raise "header filter broke" }
      location "/both", proxy_pass: "http://127.0.0.1:#{@up.port}",
               header_filter: ->(req) { req.headers_out["X-Head"] = "1" },
               body_filter: ->(body, req) { body.upcase }
      location "/sub" do
        r = Async::HTTP.sub_request("/plain/x")
        "\#{r.status}|\#{r.headers["x-filtered"]}|\#{r.body}"
      end
    RUBY
    @worker = worker_pid
  end

  it 'changes the status and adds a header before the head goes out' do
    r = http_get(@port, '/plain/a')
    expect([r.status, r['x-filtered'], r.body]).to eq([203, 'yes!', 'up:/plain/a'])
  end

  it 'a streamed 1 MiB body follows the filtered head intact' do
    r = http_get(@port, '/big/a', timeout: 10)
    expect([r.status, r['x-filtered'], r.body.bytesize]).to eq([200, 'big', 1024 * 1024])
  end

  it 'may wait (Async.sleep) without blocking the worker; the head waits for it' do
    t = Thread.new { http_get(@port, '/slow/a') }
    sleep 0.05
    fast, took = timed { http_get(@port, '/pid') }
    expect(fast.body.to_i).to eq(@worker)
    expect(t.alive?).to be(true), 'the filter (Async.sleep 1 s) was over before /pid was answered'
    expect(took).to be < slack(0.5)
    r = t.value
    expect([r.status, r['x-slept'], r.body]).to eq([200, '1.0', 'up:/slow/a'])
  end

  it 'a HEAD whose bodyless answer completes while the filter waits is answered with the filtered head' do
    c = connect(@port)
    c.write("HEAD /slow/h HTTP/1.1\r\nHost: x\r\n\r\n")
    r = c.read_response(head: true)
    expect([r.status, r['x-slept'], r['content-length']]).to eq([200, '1.0', '42'])
    c.write("GET /pid HTTP/1.1\r\nHost: x\r\n\r\n") # the connection goes on
    expect(c.read_response.body.to_i).to eq(@worker)
  end

  it 'a filter that raises gives 500, logged, and the worker goes on' do
    r = http_get(@port, '/raise/a')
    expect(r.status).to eq(500)
    poll('the error in the log') { @gw.log.include?('header filter broke') }
    expect(worker_pid).to eq(@worker)
  end

  it 'runs before the body_filter when both are set (buffered)' do
    r = http_get(@port, '/both/a')
    expect([r.status, r['x-head'], r.body]).to eq([200, '1', 'UP:/BOTH/A'])
  end

  it 'applies to a sub-request to the location too' do
    expect(http_get(@port, '/sub').body).to eq('203|yes!|up:/plain/x')
  end

  it 'a client that leaves while the filter waits: the upstream exchange is dropped, the worker goes on' do
    c = connect(@port)
    c.write("GET /slow/gone HTTP/1.1\r\nHost: x\r\n\r\n")
    sleep 0.05
    c.close
    sleep 0.3 # past the filter's sleep: nothing may resume on the freed request
    expect(http_get(@port, '/plain/after').status).to eq(203)
    expect(@gw.log).not_to match(GatewaySpec::CRASH_REPORT)
  end

  it 'header_filter: that is not a Proc is a config error naming the line' do
    status, out, path = check_config(<<~RUBY)
      server listen: "127.0.0.1:#{free_port}" do
        location "/p", proxy_pass: "http://127.0.0.1:9/", header_filter: "x"
      end
    RUBY
    expect(status).to eq(1), out
    expect(out).to include("#{path}:2")
    expect(out).to include('header_filter')
  end
end

# A server whose only Ruby is a header filter still gets the precise timer:
# Async.sleep in the filter never returns early.
RSpec.describe 'header_filter: on a server with no Ruby handler' do
  before(:each) do
    @up = fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        peer.respond(200, {}, "up:#{req.target}")
      end
    end
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: [@port])
      server listen: "127.0.0.1:#{@port}", workers: 1 do
        location "/", proxy_pass: "http://127.0.0.1:#{@up.port}",
                 header_filter: ->(req) {
                   t0 = Time.now
                   Async.sleep 0.01
                   t1 = Time.now
                   req.headers_out["X-Slept-Us"] = ((t1.to_i - t0.to_i) * 1_000_000 + (t1.usec - t0.usec)).to_s
                 }
      end
    RUBY
  end

  it 'Async.sleep(0.01) in the filter never returns early (100 requests)' do
    c = connect(@port)
    slept = 100.times.map do |i|
      c.request('GET', "/#{i}")
      r = c.read_response(timeout: 10)
      expect([r.status, r.body]).to eq([200, "up:/#{i}"])
      r['x-slept-us'].to_i
    end
    early = slept.select { |us| us < 10_000 }
    expect(early).to be_empty, "#{early.size} of 100 sleeps returned early (µs): #{early.first(20).inspect}"
    warn "    (header-filter sleeps, µs: median #{slept.sort[50]}, p90 #{slept.sort[90]}, max #{slept.max})"
  end
end
