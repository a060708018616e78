# Hardening: 2000 clients that vanish while their request waits on something
# — an Async.sleep timer, an internal sub-request, a URL sub-request to a slow
# upstream, a streamed proxied response, a DNS lookup that is never answered.
# Afterwards the worker is the same process, its gauges are back to zero
# (fibers_parked, timers_pending, subrequests_in_flight), its descriptors are
# back near where they started, its RSS grew < 8 MiB, and (under ASan) no
# sanitizer report was logged (the harness fails the example on one).
#
# Clients alternate a plain close (FIN) and a reset (RST). Every abort loop is
# bounded in count (2000) and time (25 s).
require_relative 'spec_helper'
require 'json'

RSpec.describe 'hardening: 2000 aborts' do
  HARDENING_ABORTS = 2000
  HARDENING_ABORT_TIME = 25 # seconds, at most, for one loop of aborts

  # A UDP socket that receives DNS queries and never answers (never read).
  def silent_udp_port
    @silent = UDPSocket.new
    @silent.bind('127.0.0.1', 0)
    @silent.addr[1]
  end

  after(:each) { @silent&.close }

  def start_abort_gateway(prelude: '', locations: '')
    gateway_with(%(location "/probe" do "probe" end\n#{locations}), prelude, status: true, rss: true)
    @worker = worker_pid
  end

  def my_status
    j = JSON.parse(http_get(@port, '/status').body)
    j['workers'].find { |w| w['pid'] == j['served_by'] }
  end

  # Opens a connection, sends GET path (reads the first bytes of the answer
  # when `read_first`), then closes it: FIN on even rounds, RST on odd ones.
  # Returns how many rounds ran (all of them unless the time bound hit).
  def abort_many(path, n: HARDENING_ABORTS, read_first: false)
    request = "GET #{path} HTTP/1.1\r\nHost: x\r\n\r\n"
    deadline = GatewaySpec.now + HARDENING_ABORT_TIME * GatewaySpec::SLACK
    done = 0
    n.times do |i|
      break if GatewaySpec.now > deadline
      s = Socket.tcp('127.0.0.1', @port, connect_timeout: 2)
      begin
        s.write(request)
        if read_first
          raise "no answer began on #{path} within 2 s" unless IO.select([s], nil, nil, 2 * GatewaySpec::SLACK)
          s.read_nonblock(4096, exception: false)
        end
        s.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack('ii')) if i.odd?
      rescue Errno::EPIPE, Errno::ECONNRESET
        nil
      ensure
        s.close
      end
      done += 1
    end
    done
  end

  # Warm every path (so the baseline includes the allocator's and the VM's
  # first growth), then the baseline: [fds, RSS KiB, requests counter].
  def baseline(path, read_first: false)
    abort_many(path, n: 100, read_first: read_first)
    settle
    [open_fds(@worker), rss_kib(@worker), my_status['requests']]
  end

  def settle
    poll('the gauges to return to 0', timeout: 3) do
      s = my_status
      s['fibers_parked'].zero? && s['timers_pending'].zero? && s['subrequests_in_flight'].zero? &&
        s['connections_active'] == 1
    end
  rescue GatewaySpec::TimeoutError => e
    raise e, "#{e.message}: #{my_status.slice('fibers_parked', 'timers_pending', 'subrequests_in_flight', 'connections_active').inspect}"
  end

  def run_aborts(path, read_first: false)
    fds0, rss0, req0 = baseline(path, read_first: read_first)
    done = abort_many(path, read_first: read_first)
    expect(done).to eq(HARDENING_ABORTS), "only #{done} aborts within #{HARDENING_ABORT_TIME * GatewaySpec::SLACK} s"
    # The requests reached the worker (most of them ran and were cut).
    poll('the worker to have counted the requests', timeout: 3) { my_status['requests'] - req0 >= HARDENING_ABORTS / 2 }
    [fds0, rss0]
  end

  def expect_recovered(fds0, rss0)
    expect(worker_pid(@port)).to eq(@worker)
    settle
    s = my_status
    expect(s.slice('fibers_parked', 'timers_pending', 'subrequests_in_flight'))
      .to eq('fibers_parked' => 0, 'timers_pending' => 0, 'subrequests_in_flight' => 0)
    fds = open_fds(@worker)
    deadline = GatewaySpec.now + 3 * GatewaySpec::SLACK
    while fds > fds0 + 5 && GatewaySpec.now < deadline
      sleep 0.05
      fds = open_fds(@worker)
    end
    growth = rss_kib(@worker) - rss0
    puts "    (after #{HARDENING_ABORTS} aborts: worker fds #{fds0} -> #{fds}, RSS #{format("%+d", growth)} KiB)"
    expect(fds).to be <= fds0 + 5
    expect(growth).to be < 8 * 1024
    expect(http_get(@port, '/probe').body).to eq('probe')
  end

  # ---------------------------------------------------------------------------
  it 'during Async.sleep' do
    start_abort_gateway(locations: <<~RUBY)
      location "/sleep" do
        Async.sleep 5
        "slept"
      end
    RUBY
    fds0, rss0 = run_aborts('/sleep')
    expect(my_status['responses_2xx']).to be < 10 # none of them slept to the end
    expect_recovered(fds0, rss0)
  end

  it 'during an internal sub-request' do
    start_abort_gateway(locations: <<~RUBY)
      location "/inner" do
        Async.sleep 5
        "inner"
      end
      location "/sub" do
        Async::HTTP.sub_request("/inner").body
      end
    RUBY
    fds0, rss0 = run_aborts('/sub')
    expect_recovered(fds0, rss0)
  end

  it 'during a URL sub-request to a slow upstream' do
    up = fake_upstream do |peer| # reads the request, never answers, waits for the hang-up (≤ 10 s)
      next unless peer.read_request(timeout: 5)
      IO.select([peer.sock], nil, nil, 10)
    rescue GatewaySpec::ConnectionClosed, Errno::ECONNRESET
      nil
    end
    start_abort_gateway(locations: <<~RUBY)
      location "/url_sub" do
        Async::HTTP.sub_request("http://127.0.0.1:#{up.port}/slow", timeout: 10).body
      end
    RUBY
    fds0, rss0 = run_aborts('/url_sub')
    expect(up.accepted).to be > 0
    expect_recovered(fds0, rss0)
  end

  it 'during a proxied streamed response (the upstream sends a large body slowly)' do
    # 64 MiB announced; 128 KiB at once (the client sees the answer begin),
    # then 16 KiB every 10 ms, until the gateway hangs up (≤ 10 s).
    up = fake_upstream do |peer|
      next unless peer.read_request(timeout: 5)
      peer.write("HTTP/1.1 200 OK\r\nContent-Length: #{64 * 1024 * 1024}\r\n\r\n#{'z' * 131_072}")
      chunk = 'z' * 16_384
      deadline = GatewaySpec.now + 10
      while GatewaySpec.now < deadline
        peer.write(chunk)
        sleep 0.01
      end
    rescue Errno::EPIPE, Errno::ECONNRESET, IOError
      nil
    end
    start_abort_gateway(locations: %(location "/stream", proxy_pass: "http://127.0.0.1:#{up.port}"))
    # Each client reads the start of the streamed answer, then goes.
    fds0, rss0 = run_aborts('/stream', read_first: true)
    expect_recovered(fds0, rss0)
  end

  it 'during a DNS lookup that is never answered (resolver timeout: 1, tries: 1)' do
    dns = silent_udp_port
    start_abort_gateway(prelude: %(resolver "127.0.0.1:#{dns}", timeout: 1, tries: 1),
                        locations: %(location "/dns", proxy_pass: "http://slow.test:1/"))
    fds0, rss0 = run_aborts('/dns')
    expect_recovered(fds0, rss0)
  end

  # Sustained aborts: the dropped fibers must be collected as they go, so the
  # worker's memory stays bounded however many clients leave early.
  it '10000 aborts during an internal sub-request: RSS growth stays < 8 MiB (dropped fibers are collected)' do
    start_abort_gateway(locations: <<~RUBY)
      location "/inner" do
        Async.sleep 5
        "inner"
      end
      location "/sub" do
        Async::HTTP.sub_request("/inner").body
      end
    RUBY
    _, rss0, = baseline('/sub')
    done = abort_many('/sub', n: 10_000)
    expect(done).to eq(10_000), "only #{done} aborts within #{HARDENING_ABORT_TIME * GatewaySpec::SLACK} s"
    settle
    growth = rss_kib(@worker) - rss0
    puts "    (after 10000 aborts: RSS #{format("%+d", growth)} KiB, #{(growth / 10.0).round(2)} KiB per 1000)"
    expect(growth).to be < 8 * 1024
  end

  it 'during DNS lookups of 2000 different names that are never answered' do
    dns = silent_udp_port
    start_abort_gateway(prelude: %(resolver "127.0.0.1:#{dns}", timeout: 1, tries: 1), locations: <<~RUBY)
      location "/dns_many/" do |req|
        req.proxy_pass "http://n\#{req.path.split('/').last}.slow.test:1/"
      end
    RUBY
    # Distinct names: the name comes from a counter in the path. A first
    # round of 2000 other names warms up (2000 queries in flight at once is
    # the peak both rounds reach), then the baseline, then the round measured.
    abort_names = lambda do |prefix|
      n = 0
      deadline = GatewaySpec.now + HARDENING_ABORT_TIME * GatewaySpec::SLACK
      while n < HARDENING_ABORTS && GatewaySpec.now < deadline
        s = Socket.tcp('127.0.0.1', @port, connect_timeout: 2)
        s.write("GET /dns_many/#{prefix}#{n} HTTP/1.1\r\nHost: x\r\n\r\n")
        s.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack('ii')) if n.odd?
        s.close
        n += 1
      end
      n
    end
    expect(abort_names.call('w')).to eq(HARDENING_ABORTS)
    sleep 1.5 # their lookups time out (1 s)
    settle
    fds0 = open_fds(@worker)
    rss0 = rss_kib(@worker)
    expect(abort_names.call('m')).to eq(HARDENING_ABORTS)
    sleep 1.5
    expect_recovered(fds0, rss0)
  end
end
