# examples/fleet/: HAProxy (examples/fleet/haproxy.cfg, send-proxy-v2,
# health checks on each gateway's status port) in front of three gateways
# running examples/fleet/fleet.rb, all on loopback ports (docs/fleet.md).
# Their fixed ports are replaced textually by free ones, as
# spec/examples_spec.rb does for examples/*.rb.
require 'open3'
require_relative 'spec_helper'
require_relative 'haproxy_helper'
require_relative 'redis_helper'

RSpec.describe 'examples/fleet' do
  include HAProxyHelper
  DIR = File.join(GatewaySpec::ROOT, 'examples', 'fleet')

  # The app servers behind the gateways: GET /health and anything else, 200.
  def app_server
    server = TCPServer.new('127.0.0.1', 0)
    Thread.new do
      loop do
        Thread.new(server.accept) do |s|
          loop do
            head = +''
            head << s.readpartial(4096) until head.include?("\r\n\r\n")
            s.write("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\napp")
          end
        rescue EOFError, IOError, SystemCallError
          s.close rescue nil
        end
      end
    rescue IOError
      nil
    end
    (@apps ||= []) << server
    server.addr[1]
  end

  def haproxy_up?(front)
    r = http_get(front, '/whoami')
    r.status == 200
  rescue StandardError
    false
  end

  before(:each) do
    skip 'haproxy is not installed (setup.sh installs it)' unless haproxy?
    apps = [app_server, app_server]
    @gw_ports = Array.new(3) { free_port }
    @st_ports = Array.new(3) { free_port }
    @sentinel_ports = Array.new(3) { free_port } # sentinels start there only in the Redis example
    fleet = File.read(File.join(DIR, 'fleet.rb'))
    (0..2).each { |i| fleet = fleet.gsub((26_379 + i).to_s, @sentinel_ports[i].to_s) }
    @gws = (0..2).map do |i|
      text = fleet.gsub('8081', @gw_ports[i].to_s).gsub('9081', @st_ports[i].to_s)
                  .gsub('9101', apps[0].to_s).gsub('9102', apps[1].to_s)
      start_gateway(text, ports: [@gw_ports[i], @st_ports[i]], ready: false)
    end
    @front = free_port
    cfg = File.read(File.join(DIR, 'haproxy.cfg')).gsub('8080', @front.to_s)
    (0..2).each { |i| cfg = cfg.gsub((8081 + i).to_s, @gw_ports[i].to_s).gsub((9081 + i).to_s, @st_ports[i].to_s) }
    start_haproxy_cfg(cfg)
    poll('haproxy to serve') { haproxy_up?(@front) }
  end

  after(:each) do
    stop_haproxy
    (@apps || []).each(&:close)
  end

  def whoami(from: '127.0.0.9', path: '/whoami')
    sock = Socket.tcp('127.0.0.1', @front, from, 0, connect_timeout: 2)
    sock.write("GET #{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    parse_response(sock.read)
  ensure
    sock&.close
  end

  it 'a client bound to 127.0.0.9 is seen as 127.0.0.9 by every gateway through HAProxy' do
    bodies = Array.new(12) { whoami.body }
    expect(bodies.map { |b| b.split.first }.uniq).to eq(['127.0.0.9'])
    expect(bodies.map { |b| b[/instance=(\d+)/, 1].to_i }.uniq.sort).to eq(@st_ports.sort)
    expect(http_get(@front, '/app').body).to eq('app') # and on to the upstream group
  end

  it 'a gateway killed mid-load costs at most the requests in flight on it; HAProxy routes around it' do
    out = nil
    wrk = Thread.new do
      out, = Open3.capture2e('timeout', '30', 'wrk', '-t1', '-c6', '-d4s', "http://127.0.0.1:#{@front}/whoami")
    end
    sleep 1.5
    victim = @gw_ports[1]
    on_victim = `ss -Htn state established '( sport = :#{victim} )'`.lines.size
    @gws[1].signal('KILL') # its workers follow (PDEATHSIG): every connection on it is cut
    wrk.join
    total = out[/(\d+) requests in/, 1].to_i
    m = out.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/)
    errors = (m ? m[1..4].sum(&:to_i) : 0) + out[/Non-2xx or 3xx responses: (\d+)/, 1].to_i
    expect(total).to be > 100, out
    expect(on_victim).to be_between(1, 6)
    expect(errors).to be <= on_victim, "#{errors} failed requests, #{on_victim} connections were on the killed gateway:\n#{out}"
    seen = Array.new(8) { whoami.body[/instance=(\d+)/, 1].to_i }
    expect(seen).not_to include(@st_ports[1])
    expect(seen.uniq.sort).to eq([@st_ports[0], @st_ports[2]].sort)
  end

  it 'a Redis failover mid-load: the fleet-wide limit counts again on the promoted replica within 10 s, nothing counted twice' do
    master = RedisServer.new
    replica = RedisServer.new(args: ['--replicaof', '127.0.0.1', master.port.to_s])
    poll('the replica to sync', timeout: 10) { replica.cmd('INFO', 'replication').include?('master_link_status:up') }
    sentinels = RedisSentinel.start_three(master, name: 'fleet', ports: @sentinel_ports)
    counted = ->(body) { body[/\Acount=(\d+)/, 1]&.to_i }
    before = Array.new(15) { counted.call(whoami(path: '/limited').body) } # round robin over the three gateways
    expect(before.each_cons(2).all? { |a, b| b == a + 1 || b == 1 }).to be(true), before.inspect # a window may turn over
    poll('the replica to catch up') { replica.cmd('KEYS', 'rl:127.0.0.9:*').sum { |k| replica.cmd('GET', k).to_i } == 15 }

    master.stop
    killed = GatewaySpec.now
    after = []
    recovered = nil
    until after.count(&:itself) >= 9 || GatewaySpec.now - killed > 20
      r = whoami(path: '/limited')
      expect(r.status).to eq(200) # failing open while Redis fails over, never a 5xx or a hang
      n = counted.call(r.body)
      after << n
      recovered ||= GatewaySpec.now if n
      sleep 0.05
    end
    expect(recovered).not_to be_nil, 'no count within 20 s of the master going'
    expect(recovered - killed).to be < 10.0
    numbers = after.compact
    # Within one minute's window the counts rise by one.
    expect(numbers.each_cons(2).all? { |a, b| b == a + 1 || b == 1 }).to be(true), numbers.inspect
    expect(replica.cmd('INFO', 'replication')).to include('role:master')
    total = replica.cmd('KEYS', 'rl:127.0.0.9:*').sum { |k| replica.cmd('GET', k).to_i }
    expect(total).to eq(15 + numbers.size) # every answered count, once
  ensure
    [*sentinels, replica, master].compact.each(&:destroy)
  end
end
