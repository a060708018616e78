# Gateway::SharedDict (`shared_dict :name, size:`): the API, TTL expiry, LRU
# eviction, incr from two workers losing no update, a worker SIGKILLed while
# holding the lock, worker restarts, and what a reload keeps.
require_relative 'spec_helper'

RSpec.describe 'Gateway::SharedDict' do
  # boot: increments of "boot" each worker makes in init_worker, all workers
  # at once (they start together): the dictionary's lock across processes,
  # whatever way the kernel spreads connections.
  # hold: a /hold location that stalls on the lock, through the test-only
  # GatewayTest (tools/testhooks), which only build/gateway-test has.
  def config(size: '1m', workers: 2, boot: 0, hold: false)
    server = %(workers: #{workers}, init_worker: -> { #{boot}.times { Gateway::SharedDict[:d].incr("boot") } })
    config_with(<<~RUBY, %(shared_dict :d, size: "#{size}"), port: @port, server: server)
      location "/api" do
        d = Gateway::SharedDict[:d]
        out = []
        out << d.set("s", "str") << d.get("s") << d.get("none")
        d.set("i", 41); d.set("f", 1.5); d.set("t", true); d.set("fa", false); d.set("n", nil)
        out << d.get("i") << d.get("f") << d.get("t") << d.get("fa") << d.get("n")
        out << d.add("s", "x") << d.add("new", "y") << d.get("new")
        out << d.incr("i") << d.incr("i", 10) << d.incr("c", 1, init: 100) << d.incr("f", 1)
        begin
          d.incr("s")
        rescue TypeError => e
          out << "TypeError"
        end
        out << d.delete("new") << d.delete("new") << d.ttl("s") << d.ttl("absent")
        d.set("e", 1, ttl: 30)
        out << (d.ttl("e") > 29 && d.ttl("e") <= 30)
        out << d.keys.sort << d.keys(2).size
        out << (d.size > 900_000) << (d.free_space < d.size) << Gateway::SharedDict[:nope].inspect
        begin
          d.set("x", Object.new)
        rescue TypeError
          out << "TypeError"
        end
        d.flush_all
        out << d.keys << (d.free_space == d.size)
        out.inspect
      end
      location "/set" do |req| k, v, ttl = req.query.split(","); Gateway::SharedDict[:d].set(k, v, ttl: ttl && ttl.to_f); "ok" end
      location "/get" do |req| Gateway::SharedDict[:d].get(req.query).inspect end
      location "/incr" do |req| [200, { "x-pid" => Gateway.pid.to_s }, [Gateway::SharedDict[:d].incr("hits").to_s]] end
      location "/fill" do |req|
        d = Gateway::SharedDict[:d]
        v = "v" * 200
        (0...req.query.to_i).each { |i| d.set("k\#{i}", v) }
        "\#{d.count} \#{d.stats[:evictions]}"
      end
      #{hold ? <<~HOLD : ''}
      location "/hold" do
        Gateway.log(:warn, "holding the lock: pid \#{Gateway.pid}")
        GatewayTest.hold_shdict_lock("d", 30_000)
        "released"
      end
      HOLD
      location "/hooks" do
        [Object.const_defined?(:GatewayTest), Gateway::SharedDict[:d].respond_to?(:_gw_hold_lock)].inspect
      end
      location "/stats" do Gateway::SharedDict[:d].stats[:recoveries].to_s end
    RUBY
  end

  def start(bin: GatewaySpec::BIN, **opts)
    @port = free_port
    @gw = start_gateway(config(**opts), ports: @port, bin: bin)
  end

  def get(path, timeout: 5)
    http_get(@port, path, timeout: timeout)
  end

  it 'get/set/add/incr/delete/ttl/keys/flush_all/size/free_space, with every value type' do
    start
    r = get('/api')
    expect(r.status).to eq(200), @gw.log_tail
    expect(r.body).to eq('[true, "str", nil, 41, 1.5, true, false, nil, false, true, "y", 42, 52, 101, 2.5, ' \
                         '"TypeError", true, false, 0.0, nil, true, ["c", "e", "f", "fa", "i", "n", "s", "t"], 2, ' \
                         'true, true, "nil", "TypeError", [], true]')
  end

  it 'entries expire after their ttl' do
    start(workers: 1)
    get('/set?a,1,0.2')
    expect(get('/get?a').body).to eq('"1"')
    sleep 0.3
    expect(get('/get?a').body).to eq('nil')
  end

  it 'evicts the least recently used entries when full' do
    start(size: '64k', workers: 1)
    count, evictions = get('/fill?2000').body.split.map(&:to_i)
    expect(count).to be_between(50, 1999)
    expect(evictions).to be >= 2000 - count
    expect(get('/get?k0').body).to eq('nil')
    expect(get('/get?k1999').body).to eq('"' + 'v' * 200 + '"')
  end

  it 'incr from 2 workers and many connections loses no update' do
    start(boot: 20_000)
    GatewaySpec.poll('both workers to finish their boot increments', timeout: 20) { get('/get?boot').body == '40000' }
    pids = Queue.new
    threads = 20.times.map do
      Thread.new do
        c = connect(@port)
        100.times do
          c.request('GET', '/incr', { 'Host' => 'x' })
          r = c.read_response
          raise "status #{r.status}" unless r.status == 200
          pids << r['x-pid']
        end
        c.close
      end
    end
    threads.each(&:join)
    expect(get('/get?hits').body).to eq('2000')
    seen = Array.new(pids.size) { pids.pop }.uniq
    expect(seen.size).to be_between(1, 2) # how the kernel spread the connections; the boot count is the two-process check
    expect(get('/get?boot').body).to eq('40000')
  end

  it 'the product has no way for a script to hold the lock (fault injection is in build/gateway-test only)' do
    start
    expect(get('/hooks').body).to eq('[false, false]')
  end

  it 'a worker SIGKILLed while holding the lock does not hang the others' do
    start(bin: GatewaySpec::TEST_BIN, hold: true)
    get('/set?kept,yes')
    holder = Thread.new { get('/hold', timeout: 40) rescue nil }
    pid = nil
    GatewaySpec.poll('a worker to hold the lock') { pid = @gw.log[/holding the lock: pid (\d+)/, 1] }
    waiter = Thread.new { get('/incr', timeout: 20) } # blocks on the lock in the other worker
    sleep 0.2
    expect(waiter.alive?).to be(true)
    Process.kill('KILL', pid.to_i)
    r = waiter.value
    expect(r.status).to eq(200)
    expect(r.body).to eq('1')
    expect(get('/get?kept').body).to eq('"yes"') # it held the lock changing nothing: nothing lost
    holder.join(5)
    expect(get("/stats").body).to eq("0") # the holder changed nothing: the data was kept
  end

  it 'survives a worker restart' do
    start(workers: 1)
    get('/set?w,1')
    pid = worker_pid
    Process.kill('KILL', pid)
    GatewaySpec.poll('a new worker') { (worker_pid rescue 0).then { |p| p != 0 && p != pid } }
    expect(get('/get?w').body).to eq('"1"')
  end

  it 'a reload keeps it when its size is unchanged, and makes it anew when the size changed' do
    start(workers: 1)
    get('/set?r,1')
    @gw.rewrite_config(config(workers: 1) + "\n# reloaded\n")
    @gw.signal('HUP')
    GatewaySpec.poll('reload 1') { @gw.log.include?('reloaded: generation 1') }
    GatewaySpec.poll('the new worker') { get('/get?r').status == 200 }
    expect(get('/get?r').body).to eq('"1"')
    @gw.rewrite_config(config(size: '2m', workers: 1))
    @gw.signal('HUP')
    GatewaySpec.poll('reload 2') { @gw.log.include?('reloaded: generation 2') }
    GatewaySpec.poll('the new dictionary') { get('/get?r').body == 'nil' }
  end

  it 'bad declarations are config errors with FILE:LINE' do
    status, out, = check_config(%(shared_dict :a, size: "1x"\nserver listen: 1 do location "/" do "x" end end\n))
    expect([status, out]).to match([1, /:1: .*size must be bytes/])
    status, out, = check_config(%(shared_dict :a, size: "1m"\nshared_dict :a, size: "1m"\nserver listen: 1 do location "/" do "x" end end\n))
    expect([status, out]).to match([1, /:2: .*declared twice/])
  end
end
