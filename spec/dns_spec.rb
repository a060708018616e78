# DNS: host names in proxy_pass URLs, upstream group servers and URL
# sub-requests are resolved with c-ares on the worker's own loop (docs/upstreams.md,
# "DNS: resolver"). Proven end to end against real DNS servers on loopback:
#
# - Debian's dnsmasq, started per example in the foreground on a free
#   127.0.0.1 port with only local records (--host-record ..., --local=/test/
#   so other *.test names are NXDOMAIN) and --log-queries, so every query the
#   gateway sends is counted from dnsmasq's own log;
# - a "silent" UDP socket that never answers (timeouts, non-blocking);
# - a tiny scripted DNS server (Resolv::DNS::Message) that answers late and
#   counts queries (concurrent lookups of one name share one query).
#
# RULE: every config here that involves a host name sets `resolver` to one of
# those loopback servers; nothing ever reaches the machine's own resolver.
require_relative 'spec_helper'
require 'json'
require 'resolv'

# Loopback DNS servers for these examples (only this file uses them).
module DnsSpecSupport
  DNSMASQ = '/usr/sbin/dnsmasq'

  # A port free for both UDP and TCP on 127.0.0.1 (dnsmasq binds both).
  def self.free_dns_port
    50.times do
      u = UDPSocket.new
      u.bind('127.0.0.1', 0)
      port = u.addr[1]
      begin
        TCPServer.new('127.0.0.1', port).close
        return port
      rescue Errno::EADDRINUSE
        next
      ensure
        u.close
      end
    end
    raise 'no free UDP+TCP port'
  end

  # Sends one query to 127.0.0.1:port and returns the decoded reply, or nil
  # when nothing came back within `timeout` seconds.
  def self.dns_query(port, name, type = Resolv::DNS::Resource::IN::A, timeout: 0.3)
    msg = Resolv::DNS::Message.new(rand(1..65_535))
    msg.rd = 1
    msg.add_question(name, type)
    s = UDPSocket.new
    s.connect('127.0.0.1', port)
    s.send(msg.encode, 0)
    return nil unless IO.select([s], nil, nil, timeout)
    Resolv::DNS::Message.decode(s.recv(4096))
  rescue Errno::ECONNREFUSED
    nil
  ensure
    s&.close
  end

  # dnsmasq in the foreground (-k), answering only from its own records.
  class Dnsmasq
    attr_reader :port, :pid, :log_path

    def initialize(dir, ttl:, records:)
      @dir = dir
      @ttl = ttl
      @records = records
    end

    def start
      3.times do |attempt|
        @port = DnsSpecSupport.free_dns_port
        @log_path = File.join(@dir, "dnsmasq-#{@port}.log")
        out = File.join(@dir, "dnsmasq-#{@port}.out")
        args = [DNSMASQ, '--conf-file=/dev/null', '-k', "--port=#{@port}", '--listen-address=127.0.0.1',
                '--bind-interfaces', '--no-resolv', '--no-hosts', '--no-poll', '--log-queries',
                "--log-facility=#{@log_path}", '--local=/test/', "--local-ttl=#{@ttl}",
                "--pid-file=#{File.join(@dir, "dnsmasq-#{@port}.pid")}"]
        args += ['--user=root', '--group=root'] if Process.uid.zero?
        args += @records.map { |name, ip| "--host-record=#{name},#{ip}" }
        @pid = Process.spawn(*args, in: File::NULL, out: out, err: [:child, :out])
        begin
          ready = GatewaySpec.poll('dnsmasq to answer', timeout: 5) do
            break :died if Process.waitpid(@pid, Process::WNOHANG)
            DnsSpecSupport.dns_query(@port, 'ready.test', timeout: 0.2)
          end
        rescue GatewaySpec::TimeoutError
          stop
          raise
        end
        return self unless :died == ready # (Resolv::DNS::Message#== cannot compare with a Symbol)
        @pid = nil
        raise "dnsmasq did not start (attempt #{attempt + 1}): #{File.read(out)}" if attempt == 2
      end
    end

    def log
      File.exist?(@log_path) ? File.read(@log_path) : ''
    end

    # How many queries of `type` for `name` dnsmasq received so far.
    def queries(name, type = 'A')
      log.scan(/query\[#{Regexp.escape(type)}\] #{Regexp.escape(name)} from/).size
    end

    def stop
      return unless @pid
      begin
        Process.kill('TERM', @pid)
        GatewaySpec.poll('dnsmasq to exit', timeout: 3) { Process.waitpid(@pid, Process::WNOHANG) }
      rescue GatewaySpec::TimeoutError
        Process.kill('KILL', @pid)
        Process.waitpid(@pid)
      rescue Errno::ESRCH, Errno::ECHILD
        nil
      end
    ensure
      @pid = nil
    end
  end

  # A UDP socket on 127.0.0.1 that receives queries and never answers.
  class SilentDns
    attr_reader :port

    def initialize
      @sock = UDPSocket.new
      @sock.bind('127.0.0.1', 0)
      @port = @sock.addr[1]
      @names = []
    end

    # Names of every query received so far (in order, repeats included).
    def names
      loop do
        data = @sock.recv_nonblock(4096, exception: false)
        break if data == :wait_readable || data.nil?
        q = Resolv::DNS::Message.decode(data).question.first
        @names << q[0].to_s.downcase if q
      rescue Resolv::DNS::DecodeError
        next
      end
      @names.dup
    end

    def close
      @sock.close unless @sock.closed?
    end
  end

  # A scripted DNS server: answers A queries for `records` (name => IP) after
  # `delay` seconds (NODATA for other types, NXDOMAIN for other names; a
  # record :nodata has no records at all, :servfail gets SERVFAIL) and
  # records every query it receives as [name, type].
  class SlowDns
    attr_reader :port

    def initialize(records, delay:, ttl: 60)
      @records = records
      @delay = delay
      @ttl = ttl
      @sock = UDPSocket.new
      @sock.bind('127.0.0.1', 0)
      @port = @sock.addr[1]
      @seen = Queue.new
      @log = []
      @lock = Mutex.new
      @threads = []
      @thread = Thread.new { serve }
      @thread.report_on_exception = false
    end

    def queries
      @lock.synchronize { @log.dup }
    end

    def stop
      @thread.kill
      @thread.join(2)
      @threads.each { |t| t.kill.join(2) }
      @sock.close unless @sock.closed?
    end

    private

    def serve
      loop do
        data, from = @sock.recvfrom(4096)
        q = Resolv::DNS::Message.decode(data) rescue next
        name, type = q.question.first
        @lock.synchronize { @log << [name.to_s.downcase, type.name.split('::').last] }
        t = Thread.new { sleep @delay; answer(q, name, type, from) }
        t.report_on_exception = false
        @threads << t
      end
    end

    def answer(q, name, type, from)
      r = Resolv::DNS::Message.new(q.id)
      r.qr = 1
      r.rd = q.rd
      r.ra = 1
      r.aa = 1
      r.add_question(name, type)
      ip = @records[name.to_s.downcase]
      if ip.nil?
        r.rcode = Resolv::DNS::RCode::NXDomain
      elsif ip == :servfail
        r.rcode = Resolv::DNS::RCode::ServFail
      elsif ip == :nodata
        nil # the name exists, without records of any type
      elsif type == Resolv::DNS::Resource::IN::A
        r.add_answer(name, @ttl, Resolv::DNS::Resource::IN::A.new(ip))
      end
      @sock.send(r.encode, 0, from[3], from[1])
    rescue IOError, SystemCallError
      nil
    end
  end
end

RSpec.describe 'DNS resolution (resolver)' do
  # ---------------------------------------------------------------------------
  # Local helpers: DNS servers on loopback (stopped after each example).

  def dnsmasq(ttl: 60, records: { 'app.test' => '127.0.0.1', 'backend' => '127.0.0.1' })
    unless File.executable?(DnsSpecSupport::DNSMASQ)
      skip "#{DnsSpecSupport::DNSMASQ} is not installed (./setup.sh installs dnsmasq-base)"
    end
    d = DnsSpecSupport::Dnsmasq.new(spec_dir, ttl: ttl, records: records).start
    (@dns_servers ||= []) << d
    d
  end

  def silent_dns
    s = DnsSpecSupport::SilentDns.new
    (@dns_servers ||= []) << s
    s
  end

  def slow_dns(records, delay:)
    s = DnsSpecSupport::SlowDns.new(records, delay: delay)
    (@dns_servers ||= []) << s
    s
  end

  after(:each) do
    (@dns_servers || []).each { |d| d.respond_to?(:stop) ? d.stop : d.close }
  end

  # ---------------------------------------------------------------------------
  # Local helpers: the upstream and the gateway.

  # A keep-alive upstream answering "up TARGET host=HOST".
  def upstream!
    @up = fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        peer.respond(200, { 'X-Up' => 'yes' }, "up #{req.target} host=#{req['host']}")
      end
    end
  end

  # A single-worker gateway on @port: `resolver_line` (always given: never the
  # system resolver), then the locations (plus /pid, /fast, /status).
  def dns_gateway(resolver_line, locations, prelude: '', env: {})
    raise 'every DNS config names its resolver' unless resolver_line =~ /\Aresolver "127\.0\.0\.1:\d+"/
    gateway_with(locations, "#{resolver_line}\n#{prelude}", env: env, fast: true, status: true)
  end

  # This worker's entry on the status page.
  def my_stats
    r = http_get(@port, '/status')
    expect(r.status).to eq(200), r.inspect
    j = JSON.parse(r.body)
    j['workers'].find { |w| w['pid'] == j['served_by'] } or raise "no entry for #{j['served_by']}: #{r.body}"
  end

  def now
    GatewaySpec.now
  end

  def get_ok(path, **opts)
    r = http_get(@port, path, **opts)
    expect(r.status).to eq(200), "#{path}: #{r.inspect}\n#{@gw.log_tail}"
    r
  end

  # ---------------------------------------------------------------------------
  describe 'names served by dnsmasq' do
    before(:each) { upstream! }

    it 'proxy_pass "http://app.test:PORT/x" reaches the upstream (Host: app.test:PORT)' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"),
                  %(location "/a", proxy_pass: "http://app.test:#{@up.port}/x"))
      r = get_ok('/a/b?q=1')
      expect(r.body).to eq("up /x/b?q=1 host=app.test:#{@up.port}")
      expect(r['x-up']).to eq('yes')
      expect(dns.queries('app.test')).to eq(1), dns.log
    end

    it 'an upstream group server given by name ("app.test:PORT") works, and the status page lists it' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"),
                  %(location "/g", proxy_pass: "http://g/base"),
                  prelude: %(upstream :g, servers: ["app.test:#{@up.port}"]))
      expect(get_ok('/g/z').body).to eq('up /base/z host=g')
      expect(get_ok('/g/y').body).to eq('up /base/y host=g')
      expect(dns.queries('app.test')).to eq(1), dns.log
      up = JSON.parse(http_get(@port, '/status').body)['upstreams']
      expect(up['g']).to match([hash_including('server' => "app.test:#{@up.port}", 'state' => 'up')])
    end

    it 'a URL sub-request (Async::HTTP.sub_request("http://app.test:PORT/s")) works' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"), <<~RUBY)
        location "/sub" do
          r = Async::HTTP.sub_request("http://app.test:#{@up.port}/s?k=v")
          "sub \#{r.status} \#{r.body}"
        end
      RUBY
      expect(get_ok('/sub').body).to eq("sub 200 up /s?k=v host=app.test:#{@up.port}")
      expect(dns.queries('app.test')).to eq(1), dns.log
    end

    it 'req.proxy_pass with a host name from a handler works' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"), <<~RUBY)
        location "/h" do |req|
          req.proxy_pass "http://app.test:#{@up.port}/from-handler"
        end
      RUBY
      expect(get_ok('/h').body).to eq("up /from-handler host=app.test:#{@up.port}")
    end

    it 'a bare name that is not an upstream group ("http://backend:PORT/") is resolved too' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"),
                  %(location "/b", proxy_pass: "http://backend:#{@up.port}/"))
      expect(get_ok('/b').body).to eq("up / host=backend:#{@up.port}")
      expect(dns.queries('backend')).to eq(1), dns.log
    end

    it 'host names are case-insensitive: APP.Test and app.test share one cache entry' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"), <<~RUBY)
        location "/upper", proxy_pass: "http://APP.Test:#{@up.port}/u"
        location "/lower", proxy_pass: "http://app.test:#{@up.port}/l"
      RUBY
      expect(get_ok('/upper').body).to start_with('up /u')
      expect(get_ok('/lower').body).to start_with('up /l')
      expect(dns.log.scan(/query\[A\] app\.test from/i).size).to eq(1), dns.log
    end

    it 'NXDOMAIN -> 502 fast (< 1 s); the log names the host and says "host not found"' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"),
                  %(location "/nx", proxy_pass: "http://nx.test:#{@up.port}/"))
      t = now
      r = http_get(@port, '/nx')
      elapsed = now - t
      expect(r.status).to eq(502), r.inspect
      expect(elapsed).to be < 1.0 * GatewaySpec::SLACK
      poll('the error log line') { @gw.log =~ /nx\.test.*host not found/ }
      expect(@gw.log).to match(/nx\.test.*host not found/)
      expect(@up.accepted).to eq(0)
    end

    it 'a failure is cached for about 1 s: a second NXDOMAIN request at once asks nothing, a later one asks again' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"),
                  %(location "/nx", proxy_pass: "http://nx.test:#{@up.port}/"))
      expect(http_get(@port, '/nx').status).to eq(502)
      poll('the NXDOMAIN query in the dnsmasq log', timeout: 2) { dns.queries('nx.test') >= 1 }
      first = dns.queries('nx.test')
      expect(http_get(@port, '/nx').status).to eq(502)
      sleep 0.1
      expect(dns.queries('nx.test')).to eq(first), dns.log
      sleep 1.3
      expect(http_get(@port, '/nx').status).to eq(502)
      poll('a new query after the negative TTL', timeout: 2) { dns.queries('nx.test') > first }
    end

    it 'a sub-request to a name that does not exist raises Gateway::UpstreamError naming the problem' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"), <<~RUBY)
        location "/subnx" do
          begin
            Async::HTTP.sub_request("http://nx.test:#{@up.port}/")
            "no error"
          rescue Gateway::TimeoutError => e
            "timeout: \#{e.message}"
          rescue Gateway::UpstreamError => e
            "upstream error: \#{e.message}"
          end
        end
      RUBY
      r = get_ok('/subnx')
      expect(r.body).to match(/\Aupstream error: .*host not found/)
    end

    it 'caching: 20 requests for the same name issue 1 query (dns_lookups 20, dns_cache_hits 19)' do
      dns = dnsmasq(ttl: 60)
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"),
                  %(location "/a", proxy_pass: "http://app.test:#{@up.port}/"))
      20.times { get_ok('/a') }
      sleep 0.1 # any late query would be in dnsmasq's log by now
      expect(dns.queries('app.test')).to eq(1), dns.log
      expect(dns.queries('app.test', 'AAAA')).to eq(0), 'IPv4 is preferred: no AAAA query when there is an A record'
      s = my_stats
      expect([s['dns_lookups'], s['dns_cache_hits']]).to eq([20, 19]), s.inspect
      expect(s['dns_cache_entries']).to eq(1)
    end

    it 'TTL expiry: with a 1 s TTL, a request after 1.5 s queries again' do
      dns = dnsmasq(ttl: 1)
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"),
                  %(location "/a", proxy_pass: "http://app.test:#{@up.port}/"))
      get_ok('/a')
      get_ok('/a')
      expect(dns.queries('app.test')).to eq(1), dns.log
      sleep 1.6
      get_ok('/a')
      poll('a second query after the TTL expired', timeout: 2) { dns.queries('app.test') == 2 }
      get_ok('/a')
      expect(dns.queries('app.test')).to eq(2), dns.log
    end

    it '10 concurrent requests on a fresh worker send at most 2 queries (dnsmasq)' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"),
                  %(location "/a", proxy_pass: "http://app.test:#{@up.port}/c"))
      conns = 10.times.map { connect(@port) }
      conns.each { |c| c.request('GET', '/a', 'Connection' => 'close') }
      conns.each { |c| expect(c.read_response.body).to start_with('up /c') }
      expect(dns.queries('app.test')).to be_between(1, 2), dns.log
    end

    it 'the status page shows dns_lookups, dns_cache_hits and dns_failures growing' do
      dns = dnsmasq
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}"), <<~RUBY)
        location "/a", proxy_pass: "http://app.test:#{@up.port}/"
        location "/nx", proxy_pass: "http://nx.test:#{@up.port}/"
      RUBY
      s0 = my_stats
      expect(s0).to include('dns_lookups', 'dns_cache_hits', 'dns_failures', 'dns_cache_entries')
      3.times { get_ok('/a') }
      s1 = my_stats
      expect(s1['dns_lookups'] - s0['dns_lookups']).to eq(3)
      expect(s1['dns_cache_hits'] - s0['dns_cache_hits']).to eq(2)
      expect(s1['dns_cache_entries']).to eq(1)
      expect(http_get(@port, '/nx').status).to eq(502)
      s2 = my_stats
      expect(s2['dns_lookups'] - s1['dns_lookups']).to eq(1)
      expect(s2['dns_failures'] - s1['dns_failures']).to eq(1)
      expect(s2['dns_cache_entries']).to eq(2)
      prom = http_get(@port, '/status?format=prometheus').body
      expect(prom).to match(/^gateway_dns_lookups_total\{port="#{@port}",worker="0",pid="\d+"\} 4$/)
      expect(prom).to match(/^gateway_dns_cache_hits_total\{[^}]*\} 2$/)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'a DNS server that answers late (scripted)' do
    before(:each) { upstream! }

    it 'concurrent lookups of one name share one query: 10 requests, 1 A query, 10 answers' do
      dns = slow_dns({ 'shared.test' => '127.0.0.1' }, delay: 0.4)
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}", timeout: 3, tries: 1),
                  %(location "/a", proxy_pass: "http://shared.test:#{@up.port}/s"))
      conns = 10.times.map { connect(@port) }
      conns.each { |c| c.request('GET', '/a', 'Connection' => 'close') }
      t = now
      bodies = conns.map { |c| c.read_response.body }
      expect(bodies).to all(start_with('up /s'))
      expect(now - t).to be < 2.0 * GatewaySpec::SLACK
      expect(dns.queries).to eq([['shared.test', 'A']])
      s = my_stats
      expect(s['dns_lookups']).to eq(10)
    end

    it 'a name without an A record is asked for AAAA next; with neither: 502 "host not found"' do
      dns = slow_dns({ 'empty.test' => :nodata }, delay: 0)
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}", timeout: 1, tries: 1),
                  %(location "/e", proxy_pass: "http://empty.test:#{@up.port}/"))
      r = http_get(@port, '/e')
      expect(r.status).to eq(502)
      expect(dns.queries).to eq([%w[empty.test A], %w[empty.test AAAA]])
      poll('the error log line') { @gw.log =~ /empty\.test.*host not found/ }
    end

    it 'SERVFAIL -> 502 at once (not a timeout), the log names the host' do
      dns = slow_dns({ 'fail.test' => :servfail }, delay: 0)
      dns_gateway(%(resolver "127.0.0.1:#{dns.port}", timeout: 1, tries: 2),
                  %(location "/f", proxy_pass: "http://fail.test:#{@up.port}/"))
      t = now
      r = http_get(@port, '/f')
      expect(r.status).to eq(502)
      expect(now - t).to be < 0.9 * GatewaySpec::SLACK
      poll('the error log line') { @gw.log =~ /fail\.test.*DNS server failure/ }
      expect(@up.accepted).to eq(0)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'a DNS server that never answers' do
    before(:each) { upstream! }

    it 'does not block the worker: a local handler answers at once while the lookup waits; then 504 naming the host' do
      silent = silent_dns
      dns_gateway(%(resolver "127.0.0.1:#{silent.port}", timeout: 0.5, tries: 1),
                  %(location "/a", proxy_pass: "http://slow.test:#{@up.port}/x"))
      slow = connect(@port)
      t0 = now
      slow.request('GET', '/a', 'Connection' => 'close')
      poll('the query to reach the silent server', timeout: 2) { silent.names.include?('slow.test') }
      t1 = now
      fast = http_get(@port, '/fast')
      fast_took = now - t1
      fast_done = now - t0
      expect(fast.body).to eq('fast')
      expect(fast_took).to be < 0.5 * GatewaySpec::SLACK # the lookup waits 0.5 s x tries; the pending check is the proof
      expect(slow.pending).to eq(''), 'the proxied request was still waiting when /fast was answered'
      r = slow.read_response(timeout: 5)
      total = now - t0
      expect(r.status).to eq(504), r.inspect
      expect(total).to be > fast_done
      expect(total).to be_between(0.4, 3.0 * GatewaySpec::SLACK)
      poll('the error log line') { @gw.log =~ /slow\.test.*DNS server did not answer/ }
      expect(@gw.log).to match(/proxy_pass.*slow\.test/)
      expect(@up.accepted).to eq(0)
    end

    it 'waits timeout x (2^tries - 1): timeout 0.5, tries 2 -> about 1.5 s and two queries' do
      silent = silent_dns
      dns_gateway(%(resolver "127.0.0.1:#{silent.port}", timeout: 0.5, tries: 2),
                  %(location "/a", proxy_pass: "http://slow.test:#{@up.port}/x"))
      t = now
      r = http_get(@port, '/a', timeout: 10)
      elapsed = now - t
      expect(r.status).to eq(504)
      expect(elapsed).to be_between(1.3, 4.0 * GatewaySpec::SLACK)
      expect(silent.names.count('slow.test')).to eq(2)
    end

    it 'a sub-request with timeout: 0.3 raises Gateway::TimeoutError while its lookup waits' do
      silent = silent_dns
      dns_gateway(%(resolver "127.0.0.1:#{silent.port}", timeout: 5, tries: 1), <<~RUBY)
        location "/subto" do
          begin
            Async::HTTP.sub_request("http://slow.test:#{@up.port}/", timeout: 0.3)
            "no error"
          rescue Gateway::TimeoutError => e
            "timeout"
          end
        end
      RUBY
      t = now
      r = get_ok('/subto')
      expect(r.body).to eq('timeout')
      expect(now - t).to be_between(0.25, 1.5 * GatewaySpec::SLACK)
      expect(get_ok('/fast').body).to eq('fast')
    end

    it '/etc/hosts first: "localhost" resolves without any DNS query' do
      silent = silent_dns
      dns_gateway(%(resolver "127.0.0.1:#{silent.port}", timeout: 2, tries: 1),
                  %(location "/lh", proxy_pass: "http://localhost:#{@up.port}/h"))
      t = now
      r = get_ok('/lh')
      expect(now - t).to be < 0.5 * GatewaySpec::SLACK
      expect(r.body).to eq("up /h host=localhost:#{@up.port}")
      sleep 0.05
      expect(silent.names).to eq([])
    end

    it 'without "localhost" in the hosts file, localhost and *.localhost are the loopback address, never a DNS query (RFC 6761)' do
      silent = silent_dns
      hosts = File.join(spec_dir, 'hosts-without-localhost')
      File.write(hosts, "10.9.9.9 something.example\n")
      dns_gateway(%(resolver "127.0.0.1:#{silent.port}", timeout: 2, tries: 1),
                  %(location "/lh", proxy_pass: "http://localhost:#{@up.port}/h"
                    location "/app", proxy_pass: "http://app.localhost:#{@up.port}/a"),
                  env: GatewaySpec.sanitizer_env.merge('CARES_HOSTS' => hosts))
      t = now
      expect(get_ok('/lh').body).to eq("up /h host=localhost:#{@up.port}")
      expect(get_ok('/app').body).to eq("up /a host=app.localhost:#{@up.port}")
      expect(now - t).to be < 0.5 * GatewaySpec::SLACK
      sleep 0.05
      expect(silent.names).to eq([])
    end

    it '".invalid" names fail at once with 502, never a DNS query, even with a DNS server that does not answer (RFC 6761)' do
      silent = silent_dns
      dns_gateway(%(resolver "127.0.0.1:#{silent.port}", timeout: 5, tries: 2),
                  %(location "/inv", proxy_pass: "http://no-such-host.invalid:#{@up.port}/"
                    location "/bare", proxy_pass: "http://invalid.:#{@up.port}/"
                    location "/sub" do
                      begin
                        Async::HTTP.sub_request("http://x.y.INVALID:#{@up.port}/").status.to_s
                      rescue Gateway::UpstreamError => e
                        "upstream error: \#{e.message}"
                      end
                    end))
      t = now
      r = http_get(@port, '/inv')
      expect(now - t).to be < 0.5 * GatewaySpec::SLACK # a query would wait 5 s x 2 tries
      expect(r.status).to eq(502)
      expect(http_get(@port, '/bare').status).to eq(502)
      expect(get_ok('/sub').body).to eq('upstream error: host not found')
      sleep 0.05
      expect(silent.names).to eq([])
      expect(@gw.log).to include('cannot resolve upstream host "no-such-host.invalid": host not found')
    end

    it 'IP literals never reach the DNS server' do
      silent = silent_dns
      dns_gateway(%(resolver "127.0.0.1:#{silent.port}", timeout: 2, tries: 1),
                  %(location "/ip", proxy_pass: "http://127.0.0.1:#{@up.port}/i"))
      expect(get_ok('/ip').body).to start_with('up /i')
      sleep 0.05
      expect(silent.names).to eq([])
    end

    it 'survives 300 client aborts during slow lookups (proxy_pass, handler proxy_pass, sub-request)' do
      silent = silent_dns
      dns_gateway(%(resolver "127.0.0.1:#{silent.port}", timeout: 5, tries: 1), <<~RUBY)
        location "/p", proxy_pass: "http://same.slow.test:#{@up.port}/"
        location "/h" do |req|
          req.proxy_pass "http://\#{req.query}.slow.test:#{@up.port}/"
        end
        location "/s" do |req|
          Async::HTTP.sub_request("http://\#{req.query}.slow.test:#{@up.port}/").body
        end
      RUBY
      pid = worker_pid(@port)
      deadline = now + 60 * GatewaySpec::SLACK
      300.times do |i|
        raise 'abort loop took too long' if now > deadline
        name = "n#{i}"
        path = case i % 3
               when 0 then '/p'
               when 1 then "/h?#{name}"
               else "/s?#{name}"
               end
        c = connect(@port)
        c.sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack('ii')) if i.odd?
        c.request('GET', path)
        if path == '/p'
          sleep 0.002
        else
          poll("the lookup of #{name}.slow.test", timeout: 3, interval: 0.001) do
            silent.names.include?("#{name}.slow.test")
          end
        end
        c.close
      end
      expect(worker_pid(@port)).to eq(pid)
      expect(get_ok('/fast').body).to eq('fast')
      poll('every aborted request to be dropped', timeout: 5) do
        s = my_stats
        s['fibers_parked'].zero? && s['connections_active'] == 1 && s['subrequests_in_flight'].zero?
      end
      expect(worker_pid(@port)).to eq(pid)
      expect(@gw.log).not_to match(GatewaySpec::SANITIZER_REPORT)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'configuration' do
    it '`resolver 42` is a config error: gateway -t exits 1 with FILE:LINE' do
      status, output, path = check_config(<<~RUBY)
        # line 1
        resolver 42
        server listen: "127.0.0.1:#{free_port}" do
          location "/" do "x" end
        end
      RUBY
      expect(status).to eq(1), output
      expect(output).to match(/^#{Regexp.escape(path)}:2: .*resolver/), output
    end

    it '`resolver "127.0.0.1:PORT", tries: 0` is a config error: gateway -t exits 1 with FILE:LINE' do
      status, output, path = check_config(<<~RUBY)
        server listen: "127.0.0.1:#{free_port}" do
          location "/" do "x" end
        end
        resolver "127.0.0.1:#{free_port}", tries: 0
      RUBY
      expect(status).to eq(1), output
      expect(output).to match(/^#{Regexp.escape(path)}:4: .*tries/), output
    end

    it 'a non-positive timeout is a config error with FILE:LINE' do
      status, output, path = check_config(<<~RUBY)
        resolver "127.0.0.1:#{free_port}", timeout: 0
        server listen: "127.0.0.1:#{free_port}" do
          location "/" do "x" end
        end
      RUBY
      expect(status).to eq(1), output
      expect(output).to match(/^#{Regexp.escape(path)}:1: .*timeout/), output
    end

    it 'a list of servers with timeout and tries is accepted' do
      status, output, = check_config(<<~RUBY)
        resolver ["127.0.0.1:#{free_port}", "127.0.0.1"], timeout: 0.5, tries: 3
        server listen: "127.0.0.1:#{free_port}" do
          location "/" do "x" end
        end
      RUBY
      expect(status).to eq(0), output
    end

    it 'a resolver address that is not an IP[:port] ("dns.example") is a config error, not a runtime surprise' do
      status, output, path = check_config(<<~RUBY)
        resolver "dns.example"
        server listen: "127.0.0.1:#{free_port}" do
          location "/" do "x" end
        end
      RUBY
      expect(status).to eq(1), "gateway -t accepted it:\n#{output}"
      expect(output).to match(/^#{Regexp.escape(path)}:1: .*resolver/), output
    end
  end
end
