# header_filter: and body_filter: on every response a location produces
# (request.c's output filters): static files (memory-cached, sendfile'd,
# ranged, HEAD), the gateway's own error pages (a missing file's 404, a
# dead upstream's 502, a slow one's 504), a phase that answered, over
# HTTP/1.1 and HTTP/2; and `gateway -t` refusing filters where they cannot
# apply (a WebSocket).
require_relative 'spec_helper'

RSpec.describe 'filters on every response' do
  BIG = 300 * 1024 # over static.c's SMALL_READ: sent with sendfile(2) over HTTP/1.1

  def docroot
    @docroot ||= begin
      d = File.join(spec_dir, 'public')
      FileUtils.mkdir_p(d)
      File.write(File.join(d, 'a.txt'), "hello\n")
      File.write(File.join(d, 'abc.txt'), 'abcdefghij')
      File.write(File.join(d, 'big.txt'), 'x' * BIG)
      d
    end
  end

  before(:each) do
    @dead = free_port # nothing listens there: 502
    @slow = TCPServer.new('127.0.0.1', 0) # accepts, never answers: 504
    prelude = <<~RUBY
      upstream "slow", servers: ["127.0.0.1:#{@slow.addr[1]}"], timeout: 0.5
    RUBY
    gateway_with(<<~RUBY, prelude, server: 'workers: 1, http2: true')
      location "/s/", alias: "#{docroot}/",
               header_filter: ->(req) { req.headers_out["X-Filtered"] = req.status.to_s },
               body_filter: ->(body, req) { "[" + body.upcase + "]" }
      location "/h/", alias: "#{docroot}/",
               header_filter: ->(req) { req.headers_out["X-Head-Only"] = "yes" }
      location "/slowhead/", alias: "#{docroot}/",
               header_filter: ->(req) { Async.sleep(0.1); req.headers_out["X-Slept"] = "yes" }
      location "/boom/", alias: "#{docroot}/",
               header_filter: ->(req) { Async.sleep(0.05); raise "filter broke" }
      location "/dead", proxy_pass: "http://127.0.0.1:#{@dead}",
               header_filter: ->(req) { req.headers_out["X-Filtered"] = req.status.to_s },
               body_filter: ->(body, req) { "filtered: " + body }
      location "/slow", proxy_pass: "http://slow",
               header_filter: ->(req) { req.headers_out["X-Filtered"] = req.status.to_s }
      location "/denied", access: ->(req) { Nginx.return 403 },
               root: "#{docroot}",
               header_filter: ->(req) { req.headers_out["X-Filtered"] = req.status.to_s }
    RUBY
  end

  after(:each) { @slow&.close }

  it 'a memory-cached static file passes both filters' do
    r = http_get(@port, '/s/a.txt')
    expect([r.status, r['x-filtered'], r.body, r['content-length']]).to eq([200, '200', "[HELLO\n]", '8'])
  end

  it "a body filter reads a sendfile'd file through the filter" do
    r = http_get(@port, '/s/big.txt', timeout: 10)
    expect([r.status, r['x-filtered'], r.body.bytesize]).to eq([200, '200', BIG + 2])
    expect(r.body).to eq('[' + 'X' * BIG + ']')
  end

  it 'a header filter alone leaves a large file streaming (sendfile) with the filtered head' do
    r = http_get(@port, '/h/big.txt', timeout: 10)
    expect([r.status, r['x-head-only'], r.body.bytesize, r['content-length']]).to eq([200, 'yes', BIG, BIG.to_s])
  end

  it 'a header filter that waits holds the file until it is done' do
    r = http_get(@port, '/slowhead/big.txt', timeout: 10)
    expect([r.status, r['x-slept'], r.body]).to eq([200, 'yes', 'x' * BIG])
    r = http_get(@port, '/slowhead/a.txt')
    expect([r.status, r['x-slept'], r.body]).to eq([200, 'yes', "hello\n"])
  end

  it 'a header filter that raises while it holds a large file answers 500, the file let go' do
    pid = worker_pid(@port)
    2.times { expect(http_get(@port, '/boom/big.txt', timeout: 10).status).to eq(500) }
    before = open_fds(pid)
    5.times { expect(http_get(@port, '/boom/big.txt', timeout: 10).status).to eq(500) }
    # The last client's socket may still be open a moment (the worker closes
    # it on the EOF it has yet to read); five held files would never go.
    poll('the files (and the last connection) to be let go') { open_fds(pid) <= before }
    poll('the error in the log') { @gw.log.include?('filter broke') }
  end

  it 'a ranged response passes the filters (206, the range filtered)' do
    r = http_get(@port, '/s/abc.txt', 'Range' => 'bytes=2-5')
    expect([r.status, r['x-filtered'], r['content-range'], r.body]).to eq([206, '206', 'bytes 2-5/10', '[CDEF]'])
  end

  it 'HEAD of a static file runs the header filter' do
    c = connect(@port)
    c.write("HEAD /h/big.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    r = c.read_response(head: true)
    expect([r.status, r['x-head-only'], r['content-length']]).to eq([200, 'yes', BIG.to_s])
  end

  it "the gateway's own 404 for a missing file passes the filters" do
    r = http_get(@port, '/s/missing.txt')
    expect([r.status, r['x-filtered'], r.body]).to eq([404, '404', "[404 NOT FOUND\n]"])
  end

  it "a dead upstream's 502 passes the filters" do
    r = http_get(@port, '/dead/x')
    expect([r.status, r['x-filtered'], r.body]).to eq([502, '502', "filtered: 502 Bad Gateway\n"])
  end

  it "a silent upstream's 504 passes the header filter" do
    r = http_get(@port, '/slow/x', timeout: 10)
    expect([r.status, r['x-filtered']]).to eq([504, '504'])
  end

  it 'an access phase that answered passes the header filter' do
    r = http_get(@port, '/denied/a.txt')
    expect([r.status, r['x-filtered']]).to eq([403, '403'])
  end

  it 'HTTP/2: static files (in memory and large) and error pages pass the filters' do
    out = curl('--http2-prior-knowledge', '-D', '-', "http://127.0.0.1:#{@port}/s/a.txt")
    expect(out).to match(%r{\AHTTP/2 200}).and include("x-filtered: 200").and end_with("[HELLO\n]")
    out = curl('--http2-prior-knowledge', '-D', '-', "http://127.0.0.1:#{@port}/s/big.txt")
    expect(out).to include("x-filtered: 200").and end_with('[' + 'X' * BIG + ']')
    out = curl('--http2-prior-knowledge', '-D', '-', "http://127.0.0.1:#{@port}/slowhead/big.txt")
    expect(out).to include("x-slept: yes").and end_with('x' * BIG)
    out = curl('--http2-prior-knowledge', '-D', '-', "http://127.0.0.1:#{@port}/s/missing")
    expect(out).to match(%r{\AHTTP/2 404}).and include("x-filtered: 404").and end_with("[404 NOT FOUND\n]")
  end

  it 'clients that leave while a header filter holds a file (sendfile deferred) leak no descriptor' do
    pid = worker_pid(@port)
    http_get(@port, '/slowhead/big.txt', timeout: 10) # both files are open in the cache from now on
    http_get(@port, '/slowhead/a.txt')
    before = open_fds(pid)
    30.times do
      c = connect(@port)
      c.write("GET /slowhead/big.txt HTTP/1.1\r\nHost: x\r\n\r\n")
      sleep 0.01
      c.close
    end
    sleep 0.3 # the filters' sleeps end
    expect(http_get(@port, '/slowhead/a.txt').body).to eq("hello\n")
    poll('the descriptors back to where they were') { open_fds(pid) <= before }
  end

  it 'a body over 64 MiB for a body filter answers 502 (a file, or a streamed upstream), the worker goes on' do
    File.open(File.join(docroot, 'huge.bin'), 'w') { |f| f.truncate(65 << 20) } # sparse
    r = http_get(@port, '/s/huge.bin', timeout: 10)
    expect([r.status, r['x-filtered']]).to eq([502, '502'])
    up = fake_upstream do |peer|
      while peer.read_request(timeout: 30)
        peer.write("HTTP/1.1 200 OK\r\nContent-Length: #{66 << 20}\r\n\r\n")
        66.times { peer.write('y' * (1 << 20)) }
      end
    end
    port = free_port
    start_gateway(<<~RUBY, ports: [port])
      server listen: "127.0.0.1:#{port}", workers: 1 do
        location "/", proxy_pass: "http://127.0.0.1:#{up.port}", body_filter: ->(body, req) { body }
      end
    RUBY
    r = http_get(port, '/big', timeout: 20)
    expect(r.status).to eq(502)
    expect(http_get(@port, '/s/a.txt').body).to eq("[HELLO\n]")
  end

  it 'the worker survives it all' do
    expect(http_get(@port, '/pid').status).to eq(200)
  end
end

RSpec.describe 'filters where they cannot apply' do
  it 'gateway -t refuses a filter on a websocket: location, with FILE:LINE' do
    st, out, path = check_config(<<~RUBY)
      server listen: #{free_port} do
        location "/ws", websocket: ->(ws, req) { },
                 header_filter: ->(req) { }
      end
    RUBY
    expect(st).not_to eq(0)
    expect(out).to include("#{path}:2").and include('header_filter: cannot apply to a WebSocket')
  end

  it "gateway -t refuses the server's body filter on a tunnelling proxy (tunnel_timeout:), with FILE:LINE" do
    st, out, path = check_config(<<~RUBY)
      server listen: #{free_port}, body_filter: ->(body, req) { body } do
        location "/ok" do "x" end
        location "/ws", proxy_pass: "http://127.0.0.1:1", tunnel_timeout: 30
      end
    RUBY
    expect(st).not_to eq(0)
    expect(out).to include("#{path}:3").and include("the server's body_filter: cannot apply")
  end

  it 'a proxy_pass location with filters relays no upgrade: the handshake goes as a plain request, its answer filtered' do
    seen = Queue.new
    up = fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        seen << req['upgrade'].to_s
        peer.respond(200, {}, 'plain')
      end
    end
    port = free_port
    start_gateway(<<~RUBY, ports: [port])
      server listen: "127.0.0.1:#{port}", workers: 1 do
        location "/ws", proxy_pass: "http://127.0.0.1:#{up.port}", header_filter: ->(req) { req.headers_out["X-F"] = "1" }
      end
    RUBY
    c = connect(port)
    c.write("GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" \
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    r = c.read_response
    expect([r.status, r['x-f'], r.body, seen.pop]).to eq([200, '1', 'plain', ''])
  end

  it "a websocket: location does not take the server's filters, and filter: false opts a tunnel out" do
    st, out, = check_config(<<~RUBY)
      server listen: #{free_port}, header_filter: ->(req) { } do
        location "/ws", websocket: ->(ws, req) { }
        location "/t", proxy_pass: "http://127.0.0.1:1", tunnel_timeout: 30, header_filter: false
      end
    RUBY
    expect([st, out]).to eq([0, out])
  end
end

RSpec.describe 'filter and handler arity' do
  it 'a body filter file (Nginx::Filter) and lambdas declaring fewer parameters run with what they declare' do
    dir = spec_dir
    File.write(File.join(dir, 'bf.rb'), "f = Nginx::Filter.new\nf.body = f.body.upcase + \"!\"\n\"ignored\"\n")
    File.write(File.join(dir, 'init.rb'), "$init_ran = (req.nil? ? 'ran' : 'req?')\n")
    port = free_port
    start_gateway(<<~RUBY, ports: [port])
      server listen: "127.0.0.1:#{port}", workers: 1, init_worker: "#{dir}/init.rb" do
        location "/file", body_filter: "#{dir}/bf.rb" do "hello" end
        location "/one", body_filter: ->(body) { body.reverse } do "hello" end
        location "/init" do $init_ran.to_s end
        location "/none", header_filter: -> { Nginx::Headers_out.new["X-None"] = "1" } do "x" end
      end
    RUBY
    r = http_get(port, '/file')
    expect([r.status, r.body]).to eq([200, 'HELLO!'])
    r = http_get(port, '/one')
    expect([r.status, r.body]).to eq([200, 'olleh'])
    r = http_get(port, '/none')
    expect([r.status, r['x-none']]).to eq([200, '1'])
    expect(http_get(port, '/init').body).to eq('ran') # an init_worker file, called with nothing
  end

  it 'a lambda that cannot take the arguments is a FILE:LINE error at load' do
    st, out, path = check_config(<<~RUBY)
      server listen: #{free_port} do
        location "/x", body_filter: ->(a, b, c) { a } do "x" end
      end
    RUBY
    expect(st).not_to eq(0)
    expect(out).to include("#{path}:2").and include('body_filter: the lambda takes 3 argument(s); it is called with (body, req)')
    st, out, path = check_config(<<~RUBY)
      server listen: #{free_port} do
        location "/x",
                 header_filter: ->(req, extra) { } do "x" end
      end
    RUBY
    expect(st).not_to eq(0)
    expect(out).to include("#{path}:2").and include('header_filter: the lambda takes 2 argument(s); it is called with (req)')
  end
end

RSpec.describe 'headers set before the content (phases, a handler) on the response' do
  before(:each) do
    @up = fake_upstream do |peer|
      while (req = peer.read_request(timeout: 30))
        peer.write("HTTP/1.1 200 OK\r\nX-Up: yes\r\nSet-Cookie: up=1\r\nContent-Type: text/up\r\nContent-Length: 2\r\n\r\nup")
      end
    end
    d = File.join(spec_dir, 'www')
    FileUtils.mkdir_p(d)
    File.write(File.join(d, 'f.txt'), 'file')
    @port = free_port
    early = %q{->(req) { h = req.headers_out; h["X-Early"] = "1"; h["Set-Cookie"] = "early=1"; h["Content-Type"] = "text/early"; nil }}
    start_gateway(<<~RUBY, ports: [@port])
      server listen: "127.0.0.1:#{@port}", workers: 1 do
        location "/p/", proxy_pass: "http://127.0.0.1:#{@up.port}", rewrite: #{early}
        location "/s/", alias: "#{d}/", access: #{early}
        location "/dead", proxy_pass: "http://127.0.0.1:#{free_port}", rewrite: #{early}
        location "/ruby" do |req|
          req.headers_out["X-Handler"] = "set before proxy_pass"
          req.proxy_pass("http://127.0.0.1:#{@up.port}/x")
        end
      end
    RUBY
  end

  it 'a proxied response keeps them: both fields appear, the Content-Type is the upstream\'s' do
    r = http_get(@port, '/p/x')
    expect([r.status, r.body, r['x-early'], r['x-up'], r['content-type']]).to eq([200, 'up', '1', 'yes', 'text/up'])
    expect(r['set-cookie'].split(', ').sort).to eq(['early=1', 'up=1'])
    expect(r.count('content-type')).to eq(1)
  end

  it 'a static file and the missing file\'s 404 keep them' do
    r = http_get(@port, '/s/f.txt')
    expect([r.status, r['x-early'], r['set-cookie'], r['content-type']]).to eq([200, '1', 'early=1', 'text/plain'])
    r = http_get(@port, '/s/none.txt')
    expect([r.status, r['x-early'], r.count('content-type')]).to eq([404, '1', 1])
  end

  it "a dead upstream's 502 keeps them" do
    r = http_get(@port, '/dead')
    expect([r.status, r['x-early']]).to eq([502, '1'])
  end

  it 'a handler that sets a field, then proxy_pass: the field is on the upstream\'s response' do
    r = http_get(@port, '/ruby')
    expect([r.status, r.body, r['x-handler'], r['x-up']]).to eq([200, 'up', 'set before proxy_pass', 'yes'])
  end
end

RSpec.describe 'ruby_files: true (ngx_mruby mruby_add_handler)' do
  before(:each) do
    @root = File.join(spec_dir, 'app')
    FileUtils.mkdir_p(File.join(@root, 'sub'))
    File.write(File.join(@root, 'hello.rb'), "Nginx.rputs \"hello from \#{req.method}\"\n")
    File.write(File.join(@root, 'sub', 'index.rb'), "\"index \#{Gateway.pid}\"\n")
    File.write(File.join(@root, 'broken.rb'), "a = 1\nb = )\n")
    File.write(File.join(@root, 'plain.txt'), 'text')
    File.write(File.join(spec_dir, 'outside.rb'), '"outside!"')
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: [@port])
      server listen: "127.0.0.1:#{@port}", workers: 1 do
        location "/", root: "#{@root}", ruby_files: true, index: ["index.rb", "index.html"],
                 open_file_cache: false
        location "/src/", alias: "#{@root}/"
      end
    RUBY
  end

  it 'runs *.rb under the root as handler files (any method, an index too), never their source' do
    r = http_get(@port, '/hello.rb')
    expect([r.status, r.body]).to eq([200, 'hello from GET'])
    r = http_request(@port, 'POST', '/hello.rb', {}, 'x=1')
    expect([r.status, r.body]).to eq([200, 'hello from POST'])
    r = http_get(@port, '/sub/')
    expect([r.status, r.body]).to start_with(200).and(satisfy { |a| a[1].start_with?('index ') })
    expect(http_get(@port, '/plain.txt').body).to eq('text')
    expect(http_get(@port, '/src/hello.rb').body).to start_with('Nginx.rputs') # a location without it: a file
  end

  it 'compiles once and again when the file changes' do
    expect(http_get(@port, '/hello.rb').body).to eq('hello from GET')
    path = File.join(@root, 'hello.rb')
    File.write(path, "\"changed\"\n")
    File.utime(Time.now + 5, Time.now + 5, path)
    expect(http_get(@port, '/hello.rb').body).to eq('changed')
  end

  it 'a file that does not compile answers 500 with FILE:LINE in the log; no path leaves the root' do
    expect(http_get(@port, '/broken.rb').status).to eq(500)
    poll('the compile error with FILE:LINE') { @gw.log.include?("ruby_files: #{@root}/broken.rb:2:") }
    [ '/../outside.rb', '/%2e%2e/outside.rb', '/sub/..%2f..%2foutside.rb', '/sub/%2e%2e/%2e%2e/outside.rb' ].each do |p|
      r = http_get(@port, p)
      expect(r.body).not_to include('outside!'), p
      expect([400, 403, 404]).to include(r.status), p
    end
  end
end

RSpec.describe 'response head order (nginx: its own fields, then the handler\'s)' do
  it 'writes Server, Date, Content-Length, Connection first and the fields a handler set after them' do
    port = free_port
    start_gateway(<<~RUBY, ports: [port])
      server listen: "127.0.0.1:#{port}", workers: 1 do
        location "/a" do |req| req.headers_out["X-Mine"] = "1"; "a" end
        location "/s" do |req| req.headers_out["Server"] = "mine"; "s" end
      end
    RUBY
    c = connect(port)
    c.write("GET /a HTTP/1.0\r\nHost: x\r\n\r\n")
    names = c.read_all.split("\r\n\r\n", 2)[0].split("\r\n").drop(1).map { |l| l.split(':', 2)[0] }
    expect(names).to eq(%w[Server Date Content-Type Content-Length Connection X-Mine])
    c = connect(port)
    c.write("GET /s HTTP/1.0\r\nHost: x\r\n\r\n")
    head = c.read_all.split("\r\n\r\n", 2)[0]
    expect(head.scan(/^Server: .*$/)).to eq(['Server: mine'])
    expect(head.split("\r\n").last).to eq('Server: mine')
  end
end
