# All cores: workers: :auto, cpu_affinity: :auto and reuseport (one
# SO_REUSEPORT listening socket per worker, handed over on reload by index).
require_relative 'spec_helper'
require 'json'

RSpec.describe 'workers: :auto, cpu_affinity: :auto, reuseport' do
  def config(port, opts)
    config_with('location "/" do "ok" end', port: port, server: opts, status: true)
  end


  # The current generation's workers from the status page: [{pid, index, requests, ...}].
  def workers_of(port)
    ws = JSON.parse(http_get(port, '/status').body)['workers']
    gen = ws.map { |w| w['generation'] }.max
    ws.select { |w| w['generation'] == gen }.sort_by { |w| w['index'] }
  end

  # Listening sockets on 127.0.0.1:port (/proc/net/tcp, state 0A).
  def listeners(port)
    want = format('0100007F:%04X', port)
    File.readlines('/proc/net/tcp').count { |l| f = l.split; f[1] == want && f[3] == '0A' }
  end

  def allowed_cpus
    File.read('/proc/self/status')[/^Cpus_allowed_list:\s*(\S+)/, 1].split(',').flat_map do |r|
      a, b = r.split('-').map(&:to_i)
      (a..(b || a)).to_a
    end
  end

  # count requests, each on its own connection; the failures (bounded: 10 s).
  def requests(port, count)
    deadline = GatewaySpec.now + 10
    failures = []
    count.times do
      break if GatewaySpec.now > deadline
      begin
        r = http_get(port, '/', timeout: 5)
        failures << r.status unless r.status == 200 && r.body == 'ok'
      rescue StandardError => e
        failures << e.class.name
      end
    end
    failures
  end

  describe 'the DSL' do
    {
      'workers: :many' => /:1: server: workers must be an Integer from 1 to 64 or :auto/,
      'workers: 0' => /:1: server: workers must be/,
      'cpu_affinity: :all' => /:1: server: cpu_affinity must be a CPU number \(0, 1, ...\) or :auto/,
      'reuseport: "yes"' => /:1: server: reuseport must be true .* or false/
    }.each do |opts, message|
      it "rejects #{opts} with FILE:LINE" do
        st, out, path = check_config(config(free_port, opts))
        expect(st).to eq(1)
        expect(out).to include("#{path}:1:")
        expect(out).to match(message)
      end
    end

    it 'accepts workers: :auto, cpu_affinity: :auto, reuseport: true/false' do
      %w[true false].each do |rp|
        st, out, = check_config(config(free_port, "workers: :auto, cpu_affinity: :auto, reuseport: #{rp}"))
        expect(st).to eq(0), out
      end
    end
  end

  it 'workers: :auto starts one worker per online CPU (nproc)' do
    port = free_port
    gw = start_gateway(config(port, 'workers: :auto'), ports: port)
    n = [`nproc`.to_i, 64].min
    poll("#{n} workers", timeout: 5) { live_children_of(gw.pid).size == n }
    expect(workers_of(port).size).to eq(n)
    expect(listeners(port)).to eq(n) # reuseport by default: one socket each
  end

  it 'cpu_affinity: :auto pins worker i to the i-th allowed CPU (Cpus_allowed_list)' do
    port = free_port
    start_gateway(config(port, 'workers: 3, cpu_affinity: :auto'), ports: port)
    cpus = allowed_cpus
    ws = poll('three workers on the status page', timeout: 5) { (w = workers_of(port)).size == 3 && w }
    ws.each do |w|
      list = File.read("/proc/#{w['pid']}/status")[/^Cpus_allowed_list:\s*(\S+)/, 1]
      expect(list).to eq(cpus[w['index'] % cpus.size].to_s), "worker #{w['index']}"
    end
  end

  it 'reuseport: 200 new connections are spread over both workers' do
    port = free_port
    start_gateway(config(port, 'workers: 2, reuseport: true'), ports: port)
    expect(listeners(port)).to eq(2)
    poll('two workers', timeout: 5) { workers_of(port).size == 2 }
    before = workers_of(port).map { |w| w['connections_accepted'] }
    expect(requests(port, 200)).to eq([])
    got = workers_of(port).map { |w| w['connections_accepted'] }.zip(before).map { |a, b| a - b }
    # The kernel hashes each connection's addresses: ~100 each; 40 is far out of chance.
    expect(got.min).to be >= 40, "connections per worker: #{got.inspect}"
  end

  it 'reuseport: false shares one listening socket' do
    port = free_port
    start_gateway(config(port, 'workers: 2, reuseport: false'), ports: port)
    expect(listeners(port)).to eq(1)
    expect(requests(port, 20)).to eq([])
  end

  it 'reuseport listeners survive reloads: no connection refused while loaded' do
    port = free_port
    gw = start_gateway(config(port, 'workers: 2, reuseport: true'), ports: port)
    failures = nil
    load = Thread.new { failures = requests(port, 1500) }
    3.times do
      sleep 0.3
      gw.signal('HUP')
    end
    load.join(30) or raise 'the request loop did not finish'
    expect(failures).to eq([])
    poll('three reloads', timeout: 5) { gw.log.scan('reloaded').size == 3 }
    expect(listeners(port)).to eq(2)
  end

  it 'a reload grows and shrinks the workers and their sockets' do
    port = free_port
    gw = start_gateway(config(port, 'workers: 2, reuseport: true'), ports: port)
    [3, 1, 2].each_with_index do |n, i|
      gw.rewrite_config(config(port, "workers: #{n}, reuseport: true"))
      gw.signal('HUP')
      poll("reload #{i + 1}", timeout: 5) { gw.log.scan('reloaded').size == i + 1 }
      poll("#{n} workers and #{n} sockets", timeout: 10) do
        live_children_of(gw.pid).size == n && listeners(port) == n
      end
      expect(requests(port, 30)).to eq([])
    end
  end

  it 'shrinking and growing under load refuses no connection' do
    port = free_port
    gw = start_gateway(config(port, 'workers: 3, reuseport: true'), ports: port)
    failures = nil
    load = Thread.new { failures = requests(port, 3000) }
    [1, 3, 1, 2].each_with_index do |n, i|
      sleep 0.3
      gw.rewrite_config(config(port, "workers: #{n}, reuseport: true"))
      gw.signal('HUP')
      poll("reload #{i + 1}", timeout: 5) { gw.log.scan('reloaded').size == i + 1 }
    end
    load.join(30) or raise 'the request loop did not finish'
    expect(failures).to eq([])
  end

  it 'an explicit switch of reuseport on reload is refused and the running config kept' do
    port = free_port
    gw = start_gateway(config(port, 'workers: 2, reuseport: false'), ports: port)
    gw.rewrite_config(config(port, 'workers: 2, reuseport: true'))
    gw.signal('HUP')
    poll('the refusal', timeout: 5) { gw.log.include?('reuseport: cannot change from false to true on reload') }
    expect(listeners(port)).to eq(1)
    expect(requests(port, 10)).to eq([])
  end

  it 'a second gateway cannot start on a port served with reuseport' do
    port = free_port
    start_gateway(config(port, 'workers: 2, reuseport: true'), ports: port)
    # SO_REUSEPORT alone would let it join the port's group and take half the connections.
    r = run_gateway('-f', write_config(config(port, 'workers: 2, reuseport: true')), timeout: 15)
    expect(r.exitstatus).to eq(1)
    expect(r.output).to include("listen 127.0.0.1:#{port}: Address already in use")
    expect(listeners(port)).to eq(2)
  end

  it "a worker's crash does not lose its port: connections wait for the replacement" do
    port = free_port
    gw = start_gateway(config(port, 'workers: 2, reuseport: true'), ports: port)
    ws = poll('two workers', timeout: 5) { (w = workers_of(port)).size == 2 && w }
    Process.kill('KILL', ws[0]['pid'])
    expect(requests(port, 100)).to eq([])
    poll('worker 0 replaced', timeout: 5) do
      w = workers_of(port).find { |x| x['index'].zero? }
      w && w['pid'] != ws[0]['pid'] && w['restarts'] == 1
    end
    expect(listeners(port)).to eq(2)
    expect(gw.log).to match(/worker #{ws[0]['pid']} \(port #{port} #0\) killed by signal 9/)
  end
end
