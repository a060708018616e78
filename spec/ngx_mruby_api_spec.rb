# ngx_mruby's API on the gateway, over real sockets: Nginx::Var, the status
# constants, Nginx::Connection, Nginx::Server, the request's ngx_mruby
# methods, headers (#all, Arrays), redirects, Nginx::Filter, Userdata,
# Nginx::Upstream, logging, Kernel#run and Nginx::Async::HTTP.sub_request's
# ngx_mruby forms. Handlers are written as an ngx_mruby user writes them.
require_relative 'spec_helper'

RSpec.describe 'the ngx_mruby API' do
  before(:each) do
    @port = free_port
    @a = fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        peer.respond(200, {}, "from-a #{req.target}")
      end
    end
    @b = fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        peer.respond(200, {}, "from-b #{req.target}")
      end
    end
    @config = write_config(<<~RUBY)
      error_log "error.log", level: :debug
      upstream :backend, servers: ["127.0.0.1:#{@a.port}"]
      server listen: "127.0.0.1:#{@port}" do
        location "/var" do
          r = Nginx::Request.new
          Nginx.rputs r.var.send(r.var.arg_name.to_sym).to_s
        end
        location "/var_set" do
          r = Nginx::Request.new
          r.var.set "hoge", 100
          r.var.fuga = r.var.hoge.to_i * 2
          v = Nginx::Var.new
          Nginx.rputs [v.hoge, v.fuga, v.exist?("fuga"), v.exist?("nope"), v.nope.inspect].join(",")
        end
        location "/constants" do
          Nginx.rputs [Nginx::OK, Nginx::DECLINED, Nginx::ERROR, Nginx::AGAIN, Nginx::DONE,
                       Nginx::FALSE + Nginx::TRUE, Nginx::HTTP_NOT_FOUND, Nginx::HTTP_SERVICE_UNAVAILABLE,
                       Nginx::HTTP_TOO_MANY_REQUESTS, Nginx::LOG_ERR].join(",")
        end
        location "/conn" do
          c = Nginx::Connection.new
          Nginx.rputs "\#{c.remote_ip} \#{c.remote_port} \#{c.local_ip}:\#{c.local_port}"
        end
        location "/server" do
          s = Nginx::Server.new
          Nginx.rputs "\#{s.document_root}|\#{s.path}"
        end
        location "/req" do
          r = Nginx::Request.new
          Nginx.rputs [r.method, r.uri, r.unparsed_uri, r.args, r.authority, r.hostname, r.scheme,
                       r.protocol, r.sub_request?].join("|")
        end
        location "/uri_args" do
          r = Nginx::Request.new
          a = r.uri_args
          r.uri_args = { "pass" => "ngx mruby", "x" => "1&2" }
          Nginx.rputs "\#{a.inspect} \#{r.args}"
        end
        location "/post_args" do
          r = Nginx::Request.new
          r.read_body
          Nginx.rputs "\#{r.post_args.inspect} \#{r.get_body}"
        end
        location "/rewrite" do
          r = Nginx::Request.new
          r.uri = "/to/backend"
          r.proxy_pass "http://backend"
        end
        location "/content_type" do
          r = Nginx::Request.new
          r.content_type = "text/html"
          Nginx.rputs "<p>hi</p>"
        end
        location "/headers" do
          r = Nginx::Request.new
          r.headers_in["X-Drop"] = nil
          r.headers_out["X-One"] = "1"
          r.headers_out["Set-Cookie"] = ["a=1", "b=2"]
          r.headers_out["X-Gone"] = "x"
          r.headers_out.delete("X-Gone")
          Nginx.rputs "\#{r.headers_in.all.keys.sort.join(',')} \#{r.headers_out.all.keys.join(',')} \#{r.headers_out['Set-Cookie'].inspect}"
        end
        location "/redirect" do
          Nginx.redirect "http://example.com/x"
        end
        location "/redirect301" do
          Nginx.redirect "http://example.com/y", Nginx::HTTP_MOVED_PERMANENTLY
        end
        location "/internal" do
          Nginx.redirect "/target?from=internal"
        end
        location "/target" do |req|
          req.headers_out["X-Target"] = "yes"
          "target \#{req.query} \#{req.method}"
        end
        location "/status_code" do
          Nginx.status_code = 204
        end
        location "/names" do
          Nginx.rputs [server_name, get_server_class, Nginx.module_name, Nginx.nginx_version,
                       Nginx.server_version].join(",")
        end
        location "/userdata" do
          Userdata.new.count = 41
          Userdata.new.count += 1
          Nginx.rputs Userdata.new.count.to_s
        end
        location "/filter", proxy_pass: "http://127.0.0.1:#{@a.port}",
                 body_filter: ->(*) { f = Nginx::Filter.new; f.body = f.body.upcase }
        location "/upstream" do |req|
          u = Nginx::Upstream.new "backend"
          before = u.server
          u.server = "127.0.0.1:#{@b.port}" if req.query == "switch"
          Nginx.rputs "\#{before} -> \#{u.server} keepalive \#{u.keepalive_cache}"
        end
        location "/via_upstream", proxy_pass: "http://backend"
        location "/log" do
          [Nginx::LOG_STDERR, Nginx::LOG_EMERG, Nginx::LOG_ALERT, Nginx::LOG_CRIT, Nginx::LOG_ERR,
           Nginx::LOG_WARN, Nginx::LOG_NOTICE, Nginx::LOG_INFO, Nginx::LOG_DEBUG].each do |lv|
            Nginx.errlogger lv, "errlogger level \#{lv}"
          end
          Nginx.log Nginx::LOG_WARN, "nginx log line"
          Nginx.rputs "logged"
        end
        location "/rack" do
          run ->(env) { [201, { "x-path" => env["PATH_INFO"] }, ["\#{env['REQUEST_METHOD']} \#{env['QUERY_STRING']} \#{env['HTTP_X_A']} \#{env['rack.input'].read}"]] }
        end
        location "/sub_dst" do
          Nginx.rputs Nginx::Request.new.uri_args.inspect
        end
        location "/sub_hash" do
          Nginx::Async::HTTP.sub_request "/sub_dst", { query1: "foo", query2: "a b" }
          Nginx.rputs Nginx::Async::HTTP.last_response.body
        end
        location "/sub_missing" do
          Nginx::Async::HTTP.sub_request "/nowhere"
          Nginx.rputs Nginx::Async::HTTP.last_response.body
        end
        location "/sub_missing_ok" do
          Nginx::Async::HTTP.sub_request "/nowhere"
          Nginx.rputs "ok \#{Nginx::Async::HTTP.last_response.status}"
        end
      end
    RUBY
    @gw = start_gateway(File.read(@config), ports: @port)
  end

  def get(path, headers = {})
    http_get(@port, path, headers)
  end

  it 'Nginx::Var reads nginx variables of the request' do
    expect(get('/var?name=uri').body).to eq('/var')
    expect(get('/var?name=args').body).to eq('name=args')
    expect(get('/var?name=query_string').body).to eq('name=query_string')
    expect(get('/var?name=arg_name').body).to eq('arg_name')
    expect(get('/var?name=request_method').body).to eq('GET')
    expect(get('/var?name=remote_addr').body).to eq('127.0.0.1')
    expect(get('/var?name=server_addr').body).to eq('127.0.0.1')
    expect(get('/var?name=server_port').body).to eq(@port.to_s)
    expect(get('/var?name=scheme').body).to eq('http')
    expect(get('/var?name=host').body).to eq('127.0.0.1')
    expect(get('/var?name=request_uri').body).to eq('/var?name=request_uri')
    expect(get('/var?name=request').body).to eq('GET /var?name=request HTTP/1.1')
    expect(get('/var?name=server_protocol').body).to eq('HTTP/1.1')
    expect(get('/var?name=http_x_foo', 'X-Foo' => 'bar').body).to eq('bar')
    expect(get('/var?name=cookie_sid', 'Cookie' => 'a=1; sid=xyz').body).to eq('xyz')
    r = http_request(@port, 'POST', '/var?name=content_length', { 'Content-Type' => 'text/plain' }, 'hello')
    expect(r.body).to eq('5')
    r = http_request(@port, 'POST', '/var?name=content_type', { 'Content-Type' => 'text/plain' }, 'hello')
    expect(r.body).to eq('text/plain')
    expect(get('/var?name=not_a_variable').body).to eq('')
  end

  it 'Nginx::Var keeps user variables for the rest of the request (set, NAME =, exist?)' do
    expect(get('/var_set').body).to eq('100,200,true,false,nil')
  end

  it 'defines ngx_mruby status constants, FALSE/TRUE and log levels' do
    expect(get('/constants').body).to eq('0,-5,-1,-2,-4,01,404,503,429,4')
  end

  it 'Nginx::Connection gives both ends of the client socket' do
    c = connect(@port)
    c.request('GET', '/conn', 'Connection' => 'close')
    body = c.read_response.body
    local = c.sock.local_address
    expect(body).to eq("127.0.0.1 #{local.ip_port} 127.0.0.1:#{@port}")
  ensure
    c&.close
  end

  it 'Nginx::Server answers with the config file folder' do
    dir = File.dirname(@config)
    expect(get('/server').body).to eq("#{dir}|#{dir}")
  end

  it 'the request has ngx_mruby names: uri, unparsed_uri, args, authority, hostname, scheme, protocol, sub_request?' do
    r = get('/req/a%20b?x=1', 'Host' => "localhost:#{@port}")
    expect(r.body).to eq("GET|/req/a b|/req/a%20b?x=1|x=1|localhost:#{@port}|localhost|http|HTTP/1.1|false")
  end

  it 'uri_args decodes the query; uri_args= replaces it, encoded' do
    expect(get('/uri_args?k1=v1&k2=&k3=a%20b').body)
      .to eq('{"k1"=>"v1", "k2"=>"", "k3"=>"a b"} pass=ngx%20mruby&x=1%262')
  end

  it 'post_args decodes a form body; read_body and get_body work' do
    r = http_request(@port, 'POST', '/post_args', {}, 'foo=bar&bar=buzz')
    expect(r.body).to eq('{"foo"=>"bar", "bar"=>"buzz"} foo=bar&bar=buzz')
  end

  it 'r.uri= rewrites the path a later proxy_pass sends' do
    expect(get('/rewrite?q=1').body).to eq('from-a /to/backend?q=1')
  end

  it 'r.content_type= sets the Content-Type' do
    r = get('/content_type')
    expect(r['content-type']).to eq('text/html')
    expect(r.count('content-type')).to eq(1)
  end

  it 'headers: []= nil deletes, an Array sends one field per element, #all lists them' do
    r = get('/headers', 'X-Drop' => '1', 'X-Keep' => '2')
    expect(r.body).to eq('Connection,Host,X-Keep X-One,Set-Cookie ["a=1", "b=2"]')
    expect(r.header_lines.select { |k, _| k.casecmp?('set-cookie') }.map(&:last)).to eq(%w[a=1 b=2])
    expect(r['x-gone']).to be_nil
  end

  it 'Nginx.redirect answers an external redirect (302 by default, or the status given)' do
    r = get('/redirect')
    expect(r.status).to eq(302)
    expect(r['location']).to eq('http://example.com/x')
    r = get('/redirect301')
    expect(r.status).to eq(301)
    expect(r['location']).to eq('http://example.com/y')
  end

  it 'Nginx.redirect "/path" is an internal redirect: that location answers, in-process' do
    r = get('/internal')
    expect(r.status).to eq(200)
    expect(r.body).to eq('target from=internal GET')
    expect(r['x-target']).to eq('yes')
  end

  it 'Nginx.status_code= sets the status' do
    expect(get('/status_code').status).to eq(204)
  end

  it 'server_name, get_server_class, module_name and the versions (the gateway\'s own)' do
    version = `#{gateway_bin} -v`[%r{gateway/(\S+)}, 1]
    expect(get('/names').body).to eq("NGINX,Nginx,ngx_mruby,#{version},#{version}")
  end

  it 'Userdata keeps values for the rest of the request, and not for the next one' do
    expect(get('/userdata').body).to eq('42')
    expect(get('/userdata').body).to eq('42')
  end

  it 'Nginx::Filter reads and replaces the body in a body filter' do
    expect(get('/filter/x').body).to eq('FROM-A /FILTER/X')
  end

  it "Nginx::Upstream reads a group and replaces its server for the worker's next requests" do
    expect(get('/upstream').body).to eq("127.0.0.1:#{@a.port} -> 127.0.0.1:#{@a.port} keepalive 128")
    expect(get('/via_upstream').body).to eq('from-a /via_upstream')
    expect(get('/upstream?switch').body).to eq("127.0.0.1:#{@a.port} -> 127.0.0.1:#{@b.port} keepalive 128")
    expect(get('/via_upstream').body).to eq('from-b /via_upstream')
  end

  it 'Nginx.errlogger and Nginx.log accept every level constant' do
    expect(get('/log').body).to eq('logged')
    log = File.join(File.dirname(@config), 'error.log')
    text = poll('the log lines') { (t = File.read(log)).include?('nginx log line') && t }
    (0..8).each { |lv| expect(text).to include("errlogger level #{lv}") }
    expect(text).to match(/\[warn\].*nginx log line/)
  end

  it 'Kernel#run answers with a Rack app and ngx_mruby env keys' do
    r = http_request(@port, 'POST', '/rack?q=1', { 'X-A' => 'b' }, 'in')
    expect(r.status).to eq(201)
    expect(r['x-path']).to eq('/rack')
    expect(r.body).to eq('POST q=1 b in')
  end

  it 'Nginx::Async::HTTP.sub_request sends a Hash as an encoded query' do
    expect(get('/sub_hash').body).to eq('{"query1"=>"foo", "query2"=>"a b"}')
  end

  it 'a sub-request to a missing location: 404, and the request answers 404 unless it writes' do
    r = get('/sub_missing')
    expect(r.status).to eq(404)
    expect(r.body).to eq('')
    r = get('/sub_missing_ok')
    expect(r.status).to eq(200)
    expect(r.body).to eq('ok 404')
  end
end
