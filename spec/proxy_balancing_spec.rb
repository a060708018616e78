# Upstream groups: how `upstream :g, servers: [...]` spreads requests
# (round robin, smooth weighted round robin, least_conn, hash on a key) and
# passive health checks (a refusing server is retried on the next one,
# marked down for fail_timeout, tried again afterwards; max_fails: 0 never
# marks down; all servers down -> 502).
#
# Each example boots its own single-worker gateway; the group's servers are
# scripted fakes that answer with their own name.
require_relative 'spec_helper'

# gateway_with(locations, groups): a single-worker server after the groups.
RSpec.describe 'upstream groups' do
  # A keep-alive fake upstream that answers every request with `name` and
  # counts them in @hits[name].
  def named_upstream(name)
    @hits ||= Hash.new(0)
    @hits_lock ||= Mutex.new
    fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        @hits_lock.synchronize { @hits[name] += 1 }
        peer.respond(200, {}, "#{name} #{req.target}")
      end
    end
  end

  def hits
    @hits_lock.synchronize { @hits.dup }
  end

  # The name of the upstream that answered GET path (asserting a 200).
  def served_by(path, **opts)
    r = http_get(@port, path, **opts)
    expect(r.status).to eq(200), "#{path}: #{r.inspect}"
    r.body.split(' ').first
  end

  def tally(names)
    names.each_with_object(Hash.new(0)) { |n, h| h[n] += 1 }
  end

  def marked_down_count
    @gw.log.scan(/marked down/).size
  end

  # ---------------------------------------------------------------------------
  describe 'round robin' do
    it 'spreads 30 requests over 3 servers 10/10/10' do
      a = named_upstream('a')
      b = named_upstream('b')
      c = named_upstream('c')
      gateway_with(%(location "/rr", proxy_pass: "http://g/"),
                   %(upstream :g, servers: ["127.0.0.1:#{a.port}", "127.0.0.1:#{b.port}", "127.0.0.1:#{c.port}"]))
      names = 30.times.map { served_by('/rr/x') }
      expect(tally(names)).to eq('a' => 10, 'b' => 10, 'c' => 10)
    end

    it 'takes turns: no server answers twice in a row' do
      a = named_upstream('a')
      b = named_upstream('b')
      gateway_with(%(location "/rr", proxy_pass: "http://g/"),
                   %(upstream :g, servers: ["127.0.0.1:#{a.port}", "127.0.0.1:#{b.port}"]))
      names = 10.times.map { served_by('/rr') }
      expect(names.each_cons(2).none? { |x, y| x == y }).to be(true), names.inspect
    end

    it 'maps the location prefix onto the group URL path ("/rr/a?q" -> "/base/a?q")' do
      a = named_upstream('a')
      gateway_with(%(location "/rr", proxy_pass: "http://g/base"),
                   %(upstream :g, servers: ["127.0.0.1:#{a.port}"]))
      expect(http_get(@port, '/rr/a?q=1').body).to eq('a /base/a?q=1')
    end

    it 'weights {address:, weight: 2} split 30 requests 20/10 (smooth weighted round robin)' do
      a = named_upstream('a')
      b = named_upstream('b')
      gateway_with(%(location "/w", proxy_pass: "http://g/"),
                   %(upstream :g, servers: [{ address: "127.0.0.1:#{a.port}", weight: 2 }, "127.0.0.1:#{b.port}"]))
      names = 30.times.map { served_by('/w') }
      expect(tally(names)).to eq('a' => 20, 'b' => 10)
      # smooth: the heavy server never serves three in a row
      expect(names.each_cons(3).none? { |t| t.uniq == ['a'] }).to be(true), names.inspect
    end
  end

  # ---------------------------------------------------------------------------
  describe 'least_conn' do
    it 'sends new requests to the server with fewer requests in flight' do
      release = Queue.new
      held = Queue.new
      slow = fake_upstream do |peer|
        while (req = peer.read_request(timeout: 30))
          held << req.target
          release.pop # hold until the example lets go
          peer.respond(200, {}, "slow #{req.target}")
        end
      end
      fast = named_upstream('fast')
      gateway_with(%(location "/lc", proxy_pass: "http://g/"),
                   %(upstream :g, servers: ["127.0.0.1:#{slow.port}", "127.0.0.1:#{fast.port}"], balance: :least_conn))
      # Park at least one request on the slow server (ties may go either way).
      parked = []
      4.times do |i|
        before = hits['fast']
        c = connect(@port)
        c.request('GET', "/lc/park#{i}", 'Connection' => 'close')
        parked << c
        poll("park#{i} to reach a server") { held.size >= 1 || hits['fast'] > before }
        break if held.size >= 1
      end
      expect(held.size).to be >= 1
      names = 10.times.map { served_by('/lc/next', timeout: 3) }
      expect(names).to all(eq('fast'))
    ensure
      20.times { release << true } if release
    end

    it 'spreads sequential requests when nothing is in flight (every server is used)' do
      a = named_upstream('a')
      b = named_upstream('b')
      gateway_with(%(location "/lc", proxy_pass: "http://g/"),
                   %(upstream :g, servers: ["127.0.0.1:#{a.port}", "127.0.0.1:#{b.port}"], balance: :least_conn))
      10.times { served_by('/lc') }
      expect(hits.values.sum).to eq(10)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'hash' do
    def hash_gateway
      a = named_upstream('a')
      b = named_upstream('b')
      c = named_upstream('c')
      gateway_with(%(location "/h" do |req| req.proxy_pass "http://h/", hash_key: req.query end),
                   %(upstream :h, servers: ["127.0.0.1:#{a.port}", "127.0.0.1:#{b.port}", "127.0.0.1:#{c.port}"], balance: :hash))
    end

    it 'sends the same key to the same server across 20 requests' do
      hash_gateway
      names = 20.times.map { served_by('/h?user-17') }
      expect(names.uniq.size).to eq(1), names.inspect
    end

    it 'keeps each of several keys on its own server' do
      hash_gateway
      %w[alice bob carol dave erin].each do |key|
        names = 5.times.map { served_by("/h?#{key}") }
        expect(names.uniq.size).to eq(1), "#{key}: #{names.inspect}"
      end
    end

    it 'spreads different keys over the servers' do
      hash_gateway
      names = (1..30).map { |i| served_by("/h?key#{i}") }
      expect(names.uniq.size).to be >= 2, tally(names).inspect
    end
  end

  # ---------------------------------------------------------------------------
  describe 'passive health' do
    it 'a refusing server: every request still succeeds (retried on the next server), marked down once' do
      dead = free_port
      live = named_upstream('live')
      gateway_with(%(location "/g", proxy_pass: "http://g/"),
                   %(upstream :g, servers: ["127.0.0.1:#{dead}", "127.0.0.1:#{live.port}"], fail_timeout: 10))
      names = 10.times.map { served_by('/g') }
      expect(names).to all(eq('live'))
      expect(@gw.log).to include("127.0.0.1:#{dead}")
      expect(marked_down_count).to eq(1), @gw.log
    end

    it 'during fail_timeout the dead server is not tried; after it, it is tried again' do
      dead = free_port
      live = named_upstream('live')
      gateway_with(%(location "/g", proxy_pass: "http://g/"),
                   %(upstream :g, servers: ["127.0.0.1:#{dead}", "127.0.0.1:#{live.port}"], fail_timeout: 1))
      served_by('/g') until marked_down_count == 1 || (@tries = (@tries || 0) + 1) > 4
      expect(marked_down_count).to eq(1)
      t0 = GatewaySpec.now
      retried = @gw.log.scan(/trying/).size
      # Within the second it stays down: requests go straight to the live one.
      while GatewaySpec.now - t0 < 0.7
        expect(served_by('/g')).to eq('live')
        expect(@gw.log.scan(/trying/).size).to eq(retried), "the dead server was tried during fail_timeout:\n#{@gw.log}"
      end
      # Afterwards it is tried (and marked down) again, while requests succeed.
      poll('the dead server to be tried again', timeout: 4, interval: 0.05) do
        expect(served_by('/g')).to eq('live')
        marked_down_count >= 2
      end
      expect(GatewaySpec.now - t0).to be >= 0.9
    end

    it 'all servers down -> 502, and the log says "no live upstreams"' do
      d1 = free_port
      d2 = free_port
      gateway_with(%(location "/g", proxy_pass: "http://g/"),
                   %(upstream :g, servers: ["127.0.0.1:#{d1}", "127.0.0.1:#{d2}"], fail_timeout: 10))
      3.times { expect(http_get(@port, '/g').status).to eq(502) }
      expect(@gw.log).to include('no live upstreams')
    end

    it 'max_fails: 0 never marks a server down (the refusing one keeps being tried)' do
      dead = free_port
      live = named_upstream('live')
      gateway_with(%(location "/g", proxy_pass: "http://g/"),
                   %(upstream :g, servers: ["127.0.0.1:#{dead}", "127.0.0.1:#{live.port}"], max_fails: 0))
      names = 10.times.map { served_by('/g') }
      expect(names).to all(eq('live'))
      expect(@gw.log).not_to include('marked down')
      expect(@gw.log.scan(/connection refused, trying/).size).to be >= 4
    end

    it 'max_fails: 3 marks a server down only after the third failure' do
      dead = free_port
      live = named_upstream('live')
      gateway_with(%(location "/g", proxy_pass: "http://g/"),
                   %(upstream :g, servers: ["127.0.0.1:#{dead}", "127.0.0.1:#{live.port}"], max_fails: 3))
      names = 12.times.map { served_by('/g') }
      expect(names).to all(eq('live'))
      expect(@gw.log.scan(/connection refused, trying/).size).to eq(3)
      expect(marked_down_count).to eq(1)
    end

    it 'a group with a single server is not made unusable by one failure (nginx: never marked down)' do
      flaky = 0
      lock = Mutex.new
      up = fake_upstream do |peer|
        while (req = peer.read_request(timeout: 30))
          first = lock.synchronize { (flaky += 1) == 1 }
          if first # the first request times out
            IO.select([peer.sock], nil, nil, 5)
            break
          end
          peer.respond(200, {}, "ok #{req.target}")
        end
      end
      gateway_with(%(location "/one/", proxy_pass: "http://one/"),
                   %(upstream :one, servers: ["127.0.0.1:#{up.port}"], timeout: 0.3, fail_timeout: 10))
      expect(http_get(@port, '/one/a').status).to eq(504)
      r = http_get(@port, '/one/b')
      expect([r.status, r.body]).to eq([200, 'ok /b'])
    end
  end

  # ---------------------------------------------------------------------------
  # The upstream client (httpclient.c) retries by error kind: a connection
  # that broke before any answer sends an idempotent request on to the next
  # server; a POST may have taken effect, so it is answered 502 instead.
  describe 'a connection closed before the answer' do
    it 'sends a GET on to the next server, never a POST' do
      seen = Queue.new
      closer = fake_upstream do |peer|
        req = peer.read_request(timeout: 10)
        seen << req.method if req # and closes without a word
      end
      live = named_upstream('live')
      gateway_with(%(location "/g", proxy_pass: "http://g/"),
                   %(upstream :g, servers: ["127.0.0.1:#{closer.port}", "127.0.0.1:#{live.port}"]))
      names = 4.times.map { served_by('/g') }
      expect(names).to all(eq('live'))
      gets = []
      gets << seen.pop until seen.empty?
      expect(gets).not_to be_empty
      expect(gets).to all(eq('GET'))
      expect(@gw.log.scan(/upstream closed connection prematurely, trying/).size).to eq(gets.size)
      statuses = 4.times.map { http_request(@port, 'POST', '/g', {}, 'x').status }
      posts = []
      posts << seen.pop until seen.empty?
      expect(posts).not_to be_empty
      expect(posts).to all(eq('POST'))
      expect(statuses.count(502)).to eq(posts.size)
      expect(statuses.count(200)).to eq(4 - posts.size)
      expect(@gw.log.scan(/upstream closed connection prematurely, trying/).size).to eq(gets.size)
    end
  end
end
