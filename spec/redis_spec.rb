# Async::Redis against Debian's redis-server (started here on a free port,
# stopped by PID) and against scripted fake servers: every command helper,
# replies as Ruby objects, errors, pipeline and MULTI, pooled connections,
# a slow command not delaying others, timeouts, aborts that never desync a
# pooled connection, garbage, a server restart mid-traffic, pub/sub from
# init_worker, and a Redis-backed limit shared by two gateways.
require_relative 'spec_helper'
require_relative 'redis_helper'
require_relative 'restart_helper'

RSpec.describe 'Async::Redis' do
  include RestartTraffic
  before(:all) { @redis = RedisServer.new }
  after(:all) { @redis&.destroy }
  before(:each) { @redis.cmd('FLUSHALL') }

  def start(body, prelude: '', server_opts: '')
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      #{prelude}
      server listen: "127.0.0.1:#{@port}"#{server_opts} do
        #{body}
      end
    RUBY
  end

  def get(path, timeout: 5)
    http_get(@port, path, timeout: timeout)
  end

  describe 'commands' do
    before(:each) do
      start(<<~RUBY, prelude: %(redis :cache, servers: ["#{@redis.addr}"], pool: 4))
        location "/cmds" do
          r = Async::Redis.new("#{@redis.addr}", timeout: 2.0)
          out = []
          out << r.set("k", "v")
          out << r.get("k")
          out << r.get("missing")
          out << r.set("k", "w", nx: true)
          out << r.set("e", "1", ex: 100)
          out << r.call("TTL", "e")
          out << r.incr("n") << r.incrby("n", 10) << r.expire("n", 50) << r.del("n", "e")
          out << r.hset("h", "f", "x") << r.hget("h", "f")
          out << r.call("RPUSH", "l", "a", "b", 3) << r.call("LRANGE", "l", 0, -1)
          out << r.eval("return {KEYS[1], ARGV[1], 7}", ["kk"], ["aa"])
          sha = r.call("SCRIPT", "LOAD", "return ARGV[1]")
          out << r.evalsha(sha, [], ["viasha"])
          out.inspect
        end
        location "/err" do
          begin
            Async::Redis[:cache].call("NOSUCHCMD", "x")
            "no error"
          rescue Async::Redis::Error => e
            "\#{e.class} \#{e.is_a?(Gateway::Error)} \#{e.message}"
          end
        end
        location "/wrongtype" do
          Async::Redis[:cache].set("s", "str")
          Async::Redis[:cache].incr("s")
        end
        location "/pipeline" do
          Async::Redis[:cache].pipeline { |p| p.incr("a"); p.expire("a", 60); p.call("NOPE"); p.get("a") }.map { |x| x.is_a?(Exception) ? x.class.to_s : x }.inspect
        end
        location "/multi" do
          Async::Redis[:cache].multi { |m| m.incr("m"); m.incr("m"); m.get("m") }.inspect
        end
        location "/multi_abort" do
          begin
            Async::Redis[:cache].multi { |m| m.incr("m"); m.call("NOPE") }.inspect
          rescue Async::Redis::Error => e
            e.message
          end
        end
        location "/badarg" do
          begin
            Async::Redis[:cache].call("GET", nil)
          rescue ArgumentError => e
            e.message
          end
        end
        location "/blpop" do Async::Redis[:cache].call("BLPOP", "q", 1).inspect end
        location "/fast" do Async::Redis[:cache].get("k").inspect end
        location "/nopool" do Async::Redis[:nope] end
      RUBY
    end

    it 'each helper sends its command and replies come back as Ruby objects' do
      r = get('/cmds')
      expect(r.status).to eq(200), @gw.log_tail
      expect(r.body).to eq('["OK", "v", nil, nil, "OK", 100, 1, 11, 1, 2, 1, "x", 3, ["a", "b", "3"], ' \
                           '["kk", "aa", 7], "viasha"]')
      expect(@redis.cmd('GET', 'k')).to eq('v')
    end

    it 'an error reply raises Async::Redis::Error (a Gateway::Error) with Redis\'s message; unrescued: a 500' do
      expect(get('/err').body).to match(/\AAsync::Redis::Error true ERR unknown command .NOSUCHCMD/)
      r = get('/wrongtype')
      expect(r.status).to eq(500)
      expect(@gw.log).to include('ERR value is not an integer')
    end

    it 'pipeline: one batch, the replies in order, an error reply as an element' do
      expect(get('/pipeline').body).to eq('[1, 1, "Async::Redis::Error", "1"]')
      expect(@redis.cmd('TTL', 'a')).to be_between(1, 60)
    end

    it 'multi: MULTI/EXEC, EXEC\'s replies; a command refused at queueing raises EXECABORT' do
      expect(get('/multi').body).to eq('[1, 2, "2"]')
      expect(get('/multi_abort').body).to match(/EXECABORT/)
      expect(@redis.cmd('GET', 'm')).to eq('2') # the aborted transaction ran nothing
    end

    it 'rejects nil arguments and unknown pools clearly' do
      expect(get('/badarg').body).to match(/nil is not a command argument/)
      expect(get('/nopool').status).to eq(500)
      expect(@gw.log).to include('Async::Redis[:nope]: no such pool')
    end

    it 'a slow command parks its fiber: other requests are served meanwhile' do
      t0 = GatewaySpec.now
      slow = Thread.new { get('/blpop') }
      sleep 0.1
      fast = get('/fast')
      expect(fast.body).to eq('nil')
      expect(GatewaySpec.now - t0).to be < slack(0.8)
      expect(slow.value.body).to eq('nil') # BLPOP timed out server-side after 1 s
    end

    it 'connections are pooled per worker and reused across requests' do
      20.times { expect(get('/fast').status).to eq(200) }
      clients = @redis.cmd('CLIENT', 'LIST').lines.size
      expect(clients).to be <= 2 # the gateway's one pooled connection, and this check's
    end

    it 'a client that goes away cancels the call; its connection (with a reply unread) is closed, not reused' do
      c = connect(@port)
      c.request('GET', '/blpop', { 'Host' => 'x' })
      GatewaySpec.poll('BLPOP to block') { @redis.cmd('CLIENT', 'LIST').include?('cmd=blpop') }
      c.close
      GatewaySpec.poll('the blocked connection to be closed') { !@redis.cmd('CLIENT', 'LIST').include?('cmd=blpop') }
      @redis.cmd('RPUSH', 'q', 'late') # would have been the aborted BLPOP's reply
      @redis.cmd('SET', 'k', 'right')
      5.times { expect(get('/fast').body).to eq('"right"') }
      expect(@redis.cmd('LLEN', 'q')).to eq(1)
    end
  end

  it 'a server that never answers: Gateway::TimeoutError after timeout:, and the worker keeps serving' do
    fake = FakeRedis.new { |c| c.read(1) && sleep(10) }
    start(<<~RUBY)
      location "/t" do
        begin
          Async::Redis.new("127.0.0.1:#{fake.port}", timeout: 0.3).get("x")
        rescue Gateway::TimeoutError => e
          "\#{e.class}: \#{e.message}"
        end
      end
      location "/hello" do "hi" end
    RUBY
    t0 = GatewaySpec.now
    th = Thread.new { get('/t') }
    sleep 0.05
    expect(get('/hello').body).to eq('hi')
    r = th.value
    expect(r.body).to match(/Gateway::TimeoutError: redis 127.0.0.1:\d+ timed out after 0.3 s/)
    expect(GatewaySpec.now - t0).to be_between(0.25, slack(2.0))
  ensure
    fake&.stop
  end

  it 'a server that sends garbage (not RESP): Gateway::UpstreamError, the connection closed, the next call opens a new one' do
    fake = FakeRedis.new { |c| c.readpartial(100); c.write("HTTP/1.1 200 OK\r\n\r\n"); sleep 5 }
    start(<<~RUBY)
      location "/g" do
        begin
          Async::Redis.new("127.0.0.1:#{fake.port}", timeout: 2).get("x")
        rescue Gateway::UpstreamError => e
          "\#{e.class}: \#{e.message}"
        end
      end
    RUBY
    expect(get('/g').body).to match(/Gateway::UpstreamError: redis 127.0.0.1:\d+: redis sent an invalid reply/)
    expect(get('/g').body).to match(/invalid reply/)
    expect(fake.accepted).to eq(2)
    expect(@gw.log).to match(/invalid reply \(Protocol error/)
  ensure
    fake&.stop
  end

  it 'a dead server raises Gateway::UpstreamError; a restart mid-traffic is reconnected with backoff' do
    other = RedisServer.new
    start(<<~RUBY)
      location "/i" do
        begin
          Async::Redis.new("#{other.addr}", timeout: 1).incr("c").to_s
        rescue Gateway::UpstreamError => e
          "down: \#{e.message}"
        end
      end
    RUBY
    expect(get('/i').body).to eq('1')
    other.stop
    r = get('/i').body
    expect(r).to start_with('down: redis 127.0.0.1')
    expect(get('/i').body).to start_with('down:') # within the backoff: at once
    other.start
    GatewaySpec.poll('the gateway to reconnect', timeout: 5) { get('/i').body == '1' }
    expect(get('/i').body).to eq('2')
  ensure
    other&.destroy
  end

  it 'a restart mid-traffic: commands during it fail clearly or succeed, none hangs, all succeed once it is back' do
    other = RedisServer.new
    check_restart_mid_traffic(other, %(redis :other, servers: ["#{other.addr}"], pool: 4, timeout: 1.0),
                              %(Async::Redis[:other].call('ECHO', req.query)), /redis 127.0.0.1:\d+/) # timeout: 1.0 bounds each call
  ensure
    other&.destroy
  end

  it 'pub/sub from init_worker: the block runs per message in a fiber of its own and may make async calls' do
    start(<<~RUBY, prelude: %(redis :cache, servers: ["#{@redis.addr}"]), server_opts: <<~OPTS.chomp)
      location "/pub" do Async::Redis[:cache].publish("news", "hello").to_s end
    RUBY
      , init_worker: -> { Async::Redis.subscribe("news", redis: Async::Redis[:cache]) { |msg, ch| Async.sleep(0.01); Async::Redis[:cache].call("RPUSH", "got", "\#{ch}:\#{msg}") } }
    OPTS
    GatewaySpec.poll('the worker to subscribe') { get('/pub').body == '1' }
    GatewaySpec.poll('the message to be handled') { @redis.cmd('LRANGE', 'got', 0, -1).include?('news:hello') }
  end

  it 'a fixed-window limit in Redis holds across two gateways (a fleet)' do
    cfg = lambda do |port|
      <<~RUBY
        redis :fleet, servers: ["#{@redis.addr}"]
        server listen: "127.0.0.1:#{port}" do
          location "/" do
            n, = Async::Redis[:fleet].pipeline { |p| p.incr("fleet"); p.expire("fleet", 60) }
            n > 10 ? [429, { "retry-after" => "60" }, ["no\n"]] : "ok\n"
          end
        end
      RUBY
    end
    ports = [free_port, free_port]
    ports.each { |p| start_gateway(cfg.call(p), ports: p) }
    @redis.cmd('DEL', 'fleet') # the readiness probes counted too
    codes = 16.times.map { |i| http_get(ports[i % 2], '/').status }
    expect(codes.count(200)).to eq(10)
    expect(codes.count(429)).to eq(6)
    expect(@redis.cmd('GET', 'fleet')).to eq('16')
  end
end
