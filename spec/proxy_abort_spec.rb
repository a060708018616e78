# Clients that vanish while their request waits on a slow upstream: the
# pending upstream exchange is cancelled (its connection closed, never
# leaked or pooled half-used), the worker survives and keeps serving, and the
# sanitizer build stays silent (the harness fails the example on any report).
require_relative 'spec_helper'

RSpec.describe 'proxy_pass with clients that abort' do
  PROXY_ABORT_ROUNDS = 500

  before(:each) do
    @lock = Mutex.new
    @open = 0       # upstream connections the gateway has not closed yet
    @hangups = 0    # connections the gateway closed before getting an answer
    @answered = 0   # answers written
    @done = 0       # connections whose handler has finished (cut, answered or closed)
    # Reads a request, waits 0.2 s (or until the gateway hangs up), answers.
    @up = fake_upstream do |peer|
      @lock.synchronize { @open += 1 }
      cut = true
      begin
        while peer.read_request(timeout: 30)
          cut = true
          break if IO.select([peer.sock], nil, nil, 0.2) && peer.sock.read_nonblock(1, exception: false).nil?
          peer.respond(200, {}, 'slow-answer')
          @lock.synchronize { @answered += 1 }
          cut = false
        end
      rescue Errno::EPIPE, Errno::ECONNRESET, IOError, GatewaySpec::ConnectionClosed
        nil
      ensure
        @lock.synchronize do
          @open -= 1
          @done += 1
          @hangups += 1 if cut
        end
      end
    end
    prelude = <<~RUBY
      error_log :stderr, level: :info
      upstream :slow, servers: ["127.0.0.1:#{@up.port}"], max_fails: 0
    RUBY
    gateway_with(<<~RUBY, prelude, fast: true)
      location "/slow", proxy_pass: "http://127.0.0.1:#{@up.port}/"
      location "/slow_group", proxy_pass: "http://slow/"
      location "/slow_script" do |req|
        req.proxy_pass "http://slow/"
      end
    RUBY
  end

  def counts
    @lock.synchronize { { open: @open, hangups: @hangups, answered: @answered } }
  end

  # Opens a connection, sends GET path, closes at once; PROXY_ABORT_ROUNDS times.
  def abort_many(path)
    request = build_request('GET', path)
    PROXY_ABORT_ROUNDS.times do
      s = Socket.tcp('127.0.0.1', @port, connect_timeout: 2)
      begin
        s.write(request)
      rescue Errno::EPIPE, Errno::ECONNRESET
        nil
      ensure
        s.close
      end
    end
  end

  def expect_worker_fine(pid)
    expect(@gw.alive?).to be(true)
    expect(worker_pid(@port)).to eq(pid)
    expect(http_get(@port, '/fast').body).to eq('fast')
    r = http_get(@port, '/slow', timeout: 5)
    expect([r.status, r.body]).to eq([200, 'slow-answer'])
  end

  # After the aborts, every exchange the gateway started is cut (or done)
  # and its connection closed; only `pooled` idle ones (+ 2) may stay open.
  # Counted from the accepts: a connection whose handler thread has not run
  # yet is open too (reading only the handlers' count, all zero then, raced).
  def expect_upstream_connections_closed(pooled = 0)
    poll('the gateway to close its upstream connections', timeout: 5) do
      @up.accepted - @lock.synchronize { @done } <= pooled + 2
    end
  rescue GatewaySpec::TimeoutError => e
    raise e, "#{e.message}: #{counts.inspect}, accepted #{@up.accepted}"
  end

  %w[/slow /slow_group /slow_script].each do |path|
    it "#{PROXY_ABORT_ROUNDS} clients closing at once on #{path}: same worker, still serving, upstream connections closed" do
      pid = worker_pid(@port)
      abort_many(path)
      # The gateway must have started some upstream exchanges and cut them.
      poll('the upstream to see connections') { @up.accepted.positive? }
      expect_upstream_connections_closed
      begin # a handler thread may still be starting: give it time, then judge
        poll('the upstream to see a cut exchange', timeout: 5) { counts[:hangups] >= 1 }
      rescue GatewaySpec::TimeoutError
        nil # the expectation below says what was seen
      end
      c = counts
      expect(c[:hangups]).to be >= 1, "no exchange was cut by the gateway: #{c.inspect}, accepted #{@up.accepted}"
      expect_worker_fine(pid)
      expect(@gw.log).not_to match(GatewaySpec::SANITIZER_REPORT)
    end
  end

  it 'a client that hangs up while its request waits is logged, and the upstream sees the hang-up within a second' do
    pid = worker_pid(@port)
    c = connect(@port)
    c.request('GET', '/slow/one')
    poll('the upstream to get the request') { @up.accepted >= 1 && counts[:open] >= 1 }
    c.close
    poll('the upstream to see the hang-up', timeout: 1) { counts[:hangups] >= 1 }
    expect(counts[:answered]).to eq(0)
    poll('the abort to be logged', timeout: 2) { @gw.log.include?('client closed the connection') }
    expect(worker_pid(@port)).to eq(pid)
  end

  it 'aborts mixed with completed requests: every completed one gets the right answer' do
    pid = worker_pid(@port)
    keep = 5.times.map do
      k = connect(@port)
      k.request('GET', '/slow/keep', 'Connection' => 'close')
      k
    end
    abort_many('/slow/abort')
    keep.each do |k|
      r = k.read_response(timeout: 10)
      expect([r.status, r.body]).to eq([200, 'slow-answer'])
    end
    expect_upstream_connections_closed(keep.size)
    expect_worker_fine(pid)
  end
end
