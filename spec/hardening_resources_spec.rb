# Hardening: process resources. Out of file descriptors (EMFILE) the worker
# pauses accepting instead of spinning and recovers once descriptors are
# free; clients that reset mid-response never kill it (SIGPIPE); thousands of
# idle keep-alive connections cost little memory each.
#
# The fd limit is lowered on the running worker with prlimit(1) (util-linux):
# start_gateway spawns the binary itself, and only the worker needs it.
require_relative 'spec_helper'
require 'json'

RSpec.describe 'hardening: resources' do
  def proc_stat(pid)
    stat = File.read("/proc/#{pid}/stat")
    stat[(stat.rindex(')') + 2)..].split
  end

  # User + system CPU seconds the process has used.
  def cpu_seconds(pid)
    f = proc_stat(pid)
    (f[11].to_i + f[12].to_i) / 100.0 # utime, stime (fields 14, 15) in USER_HZ = 100 ticks
  end

  def start_res_gateway(upstream_port: nil, env: {})
    up = upstream_port ? %(location "/stream", proxy_pass: "http://127.0.0.1:#{upstream_port}") : ''
    gateway_with(<<~RUBY, env: env, status: true)
      location "/probe" do "probe" end
      location "/big" do "x" * (8 * 1024 * 1024) end
      #{up}
    RUBY
    @worker = worker_pid
  end

  def my_status
    j = JSON.parse(http_get(@port, '/status').body)
    j['workers'].find { |w| w['pid'] == j['served_by'] }
  end

  def raw_sockets
    @raw_sockets ||= []
  end

  after(:each) { (@raw_sockets || []).each { |s| s.close unless s.closed? } }

  # A connection that resets (RST) when closed.
  def resetting_socket
    s = Socket.tcp('127.0.0.1', @port, connect_timeout: 2)
    s.setsockopt(Socket::SOL_SOCKET, Socket::SO_RCVBUF, 4096)
    s.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack('ii'))
    raw_sockets << s
    s
  end

  # ---------------------------------------------------------------------------
  describe 'out of file descriptors (EMFILE), worker limited to 64 with prlimit' do
    HARDENING_PRLIMIT = '/usr/bin/prlimit'

    before(:each) do
      skip "#{HARDENING_PRLIMIT} (util-linux) is not installed" unless File.executable?(HARDENING_PRLIMIT)
      start_res_gateway
      @fds_before = open_fds(@worker)
      ok = system(HARDENING_PRLIMIT, "--pid=#{@worker}", '--nofile=64:64', out: File::NULL, err: File::NULL)
      raise "prlimit --pid=#{@worker} --nofile=64:64 failed" unless ok
      # 100 idle connections: the kernel completes them all (backlog 4096);
      # the worker runs out of descriptors after about 64 - its own.
      100.times { raw_sockets << Socket.tcp('127.0.0.1', @port, connect_timeout: 2) }
      poll('the worker to log "pausing accepts"', timeout: 3) { @gw.log.include?('pausing accepts') }
    end

    it 'the worker logs "pausing accepts" and does not spin (< 0.5 s of CPU over 2 s)' do
      expect(@gw.log).to match(/accept: Too many open files; pausing accepts/)
      before = cpu_seconds(@worker)
      sleep 2
      used = cpu_seconds(@worker) - before
      puts "    (worker CPU while out of descriptors: #{used.round(2)} s over 2 s; " \
           "#{@gw.log.scan('pausing accepts').size} pause log lines)"
      expect(used).to be < 0.5
      expect(worker_pid_alive?).to be(true)
    end

    it 'connections it did accept are still served while accepts are paused' do
      served = raw_sockets.first(20).count do |s|
        s.write("GET /probe HTTP/1.1\r\nHost: x\r\n\r\n")
        IO.select([s], nil, nil, 2 * GatewaySpec::SLACK) && s.read_nonblock(4096, exception: false).to_s.end_with?('probe')
      end
      expect(served).to be >= 10, "only #{served} of the first 20 connections were answered"
    end

    it 'after the connections close, a probe on a fresh connection is served again' do
      raw_sockets.each(&:close)
      r = poll('a probe to be served', timeout: 5, interval: 0.1) do
        http_get(@port, '/probe', timeout: 1)
      rescue GatewaySpec::TimeoutError, GatewaySpec::ConnectionClosed, SystemCallError
        nil
      end
      expect([r.status, r.body]).to eq([200, 'probe'])
      expect(worker_pid(@port)).to eq(@worker)
      poll('the worker to close the connections', timeout: 5) { open_fds(@worker) <= @fds_before + 3 }
    end

    def worker_pid_alive?
      !process_gone?(@worker)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'clients that reset while a large response is being written (SIGPIPE)' do
    it '20 clients reset mid-way through an 8 MiB response: same worker, still serving' do
      start_res_gateway
      20.times do
        s = resetting_socket
        s.write("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        IO.select([s], nil, nil, 5 * GatewaySpec::SLACK) or raise 'no response started within 5 s'
        s.read_nonblock(1024) # the response began; the rest is still being written
        s.close # RST
      end
      expect(worker_pid(@port)).to eq(@worker)
      expect(http_get(@port, '/probe').body).to eq('probe')
      poll('the reset connections to be gone', timeout: 3) { my_status['connections_active'] == 1 }
    end

    it '20 clients reset during a streamed proxied response: same worker, still serving' do
      up = fake_upstream do |peer|
        next unless peer.read_request(timeout: 5)
        peer.write("HTTP/1.1 200 OK\r\nContent-Length: #{64 * 1024 * 1024}\r\n\r\n")
        deadline = GatewaySpec.now + 10
        chunk = 'y' * 65_536
        peer.write(chunk) while GatewaySpec.now < deadline # until the gateway hangs up (EPIPE/ECONNRESET)
      rescue Errno::EPIPE, Errno::ECONNRESET, IOError
        nil
      end
      start_res_gateway(upstream_port: up.port)
      20.times do
        s = resetting_socket
        s.write("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        IO.select([s], nil, nil, 5 * GatewaySpec::SLACK) or raise 'no response started within 5 s'
        s.read_nonblock(1024)
        s.close # RST
      end
      expect(worker_pid(@port)).to eq(@worker)
      expect(http_get(@port, '/probe').body).to eq('probe')
      poll('the reset connections to be gone', timeout: 3) { my_status['connections_active'] == 1 }
    end
  end

  # ---------------------------------------------------------------------------
  describe '2000 idle keep-alive connections' do
    HARDENING_N_IDLE = 2000

    before(:each) do
      start_res_gateway(env: rss_env)
      # Warm up: the allocator, the VM and the response path.
      50.times { expect(http_get(@port, '/probe').body).to eq('probe') }
      @rss_before = rss_kib(@worker)
      @idle = Array.new(HARDENING_N_IDLE) do
        c = GatewaySpec::Conn.new(@port)
        (@conns ||= []) << c
        c.request('GET', '/probe')
        c
      end
      @idle.each { |c| expect(c.read_response(timeout: 5).body).to eq('probe') }
    end

    it 'a probe on a fresh connection is still served promptly, and all 2000 are counted idle' do
      t = GatewaySpec.now
      expect(http_get(@port, '/probe').body).to eq('probe')
      expect(GatewaySpec.now - t).to be < 0.5 * GatewaySpec::SLACK
      s = my_status
      expect(s['connections_idle']).to eq(HARDENING_N_IDLE)
      expect(s['connections_active']).to eq(HARDENING_N_IDLE + 1)
    end

    it 'the worker holds them in < 8 KiB of RSS each' do
      per = (rss_kib(@worker) - @rss_before).to_f / HARDENING_N_IDLE
      puts format('    (worker RSS: %<b>d KiB before, %<a>d KiB with %<n>d idle keep-alive connections: %<p>.2f KiB each)',
                  b: @rss_before, a: rss_kib(@worker), n: HARDENING_N_IDLE, p: per)
      expect(per).to be < 8.0
    end
  end
end
