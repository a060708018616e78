# Active health checks (`upstream ..., health_check: {...}`, docs/fleet.md):
# one worker checks each group's servers and shares the result with every
# worker through shared memory; a server failing its checks gets no user
# request until it passes again.
require_relative 'spec_helper'
require 'json'

RSpec.describe 'upstream health_check' do
  # A backend answering GET /health with @health[name] and anything else
  # with its name; it counts both kinds of request.
  class HealthBackend
    attr_reader :port, :name
    attr_accessor :health_status

    def initialize(name)
      @name = name
      @health_status = 200
      @lock = Mutex.new
      @user = 0
      @health = 0
      @server = TCPServer.new('127.0.0.1', 0)
      @port = @server.addr[1]
      @threads = []
      @acceptor = Thread.new do
        loop { @threads << Thread.new(@server.accept) { |s| serve(s) } }
      rescue IOError
        nil
      end
    end

    def counts
      @lock.synchronize { [@user, @health] }
    end

    def stop
      @server.close
      @acceptor.join(2)
      @threads.each(&:kill)
    end

    private

    def serve(sock)
      loop do
        head = +''
        head << sock.readpartial(4096) until head.include?("\r\n\r\n")
        path = head[/\AGET (\S+)/, 1]
        if path == '/health'
          @lock.synchronize { @health += 1 }
          status = @health_status
          body = 'health'
        else
          @lock.synchronize { @user += 1 }
          status = 200
          body = @name
        end
        sock.write("HTTP/1.1 #{status} X\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}")
        break if head =~ /^connection: close/i
      end
    rescue EOFError, IOError, Errno::ECONNRESET, Errno::EPIPE
      nil
    ensure
      sock.close rescue nil
    end
  end

  INTERVAL = 0.2
  FAILS = 2
  PASSES = 2

  before(:each) do
    @a = HealthBackend.new('A')
    @b = HealthBackend.new('B')
    @port = free_port
    @st = free_port
    @gw = start_gateway(<<~RUBY, ports: [@port, @st])
      upstream :app, servers: ["127.0.0.1:#{@a.port}", "127.0.0.1:#{@b.port}"], max_fails: 0,
               health_check: { path: "/health", interval: #{INTERVAL}, timeout: 0.5, fails: #{FAILS}, passes: #{PASSES}, expect: 200 }
      server listen: "127.0.0.1:#{@port}", workers: 2 do
        location "/", proxy_pass: "http://app"
      end
      server listen: "127.0.0.1:#{@st}" do
        location "/status", status: true
      end
    RUBY
  end

  after(:each) do
    @a&.stop
    @b&.stop
  end

  def health_of(name)
    backend = name == 'A' ? @a : @b
    JSON.parse(http_get(@st, '/status').body)['upstreams']['app'].find { |s| s['server'] == "127.0.0.1:#{backend.port}" }['health']
  end

  def served_by(n)
    Array.new(n) { http_get(@port, '/').body }.tally
  end

  it 'takes a failing server out after fails x interval, sends it no user request, and puts it back after passes x interval' do
    expect(served_by(20).keys.sort).to eq(%w[A B])
    t0 = GatewaySpec.now
    @b.health_status = 503
    poll('B marked down', timeout: 5) { health_of('B')['state'] == 'down' }
    took = GatewaySpec.now - t0
    expect(took).to be <= (FAILS + 1) * INTERVAL + 1.0 * GatewaySpec::SLACK # fails x interval (+ the round in progress, + 1 s for a busy machine)
    user_b, = @b.counts
    expect(served_by(40)).to eq('A' => 40) # both workers: none reach B
    expect(@b.counts[0]).to eq(user_b)
    expect(health_of('B')).to include('state' => 'down', 'last_status' => 503, 'last_error' => 'answered 503, not 200')
    expect(@gw.log).to match(%r{upstream app: server 127\.0\.0\.1:#{@b.port} is down: health check /health answered 503, not 200 \(2 failed in a row\)})

    t1 = GatewaySpec.now
    @b.health_status = 200
    poll('B up again', timeout: 5) { health_of('B')['state'] == 'up' }
    expect(GatewaySpec.now - t1).to be <= (PASSES + 1) * INTERVAL + 1.0 * GatewaySpec::SLACK
    expect(served_by(20).keys.sort).to eq(%w[A B])
    expect(@gw.log).to match(%r{upstream app: server 127\.0\.0\.1:#{@b.port} is up: health check /health passed 2 times in a row})
    prom = http_get(@st, '/status?format=prometheus').body
    expect(prom).to include(%(gateway_upstream_healthy{upstream="app",server="127.0.0.1:#{@b.port}"} 1))
    expect(prom).to include(%(gateway_upstream_health_transitions_total{upstream="app",server="127.0.0.1:#{@b.port}"} 2))
  end

  it 'a server that stops accepting connections is out too; one worker checks (not one per worker)' do
    _, h0 = @a.counts
    sleep 10 * INTERVAL
    _, h1 = @a.counts
    expect(h1 - h0).to be_between(5, 13) # ~10 rounds of one checker; two workers checking would make ~20
    @b.stop
    poll('B marked down', timeout: 5) { health_of('B')['state'] == 'down' }
    expect(served_by(20)).to eq('A' => 20)
    expect(health_of('B')['last_error']).to match(/refused|connect/)
  end

  it 'when the checking worker dies another worker takes the checks over' do
    checker = nil
    poll('a checker') { (checker = health_of('A')['checked_by']).to_i.positive? }
    workers = JSON.parse(http_get(@st, '/status').body)['workers'].to_h { |w| [w['pid'], w['port']] }
    expect(workers).to include(checker) # any worker of any server may hold the lock
    Process.kill('KILL', checker)
    poll('another checker', timeout: 10) { (c = health_of('A')['checked_by']) != checker && c.to_i.positive? }
    @b.health_status = 500
    poll('B marked down by the new checker', timeout: 10) { health_of('B')['state'] == 'down' }
    expect(served_by(10)).to eq('A' => 10)
    expect(@gw.log).to include("worker #{checker} (port #{workers[checker]} #") # the master saw it die (and replaced it)
  end

  it 'a group whose every server is down answers 502' do
    @a.health_status = 500
    @b.health_status = 500
    poll('both down', timeout: 5) { health_of('A')['state'] == 'down' && health_of('B')['state'] == 'down' }
    expect(http_get(@port, '/').status).to eq(502)
  end
end

RSpec.describe 'health_check config' do
  it 'rejects bad values at FILE:LINE' do
    [['health_check: { interval: 0 }', 'upstream app: health_check: interval must be a number of seconds from 0.01 to 3600'],
     ['health_check: { fails: 0 }', 'upstream app: health_check: fails must be an Integer from 1 to 100'],
     ['health_check: { expect: "200" }', 'upstream app: health_check: expect must be an HTTP status'],
     ['health_check: { path: "health" }', 'upstream app: health_check: path must be a request-target starting with "/"'],
     ['health_check: { paths: "/" }', 'upstream app: health_check: unknown key :paths'],
     ['health_check: "/health"', 'upstream app: health_check must be a Hash']].each do |opts, msg|
      status, output, path = check_config("# hc\nupstream :app, servers: [\"127.0.0.1:9\"], #{opts}\nserver listen: #{free_port} do\n  location(\"/\") { \"x\" }\nend\n")
      expect(status).to eq(1), output
      expect(output).to include("#{path}:2: #{msg}")
    end
  end
end
