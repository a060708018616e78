# Async::Redis against a Redis Cluster of three Debian redis-server nodes
# (`--cluster-enabled yes`, joined with `redis-cli --cluster create`), each
# started here on a free port with its own folder and stopped by PID: calls
# go to the node that owns their keys' slot, {hash tags} keep keys together,
# keys of one call in two slots are refused before anything is sent, and a
# slot moved under traffic is followed (-MOVED, and -ASK while it migrates).
require_relative 'spec_helper'
require_relative 'redis_helper'

RSpec.describe 'Async::Redis on a Redis Cluster' do
  before(:all) do
    @nodes = Array.new(3) do
      RedisServer.new(args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
                             '--cluster-node-timeout', '2000',
                             '--cluster-port', free_port.to_s]) # not port + 10000, which may be taken
    end
    out = IO.popen(['redis-cli', '--cluster', 'create', *@nodes.map(&:addr), '--cluster-yes'], err: [:child, :out], &:read)
    raise "redis-cli --cluster create failed:\n#{out}" unless $?.success?
    GatewaySpec.poll('the cluster to be ok', timeout: 20) do
      @nodes.all? { |n| n.cmd('CLUSTER', 'INFO').include?('cluster_state:ok') }
    end
  end

  after(:all) { @nodes&.each(&:destroy) }

  before(:each) do
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      redis :c, cluster: ["#{@nodes.first.addr}"], timeout: 1.0
      server listen: "127.0.0.1:#{@port}" do
        location "/set" do |req|
          k, v = req.query.split("=", 2)
          Async::Redis[:c].set(k, v)
        end
        location "/get" do |req|
          Async::Redis[:c].get(req.query).to_s
        end
        location "/pipe" do |req|
          a, b = req.query.split(",")
          begin
            Async::Redis[:c].pipeline { |p| p.incr(a); p.incr(b) }.inspect
          rescue Gateway::UpstreamError => e
            [400, {}, [e.message]]
          end
        end
      end
    RUBY
  end

  def get(path)
    http_get(@port, path, timeout: 5)
  end

  # The node that owns key's slot, and the slot.
  def owner(key)
    slot = @nodes.first.cmd('CLUSTER', 'KEYSLOT', key)
    node = @nodes.find do |n|
      n.cmd('CLUSTER', 'SLOTS').any? { |from, to, (_ip, port)| slot.between?(from, to) && port == n.port }
    end
    [node, slot]
  end

  it 'each key is written to the node that owns its slot, and read back from it' do
    keys = (1..30).map { |i| "key:#{i}" }
    keys.each { |k| expect(get("/set?#{k}=v#{k}").body).to eq('OK') }
    keys.each do |k|
      node, = owner(k)
      expect(node.cmd('GET', k)).to eq("v#{k}") # on the owner itself, no redirect
      expect(get("/get?#{k}").body).to eq("v#{k}")
    end
    expect(keys.map { |k| owner(k)[0].port }.uniq.size).to eq(3) # the keys did spread over the nodes
  end

  it 'a pipeline with a common {hash tag} goes to one node; keys in two slots are refused before sending' do
    expect(get('/pipe?{u1}.a,{u1}.b').body).to eq('[1, 1]')
    node, = owner('{u1}.a')
    expect(node.cmd('GET', '{u1}.b')).to eq('1')
    a, b = (1..100).map { |i| "p#{i}" }.combination(2).find { |x, y| owner(x)[1] != owner(y)[1] }
    r = get("/pipe?#{a},#{b}")
    expect(r.status).to eq(400)
    expect(r.body).to include('must hash to one slot')
    expect([a, b].map { |k| owner(k)[0].cmd('EXISTS', k) }).to eq([0, 0])
  end

  # Moves key's slot to another node as redis-cli --cluster reshard does,
  # calling the block between MIGRATE and the final SETSLOT NODE (the -ASK window).
  def move_slot(key)
    src, slot = owner(key)
    dst = (@nodes - [src]).first
    src_id = src.cmd('CLUSTER', 'MYID')
    dst_id = dst.cmd('CLUSTER', 'MYID')
    dst.cmd('CLUSTER', 'SETSLOT', slot, 'IMPORTING', src_id)
    src.cmd('CLUSTER', 'SETSLOT', slot, 'MIGRATING', dst_id)
    src.cmd('MIGRATE', '127.0.0.1', dst.port, '', 0, 5000, 'KEYS', key)
    yield src, dst if block_given?
    @nodes.each { |n| n.cmd('CLUSTER', 'SETSLOT', slot, 'NODE', dst_id) }
    dst
  end

  it 'follows a slot that migrates (-ASK) and then moves (-MOVED)' do
    expect(get('/set?moving=1').body).to eq('OK')
    dst = move_slot('moving') do |src, _dst|
      expect { src.cmd('GET', 'moving') }.to raise_error(/\AASK /)
      expect(get('/get?moving').body).to eq('1') # ASKING, then the call, on the importing node
    end
    expect(dst.cmd('GET', 'moving')).to eq('1')
    expect(get('/get?moving').body).to eq('1') # -MOVED from the old owner, then the new one
    expect(get('/set?moving=2').body).to eq('OK')
    expect(dst.cmd('GET', 'moving')).to eq('2')
  end

  it 'a bad cluster: list is a FILE:LINE error' do
    st, out, path = check_config(<<~RUBY)
      redis :x, cluster: "127.0.0.1:7000"
      server(listen: #{free_port}) { location("/") { "x" } }
    RUBY
    expect(st).to eq(1)
    expect(out).to include("#{path}:1").and include('cluster: must be an Array')
  end
end
