# Scripted routing: a handler decides where a request goes and hands it over
# with req.proxy_pass (canary by header, the handler's own output discarded,
# bad URLs are a script error), and examples/routing.rb booted on free ports
# and exercised as its header comment promises.
require_relative 'spec_helper'

RSpec.describe 'req.proxy_pass from a handler' do
  # A keep-alive fake upstream answering "NAME METHOD TARGET" and recording
  # each request in @seen[name].
  def named_upstream(name)
    @seen ||= Hash.new { |h, k| h[k] = Queue.new }
    q = @seen[name]
    fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        q << req
        peer.respond(200, { 'X-Served-By' => name }, "#{name} #{req.method} #{req.target}")
      end
    end
  end


  describe 'in a handler' do
    before(:each) do
      @stable = named_upstream('stable')
      @canary = named_upstream('canary')
      # Names resolve against a closed loopback port (tests never query the
      # machine's own DNS server): an unknown name fails at once.
      gateway_with(<<~RUBY, %(resolver "127.0.0.1:#{free_port}", timeout: 0.2, tries: 1))
        location "/api/" do |req|
          if req.headers["x-canary"] == "1"
            req.proxy_pass "http://127.0.0.1:#{@canary.port}"
          else
            req.proxy_pass "http://127.0.0.1:#{@stable.port}"
          end
        end
        location "/noisy/" do |req|
          req.write "handler output that must not be sent"
          req.status = 418
          req.headers_out["x-from-handler"] = "1"
          req.proxy_pass "http://127.0.0.1:#{@stable.port}/v2/"
          "returned string that must not be sent"
        end
        location "/rputs/" do |req|
          Nginx.rputs "rputs output"
          req.proxy_pass "http://127.0.0.1:#{@stable.port}"
        end
        location "/after_sleep/" do |req|
          Async.sleep 0.05
          req.proxy_pass "http://127.0.0.1:#{@stable.port}"
        end
        location "/bad_scheme" do |req|
          req.proxy_pass "ftp://127.0.0.1/x"
        end
        location "/bad_port" do |req|
          req.proxy_pass "http://127.0.0.1:notaport/x"
        end
        location "/empty_host" do |req|
          req.proxy_pass "http:///x"
        end
        location "/not_string" do |req|
          req.proxy_pass 42
        end
        location "/no_group" do |req|
          req.proxy_pass "http://nosuchgroup/"
        end
        location "/posted/" do |req|
          req.proxy_pass "http://127.0.0.1:#{@stable.port}"
        end
      RUBY
    end

    it 'routes by header: x-canary: 1 goes to the canary, anything else to stable' do
      expect(http_get(@port, '/api/users', 'x-canary' => '1').body).to eq('canary GET /api/users')
      expect(http_get(@port, '/api/users').body).to eq('stable GET /api/users')
      expect(http_get(@port, '/api/users', 'x-canary' => '0').body).to eq('stable GET /api/users')
    end

    it "passes the upstream's status and headers" do
      r = http_get(@port, '/api/x', 'x-canary' => '1')
      expect([r.status, r['x-served-by']]).to eq([200, 'canary'])
    end

    it "discards the handler's own output and status when it proxies; the fields it set stay (nginx's headers_out)" do
      r = http_get(@port, '/noisy/thing')
      expect(r.status).to eq(200)
      expect(r.body).to eq('stable GET /v2/thing')
      expect(r['x-from-handler']).to eq('1')
    end

    it 'discards Nginx.rputs output when the handler proxies' do
      expect(http_get(@port, '/rputs/a').body).to eq('stable GET /rputs/a')
    end

    it 'works after the handler has waited (Async.sleep) first' do
      expect(http_get(@port, '/after_sleep/z').body).to eq('stable GET /after_sleep/z')
    end

    it 'forwards the method and body of the original request' do
      r = http_request(@port, 'PUT', '/posted/doc', {}, 'the-body')
      expect(r.body).to eq('stable PUT /posted/doc')
      req = @seen['stable'].pop
      expect([req.body, req['content-length']]).to eq(%w[the-body 8])
    end

    it 'a non-http URL -> 500, and the log names the problem' do
      expect(http_get(@port, '/bad_scheme').status).to eq(500)
      expect(@gw.log).to match(/proxy_pass.*ftp:\/\/127\.0\.0\.1\/x/)
    end

    it 'a URL that is not a String -> 500, and the log names the problem' do
      expect(http_get(@port, '/not_string').status).to eq(500)
      expect(@gw.log).to match(/proxy_pass: url must be a String/)
    end

    it 'a malformed http:// URL (port "notaport") is a script error: 500, and the log names the URL' do
      expect(http_get(@port, '/bad_port').status).to eq(500)
      expect(@gw.log).to include('http://127.0.0.1:notaport/x')
    end

    it 'an http:// URL without a host is a script error: 500, and the log names the URL' do
      expect(http_get(@port, '/empty_host').status).to eq(500)
      expect(@gw.log).to include('http:///x')
    end

    it 'an unknown group name -> 502, and the log names it' do
      expect(http_get(@port, '/no_group', timeout: 15).status).to eq(502)
      expect(@gw.log).to match(/proxy_pass.*nosuchgroup/)
    end

    it 'the worker keeps serving after bad URLs' do
      pid = worker_pid(@port)
      %w[/bad_scheme /bad_port /empty_host /not_string /no_group].each { |p| http_get(@port, p, timeout: 15) }
      expect(http_get(@port, '/api/ok').body).to eq('stable GET /api/ok')
      expect(worker_pid(@port)).to eq(pid)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'examples/routing.rb' do
    before(:each) do
      text = File.read(File.join(GatewaySpec::ROOT, 'examples', 'routing.rb'))
      @ports = {}
      %w[8080 9101 9102 9103].each do |p|
        expect(text).to include("127.0.0.1:#{p}")
        @ports[p] = free_port
      end
      # One pass: a port picked for 8080 may contain "9101" (29101), which a
      # second gsub would rewrite.
      text = text.gsub(/127\.0\.0\.1:(8080|9101|9102|9103)\b/) { "127.0.0.1:#{@ports[Regexp.last_match(1)]}" }
      @port = @ports['8080']
      @gw = start_gateway(text, ports: @ports.values)
    end

    def get_body(path, headers = {})
      r = http_get(@port, path, headers)
      expect(r.status).to eq(200), "#{path}: #{r.inspect}"
      r.body
    end

    it '/api/ splits 30 requests 2:1 between stable-a and stable-b' do
      names = 30.times.map { get_body('/api/users')[/\A\S+/] }
      counts = names.each_with_object(Hash.new(0)) { |n, h| h[n] += 1 }
      expect(counts).to eq('stable-a' => 20, 'stable-b' => 10)
    end

    it '/api/ passes the path on: "stable-x /api/users"' do
      expect(get_body('/api/users')).to match(%r{\Astable-[ab] /api/users\n\z})
    end

    it 'x-canary: 1 goes to the canary' do
      5.times { expect(get_body('/api/users', 'x-canary' => '1')).to eq("canary /api/users\n") }
    end

    it 'cookie user=42 sticks to one server over 10 requests' do
      bodies = 10.times.map { get_body('/cart/', 'cookie' => 'theme=dark; user=42') }
      expect(bodies.uniq.size).to eq(1), bodies.inspect
      expect(bodies.first).to match(%r{\Astable-[ab] /cart/\n\z})
    end

    it 'different users are spread over both cart servers' do
      servers = (1..20).map { |u| get_body('/cart/', 'cookie' => "user=#{u}")[/\A\S+/] }
      expect(servers.uniq.sort).to eq(%w[stable-a stable-b])
    end

    it '/static is rewritten to /files on stable-a' do
      expect(get_body('/static/app.js')).to eq("stable-a /files/app.js\n")
    end

    it '/admin -> 403' do
      r = http_get(@port, '/admin')
      expect([r.status, r.body]).to eq([403, "forbidden\n"])
    end
  end
end
