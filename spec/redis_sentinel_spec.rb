# Async::Redis behind Redis Sentinel, against Debian's redis-server: a
# master, a replica and three sentinels (`redis-server FILE --sentinel`),
# each started here on a free port with its own folder and stopped by PID.
# The gateway asks the sentinels for the master, follows a failover within
# seconds (+switch-master, or asking again when the master is lost), counts
# nothing twice, and while no master answers a command fails with an
# exception the handler can rescue, never a stalled worker.
require_relative 'spec_helper'
require_relative 'redis_helper'

RSpec.describe 'Async::Redis behind Redis Sentinel' do
  before(:each) do
    @master = RedisServer.new
    @replica = RedisServer.new(args: ['--replicaof', '127.0.0.1', @master.port.to_s])
    GatewaySpec.poll('the replica to sync', timeout: 10) do
      @replica.cmd('INFO', 'replication').include?('master_link_status:up')
    end
    @sentinels = RedisSentinel.start_three(@master)
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      redis :fleet, sentinels: #{@sentinels.map(&:addr).inspect}, master_name: "mymaster", timeout: 1.0
      server listen: "127.0.0.1:#{@port}" do
        location "/incr" do
          begin
            Async::Redis[:fleet].incr("hits").to_s
          rescue Gateway::UpstreamError, Gateway::TimeoutError => e
            [503, {}, ["redis: \#{e.message}"]]
          end
        end
        location "/get" do
          Async::Redis[:fleet].get("hits").to_s
        end
      end
    RUBY
  end

  after(:each) do
    [*@sentinels, @replica, @master].compact.each(&:destroy)
  end

  def get(path)
    http_get(@port, path, timeout: 5)
  end

  it 'talks to the master the sentinels name' do
    expect(get('/incr').body).to eq('1')
    expect(get('/incr').body).to eq('2')
    expect(@master.cmd('GET', 'hits')).to eq('2')
    GatewaySpec.poll('the replica to have the count') { @replica.cmd('GET', 'hits') == '2' }
    expect(get('/get').body).to eq('2')
  end

  it 'follows a failover: counting resumes on the promoted replica within 10 s, nothing counted twice, no request hangs' do
    values = 20.times.map { get('/incr').body }
    expect(values).to eq((1..20).map(&:to_s))
    GatewaySpec.poll('the replica to catch up') { @replica.cmd('GET', 'hits') == '20' }

    @master.stop # the master dies between two requests of a steady client
    killed = Time.now
    answers = []
    recovered = nil
    deadline = killed + 20
    while Time.now < deadline
      t0 = Time.now
      r = get('/incr')
      took = Time.now - t0
      answers << [r.status, r.body, took]
      expect(took).to be < 1.0 + 1.5 * GatewaySpec::SLACK # timeout: 1.0 bounds a call; none waits longer
      if r.status == 200
        recovered ||= Time.now
        break if answers.count { |a| a[0] == 200 } >= 5
      else
        expect(r.status).to eq(503)
        expect(r.body).to start_with('redis: ')
      end
      sleep 0.05
    end
    expect(recovered).not_to be_nil, "no success within 20 s: #{answers.last(3).inspect}"
    expect(recovered - killed).to be < 10.0

    oks = answers.select { |a| a[0] == 200 }.map { |a| a[1].to_i }
    expect(oks).to eq((21..(20 + oks.size)).to_a) # none counted twice, none lost
    expect(@replica.cmd('INFO', 'replication')).to include('role:master')
    expect(@replica.cmd('GET', 'hits')).to eq((20 + oks.size).to_s)
    expect(@gw.log).to match(/redis sentinel:mymaster@[^:]+:\d+.*: master is now 127\.0\.0\.1:#{@replica.port}/)
  end

  it 'a planned failover (SENTINEL FAILOVER): the gateway moves to the promoted replica' do
    get('/incr')
    GatewaySpec.poll('the replica to catch up') { @replica.cmd('GET', 'hits') == '1' }
    @sentinels.each { |s| s.cmd('SENTINEL', 'failover', 'mymaster') rescue nil } # a planned switch: +switch-master
    GatewaySpec.poll('the sentinels to promote the replica', timeout: 15) do
      @sentinels.first.cmd('SENTINEL', 'get-master-addr-by-name', 'mymaster') == ['127.0.0.1', @replica.port.to_s]
    end
    GatewaySpec.poll('the gateway to count on the new master', timeout: 10) { get('/incr').status == 200 && @replica.cmd('GET', 'hits').to_i >= 2 }
    expect(get('/get').body).to eq(@replica.cmd('GET', 'hits'))
  end

  it 'with every sentinel gone, a command fails at once with an error the handler can rescue' do
    expect(get('/incr').body).to eq('1')
    @sentinels.each(&:stop)
    @master.stop
    t0 = Time.now
    r = get('/incr')
    expect(r.status).to eq(503)
    expect(r.body).to match(/redis: (no redis sentinel named a master|.*redis)/)
    expect(Time.now - t0).to be < 1.0 + 1.5 * GatewaySpec::SLACK
    expect(get('/incr').status).to eq(503) # and again, at once (backoff)
  end

  it 'a bad sentinels: or master_name: is a FILE:LINE error' do
    st, out, path = check_config(<<~RUBY)
      redis :x, sentinels: "127.0.0.1:26379", master_name: "m"
      server(listen: #{free_port}) { location("/") { "x" } }
    RUBY
    expect(st).to eq(1)
    expect(out).to include("#{path}:1").and include('sentinels: must be an Array')
    st, out, = check_config(<<~RUBY)
      redis :x, sentinels: ["127.0.0.1:26379"], master_name: ""
      server(listen: #{free_port}) { location("/") { "x" } }
    RUBY
    expect(st).to eq(1)
    expect(out).to include('master_name: must name the master')
    st, out, = check_config(<<~RUBY)
      redis :x, servers: ["127.0.0.1:6379"], sentinels: ["127.0.0.1:26379"], master_name: "m"
      server(listen: #{free_port}) { location("/") { "x" } }
    RUBY
    expect(st).to eq(1)
    expect(out).to include('not both')
  end
end
