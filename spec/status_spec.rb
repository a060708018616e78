# The status page (`location "/status", status: true`) and Gateway.stats:
# every live worker of every server, from shared memory (stats.c), as JSON
# or as Prometheus text (?format=prometheus).
#
# Counters are written straight into the shared table by the worker that
# counts them (exact at once, whichever worker serves the page); gauges and
# the upstream/DNS numbers are published by each worker every second and by
# the serving worker right before it renders (its own are exact, the others'
# may lag up to a second: those are polled).
#
# Each example boots its own gateway: server A (1 worker, the page, the
# test handlers) and, when asked, server B (workers: 2).
require_relative 'spec_helper'
require 'json'

RSpec.describe 'status page and Gateway.stats' do
  # A keep-alive upstream answering "up TARGET".
  def upstream!
    @up ||= fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        peer.respond(200, {}, "up #{req.target}")
      end
    end
  end

  # Server A on @port (workers: 1) with the page and the test handlers;
  # server B on @port_b (workers: 2) when `second`. No host names are used;
  # the resolver points at a closed loopback port all the same.
  def status_gateway(second: true, prelude: '', locations: '')
    @port = free_port
    @port_b = free_port if second
    b = second ? config_with('location "/hello" do "hello-b" end', port: @port_b, server: 'workers: 2', status: true) : ''
    a = config_with(<<~RUBY, %(resolver "127.0.0.1:#{free_port}", timeout: 0.2, tries: 1\n#{prelude}), port: @port, status: true)
      location "/hello" do "hello" end
      location "/sleep" do
        Async.sleep 1
        "slept"
      end
      location "/sub" do
        Async::HTTP.sub_request("/hello").body + "!"
      end
      location "/sub_status" do
        r = Async::HTTP.sub_request("/status")
        "\#{r.status} \#{r.headers['content-type']} \#{r.body}"
      end
      location "/stats" do
        s = Gateway.stats
        mine = s.find { |h| h[:pid] == Gateway.pid }
        [s.class.to_s,
         s.size.to_s,
         s.all? { |h| h.is_a?(Hash) }.to_s,
         s.map { |h| h[:pid] }.sort.join(","),
         s.map { |h| "\#{h[:port]}/\#{h[:index]}" }.sort.join(","),
         mine.keys.all? { |k| k.is_a?(Symbol) }.to_s,
         mine.values.all? { |v| v.is_a?(Integer) }.to_s,
         mine[:requests].to_s,
         mine[:responses_2xx].to_s,
         mine[:timers_pending].to_s,
         mine.keys.map(&:to_s).sort.join(",")].join("\\n")
      end
      #{locations}
    RUBY
    @gw = start_gateway(a + b, ports: [@port, @port_b].compact)
  end

  def status_json(port = @port)
    r = http_get(port, '/status')
    expect(r.status).to eq(200), r.inspect
    JSON.parse(r.body)
  end

  # The entries of the page (all workers), once `n` are listed (workers of
  # a pool attach their slot when they start: poll).
  def workers_listed(n, port = @port)
    poll("#{n} workers on the status page") do
      j = status_json(port)
      j['workers'].size == n && j
    end
  end

  def entry(json, pid)
    json['workers'].find { |w| w['pid'] == pid } or raise "pid #{pid} not on the page: #{json.inspect}"
  end

  def mine(json)
    entry(json, json['served_by'])
  end

  def of_port(json, port)
    json['workers'].select { |w| w['port'] == port }
  end

  def sum(entries, field)
    entries.sum { |w| w.fetch(field) }
  end


  # ---------------------------------------------------------------------------
  describe 'the JSON page' do
    it 'lists every live worker of every server (pid, port, index): 1 + 2 workers -> 3 entries' do
      status_gateway
      j = workers_listed(3)
      expect(j['workers'].map { |w| [w['port'], w['index']] }.sort)
        .to eq([[@port, 0], [@port_b, 0], [@port_b, 1]].sort)
      expect(j['workers'].map { |w| w['pid'] }.sort).to eq(live_children_of(@gw.pid).sort)
      expect(j['served_by']).to eq(worker_pid(@port))
      expect(j['workers']).to all(include('pid', 'port', 'index', 'generation', 'requests',
                                          'responses_2xx', 'connections_active', 'timers_pending'))
      # Server B's page lists the same three.
      jb = workers_listed(3, @port_b)
      expect(jb['workers'].map { |w| w['pid'] }.sort).to eq(j['workers'].map { |w| w['pid'] }.sort)
      expect(of_port(jb, @port_b).map { |w| w['pid'] }).to include(jb['served_by'])
    end

    it 'is application/json with Cache-Control: no-store' do
      status_gateway(second: false)
      r = http_get(@port, '/status')
      expect(r.status).to eq(200)
      expect(r['content-type']).to eq('application/json')
      expect(r['cache-control']).to eq('no-store')
      expect { JSON.parse(r.body) }.not_to raise_error
      expect(JSON.parse(r.body)).to include('served_by', 'workers', 'upstreams')
    end

    it "the serving worker's counters are exact: requests and responses_2xx / responses_4xx" do
      status_gateway(second: false)
      s0 = mine(status_json)
      5.times { expect(http_get(@port, '/hello').body).to eq('hello') }
      3.times { expect(http_get(@port, '/nope').status).to eq(404) }
      s1 = mine(status_json)
      # s0 counted its own request but not its own response; s1 the reverse.
      expect(s1['requests'] - s0['requests']).to eq(5 + 3 + 1)
      expect(s1['responses_2xx'] - s0['responses_2xx']).to eq(5 + 1)
      expect(s1['responses_4xx'] - s0['responses_4xx']).to eq(3)
      expect(s1['responses_5xx'] - s0['responses_5xx']).to eq(0)
      expect(s1['connections_accepted'] - s0['connections_accepted']).to eq(5 + 3 + 1)
    end

    it "another server's workers' counters are exact at once (written directly): N requests to B seen from A" do
      status_gateway
      j0 = workers_listed(3)
      b0 = of_port(j0, @port_b)
      6.times { expect(http_get(@port_b, '/hello').body).to eq('hello-b') }
      2.times { expect(http_get(@port_b, '/missing').status).to eq(404) }
      b1 = of_port(status_json, @port_b)
      expect(b1.map { |w| w['pid'] }.sort).to eq(b0.map { |w| w['pid'] }.sort)
      expect(sum(b1, 'requests') - sum(b0, 'requests')).to eq(8)
      expect(sum(b1, 'responses_2xx') - sum(b0, 'responses_2xx')).to eq(6)
      expect(sum(b1, 'responses_4xx') - sum(b0, 'responses_4xx')).to eq(2)
    end

    it 'timers_pending (and fibers_parked) is 1 while a request sleeps (Async.sleep 1), then 0' do
      status_gateway(second: false)
      expect(mine(status_json)['timers_pending']).to eq(0)
      c = connect(@port)
      c.request('GET', '/sleep', 'Connection' => 'close')
      poll('timers_pending to be 1', timeout: 2) { mine(status_json)['timers_pending'] == 1 }
      s = mine(status_json)
      expect([s['timers_pending'], s['fibers_parked']]).to eq([1, 1])
      expect(c.read_response(timeout: 5).body).to eq('slept')
      s = mine(status_json)
      expect([s['timers_pending'], s['fibers_parked']]).to eq([0, 0])
    end

    it 'connections_active / connections_idle count open keep-alive connections (then drop when they close)' do
      status_gateway(second: false)
      conns = 3.times.map do
        c = connect(@port)
        c.request('GET', '/hello')
        expect(c.read_response.body).to eq('hello')
        c
      end
      s = mine(status_json)
      # The three idle keep-alive connections plus the one asking for the page.
      expect(s['connections_active']).to eq(4)
      expect(s['connections_idle']).to eq(3)
      conns.each(&:close)
      poll('the closed connections to be gone', timeout: 3) { mine(status_json)['connections_active'] == 1 }
      expect(mine(status_json)['connections_idle']).to eq(0)
    end

    it "another worker's gauges catch up within about a second (connections_active of server B)" do
      status_gateway
      workers_listed(3)
      conns = 2.times.map do
        c = connect(@port_b)
        c.request('GET', '/hello')
        expect(c.read_response.body).to eq('hello-b')
        c
      end
      poll("server B's gauges to show 2 open connections", timeout: 3) do
        sum(of_port(status_json, @port_b), 'connections_active') == 2
      end
      conns.each(&:close)
      poll("server B's gauges to show 0 open connections", timeout: 3) do
        sum(of_port(status_json, @port_b), 'connections_active').zero?
      end
    end

    it 'subrequests counts sub-requests (which are not client requests), subrequests_in_flight returns to 0' do
      status_gateway(second: false)
      s0 = mine(status_json)
      3.times { expect(http_get(@port, '/sub').body).to eq('hello!') }
      s1 = mine(status_json)
      expect(s1['subrequests'] - s0['subrequests']).to eq(3)
      expect(s1['subrequests_in_flight']).to eq(0)
      expect(s1['requests'] - s0['requests']).to eq(3 + 1)
      expect(s1['responses_2xx'] - s0['responses_2xx']).to eq(3 + 1)
    end

    it 'upstream_opened vs upstream_reused after 10 proxied keep-alive requests: opened <= 2, reused >= 8' do
      upstream!
      status_gateway(second: false, locations: %(location "/px", proxy_pass: "http://127.0.0.1:#{@up.port}"))
      s0 = mine(status_json)
      10.times { expect(http_get(@port, '/px/a').body).to eq('up /px/a') }
      s1 = mine(status_json)
      opened = s1['upstream_opened'] - s0['upstream_opened']
      reused = s1['upstream_reused'] - s0['upstream_reused']
      expect(opened).to be <= 2
      expect(reused).to be >= 8
      expect(opened + reused).to eq(10)
      expect(s1['upstream_idle']).to eq(1)
      expect(s1['upstream_failures'] - s0['upstream_failures']).to eq(0)
      expect(@up.accepted).to eq(opened)
    end

    it 'the upstreams section: a refused server of a 2-server group (max_fails: 1) is "down", then "up" after fail_timeout' do
      upstream!
      dead = free_port
      status_gateway(second: false,
                     prelude: %(upstream :g, servers: ["127.0.0.1:#{@up.port}", "127.0.0.1:#{dead}"], ) +
                              %(max_fails: 1, fail_timeout: 1),
                     locations: %(location "/g", proxy_pass: "http://g"))
      before = status_json['upstreams']['g']
      expect(before.map { |s| [s['server'], s['state']] })
        .to eq([["127.0.0.1:#{@up.port}", 'up'], ["127.0.0.1:#{dead}", 'up']])
      # Round robin: within two requests the dead one is tried, refused, and
      # the request retried on the live one.
      2.times { expect(http_get(@port, '/g/x').body).to eq('up /g/x') }
      t = GatewaySpec.now
      g = status_json['upstreams']['g']
      dead_entry = g.find { |s| s['server'] == "127.0.0.1:#{dead}" }
      live_entry = g.find { |s| s['server'] == "127.0.0.1:#{@up.port}" }
      # (fails counts consecutive failures and restarts at 0 once the server is marked down, as nginx)
      expect(dead_entry).to include('state' => 'down', 'weight' => 1, 'active' => 0)
      expect(live_entry).to include('state' => 'up', 'fails' => 0, 'active' => 0)
      expect(@gw.log).to match(/server 127\.0\.0\.1:#{dead} marked down/)
      poll('the dead server to be "up" again after fail_timeout', timeout: 3) do
        status_json['upstreams']['g'].find { |s| s['server'] == "127.0.0.1:#{dead}" }['state'] == 'up'
      end
      expect(GatewaySpec.now - t).to be > 0.5
    end

    it 'stays valid JSON when an upstream group name has a quote or a backslash in it' do
      # `upstream` takes any non-empty Symbol or String as the name.
      status_gateway(second: false,
                     prelude: %(upstream 'api "v2" \\\\ edge', servers: ["127.0.0.1:#{free_port}"]))
      r = http_get(@port, '/status')
      expect(r.status).to eq(200)
      j = begin
        JSON.parse(r.body)
      rescue JSON::ParserError => e
        raise RSpec::Expectations::ExpectationNotMetError, "the page is not valid JSON (#{e.message[0, 80]}):\n#{r.body[-200..]}"
      end
      expect(j['upstreams'].keys).to eq(['api "v2" \\ edge'])
    end

    it 'a sub-request to the status location gets the JSON page' do
      status_gateway(second: false)
      r = http_get(@port, '/sub_status')
      expect(r.status).to eq(200)
      code, type, body = r.body.split(' ', 3)
      expect([code, type]).to eq(%w[200 application/json])
      expect(JSON.parse(body)['workers'].size).to eq(1)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'Prometheus text (?format=prometheus)' do
    it 'has HELP/TYPE lines and one sample per worker with port, worker and pid labels' do
      status_gateway
      j = workers_listed(3)
      r = http_get(@port, '/status?format=prometheus')
      expect(r.status).to eq(200)
      expect(r['content-type']).to eq('text/plain; version=0.0.4')
      text = r.body
      expect(text).to include("# TYPE gateway_requests_total counter\n")
      expect(text).to match(/^# HELP gateway_requests_total \S.*$/)
      expect(text).to include("# TYPE gateway_connections_active gauge\n")
      expect(text).to include("# TYPE gateway_timers_pending gauge\n")
      text.each_line do |l|
        expect(l).to match(/\A(# (HELP|TYPE) gateway_\w+ .+|gateway_\w+\{port="\d+",worker="\d+",pid="\d+"\} \d+)\n\z/), l.inspect
      end
      j['workers'].each do |w|
        expect(text).to match(/^gateway_requests_total\{port="#{w['port']}",worker="#{w['index']}",pid="#{w['pid']}"\} \d+$/)
      end
      samples = text.lines.grep(/^gateway_requests_total\{/)
      expect(samples.size).to eq(3)
      # Every metric has the same three samples.
      types = text.scan(/^# TYPE (gateway_\w+) (counter|gauge)$/)
      expect(types.size).to be >= 20
      types.each do |name, kind|
        expect(name.end_with?('_total')).to eq(kind == 'counter'), name
        expect(text.lines.grep(/^#{name}\{/).size).to eq(3), name
      end
    end

    it 'the sample values agree with the JSON page' do
      status_gateway(second: false)
      3.times { http_get(@port, '/hello') }
      text = http_get(@port, '/status?format=prometheus').body
      j = status_json # one more request: counters moved by exactly 1 request, 1 response
      me = mine(j)
      prom = text[/^gateway_requests_total\{port="#{@port}",worker="0",pid="#{me['pid']}"\} (\d+)$/, 1].to_i
      expect(me['requests']).to eq(prom + 1)
      prom2 = text[/^gateway_responses_2xx_total\{[^}]*\} (\d+)$/, 1].to_i
      expect(me['responses_2xx']).to eq(prom2 + 1)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'configuration' do
    it '`status: true` with a handler block is a config error (FILE:LINE, exit 1)' do
      status, output, path = check_config(<<~RUBY)
        server listen: "127.0.0.1:#{free_port}" do
          location "/ok" do "x" end
          location "/status", status: true do "no" end
        end
      RUBY
      expect(status).to eq(1), output
      expect(output).to match(/^#{Regexp.escape(path)}:3: .*status/), output
    end

    it '`status: true` with proxy_pass: is a config error (FILE:LINE, exit 1)' do
      status, output, path = check_config(<<~RUBY)
        server listen: "127.0.0.1:#{free_port}" do

          location "/status", status: true, proxy_pass: "http://127.0.0.1:9/"
        end
      RUBY
      expect(status).to eq(1), output
      expect(output).to match(/^#{Regexp.escape(path)}:3: .*status/), output
    end

    it '`status: true` alone is accepted' do
      status, output, = check_config(<<~RUBY)
        server listen: "127.0.0.1:#{free_port}" do
          location "/status", status: true
        end
      RUBY
      expect(status).to eq(0), output
    end
  end

  # ---------------------------------------------------------------------------
  describe 'Gateway.stats' do
    it 'returns an Array of Hashes (Symbol keys, Integer values) with :pid, :requests, ... for every live worker' do
      status_gateway
      j = workers_listed(3)
      s0 = mine(j)
      r = http_get(@port, '/stats')
      expect(r.status).to eq(200), r.inspect
      klass, size, all_hashes, pids, where, sym_keys, int_values, requests, r2xx, timers, keys = r.body.split("\n")
      expect([klass, size, all_hashes, sym_keys, int_values]).to eq(%w[Array 3 true true true])
      expect(pids).to eq(j['workers'].map { |w| w['pid'] }.sort.join(','))
      expect(where.split(',').sort).to eq(["#{@port}/0", "#{@port_b}/0", "#{@port_b}/1"].sort)
      # The /stats request itself is counted; the /status response before it too.
      expect(requests.to_i).to eq(s0['requests'] + 1)
      expect(r2xx.to_i).to eq(s0['responses_2xx'] + 1)
      expect(timers).to eq('0')
      expected_keys = (%w[pid port index] + j['workers'].first.keys - %w[generation]).uniq.sort
      expect(keys.split(',')).to include(*expected_keys)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'worker restarts and reloads' do
    it 'after a worker is SIGKILLed the page lists its replacement and not the dead pid' do
      status_gateway
      j = workers_listed(3)
      victim = of_port(j, @port_b).find { |w| w['index'] == 1 }
      expect(ppid_of(victim['pid'])).to eq(@gw.pid)
      Process.kill('KILL', victim['pid'])
      j2 = poll('a new worker #1 of server B on the page', timeout: 5) do
        jj = status_json
        pids = jj['workers'].map { |w| w['pid'] }
        b1 = of_port(jj, @port_b).find { |w| w['index'] == 1 }
        jj['workers'].size == 3 && !pids.include?(victim['pid']) && b1 && jj
      end
      fresh = of_port(j2, @port_b).find { |w| w['index'] == 1 }
      expect(fresh['pid']).not_to eq(victim['pid'])
      expect(ppid_of(fresh['pid'])).to eq(@gw.pid)
      expect(j2['workers'].map { |w| w['pid'] }.sort).to eq(live_children_of(@gw.pid).sort)
      expect(fresh['requests']).to be <= 1 # a fresh slot (the readiness request at most)
      text = http_get(@port, '/status?format=prometheus').body
      expect(text).not_to include("pid=\"#{victim['pid']}\"")
      expect(text).to include("pid=\"#{fresh['pid']}\"")
    end

    it 'after a reload (SIGHUP) the page lists only the new workers' do
      status_gateway
      j = workers_listed(3)
      old = j['workers'].map { |w| w['pid'] }
      @gw.signal('HUP')
      j2 = poll('only new workers on the page', timeout: 10) do
        jj = status_json
        pids = jj['workers'].map { |w| w['pid'] }
        jj['workers'].size == 3 && (pids & old).empty? && jj
      end
      expect(j2['workers'].map { |w| [w['port'], w['index']] }.sort)
        .to eq([[@port, 0], [@port_b, 0], [@port_b, 1]].sort)
    end

    it 'after a reload (SIGHUP) the new workers report the new config generation' do
      status_gateway(second: false)
      j = workers_listed(1)
      expect(j['workers'].first['generation']).to eq(0)
      old = j['workers'].map { |w| w['pid'] }
      @gw.signal('HUP')
      poll('the reload to be logged', timeout: 5) { @gw.log =~ /reloaded: generation 1/ }
      j2 = poll('the new worker on the page', timeout: 10) do
        jj = status_json
        jj['workers'].size == 1 && !old.include?(jj['workers'].first['pid']) && jj
      end
      expect(j2['workers'].first['generation']).to eq(1), j2.inspect
    end
  end
end
