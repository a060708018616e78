# Request phases (rewrite -> access -> content -> header_filter ->
# body_filter -> log), server-wide defaults, handler files, and
# init_worker / exit_worker.
require_relative 'spec_helper'

RSpec.describe 'request phases' do
  def start(body, prelude: '', server_opts: '')
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      #{prelude}
      server listen: "127.0.0.1:#{@port}"#{server_opts} do
        #{body}
      end
    RUBY
  end

  def get(path, headers = {})
    http_get(@port, path, headers)
  end

  describe 'access' do
    before(:each) do
      start(<<~'RUBY', server_opts: %(, access: ->(req) { Nginx.return 403 if req.headers["x-deny"] }))
        location "/in" do "content ran" end
        location "/open", access: false do "open" end
        location "/own", access: ->(req) { req.respond(401, { "www-authenticate" => "Basic" }, "who?\n") unless req.headers["authorization"] } do
          "authorized"
        end
        location "/rack", access: ->(req) { [429, { "retry-after" => "1" }, ["slow down\n"]] } do "never" end
        location "/declined", access: ->(req) { Nginx.return Nginx::DECLINED } do "went on" end
        location "/slept", access: ->(req) { Async.sleep(0.02); req.headers_out["x-waited"] = "yes"; nil } do "after a wait" end
        location "/boom", access: ->(req) { raise "access blew up" } do "never" end
      RUBY
    end

    it 'a server-wide access phase answers 403 and the content never runs; else the content answers' do
      expect(get('/in', 'x-deny' => '1').status).to eq(403)
      r = get('/in')
      expect([r.status, r.body]).to eq([200, 'content ran'])
    end

    it 'a location opts out with access: false, or gives its own' do
      expect(get('/open', 'x-deny' => '1').body).to eq('open')
      r = get('/own', 'x-deny' => '1') # its own replaces the server's
      expect([r.status, r.headers['www-authenticate'], r.body]).to eq([401, 'Basic', "who?\n"])
      expect(get('/own', 'authorization' => 'x').body).to eq('authorized')
    end

    it 'a Rack triple answers; Nginx::DECLINED goes on' do
      r = get('/rack')
      expect([r.status, r.headers['retry-after'], r.body]).to eq([429, '1', "slow down\n"])
      expect(get('/declined').body).to eq('went on')
    end

    it 'may wait (Async.sleep) and then let the content run' do
      r = get('/slept')
      expect([r.body, r.headers['x-waited']]).to eq(['after a wait', 'yes'])
    end

    it 'an exception gives 500, logged, and the worker goes on' do
      expect(get('/boom').status).to eq(500)
      expect(@gw.log).to include('access blew up')
      expect(get('/in').body).to eq('content ran')
    end
  end

  describe 'rewrite' do
    it 'changing req.target routes the request again; a cycle ends in 500 after 10 rounds' do
      start(<<~'RUBY')
        location "/old", rewrite: ->(req) { req.target = "/new" + req.path[4..-1] + (req.query.empty? ? "" : "?" + req.query); nil } do "old" end
        location "/new" do |req| "new #{req.target}" end
        location "/loop", rewrite: ->(req) { req.target = "/loop"; nil } do "never" end
      RUBY
      expect(get('/old/a?b=1').body).to eq('new /new/a?b=1')
      expect(get('/loop').status).to eq(500)
      expect(@gw.log).to include('rewritten more than 10 times')
    end
  end

  describe 'filters on Ruby responses' do
    it 'header_filter and body_filter run on a handler\'s response too, server-wide or per location' do
      start(<<~'RUBY', server_opts: %(, header_filter: ->(req) { req.headers_out["x-served"] = "gateway" }))
        location "/up", body_filter: ->(body, req) { body.upcase } do "hello" end
        location "/plain" do "plain" end
      RUBY
      r = get('/up')
      expect([r.body, r.headers['x-served'], r.headers['content-length']]).to eq(%w[HELLO gateway 5])
      expect(get('/plain').headers['x-served']).to eq('gateway')
    end
  end

  describe 'log' do
    it 'runs after the response with its status, and cannot wait (the wait is cancelled, logged)' do
      start(<<~'RUBY')
        location "/a", log: ->(req) { Gateway.log(:notice, "logged #{req.path} #{req.status}") } do
          Nginx.return 201
          "made"
        end
        location "/w", log: ->(req) { Async.sleep(5); Gateway.log(:notice, "never") } do "w" end
      RUBY
      expect(get('/a').status).to eq(201)
      GatewaySpec.poll('the log phase line') { @gw.log.include?('logged /a 201') }
      t = GatewaySpec.now
      expect(get('/w').body).to eq('w')
      expect(get('/a').status).to eq(201) # the worker is not held by the log phase
      expect(GatewaySpec.now - t).to be < 1.0 * GatewaySpec::SLACK
      GatewaySpec.poll('the cancelled wait') { @gw.log.include?('log phase for GET /w: it cannot wait') }
      expect(@gw.log).not_to include('never')
    end
  end

  describe 'handler files' do
    it 'run as a lambda body with req: return ends the handler, errors name the file and line' do
      dir = spec_dir
      File.write(File.join(dir, 'hello.rb'), <<~'RUBY')
        r = Nginx::Request.new
        return "early" if req.query == "early"
        raise "failed in a file" if req.query == "raise"
        "from a file: #{r.path}"
      RUBY
      File.write(File.join(dir, 'auth.rb'), "Nginx.return 403 if req.headers['x-deny']\n")
      start(<<~'RUBY')
        location "/f", content: "hello.rb", access: "auth.rb"
      RUBY
      expect(get('/f').body).to eq('from a file: /f')
      expect(get('/f?early').body).to eq('early')
      expect(get('/f', 'x-deny' => '1').status).to eq(403)
      expect(get('/f?raise').status).to eq(500)
      expect(@gw.log).to match(/failed in a file.*hello\.rb:3/m)
    end

    it 'a syntax error in a handler file is FILE:LINE: message with -t and at start-up' do
      dir = spec_dir
      bad = File.join(dir, 'bad.rb')
      File.write(bad, "x = 1\ny = (\n")
      status, output, = check_config(<<~RUBY)
        server listen: #{free_port} do
          location "/x", content: #{bad.inspect}
        end
      RUBY
      expect(status).to eq(1)
      expect(output).to match(/^#{Regexp.escape(bad)}:\d+: .*syntax error/)
      status, output, = check_config(<<~RUBY)
        server listen: #{free_port} do
          location "/x", content: "#{dir}/missing.rb"
        end
      RUBY
      expect(status).to eq(1)
      expect(output).to match(/:2: location "\/x": content: must be a Proc .* or a handler file; no file #{Regexp.escape(dir)}\/missing\.rb/)
    end
  end

  describe 'init_worker and exit_worker' do
    it 'run in each worker at start and exit' do
      start(<<~'RUBY', server_opts: %(, init_worker: -> { $greeting = "set at start \#{Gateway.worker_id}" }, exit_worker: -> { Gateway.log(:notice, "worker leaving") }))
        location "/g" do $greeting end
      RUBY
      expect(get('/g').body).to start_with('set at start')
      @gw.stop
      expect(@gw.log).to include('worker leaving')
    end
  end
end
