# Hardening: slow clients. Slowloris (a header byte at a time), a stalled
# body, a client that never reads its response, and Debian's slowhttptest:
# the worker cuts them off by its timeouts (limits:) and keeps answering
# other clients promptly all the while.
#
# Every loop here is bounded in count and in time; only 127.0.0.1.
require_relative 'spec_helper'
require 'json'

RSpec.describe 'hardening: slow clients' do
  HARDENING_PROBE_BOUND = 0.5 # seconds (x GATEWAY_SPEC_SLACK) a probe request may take during an attack

  def start_slow_gateway(limits)
    lim = limits.map { |k, v| "#{k}: #{v}" }.join(', ')
    gateway_with(<<~RUBY, 'error_log :stderr, level: :info', server: "workers: 1, limits: { #{lim} }", status: true)
      location "/probe" do "probe" end
      location "/big" do "x" * (8 * 1024 * 1024) end
      location "/" do |req| "\#{req.path}:\#{req.body.size}" end
    RUBY
    @worker = worker_pid
  end

  # Seconds one GET /probe on a fresh connection takes (fails unless it is a 200 "probe").
  def probe_seconds
    t = GatewaySpec.now
    r = http_get(@port, '/probe', timeout: 2)
    expect([r.status, r.body]).to eq([200, 'probe'])
    GatewaySpec.now - t
  end

  def my_status
    j = JSON.parse(http_get(@port, '/status').body)
    j['workers'].find { |w| w['pid'] == j['served_by'] }
  end

  # Raw client sockets whose close by the gateway is tracked: `closed_at`
  # (seconds since `start`) and what the gateway sent before closing.
  class HardeningSlowClient
    attr_reader :sock, :closed_at, :received

    def initialize(port)
      @sock = Socket.tcp('127.0.0.1', port, connect_timeout: 2)
      @received = +''.b
      @closed_at = nil
    end

    def closed?
      !@closed_at.nil?
    end

    # Writes `bytes` without blocking; a failed write means the peer closed.
    def send_bytes(bytes, t)
      return if closed?
      @sock.write_nonblock(bytes, exception: false)
    rescue Errno::EPIPE, Errno::ECONNRESET
      @closed_at ||= t
    end

    # Reads what is there; EOF or reset marks the connection closed at t.
    def poll_read(t)
      return if closed?
      loop do
        data = @sock.read_nonblock(65_536, exception: false)
        return if data == :wait_readable
        if data.nil?
          @closed_at = t
          return
        end
        @received << data
      end
    rescue Errno::ECONNRESET, Errno::EPIPE
      @closed_at ||= t
    end

    def close
      @sock.close unless @sock.closed?
    end
  end

  def slow_clients(n)
    @slow = Array.new(n) { HardeningSlowClient.new(@port) }
  end

  after(:each) { (@slow || []).each(&:close) }

  # Drives `clients` every `interval` s (the block sends their next bytes)
  # until all are closed or `limit` s pass; probes at the given times. Returns
  # [seconds until the last close (nil if some stayed open), probe times].
  def drive(clients, interval:, limit:, probes_at: [])
    start = GatewaySpec.now
    probe_times = []
    pending_probes = probes_at.dup
    tick = 0
    loop do
      t = GatewaySpec.now - start
      open = clients.reject(&:closed?)
      break if open.empty? || t > limit
      yield(open, tick, t)
      ready = IO.select(open.map(&:sock), nil, nil, 0)
      (ready ? ready[0] : []).each { |s| open.find { |c| c.sock == s }.poll_read(GatewaySpec.now - start) }
      probe_times << probe_seconds if !pending_probes.empty? && t >= pending_probes.first && pending_probes.shift
      tick += 1
      next_at = start + tick * interval
      sleep([next_at - GatewaySpec.now, 0].max)
    end
    last = clients.all?(&:closed?) ? clients.map(&:closed_at).max : nil
    [last, probe_times]
  end

  def statuses(clients)
    clients.map { |c| c.received[%r{\AHTTP/1\.1 (\d{3}) }, 1] || (c.received.empty? ? 'closed' : 'other') }.tally
  end

  # ---------------------------------------------------------------------------
  it '200 slowloris connections (a header byte every 0.2 s) are all closed by header_timeout: 1, ' \
     'within about 2 s, with 408 or a plain close' do
    start_slow_gateway(header_timeout: 1)
    clients = slow_clients(200)
    request = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: #{'s' * 200}\r\n"
    last, = drive(clients, interval: 0.2, limit: 4 * GatewaySpec::SLACK) do |open, tick, t|
      open.each { |c| c.send_bytes(request[tick % request.size], t) }
    end
    open = clients.count { |c| !c.closed? }
    expect(open).to eq(0), "#{open} of 200 slowloris connections still open after #{4 * GatewaySpec::SLACK}s"
    expect(last).to be <= 2.2 * GatewaySpec::SLACK
    expect(clients.map(&:closed_at).min).to be >= 0.8, 'closed before header_timeout'
    expect(statuses(clients).keys - %w[408 closed]).to eq([]), statuses(clients).inspect
    expect(worker_pid(@port)).to eq(@worker)
  end

  it 'a probe on a fresh connection is answered in < 0.5 s x slack while 200 slowloris connections trickle' do
    start_slow_gateway(header_timeout: 1)
    clients = slow_clients(200)
    request = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: #{'s' * 200}\r\n"
    _, probes = drive(clients, interval: 0.2, limit: 4 * GatewaySpec::SLACK, probes_at: [0.1, 0.3, 0.5, 0.7]) do |open, tick, t|
      open.each { |c| c.send_bytes(request[tick % request.size], t) }
    end
    expect(probes.size).to eq(4)
    expect(probes.max).to be < HARDENING_PROBE_BOUND * GatewaySpec::SLACK, "probe times #{probes.map { |x| x.round(3) }}"
  end

  it '200 connections whose body stalls are closed by body_timeout: 0.5 (408 or a plain close), ' \
     'probes answered in < 0.5 s x slack meanwhile' do
    start_slow_gateway(body_timeout: 0.5, header_timeout: 10)
    clients = slow_clients(200)
    clients.each { |c| c.send_bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789", 0) }
    last, probes = drive(clients, interval: 0.05, limit: 3 * GatewaySpec::SLACK, probes_at: [0.1, 0.3]) { nil }
    expect(clients.count { |c| !c.closed? }).to eq(0)
    expect(last).to be_between(0.4, 1.5 * GatewaySpec::SLACK)
    expect(statuses(clients).keys - %w[408 closed]).to eq([]), statuses(clients).inspect
    expect(probes.max).to be < HARDENING_PROBE_BOUND * GatewaySpec::SLACK, "probe times #{probes.map { |x| x.round(3) }}"
    expect(worker_pid(@port)).to eq(@worker)
  end

  it '10 clients that never read an 8 MiB response are cut by send_timeout: 0.5; the worker serves meanwhile' do
    start_slow_gateway(send_timeout: 0.5)
    readers = Array.new(10) do
      c = connect(@port, rcvbuf: 4096)
      c.request('GET', '/big')
      c
    end
    # Nobody reads. The worker still answers, promptly.
    probes = Array.new(3) { probe_seconds.tap { sleep 0.1 } }
    expect(probes.max).to be < HARDENING_PROBE_BOUND * GatewaySpec::SLACK, "probe times #{probes.map { |x| x.round(3) }}"
    # All 10 are closed by the gateway (only the status request itself is left).
    poll('the non-reading connections to be closed', timeout: 3) { my_status['connections_active'] == 1 }
    # Each got less than the whole response, then the close.
    readers.each do |c|
      expect(c.wait_closed(within: 10)).not_to be_nil
      expect(c.pending.bytesize).to be < 8 * 1024 * 1024
    end
    expect(@gw.log).to include('send timed out')
    expect(worker_pid(@port)).to eq(@worker)
  end

  # A slow upstream: the gateway must pass what it has on at once (docs/upstreams.md,
  # "Proxying": "each piece goes to the client as it arrives"), not hold it back until
  # more comes.
  it 'a slowly streamed upstream response reaches the client as it comes (head + first bytes in < 0.5 s x slack)' do
    up = fake_upstream do |peer|
      next unless peer.read_request(timeout: 5)
      peer.write("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
      sleep 2 # the rest comes later
      peer.write('world')
    rescue Errno::EPIPE, Errno::ECONNRESET, IOError
      nil
    end
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      server listen: "127.0.0.1:#{@port}", workers: 1 do
        location "/stream", proxy_pass: "http://127.0.0.1:#{up.port}"
      end
    RUBY
    c = connect(@port)
    t = GatewaySpec.now
    c.request('GET', '/stream')
    first = nil
    deadline = t + 1.5 * GatewaySpec::SLACK
    while GatewaySpec.now < deadline # bounded: 1.5 s
      c.fill(deadline, 'the first bytes') rescue break
      if c.pending.include?("\r\n\r\nhello")
        first = GatewaySpec.now - t
        break
      end
    end
    expect(first).not_to be_nil, "nothing of the response within #{1.5 * GatewaySpec::SLACK} s " \
                                 "(got #{c.pending.inspect}): held back until the upstream sends more"
    expect(first).to be < HARDENING_PROBE_BOUND * GatewaySpec::SLACK
    r = c.read_response(timeout: 5)
    expect([r.status, r.body]).to eq([200, 'helloworld'])
  end

  # ---------------------------------------------------------------------------
  HARDENING_SLOWHTTPTEST = '/usr/bin/slowhttptest'

  it 'slowhttptest -H (slowloris), 1000 connections for 5 s: probes stay prompt, the worker survives' do
    unless File.executable?(HARDENING_SLOWHTTPTEST)
      skip "#{HARDENING_SLOWHTTPTEST} is not installed (Debian package slowhttptest: apt-get install -y slowhttptest)"
    end
    start_slow_gateway(header_timeout: 2)
    prefix = File.join(spec_dir, 'slowhttptest')
    out = File.join(spec_dir, 'slowhttptest.out')
    pid = Process.spawn(HARDENING_SLOWHTTPTEST, '-c', '1000', '-H', '-i', '1', '-r', '500', '-t', 'GET',
                        '-u', "http://127.0.0.1:#{@port}/", '-x', '24', '-p', '3', '-l', '5',
                        '-g', '-o', prefix, in: File::NULL, out: out, err: [:child, :out], pgroup: true)
    probes = []
    status = nil
    begin
      deadline = GatewaySpec.now + 15
      while GatewaySpec.now < deadline # bounded: at most 15 s, one probe per 0.2 s
        _, status = Process.waitpid2(pid, Process::WNOHANG)
        break if status
        probes << probe_seconds
        sleep 0.2
      end
    ensure
      unless status
        Process.kill('KILL', pid)
        Process.waitpid(pid)
      end
    end
    expect(status).not_to be_nil, 'slowhttptest still running after 15 s (killed)'
    csv = File.exist?("#{prefix}.csv") ? File.read("#{prefix}.csv").lines.drop(1).map { |l| l.split(',').map(&:to_i) } : []
    expect(csv).not_to be_empty, "no slowhttptest statistics; output:\n#{GatewaySpec.tail(File.read(out))}"
    peak = csv.map { |row| row[3] }.max
    puts "    (slowhttptest: peak #{peak} connected, #{probes.size} probes, slowest #{(probes.max * 1000).round} ms)"
    expect(peak).to be >= 500, "slowhttptest only got #{peak} connections up: #{csv.inspect}"
    expect(csv.map { |row| row[4] }).to all(be > 0) # its own probe: "service available"
    expect(probes.size).to be >= 10
    expect(probes.max).to be < HARDENING_PROBE_BOUND * GatewaySpec::SLACK, "probe times #{probes.map { |x| x.round(3) }}"
    expect(worker_pid(@port)).to eq(@worker)
  end
end
