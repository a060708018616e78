# The response cache (docs/cache.md): a location's `cache:` in front of
# proxy_pass and Ruby handlers, over real sockets against the real binary.
# A counting upstream (a scripted peer in this process) records every
# request it gets, so each example can say how many reached it.
require_relative 'spec_helper'
require_relative 'fastcgi_helper'
require 'digest'
require 'zlib'

RSpec.describe 'response cache' do
  # A peer answering every request with the block's [status, headers, body]
  # (called with the request and its number, from 1), keeping them all
  # (but the harness's readiness probe).
  def counting_upstream(&answer)
    seen = []
    lock = Mutex.new
    up = fake_upstream do |peer|
      while (req = peer.read_request(timeout: 60))
        if req.target == '/__spec_ready__' # the harness's readiness probe: not counted
          peer.respond(404, { 'Cache-Control' => 'no-store' }, '')
          next
        end
        n = lock.synchronize { seen << req; seen.size }
        status, headers, body = answer.call(req, n)
        peer.respond(status, headers, body)
      end
    end
    up.define_singleton_method(:seen) { lock.synchronize { seen.dup } }
    up.define_singleton_method(:count) { lock.synchronize { seen.size } }
    up
  end

  def zone_prelude(name = 'api', path: nil, memory: '8m')
    %(cache :#{name}, memory: "#{memory}"#{path ? %(, path: "#{path}") : ''})
  end

  def start(up, cache_opt, prelude: zone_prelude, server: 'workers: 1', extra: '')
    gateway_with(%(location "/", proxy_pass: "http://127.0.0.1:#{up.port}", cache: #{cache_opt}\n#{extra}),
                 prelude, server: server)
  end

  def get(path, headers = {})
    http_get(@port, path, headers)
  end

  describe 'MISS, then HIT' do
    it 'answers the second request from the cache: one upstream request, X-Cache-Status and Age' do
      up = counting_upstream { |_, n| [200, { 'Cache-Control' => 'max-age=60', 'Content-Type' => 'text/plain' }, "body #{n}"] }
      start(up, ':api')
      r1 = get('/a?x=1')
      expect([r1.status, r1.body, r1['X-Cache-Status']]).to eq([200, 'body 1', 'MISS'])
      r2 = get('/a?x=1')
      expect([r2.status, r2.body, r2['X-Cache-Status']]).to eq([200, 'body 1', 'HIT'])
      expect(r2['Age']).to match(/\A\d+\z/)
      expect(r2['Content-Type']).to eq('text/plain')
      expect(up.count).to eq(1)
      expect(get('/a?x=2').body).to eq('body 2') # another key
      expect(up.count).to eq(2)
    end

    it 'works in front of a Ruby handler' do
      gateway_with(<<~'LOC', zone_prelude)
        location "/r", cache: { zone: :api, valid: { 200 => 60 } } do |req|
          $n = ($n || 0) + 1
          "ruby #{$n}"
        end
      LOC
      expect(get('/r').body).to eq('ruby 1')
      r = get('/r')
      expect([r.body, r['X-Cache-Status']]).to eq(['ruby 1', 'HIT'])
    end

    it "keeps a phase's own fields out of the entry: a hit has them once, from its own phase" do
      up = counting_upstream { |_, _| [200, { 'Cache-Control' => 'max-age=60', 'X-Up' => 'u' }, 'p'] }
      gateway_with(%(location "/", proxy_pass: "http://127.0.0.1:#{up.port}", cache: :api, ) +
                   %(access: ->(req) { req.headers_out["X-Phase"] = req.headers["X-N"]; nil }), zone_prelude)
      get('/ph', 'X-N' => '1')
      r = get('/ph', 'X-N' => '2')
      expect([r['X-Cache-Status'], r.count('X-Phase'), r['X-Phase'], r['X-Up']]).to eq(['HIT', 1, '2', 'u'])
    end

    it 'works in front of FastCGI' do
      n = 0
      fcgi = FakeFcgi.new { |_, _, _| FakeFcgi.answer("Cache-Control: max-age=60\r\nContent-Type: text/plain\r\n\r\nfcgi #{n += 1}") }
      gateway_with(%(location "/php", fastcgi: "127.0.0.1:#{fcgi.port}", cache: :api), zone_prelude)
      expect(get('/php').body).to eq('fcgi 1')
      r = get('/php')
      expect([r.body, r['X-Cache-Status'], n]).to eq(['fcgi 1', 'HIT', 1])
      expect(fcgi.stop).to eq([])
    end
  end

  describe 'what is stored, and for how long' do
    def twice(headers, valid: nil)
      up = counting_upstream { |_, n| [200, headers, "v#{n}"] }
      start(up, valid ? "{ zone: :api, valid: #{valid} }" : ':api')
      a = get('/x')
      b = get('/x')
      [up.count, a.body, b.body, b['X-Cache-Status']]
    end

    it 'stores by max-age' do
      expect(twice({ 'Cache-Control' => 'max-age=60' })).to eq([1, 'v1', 'v1', 'HIT'])
    end

    it 'takes s-maxage over max-age' do
      expect(twice({ 'Cache-Control' => 'max-age=0, s-maxage=60' })).to eq([1, 'v1', 'v1', 'HIT'])
    end

    it 'stores by Expires' do
      expires = (Time.now.utc + 120).strftime('%a, %d %b %Y %H:%M:%S GMT')
      expect(twice({ 'Expires' => expires })).to eq([1, 'v1', 'v1', 'HIT'])
    end

    it 'uses valid: when the response gives no freshness' do
      expect(twice({}, valid: '{ 200 => 60 }')).to eq([1, 'v1', 'v1', 'HIT'])
    end

    it 'stores nothing without freshness and valid:' do
      expect(twice({})).to eq([2, 'v1', 'v2', 'MISS'])
    end

    it 'never stores no-store' do
      expect(twice({ 'Cache-Control' => 'no-store, max-age=60' })).to eq([2, 'v1', 'v2', 'MISS'])
    end

    it 'never stores private' do
      expect(twice({ 'Cache-Control' => 'private, max-age=60' })).to eq([2, 'v1', 'v2', 'MISS'])
    end

    it 'does not store a response with Set-Cookie' do
      expect(twice({ 'Cache-Control' => 'max-age=60', 'Set-Cookie' => 'id=1' })).to eq([2, 'v1', 'v2', 'MISS'])
    end

    it 'store_set_cookie: true stores a response with Set-Cookie, the field left out of the entry' do
      up = counting_upstream { |_, n| [200, { 'Cache-Control' => 'max-age=60', 'Set-Cookie' => "id=#{n}", 'X-Up' => 'u' }, "v#{n}"] }
      start(up, '{ zone: :api, store_set_cookie: true }')
      a = get('/sc')
      expect([a.body, a['Set-Cookie'], a['X-Cache-Status']]).to eq(['v1', 'id=1', 'MISS']) # the filling client keeps its cookie
      b = get('/sc')
      expect([b.body, b['Set-Cookie'], b['X-Up'], b['X-Cache-Status']]).to eq(['v1', nil, 'u', 'HIT'])
      expect(up.count).to eq(1)
    end

    it 'caches a 404 for its own valid: time' do
      up = counting_upstream { |_, n| [404, {}, "gone #{n}"] }
      start(up, '{ zone: :api, valid: { 200 => 60, 404 => 60 } }')
      expect(get('/nope').status).to eq(404)
      r = get('/nope')
      expect([r.status, r.body, r['X-Cache-Status'], up.count]).to eq([404, 'gone 1', 'HIT', 1])
    end

    it 'answers HEAD from the entry a GET stored; a HEAD that misses stores nothing' do
      up = counting_upstream do |req, n|
        body = "head #{n}"
        [200, { 'Cache-Control' => 'max-age=60', 'Content-Length' => body.bytesize.to_s }, req.method == 'HEAD' ? '' : body]
      end
      start(up, ':api')
      h1 = http_request(@port, 'HEAD', '/hd')
      expect([h1.status, h1['X-Cache-Status']]).to eq([200, 'MISS'])
      expect(get('/hd').body).to eq('head 2') # the HEAD stored nothing
      h2 = http_request(@port, 'HEAD', '/hd')
      expect([h2.status, h2['Content-Length'], h2.body, h2['X-Cache-Status']]).to eq([200, '6', '', 'HIT'])
      expect(up.count).to eq(2)
    end

    it 'does not cache POST' do
      up = counting_upstream { |_, n| [200, { 'Cache-Control' => 'max-age=60' }, "p#{n}"] }
      start(up, ':api')
      http_request(@port, 'POST', '/p', {}, 'x')
      r = http_request(@port, 'POST', '/p', {}, 'x')
      expect([r.body, r['X-Cache-Status'], up.count]).to eq(['p2', nil, 2])
    end
  end

  it 'stores one variant per value of the headers Vary lists' do
    up = counting_upstream do |req, n|
      [200, { 'Cache-Control' => 'max-age=60', 'Vary' => 'Accept-Language' }, "#{req['Accept-Language']} #{n}"]
    end
    start(up, ':api')
    expect(get('/v', 'Accept-Language' => 'en').body).to eq('en 1')
    expect(get('/v', 'Accept-Language' => 'fr').body).to eq('fr 2')
    en = get('/v', 'Accept-Language' => 'en')
    fr = get('/v', 'Accept-Language' => 'fr')
    expect([en.body, en['X-Cache-Status'], fr.body, fr['X-Cache-Status']]).to eq(['en 1', 'HIT', 'fr 2', 'HIT'])
    expect(up.count).to eq(2)
  end

  it 'revalidates an expired entry with If-None-Match: a 304 refreshes it (REVALIDATED)' do
    up = counting_upstream do |req, n|
      if req['If-None-Match'] == '"v1"'
        [304, { 'ETag' => '"v1"', 'Cache-Control' => 'max-age=60' }, '']
      else
        [200, { 'ETag' => '"v1"', 'Cache-Control' => 'max-age=0', 'Last-Modified' => 'Tue, 14 Nov 2023 22:13:20 GMT',
                'Age' => '100' }, "full #{n}"]
      end
    end
    start(up, ':api')
    expect(get('/e')['X-Cache-Status']).to eq('MISS')
    r = get('/e') # stale at once (max-age=0): revalidated
    expect([r.status, r.body, r['X-Cache-Status']]).to eq([200, 'full 1', 'REVALIDATED'])
    expect(r['Age']).to eq('0') # received again just now (the first answer was 100 s old)
    cond = up.seen[1]
    expect([cond['If-None-Match'], cond['If-Modified-Since']]).to eq(['"v1"', 'Tue, 14 Nov 2023 22:13:20 GMT'])
    r = get('/e') # the 304's max-age=60 made it fresh
    expect([r.body, r['X-Cache-Status'], up.count]).to eq(['full 1', 'HIT', 2])
  end

  it "answers the client's own If-None-Match on a hit with 304, and passes no client validators upstream" do
    up = counting_upstream { |_, n| [200, { 'ETag' => '"e7"', 'Cache-Control' => 'max-age=60' }, "b#{n}"] }
    start(up, ':api')
    first = get('/c', 'If-None-Match' => '"e7"')
    expect([first.status, first.body]).to eq([200, 'b1']) # a miss: the upstream saw no If-None-Match
    expect(up.seen[0]['If-None-Match']).to be_nil
    r = get('/c', 'If-None-Match' => '"e7"')
    expect([r.status, r['X-Cache-Status']]).to eq([304, 'HIT'])
  end

  it 'serves the stale entry at once and refreshes it in the background (stale-while-revalidate)' do
    up = counting_upstream do |_, n|
      sleep 1.0 if n == 2 # the refresh is slow
      [200, { 'Cache-Control' => n == 1 ? 'max-age=0, stale-while-revalidate=60' : 'max-age=60' }, "gen #{n}"]
    end
    start(up, ':api')
    expect(get('/s').body).to eq('gen 1')
    r, took = timed { get('/s') }
    expect([r.body, r['X-Cache-Status']]).to eq(['gen 1', 'STALE'])
    expect(took).to be < slack(0.8) # not waiting for the refresh
    poll('the refresh to reach the upstream') { up.count == 2 }
    u = get('/s')
    expect([u.body, u['X-Cache-Status']]).to eq(['gen 1', 'UPDATING'])
    fresh = poll('the refreshed entry', timeout: 5) { (x = get('/s')).body == 'gen 2' && x }
    expect(fresh['X-Cache-Status']).to eq('HIT')
    expect(up.count).to eq(2)
  end

  # The refresh is a request of the worker's own, held by no connection: a
  # worker that stops while it waits on a slow upstream must cancel and free
  # it (the sanitizer build reports a leak at the worker's exit otherwise).
  it 'cancels a background refresh still running when the worker stops (graceful quit)' do
    up = counting_upstream do |_, n|
      sleep 4.0 if n == 2 # the refresh outlives the worker
      [200, { 'Cache-Control' => 'max-age=0, stale-while-revalidate=60' }, "gen #{n}"]
    end
    start(up, ':api')
    expect(get('/q').body).to eq('gen 1')
    expect(get('/q')['X-Cache-Status']).to eq('STALE')
    poll('the refresh to reach the upstream') { up.count == 2 }
    @gw.signal('QUIT')
    status, took = timed { @gw.wait_exit(slack(3)) }
    expect(status&.exitstatus).to eq(0)
    expect(took).to be < slack(3) # not waiting for the refresh's upstream
    expect(@gw.log).not_to include('requests in flight') # freed before the upstream pool
    expect(@gw.log).not_to match(GatewaySpec::SANITIZER_REPORT)
  end

  it 'use_stale: [:updating] serves an expired entry while another request refreshes it (UPDATING)' do
    up = counting_upstream do |_, n|
      sleep 1.0 if n == 2
      [200, { 'Cache-Control' => 'max-age=0' }, "gen #{n}"]
    end
    start(up, '{ zone: :api, use_stale: [:updating] }')
    expect(get('/u').body).to eq('gen 1')
    refresher = Thread.new { get('/u') }
    poll('the refresh to reach the upstream') { up.count == 2 }
    r = get('/u')
    expect([r.body, r['X-Cache-Status']]).to eq(['gen 1', 'UPDATING'])
    ref = refresher.value
    expect([ref.body, ref['X-Cache-Status']]).to eq(['gen 2', 'EXPIRED'])
  end

  it 'serves the stale entry when the upstream fails (stale-if-error: STALE)' do
    up = counting_upstream do |_, n|
      n == 1 ? [200, { 'Cache-Control' => 'max-age=0, stale-if-error=60' }, 'good'] : [503, {}, 'down']
    end
    start(up, ':api')
    expect(get('/f').body).to eq('good')
    r = get('/f')
    expect([r.status, r.body, r['X-Cache-Status']]).to eq([200, 'good', 'STALE'])
    expect(up.count).to eq(2)
  end

  it 'serves the stale entry when the upstream is down (use_stale: [:error])' do
    up = counting_upstream { |_, _| [200, { 'Cache-Control' => 'max-age=0' }, 'kept'] }
    start(up, '{ zone: :api, use_stale: [:error, :timeout] }')
    expect(get('/d').body).to eq('kept')
    up.stop # connections refused from now on
    r = get('/d')
    expect([r.status, r.body, r['X-Cache-Status']]).to eq([200, 'kept', 'STALE'])
  end

  it 'without use_stale, an upstream that is down is a 502' do
    up = counting_upstream { |_, _| [200, { 'Cache-Control' => 'max-age=0' }, 'kept'] }
    start(up, ':api')
    expect(get('/d').body).to eq('kept')
    up.stop
    expect(get('/d').status).to eq(502)
  end

  it 'collapses 200 concurrent requests for a cold key into one upstream request, across two workers (lock: true)' do
    up = counting_upstream do |_, _|
      sleep 0.5
      [200, { 'Cache-Control' => 'max-age=60' }, 'filled']
    end
    start(up, '{ zone: :api, lock: true }', server: 'workers: 2, reuseport: true')
    threads = Array.new(200) { Thread.new { get('/cold', {}) } }
    results = threads.map { |t| t.value }
    expect(results.map(&:status).uniq).to eq([200])
    expect(results.map(&:body).uniq).to eq(['filled'])
    expect(up.count).to eq(1)
    expect(results.count { |r| r['X-Cache-Status'] == 'MISS' }).to eq(1)
  end

  it 'a waiter fetches itself once lock_timeout passes' do
    up = counting_upstream do |_, n|
      sleep 2.5 if n == 1
      [200, { 'Cache-Control' => 'max-age=60' }, "t#{n}"]
    end
    start(up, '{ zone: :api, lock: true, lock_timeout: 1 }')
    first = Thread.new { get('/slow') }
    poll('the fill to reach the upstream') { up.count == 1 }
    r, took = timed { get('/slow') }
    expect([r.body, r['X-Cache-Status']]).to eq(%w[t2 MISS])
    expect(took).to be_between(0.9, slack(2.3))
    expect(first.value.body).to eq('t1')
  end

  it 'BYPASS: the bypass: lambda sends the request to the handler and stores nothing' do
    up = counting_upstream { |_, n| [200, { 'Cache-Control' => 'max-age=60' }, "b#{n}"] }
    start(up, %({ zone: :api, bypass: ->(req) { req.headers["X-Fresh"] == "1" } }))
    expect(get('/b', 'X-Fresh' => '1')['X-Cache-Status']).to eq('BYPASS')
    expect(get('/b')['X-Cache-Status']).to eq('MISS')
    r = get('/b', 'X-Fresh' => '1')
    expect([r.body, r['X-Cache-Status']]).to eq(['b3', 'BYPASS'])
    expect(get('/b').body).to eq('b2')
  end

  it 'uses the key: lambda' do
    up = counting_upstream { |_, n| [200, { 'Cache-Control' => 'max-age=60' }, "k#{n}"] }
    start(up, %({ zone: :api, key: ->(req) { req.path } })) # the query is left out of the key
    expect(get('/k?a=1').body).to eq('k1')
    r = get('/k?a=2')
    expect([r.body, r['X-Cache-Status']]).to eq(['k1', 'HIT'])
  end

  it 'purges one key, and a prefix, from Ruby' do
    up = counting_upstream { |req, n| [200, { 'Cache-Control' => 'max-age=60' }, "#{req.target} #{n}"] }
    extra = <<~LOC
      location "/purge" do |req|
        Gateway::Cache[:api].purge("http://" + req.headers["Host"] + req.query).to_s
      end
      location "/stats" do |req|
        s = Gateway::Cache[:api].stats
        "#{'#{s[:entries]} #{s[:evictions]} #{Gateway::Cache[:nope].inspect}'}"
      end
      location "/purge_prefix" do |req|
        Gateway::Cache[:api].purge_prefix("http://" + req.headers["Host"] + req.query).to_s
      end
    LOC
    start(up, ':api', extra: extra)
    %w[/p/1 /p/2 /q/1].each { |p| get(p) }
    expect(get('/p/1')['X-Cache-Status']).to eq('HIT')
    expect(get('/purge?/p/1').body).to eq('1')
    expect(get('/p/1')['X-Cache-Status']).to eq('MISS')
    expect(get('/purge_prefix?/p/').body).to eq('2')
    expect(get('/p/2')['X-Cache-Status']).to eq('MISS')
    expect(get('/q/1')['X-Cache-Status']).to eq('HIT')
    expect(get('/stats').body).to eq('2 0 nil') # /p/1 (stored again) and /q/1
  end

  it 'answers a Range request from the cached full body' do
    body = (0...100).map { |i| (97 + i % 26).chr }.join
    up = counting_upstream { |_, _| [200, { 'Cache-Control' => 'max-age=60', 'Content-Type' => 'text/plain' }, body] }
    start(up, ':api')
    get('/big', 'Range' => 'bytes=0-4') # a miss: the upstream is asked for the whole body
    expect(up.seen[0]['Range']).to be_nil
    r = get('/big', 'Range' => 'bytes=10-14')
    expect([r.status, r.body, r['Content-Range'], r['X-Cache-Status']]).to eq([206, body[10, 5], 'bytes 10-14/100', 'HIT'])
    m = get('/big', 'Range' => 'bytes=0-1,50-51')
    expect(m.status).to eq(206)
    expect(m['Content-Type']).to start_with('multipart/byteranges; boundary=')
    expect(m.body).to include("Content-Range: bytes 0-1/100\r\n\r\nab\r\n", "Content-Range: bytes 50-51/100\r\n\r\n#{body[50, 2]}\r\n")
    expect(up.count).to eq(1)
  end

  it 'serves HTTP/2 clients the entry an HTTP/1.1 request stored' do
    up = counting_upstream { |_, n| [200, { 'Cache-Control' => 'max-age=60' }, "h#{n}"] }
    start(up, ':api', server: 'workers: 1, http2: true')
    expect(get('/h2')['X-Cache-Status']).to eq('MISS')
    out = curl('-i', '--http2-prior-knowledge', "http://127.0.0.1:#{@port}/h2")
    expect(out).to start_with('HTTP/2 200')
    expect(out).to match(/^x-cache-status: HIT\r?$/i)
    expect(out).to end_with('h1')
    expect(up.count).to eq(1)
  end

  it 'shares one entry between two workers' do
    up = counting_upstream { |_, n| [200, { 'Cache-Control' => 'max-age=60' }, "w#{n}"] }
    start(up, ':api', server: 'workers: 2, reuseport: true')
    # two keep-alive connections served by different workers
    conns = {}
    50.times do
      break if conns.size == 2
      c = connect(@port)
      c.request('GET', '/pid')
      pid = c.read_response.body
      conns[pid] ? c.close : conns[pid] = c
    end
    expect(conns.size).to eq(2)
    a, b = conns.values
    a.request('GET', '/shared')
    expect(a.read_response['X-Cache-Status']).to eq('MISS')
    b.request('GET', '/shared')
    r = b.read_response
    expect([r.body, r['X-Cache-Status'], up.count]).to eq(['w1', 'HIT', 1])
    conns.each_value(&:close)
  end

  it 'keeps its entries (in memory) across a reload' do
    up = counting_upstream { |_, n| [200, { 'Cache-Control' => 'max-age=600' }, "r#{n}"] }
    start(up, ':api')
    expect(get('/reload').body).to eq('r1')
    before = worker_pid
    @gw.rewrite_config(File.read(@gw.config_path).sub('location "/pid"', 'location "/pid2" do "x" end' + "\n" + 'location "/pid"'))
    @gw.signal('HUP')
    poll('the new workers', timeout: 10) { worker_pid != before && get('/pid2').status == 200 }
    r = get('/reload')
    expect([r.body, r['X-Cache-Status'], up.count]).to eq(['r1', 'HIT', 1])
  end

  it 'compresses after the cache: the identity body is stored, each client gets its own coding' do
    text = 'compressible ' * 100
    up = counting_upstream { |_, _| [200, { 'Cache-Control' => 'max-age=60', 'Content-Type' => 'text/plain' }, text] }
    gateway_with(%(location "/", proxy_pass: "http://127.0.0.1:#{up.port}", cache: :api, compress: true), zone_prelude)
    gz = get('/z', 'Accept-Encoding' => 'gzip')
    expect([gz['Content-Encoding'], gz['X-Cache-Status']]).to eq(%w[gzip MISS])
    plain = get('/z')
    expect([plain['Content-Encoding'], plain.body, plain['X-Cache-Status']]).to eq([nil, text, 'HIT'])
    expect(up.count).to eq(1)
  end

  it 'writes $cache_status to the access log' do
    log = File.join(spec_dir, 'access.log')
    up = counting_upstream { |_, _| [200, { 'Cache-Control' => 'max-age=60' }, 'x'] }
    start(up, ':api', prelude: %(#{zone_prelude}\naccess_log "#{log}", format: "$uri $cache_status"))
    get('/l')
    get('/l')
    get('/pid') # not a cached location
    poll('the access log') { File.exist?(log) && File.read(log).lines.size >= 4 }
    expect(File.read(log).lines.map(&:chomp)).to include('/l MISS', '/l HIT', '/pid -')
  end

  it 'counts hits, misses and entries on the status page and in Prometheus' do
    up = counting_upstream { |_, _| [200, { 'Cache-Control' => 'max-age=60' }, 'x'] }
    gateway_with(%(location "/m", proxy_pass: "http://127.0.0.1:#{up.port}", cache: :api), zone_prelude, status: true)
    get('/m')
    get('/m')
    get('/m')
    json = get('/status').body
    expect(json).to match(/"caches":\{"api":\{"hits":2,"misses":1,"stores":1,/)
    prom = get('/status?format=prometheus').body
    expect(prom).to include('gateway_cache_zone_hits_total{zone="api"} 2', 'gateway_cache_zone_entries{zone="api"} 1')
    expect(prom).to match(/^gateway_cache_hits_total\{port="#{@port}",worker="0",pid="\d+"\} 2$/)
    expect(json).to include('"cache_hits":2,"cache_misses":1,')
  end

  describe 'bodies in files' do
    let(:dir) { File.join(spec_dir, 'cache') }
    let(:big) { Digest::SHA256.hexdigest('x') * 4096 } # 256 KiB: into a file

    def start_disk(up)
      start(up, ':api', prelude: zone_prelude(path: dir))
    end

    def cache_files
      Dir[File.join(dir, '[0-9a-f][0-9a-f]', '*')]
    end

    it 'keeps its entries across a restart (the loader)' do
      up = counting_upstream { |_, _| [200, { 'Cache-Control' => 'max-age=600' }, big] }
      start_disk(up)
      expect(get('/file').body).to eq(big)
      expect(cache_files.size).to eq(1)
      @gw.stop
      @gw = start_gateway(File.read(@gw.config_path), ports: [@port])
      r = get('/file')
      expect([r.body.bytesize, r.body == big, r['X-Cache-Status']]).to eq([big.bytesize, true, 'HIT'])
      expect(up.count).to eq(1)
    end

    # A hit on a body held in a file: the whole body, one range, several,
    # gzip, HTTP/2 and HEAD all answer the file's bytes.
    it 'answers a body held in a file whole, by ranges, compressed, over HTTP/2 and to HEAD' do
      body = (0...(256 * 1024)).map { |i| (i * 7 % 251).chr }.join.b
      up = counting_upstream { |_, _| [200, { 'Cache-Control' => 'max-age=600', 'Content-Type' => 'text/plain' }, body] }
      gateway_with(%(location "/", proxy_pass: "http://127.0.0.1:#{up.port}", cache: :api, compress: true),
                   zone_prelude(path: dir), server: 'workers: 1, http2: true')
      expect(get('/f').body == body).to be(true)
      expect(cache_files.size).to eq(1)
      r = get('/f')
      expect([r.status, r.body == body, r['Content-Length'], r['X-Cache-Status']]).to eq([200, true, body.bytesize.to_s, 'HIT'])
      one = get('/f', 'Range' => 'bytes=1000-1999')
      expect([one.status, one.body == body[1000, 1000], one['Content-Range']]).to eq([206, true, "bytes 1000-1999/#{body.bytesize}"])
      multi = get('/f', 'Range' => 'bytes=0-9,200000-200009')
      expect(multi.status).to eq(206)
      expect(multi.body).to include("\r\n\r\n#{body[0, 10]}\r\n", "\r\n\r\n#{body[200_000, 10]}\r\n")
      gz = get('/f', 'Accept-Encoding' => 'gzip')
      expect([gz['Content-Encoding'], gz['X-Cache-Status'], Zlib.gunzip(gz.body) == body]).to eq(['gzip', 'HIT', true])
      h2 = curl('--http2-prior-knowledge', "http://127.0.0.1:#{@port}/f").b
      expect(h2 == body).to be(true)
      head = http_request(@port, 'HEAD', '/f')
      expect([head.status, head['Content-Length'], head.body]).to eq([200, body.bytesize.to_s, ''])
      expect(up.count).to eq(1)
    end

    { 'truncated' => ->(f) { File.truncate(f, File.size(f) / 2) },
      'corrupted' => ->(f) { File.open(f, 'r+b') { |io| io.seek(100); io.write('garbage!' * 8) } },
      'removed' => ->(f) { File.delete(f) } }.each do |what, fault|
      it "treats a cache file #{what} underneath as a miss, with a log line and the right body" do
        up = counting_upstream { |_, n| [200, { 'Cache-Control' => 'max-age=600' }, n == 1 ? big : big.reverse] }
        start_disk(up)
        get('/file')
        expect(get('/file')['X-Cache-Status']).to eq('HIT')
        files = cache_files
        expect(files.size).to eq(1)
        fault.call(files[0])
        r = get('/file')
        expect([r.status, r['X-Cache-Status'], r.body == big.reverse]).to eq([200, 'MISS', true])
        expect(up.count).to eq(2)
        poll('a log line about the cache file') { @gw.log =~ /cache/i && @gw.log =~ /#{what == 'removed' ? 'remov|missing|gone|open' : 'truncat|corrupt|check|bad|mismatch'}/i }
      end
    end
  end

  describe 'configuration' do
    it 'names FILE:LINE for a zone that is not declared' do
      status, out, path = check_config(%(server listen: "127.0.0.1:#{free_port}" do\n  location "/", proxy_pass: "http://127.0.0.1:1", cache: :nope\nend\n))
      expect(status).to eq(1)
      expect(out).to include("#{path}:2:", 'cache: no cache zone :nope')
    end

    it 'names FILE:LINE for a bad option' do
      status, out, path = check_config(%(cache :api, memory: "1m"\nserver listen: "127.0.0.1:#{free_port}" do\n  location "/", proxy_pass: "http://127.0.0.1:1", cache: { zone: :api, use_stale: [:often] }\nend\n))
      expect(status).to eq(1)
      expect(out).to include("#{path}:3:", 'use_stale: must be a list of :error, :timeout, :updating')
    end

    it 'names FILE:LINE for a store_set_cookie: that is not true or false' do
      status, out, path = check_config(%(cache :api, memory: "1m"\nserver listen: "127.0.0.1:#{free_port}" do\n  location "/", proxy_pass: "http://127.0.0.1:1", cache: { zone: :api, store_set_cookie: "yes" }\nend\n))
      expect(status).to eq(1)
      expect(out).to include("#{path}:3:", 'cache: store_set_cookie: must be true or false, got "yes"')
    end

    it 'takes valid: times as seconds or "10m", "1h", for statuses, lists of them and any:' do
      status, out, = check_config(%(cache :api, memory: "1m"\nserver listen: "127.0.0.1:#{free_port}" do\n  location "/", proxy_pass: "http://127.0.0.1:1", cache: { zone: :api, valid: { [200, 301] => "10m", 404 => 60, any: "1h" }, lock_timeout: "3s" }\nend\n))
      expect(status).to eq(0), out
      status, out, path = check_config(%(cache :api, memory: "1m"\nserver listen: "127.0.0.1:#{free_port}" do\n  location "/", proxy_pass: "http://127.0.0.1:1", cache: { zone: :api, valid: { 200 => "10x" } }\nend\n))
      expect(status).to eq(1)
      expect(out).to include("#{path}:3:", 'cache: valid: 200 must be seconds')
    end

    it 'names FILE:LINE for a bad zone size' do
      status, out, path = check_config(%(cache :api, memory: "lots"\n))
      expect(status).to eq(1)
      expect(out).to include("#{path}:1:", 'memory: must be a number of bytes')
    end
  end
end
