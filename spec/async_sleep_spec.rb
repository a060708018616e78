# Async.sleep / Nginx::Async.sleep: a handler's fiber parks on a timer while
# the worker keeps serving everyone else. Proves the timer never fires early,
# that a sleeping request never delays another one on the same single worker,
# that errors after a sleep are contained, and that clients vanishing while
# their fiber sleeps leave nothing dangling.
require_relative 'spec_helper'

RSpec.describe 'Async.sleep' do
  before(:each) do
    # ELAPSED_US: microseconds between two mruby Time objects (Time.now has
    # usec precision in mruby; integer arithmetic avoids Float rounding).
    config = <<~'RUBY'
      # Elapsed time around Async.sleep(0.01), in microseconds.
      location "/dt10ms" do
        t0 = Time.now
        Async.sleep 0.01
        t1 = Time.now
        ELAPSED_US.to_s
      end

      # A Float number of seconds.
      location "/float" do
        t0 = Time.now
        Async.sleep 0.05
        t1 = Time.now
        ELAPSED_US.to_s
      end

      # ngx_mruby's form: milliseconds.
      location "/ngx30" do
        t0 = Time.now
        Nginx::Async.sleep 30
        t1 = Time.now
        Nginx.rputs ELAPSED_US.to_s
      end

      # Nginx::Async.sleep(<query>): "0", "-1", "1.5".
      location "/ngx_bad" do |req|
        q = req.query
        ms = q.include?(".") ? q.to_f : q.to_i
        Nginx::Async.sleep ms
        Nginx.echo "slept #{ms.inspect}"
      end

      location "/slow1s" do
        Gateway.log(:notice, "slow-request-in-flight")
        Async.sleep 1
        "slow"
      end

      location "/sleep200ms" do
        Async.sleep 0.2
        "late"
      end

      # An absurdly long sleep: rejected (ArgumentError) or really sleeping.
      location "/huge" do
        Async.sleep 1e300
        "woke-up"
      end

      location "/boom_after_sleep" do
        Async.sleep 0.01
        raise "boom-after-async-sleep"
      end
    RUBY
    gateway_with(config.gsub('ELAPSED_US', '((t1.to_i - t0.to_i) * 1_000_000 + (t1.usec - t0.usec))'), fast: true)
  end

  def elapsed
    t = GatewaySpec.now
    yield
    GatewaySpec.now - t
  end

  it 'Async.sleep(0.01) never returns early: 200 sequential and concurrent requests all measure >= 10 ms' do
    dts = []
    100.times do
      r = http_get(@port, '/dt10ms')
      expect(r.status).to eq(200)
      dts << r.body.to_i
    end
    lock = Mutex.new
    threads = 10.times.map do
      Thread.new do
        c = GatewaySpec::Conn.new(@port)
        begin
          10.times do
            c.request('GET', '/dt10ms')
            r = c.read_response(timeout: 10)
            lock.synchronize { dts << (r.status == 200 ? r.body.to_i : -r.status) }
          end
        ensure
          c.close
        end
      end
    end
    threads.each(&:join)
    expect(dts.size).to eq(200)
    early = dts.select { |us| us < 10_000 }
    expect(early).to be_empty, "#{early.size} of 200 sleeps returned early (µs): #{early.first(20).inspect}"
  end

  it 'Async.sleep takes a Float number of seconds' do
    r = http_get(@port, '/float')
    expect(r.status).to eq(200)
    expect(r.body.to_i).to be >= 50_000
    expect(r.body.to_i).to be < 1_000_000 * GatewaySpec::SLACK
  end

  it 'Nginx::Async.sleep takes milliseconds' do
    r = http_get(@port, '/ngx30')
    expect(r.status).to eq(200)
    expect(r.body.to_i).to be >= 30_000
    expect(r.body.to_i).to be < 1_000_000 * GatewaySpec::SLACK
  end

  %w[0 -1 1.5].each do |bad|
    it "Nginx::Async.sleep(#{bad}) raises ArgumentError: a 500, and the message is logged" do
      r = http_get(@port, "/ngx_bad?#{bad}")
      expect(r.status).to eq(500)
      expect(r.body).not_to include('slept')
      poll("the ArgumentError for #{bad} in the log", timeout: 3) do
        @gw.log =~ /ArgumentError/ && @gw.log.include?("got #{bad}")
      end
    end
  end

  it 'Async.sleep(1e300) neither returns at once nor crashes the worker (rejected with a 500, or still asleep)' do
    pid = worker_pid(@port)
    c = connect(@port)
    c.request('GET', '/huge', 'Connection' => 'close')
    r = begin
      c.read_response(timeout: 0.5)
    rescue GatewaySpec::TimeoutError
      :still_asleep
    end
    expect(r == :still_asleep || r.status == 500).to be(true), "answered #{r.inspect}"
    expect(http_get(@port, '/fast').body).to eq('fast')
    expect(worker_pid(@port)).to eq(pid)
  end

  it 'pipelined requests behind a sleeping one are answered in order' do
    c = connect(@port)
    c.write(build_request('GET', '/sleep200ms') + build_request('GET', '/fast') + build_request('GET', '/dt10ms'))
    a = c.read_response
    b = c.read_response
    d = c.read_response
    expect([a.body, b.body]).to eq(%w[late fast])
    expect(d.body.to_i).to be >= 10_000
  end

  it 'a slow request (sleeping 1 s) does not delay a fast one on the same single worker' do
    slow = connect(@port)
    t_slow = GatewaySpec.now
    slow.request('GET', '/slow1s', 'Connection' => 'close')
    poll('the slow request to be in its handler', timeout: 3) { @gw.log.include?('slow-request-in-flight') }
    fast = nil
    took = elapsed { fast = http_get(@port, '/fast') }
    expect([fast.status, fast.body]).to eq([200, 'fast'])
    expect(took).to be < slack(0.5) # the slow one sleeps 1 s; the pending check below is the proof
    expect(IO.select([slow.sock], nil, nil, 0)).to be_nil, 'the slow response came before its sleep ended'
    r = slow.read_response(timeout: 5)
    expect([r.status, r.body]).to eq([200, 'slow'])
    expect(GatewaySpec.now - t_slow).to be >= 1.0
  end

  it '100 concurrent requests sleeping 0.2 s on one worker all complete in well under 100 x 0.2 s' do
    conns = Array.new(100) { connect(@port) }
    t = GatewaySpec.now
    conns.each { |c| c.request('GET', '/sleep200ms', 'Connection' => 'close') }
    results = conns.map { |c| c.read_response(timeout: 10) }
    took = GatewaySpec.now - t
    expect(results.map { |r| [r.status, r.body] }.uniq).to eq([[200, 'late']])
    expect(took).to be >= 0.2
    expect(took).to be < 2.0 * GatewaySpec::SLACK # serially: 20 s
  end

  it 'an exception raised after Async.sleep gives a 500 and the worker keeps serving' do
    pid = worker_pid(@port)
    r = http_get(@port, '/boom_after_sleep')
    expect(r.status).to eq(500)
    expect(r.body).not_to include('boom-after-async-sleep')
    poll('the error in the log', timeout: 3) { @gw.log.include?('boom-after-async-sleep') }
    expect(http_get(@port, '/fast').body).to eq('fast')
    expect(http_get(@port, '/dt10ms').status).to eq(200)
    expect(worker_pid(@port)).to eq(pid)
  end

  it 'an exception raised after Async.sleep on a keep-alive connection leaves the connection usable' do
    c = connect(@port)
    c.request('GET', '/boom_after_sleep')
    expect(c.read_response.status).to eq(500)
    c.request('GET', '/fast')
    r = c.read_response
    expect([r.status, r.body]).to eq([200, 'fast'])
  end

  it '2000 clients disconnecting while their handler sleeps leave the same worker alive and serving' do
    pid = worker_pid(@port)
    req = build_request('GET', '/sleep200ms')
    deadline = GatewaySpec.now + 60 * GatewaySpec::SLACK
    2000.times do |i|
      raise 'the disconnect loop took too long' if GatewaySpec.now > deadline
      s = Socket.new(:INET, :STREAM)
      # Every other one closes with a reset instead of a FIN.
      s.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack('ii')) if i.odd?
      s.connect(Socket.sockaddr_in(@port, '127.0.0.1'))
      begin
        s.write(req)
      rescue Errno::EPIPE, Errno::ECONNRESET
        nil
      end
      s.close
    end
    # This request sleeps as long as the abandoned ones: when it answers,
    # every timer armed for them has expired or been cancelled.
    r = http_get(@port, '/sleep200ms', timeout: 10)
    expect([r.status, r.body]).to eq([200, 'late'])
    expect(http_get(@port, '/fast').body).to eq('fast')
    expect(http_get(@port, '/dt10ms').status).to eq(200)
    expect(worker_pid(@port)).to eq(pid)
    expect(@gw.log).not_to match(GatewaySpec::SANITIZER_REPORT)
    expect(@gw.log).not_to match(GatewaySpec::CRASH_REPORT)
  end
end
