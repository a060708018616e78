# fastcgi: locations and upstream groups with protocol: :fastcgi.
#
# Real backend: Debian's php8.2-fpm, its binary started here (-F, a config
# of our own, a temporary prefix) with one pool on a unix socket and one on
# a free TCP port, stopped by PID; never the system service. Hostile cases:
# a FastCGI responder scripted in Ruby inside the example, which also counts
# connections (keep-alive reuse).
require_relative 'spec_helper'
require 'digest'
require 'json'
require 'open3'
require 'zlib'

require_relative 'fastcgi_helper'

# Every example's gateway: one worker, bodies up to 8 MB, /fast.
RSpec.describe 'fastcgi', gateway: { server: 'workers: 1, limits: { max_body: 8_000_000 }', pid: false, fast: true } do
  # As proxy_pass's fake upstream: what a fake responder saw fails the example.
  after(:each) do
    errors = (@fakes || []).flat_map(&:stop)
    @fpm&.stop
    raise RSpec::Expectations::ExpectationNotMetError, errors.join("\n") unless errors.empty?
  end

  def fake(**o, &blk)
    f = FakeFcgi.new(**o, &blk)
    (@fakes ||= []) << f
    f
  end

  # ---------------------------------------------------------------------------
  describe 'php-fpm (Debian php8.2-fpm)' do
    before(:each) do
      skip "#{PHP_FPM} is not installed (setup.sh installs php8.2-fpm)" unless File.executable?(PHP_FPM)
      @www = File.join(spec_dir, 'www')
      FileUtils.mkdir_p(@www)
      {
        'echo.php' => '<?php echo "hello from php\n";',
        'server.php' => '<?php header("Content-Type: application/json"); echo json_encode($_SERVER);',
        'post.php' => '<?php $b = file_get_contents("php://input"); echo strlen($b), " ", md5($b), " ", $_SERVER["CONTENT_LENGTH"] ?? "-";',
        'form.php' => '<?php echo $_POST["a"] ?? "none", ",", $_POST["b"] ?? "none";',
        'headers.php' => '<?php header("X-One: 1"); header("Set-Cookie: a=1"); header("Set-Cookie: b=2", false); http_response_code(201); echo "made";',
        'status.php' => '<?php header("Status: 418 I am a teapot"); echo "tea";',
        'redirect.php' => '<?php header("Location: /elsewhere"); ',
        'slow.php' => '<?php usleep(1000000); echo "slow";',
        'fatal.php' => '<?php undefined_function_here();',
        'big.php' => '<?php echo str_repeat("x", 1 << 20);',
      }.each { |n, src| File.write(File.join(@www, n), src) }
      %w[u t].each { |d| File.symlink('.', File.join(@www, d)) } # /u/x.php and /t/x.php: DOCUMENT_ROOT + path
      @fpm = PhpFpm.new(spec_dir, free_port)
    end

    def php_gateway(extra = '')
      gateway_with(<<~LOC, %(upstream :php, servers: ["unix:#{@fpm.sock}"], protocol: :fastcgi, keepalive: 4))
        location "/u/", fastcgi: "php", params: { "DOCUMENT_ROOT" => "#{@www}" }
        location "/t/", fastcgi: "127.0.0.1:#{@fpm.port}", params: { "DOCUMENT_ROOT" => "#{@www}" }
        location "/sf", fastcgi: "unix:#{@fpm.sock}", script_filename: "#{@www}/echo.php"
        #{extra}
      LOC
    end

    it 'header_filter and body_filter run on FastCGI responses, streamed and whole, and on its 502; earlier fields stay' do
      php_gateway(<<~LOC)
        location "/f/", fastcgi: "unix:#{@fpm.sock}", params: { "DOCUMENT_ROOT" => "#{@www}" },
                 rewrite: ->(req) { req.headers_out["X-Early"] = "kept"; nil },
                 header_filter: ->(req) { req.headers_out["X-Filtered"] = req.status.to_s },
                 body_filter: ->(body, req) { "<" + body.strip.upcase + ">" }
        location "/fh/", fastcgi: "unix:#{@fpm.sock}", params: { "DOCUMENT_ROOT" => "#{@www}" },
                 header_filter: ->(req) { Async.sleep(0.05); req.headers_out["X-Filtered"] = "slept" }
        location "/fdead/", fastcgi: "127.0.0.1:#{free_port}",
                 header_filter: ->(req) { req.headers_out["X-Filtered"] = req.status.to_s }
      LOC
      File.symlink('.', File.join(@www, 'f')) unless File.exist?(File.join(@www, 'f'))
      File.symlink('.', File.join(@www, 'fh')) unless File.exist?(File.join(@www, 'fh'))
      r = http_get(@port, '/f/echo.php')
      expect([r.status, r['x-filtered'], r.body, r['x-early']]).to eq([200, '200', '<HELLO FROM PHP>', 'kept'])
      r = http_get(@port, '/fh/big.php', timeout: 10)
      expect([r.status, r['x-filtered'], r.body.bytesize]).to eq([200, 'slept', 1 << 20])
      r = http_get(@port, '/fdead/x.php')
      expect([r.status, r['x-filtered']]).to eq([502, '502'])
    end

    it 'answers a one-line echo over the unix socket and over TCP' do
      php_gateway
      u = http_get(@port, '/u/echo.php')
      t = http_get(@port, '/t/echo.php')
      expect([u.status, u.body]).to eq([200, "hello from php\n"])
      expect([t.status, t.body]).to eq([200, "hello from php\n"])
      expect(http_get(@port, '/sf/anything').body).to eq("hello from php\n")
    end

    it 'sends the standard params (as nginx fastcgi_params) and every header as HTTP_*, never HTTP_PROXY' do
      php_gateway
      r = http_get(@port, '/u/server.php?a=1&b=2', 'X-Custom-Thing' => 'v1', 'Proxy' => 'http://evil:1/', 'Host' => 'example.test:8080')
      s = JSON.parse(r.body)
      expect(s['REQUEST_METHOD']).to eq('GET')
      expect(s['QUERY_STRING']).to eq('a=1&b=2')
      expect(s['REQUEST_URI']).to eq('/u/server.php?a=1&b=2')
      expect(s['SCRIPT_NAME']).to eq('/u/server.php')
      expect(s['DOCUMENT_URI']).to eq('/u/server.php')
      expect(s['SCRIPT_FILENAME']).to eq("#{@www}/u/server.php") # $document_root$fastcgi_script_name
      expect(s['DOCUMENT_ROOT']).to eq(@www)
      expect(s['SERVER_PROTOCOL']).to eq('HTTP/1.1')
      expect(s['GATEWAY_INTERFACE']).to eq('CGI/1.1')
      expect(s['SERVER_SOFTWARE']).to eq('gateway')
      expect(s['REMOTE_ADDR']).to eq('127.0.0.1')
      expect(s['REMOTE_PORT'].to_i).to be > 0
      expect(s['SERVER_ADDR']).to eq('127.0.0.1')
      expect(s['SERVER_PORT']).to eq(@port.to_s)
      expect(s['SERVER_NAME']).to eq('example.test')
      expect(s['REDIRECT_STATUS']).to eq('200')
      expect(s['REQUEST_SCHEME']).to eq('http')
      expect(s).not_to have_key('HTTPS')
      expect(s['HTTP_X_CUSTOM_THING']).to eq('v1')
      expect(s['HTTP_HOST']).to eq('example.test:8080')
      expect(s).not_to have_key('HTTP_PROXY')
    end

    it 'passes POST bodies: a form, a 5 MB body with Content-Length, and a chunked one' do
      php_gateway
      f = http_request(@port, 'POST', '/u/form.php', { 'Content-Type' => 'application/x-www-form-urlencoded' }, 'a=1&b=two')
      expect(f.body).to eq('1,two')
      big = Random.new(7).bytes(5_000_000)
      r = http_request(@port, 'POST', '/t/post.php', { 'Content-Type' => 'application/octet-stream' }, big, timeout: 20)
      expect(r.body).to eq("5000000 #{Digest::MD5.hexdigest(big)} 5000000")
      c = connect(@port)
      c.write("POST /u/post.php HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" \
              "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
      expect(c.read_response.body).to eq("11 #{Digest::MD5.hexdigest('hello world')} 11")
    end

    it 'passes headers, the status, Status: and a Location without Status as 302' do
      php_gateway
      h = http_get(@port, '/u/headers.php')
      expect([h.status, h['x-one'], h.count('set-cookie'), h.body]).to eq([201, '1', 2, 'made'])
      expect(http_get(@port, '/u/status.php').status).to eq(418)
      r = http_get(@port, '/u/redirect.php')
      expect([r.status, r['location']]).to eq([302, '/elsewhere'])
    end

    it 'a fatal error: 500, and the PHP message in the error log' do
      php_gateway
      r = http_get(@port, '/u/fatal.php')
      expect(r.status).to eq(500)
      poll('the stderr line in the log', timeout: 5) { @gw.log.include?('undefined_function_here') }
    end

    it 'a missing script: 404 from php-fpm' do
      php_gateway
      expect(http_get(@port, '/u/nope.php').status).to eq(404)
    end

    it 'streams a 1 MiB body, HEAD gets no body' do
      php_gateway
      r = http_get(@port, '/u/big.php', timeout: 10)
      expect(r.body.bytesize).to eq(1 << 20)
      h = http_request(@port, 'HEAD', '/u/big.php')
      expect(h.status).to eq(200)
    end

    it 'compress: a PHP answer is compressed on the fly, streamed (docs/compression.md)' do
      php_gateway(%(location "/c/", fastcgi: "unix:#{@fpm.sock}", params: { "DOCUMENT_ROOT" => "#{@www}" }, compress: true))
      File.symlink('.', File.join(@www, 'c')) unless File.exist?(File.join(@www, 'c'))
      r = http_get(@port, '/c/big.php', { 'Accept-Encoding' => 'gzip' }, timeout: 10)
      expect([r.status, r['content-encoding'], r['vary']]).to eq([200, 'gzip', 'Accept-Encoding'])
      expect(r.body.bytesize).to be < 10_000
      expect(Zlib.gunzip(r.body)).to eq('x' * (1 << 20))
      out, st = Open3.capture2('zstd', '-d', '-c', '-q',
                               stdin_data: http_get(@port, '/c/server.php', { 'Accept-Encoding' => 'zstd' }).body, binmode: true)
      expect(st.success?).to be true
      expect(JSON.parse(out)['REQUEST_METHOD']).to eq('GET')
      expect(http_get(@port, '/c/big.php', { 'Accept-Encoding' => 'identity' }, timeout: 10).body.bytesize).to eq(1 << 20)
    end

    it 'a slow script does not delay a fast request' do
      php_gateway
      slow = Thread.new { http_get(@port, '/u/slow.php', timeout: 5) }
      sleep 0.05
      fast, secs = timed { http_get(@port, '/fast') }
      expect(fast.body).to eq('fast')
      expect(slow.alive?).to be(true), 'the slow script (1 s) was over before /fast was answered'
      expect(secs).to be < slack(0.5)
      expect(slow.value.body).to eq('slow')
    end

    it 'Async::HTTP.sub_request targets a FastCGI location; req.fastcgi_pass from a handler' do
      php_gateway(<<~LOC)
        location "/agg" do |req| "sub:" + Async::HTTP.sub_request("/u/echo.php").body end
        location "/pass" do |req| req.fastcgi_pass("php", script_filename: "#{@www}/echo.php") end
      LOC
      expect(http_get(@port, '/agg').body).to eq("sub:hello from php\n")
      expect(http_get(@port, '/pass').body).to eq("hello from php\n")
    end
  end

  # ---------------------------------------------------------------------------
  # nginx's `location ~ [^/]\.php(/|$) { include snippets/fastcgi-php.conf; ... }`
  # (fastcgi_split_path_info ^(.+?\.php)(/.*)$) as a regex location with
  # split_path_info:, a static location beside it; php-fpm says what it got,
  # and the same requests go through nginx with Debian's snippet.
  describe 'split_path_info: and a \.php$ regex location (php8.2-fpm; nginx with snippets/fastcgi-php.conf beside)' do
    SPLIT_KEYS = %w[SCRIPT_NAME SCRIPT_FILENAME PATH_INFO PATH_TRANSLATED DOCUMENT_URI REQUEST_URI PHP_SELF].freeze
    NGINX = `sh -c 'command -v nginx'`.strip

    before(:each) do
      skip "#{PHP_FPM} is not installed (setup.sh installs php8.2-fpm)" unless File.executable?(PHP_FPM)
      @root = File.join(spec_dir, 'docroot')
      FileUtils.mkdir_p(File.join(@root, 'sub'))
      show = '<?php header("Content-Type: application/json"); $o = []; ' \
             "foreach (#{SPLIT_KEYS.inspect} as $k) $o[$k] = $_SERVER[$k] ?? null; echo json_encode($o);"
      ['a.php', 'sub/b.php', 'sp ace.php'].each { |n| File.write(File.join(@root, n), show) }
      File.write(File.join(@root, 'x.txt'), "plain text\n")
      @fpm = PhpFpm.new(spec_dir, free_port)
      gateway_with(<<~LOC)
        location %r{[^/]\\.php(/|$)}, fastcgi: "unix:#{@fpm.sock}", split_path_info: %r{^(.+?\\.php)(/.*)$},
                 params: { "DOCUMENT_ROOT" => "#{@root}" }
        location "^~ /pass/" do |req|
          req.fastcgi_pass("unix:#{@fpm.sock}", script_filename: "#{@root}/sub/b.php", split_path_info: %r{^/pass(/.+?\\.php)(/.*)$})
        end
        location "^~ /onegroup/" do |req| req.fastcgi_pass("unix:#{@fpm.sock}", split_path_info: %r{^(.+\\.php)}) end
        location "/", root: "#{@root}"
      LOC
    end

    after(:each) { stop_nginx }

    def php(path)
      r = http_get(@port, path)
      expect([r.status, r['content-type']]).to eq([200, 'application/json']), "#{path}: #{r.status} #{r.body}"
      JSON.parse(r.body)
    end

    # An nginx on a free port with Debian's snippet in front of the same
    # php-fpm pool and docroot; its fastcgi.conf is copied into its prefix,
    # where the snippet's `include fastcgi.conf` looks.
    def start_nginx
      dir = File.join(spec_dir, 'nginx')
      FileUtils.mkdir_p(dir)
      FileUtils.cp('/etc/nginx/fastcgi.conf', dir)
      @nginx_port = free_port
      @nginx = GatewaySpec.start_nginx_peer(dir, <<~NGINX, [@nginx_port], connections: 64)
        server {
          listen 127.0.0.1:#{@nginx_port};
          root #{@root};
          location / { }
          location ~ [^/]\\.php(/|$) {
            include /etc/nginx/snippets/fastcgi-php.conf;
            fastcgi_pass unix:#{@fpm.sock};
          }
        }
      NGINX
    end

    def stop_nginx
      return unless @nginx
      Process.kill('TERM', @nginx)
      Process.waitpid(@nginx)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end

    it 'splits the script from PATH_INFO: SCRIPT_NAME, SCRIPT_FILENAME, DOCUMENT_URI, PATH_INFO, PATH_TRANSLATED' do
      a = php('/a.php')
      expect(a.values_at(*SPLIT_KEYS)).to eq(['/a.php', "#{@root}/a.php", nil, nil, '/a.php', '/a.php', '/a.php'])
      b = php('/sub/b.php')
      expect(b.values_at(*SPLIT_KEYS)).to eq(['/sub/b.php', "#{@root}/sub/b.php", nil, nil, '/sub/b.php', '/sub/b.php', '/sub/b.php'])
      e = php('/a.php/extra/path?x=1')
      expect(e.values_at(*SPLIT_KEYS)).to eq(['/a.php', "#{@root}/a.php", '/extra/path', "#{@root}/extra/path", '/a.php',
                                              '/a.php/extra/path?x=1', '/a.php/extra/path'])
      s = php('/sub/b.php/')
      expect(s.values_at('SCRIPT_NAME', 'PATH_INFO')).to eq(['/sub/b.php', '/'])
    end

    it 'everything else is the static location; a missing script is php-fpm\'s 404' do
      x = http_get(@port, '/x.txt')
      expect([x.status, x.body]).to eq([200, "plain text\n"])
      expect(http_get(@port, '/a.php.txt').status).to eq(404) # not a script, not a file
      n = http_get(@port, '/nope.php')
      expect([n.status, n.body]).to eq([404, "File not found.\n"])
      poll('php-fpm\'s stderr in the log') { @gw.log.include?('Primary script unknown') }
      expect(http_get(@port, '/nope.php/more').status).to eq(404)
    end

    it 'splits the percent-decoded, normalised path (nginx\'s $uri); REQUEST_URI stays as sent; a bad one is 400' do
      e = php('/sub/%62.php/p%20q%3Fr')
      expect(e.values_at(*SPLIT_KEYS)).to eq(['/sub/b.php', "#{@root}/sub/b.php", '/p q?r', "#{@root}/p q?r", '/sub/b.php',
                                              '/sub/%62.php/p%20q%3Fr', '/sub/b.php/p q?r'])
      sp = php('/sp%20ace.php/x')
      expect(sp.values_at('SCRIPT_NAME', 'SCRIPT_FILENAME', 'PATH_INFO')).to eq(['/sp ace.php', "#{@root}/sp ace.php", '/x'])
      dots = php('/sub//b.php/../b.php/./z')
      expect(dots.values_at('SCRIPT_NAME', 'PATH_INFO')).to eq(['/sub/b.php', '/z'])
      ['/a.php/%zz', '/a.php/%2F', '/a.php/%00', '/a.php/../../etc/x.php'].each do |bad|
        expect(http_get(@port, bad).status).to eq(400), bad
      end
      expect(php('/a.php').fetch('SCRIPT_NAME')).to eq('/a.php') # the worker serves on
    end

    it 'an encoded ".php" is still the script\'s location (never the static one: no source served)' do
      ['/a%2Ephp', '/a.ph%70/x', '/sub%2F..%2Fa.php'].each do |path|
        r = http_get(@port, path)
        expect(r.body).not_to include('<?php'), path
      end
      expect(php('/a%2Ephp').values_at('SCRIPT_NAME', 'SCRIPT_FILENAME')).to eq(['/a.php', "#{@root}/a.php"])
      expect(php('/a.ph%70/x').values_at('SCRIPT_NAME', 'PATH_INFO')).to eq(['/a.php', '/x'])
    end

    it 'req.fastcgi_pass(split_path_info:) from a handler; a pattern without two groups there is a 500' do
      p = php('/pass/sub/b.php/q')
      expect(p.values_at('SCRIPT_NAME', 'SCRIPT_FILENAME', 'PATH_INFO', 'DOCUMENT_URI')).to eq(['/sub/b.php', "#{@root}/sub/b.php", '/q', '/sub/b.php'])
      expect(http_get(@port, '/onegroup/a.php').status).to eq(500)
      poll('the ArgumentError in the log') { @gw.log.include?('split_path_info: must be a Regexp with two groups') }
    end

    it 'php sees what nginx with snippets/fastcgi-php.conf sends (PATH_INFO only when not empty; PATH_TRANSLATED besides)' do
      skip 'nginx is not installed' if NGINX.empty? || !File.exist?('/etc/nginx/snippets/fastcgi-php.conf')
      start_nginx
      ['/a.php', '/sub/b.php', '/a.php/extra/path?x=1', '/sub/%62.php/p%20q', '/sp%20ace.php/x', '/a.php/',
       '/sub//b.php/../b.php/z'].each do |path|
        r = http_get(@nginx_port, path)
        expect(r.status).to eq(200), "nginx #{path}: #{r.status} #{r.body}"
        theirs = JSON.parse(r.body)
        ours = php(path)
        # nginx sends PATH_INFO "" for none (fastcgi_param without if_not_empty)
        # and no PATH_TRANSLATED; the gateway omits the one and adds the other.
        expect(theirs['PATH_TRANSLATED']).to be_nil
        expect(ours['PATH_TRANSLATED']).to eq(ours['PATH_INFO'] && "#{@root}#{ours['PATH_INFO']}")
        expect(ours.merge('PATH_TRANSLATED' => nil, 'PATH_INFO' => ours['PATH_INFO'].to_s)).to eq(theirs), path
      end
      expect(http_get(@nginx_port, '/x.txt').body).to eq(http_get(@port, '/x.txt').body)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'a scripted FastCGI responder' do
    def hello = FakeFcgi.answer("Content-Type: text/plain\r\n\r\nhi")

    it 'reuses one keep-alive connection for sequential requests (FCGI_KEEP_CONN)' do
      f = fake { hello }
      gateway_with(%(location "/f", fastcgi: "127.0.0.1:#{f.port}"))
      c = connect(@port)
      5.times do
        c.request('GET', '/f', 'Host' => 'x')
        expect(c.read_response.body).to eq('hi')
      end
      expect(f.connections).to eq(1)
    end

    it 'sends HTTPS=on and REQUEST_SCHEME=https for a request on a TLS listener (neither HTTPS on plain)' do
      f = fake { |p, _, _| FakeFcgi.answer("\r\n#{p['REQUEST_SCHEME']} #{p.fetch('HTTPS', '-')}") }
      cert = File.join(spec_dir, 'site.pem')
      out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
                                '-keyout', File.join(spec_dir, 'site.key'), '-out', cert, '-days', '2', '-subj', '/CN=localhost')
      raise out unless st.success?
      tls_port = free_port
      gateway_with(%(location "/f", fastcgi: "127.0.0.1:#{f.port}"), <<~RUBY)
        server listen: "127.0.0.1:#{tls_port}", tls: { cert: "site.pem", key: "site.key" } do
          location "/f", fastcgi: "127.0.0.1:#{f.port}"
        end
      RUBY
      expect(http_get(@port, '/f').body).to eq('http -')
      out, st = Open3.capture2e('curl', '-sS', '-k', "https://127.0.0.1:#{tls_port}/f")
      expect(st).to be_success, out
      expect(out).to eq('https on')
    end

    it 'works over a unix socket responder' do
      path = File.join(spec_dir, 'f.sock')
      f = fake(unix: path) { |p, _, _| FakeFcgi.answer("X-Uri: #{p['REQUEST_URI']}\r\n\r\nunix") }
      gateway_with(%(location "/f", fastcgi: "unix:#{path}"))
      r = http_get(@port, '/f?q=1')
      expect([r.status, r['x-uri'], r.body]).to eq([200, '/f?q=1', 'unix'])
    end

    it 'splits the head across records, and logs FCGI_STDERR lines' do
      f = fake do
        [FakeFcgi.stderr("line one\nline"), FakeFcgi.stdout("X-A: 1\r"), FakeFcgi.stdout("\n\r"),
         FakeFcgi.stdout("\nbo", pad: 3) + FakeFcgi.stderr(" two\n"), FakeFcgi.stdout('dy') + FakeFcgi.stdout('') + FakeFcgi.end_request]
      end
      gateway_with(%(location "/f", fastcgi: "127.0.0.1:#{f.port}"))
      r = http_get(@port, '/f')
      expect([r.status, r['x-a'], r.body]).to eq([200, '1', 'body'])
      expect(@gw.log).to include('line one').and include('line two')
    end

    {
      'a bad record version' => -> { "\x02" + FakeFcgi.answer("A: 1\r\n\r\nx")[1..] },
      'a record for another request id' => -> { FakeFcgi.stdout("A: 1\r\n\r\nx", id: 2) + FakeFcgi.end_request },
      'garbage (an HTTP response)' => -> { "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi" },
      'an END_REQUEST of the wrong length' => -> { FakeFcgi.stdout("A: 1\r\n") + FakeFcgi.rec(3, "\0" * 9) },
      'a close in the middle of a record' => -> { FakeFcgi.stdout("A: 1\r\n\r\nxxxxxxxx")[0, 12] },
      'a head that never ends' => -> { FakeFcgi.stdout("A: 1\r\n" * 20) },
      'a head line without a colon' => -> { FakeFcgi.answer("garbage line\r\n\r\nx") },
      'an END_REQUEST without any head' => -> { FakeFcgi.end_request },
      'a management record' => -> { FakeFcgi.rec(10, '', id: 0) },
      'FCGI_OVERLOADED' => -> { FakeFcgi.end_request(0, 2) },
    }.each do |what, bytes|
      it "#{what}: 502, the connection is not reused, the worker serves on" do
        f = fake { |_, _, idx| idx == 1 ? [:close_after, bytes.call] : FakeFcgi.answer("\r\nok") }
        gateway_with(%(location "/f", fastcgi: "127.0.0.1:#{f.port}"))
        expect(http_get(@port, '/f').status).to eq(502)
        r = http_get(@port, '/f')
        expect([r.status, r.body]).to eq([200, 'ok'])
        expect(f.connections).to eq(2)
      end
    end

    it 'an error after the head went out cuts the chunked response short (no last chunk), never a fake complete one' do
      f = fake { [:close_after, FakeFcgi.stdout("\r\npartial") + FakeFcgi.rec(3, "\0" * 9)] }
      gateway_with(%(location "/f", fastcgi: "127.0.0.1:#{f.port}"))
      raw = raw_request(@port, "GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
      expect(raw).to start_with('HTTP/1.1 200').and include("7\r\npartial\r\n")
      expect(raw).not_to end_with("0\r\n\r\n")
    end

    it 'bytes after FCGI_END_REQUEST: the response stands, the connection is not reused' do
      f = fake { |_, _, idx| idx == 1 ? FakeFcgi.answer("\r\nfirst") + 'junk' : FakeFcgi.answer("\r\nsecond") }
      gateway_with(%(location "/f", fastcgi: "127.0.0.1:#{f.port}"))
      expect(http_get(@port, '/f').body).to eq('first')
      expect(http_get(@port, '/f').body).to eq('second')
      expect(f.connections).to eq(2)
    end

    it 'a responder that says nothing: 504 after the group timeout' do
      f = fake { :hang }
      gateway_with(%(location "/f", fastcgi: "slow"), %(upstream :slow, servers: ["127.0.0.1:#{f.port}"], protocol: :fastcgi, timeout: 0.5))
      r, secs = timed { http_get(@port, '/f') }
      expect(r.status).to eq(504)
      expect(secs).to be_between(0.4, slack(3))
    end

    it 'retries on the next server of a group when one is dead; 502 when all are' do
      dead = free_port
      f = fake { hello }
      gateway_with(%(location "/f", fastcgi: "g"\n location "/d", fastcgi: "alldead"),
                   %(upstream :g, servers: ["127.0.0.1:#{dead}", "127.0.0.1:#{f.port}"], protocol: :fastcgi\n) +
                   %(upstream :alldead, servers: ["127.0.0.1:#{dead}"], protocol: :fastcgi))
      4.times { expect(http_get(@port, '/f').body).to eq('hi') }
      expect(http_get(@port, '/d').status).to eq(502)
    end

    it 'a client that leaves mid-response: the FastCGI connection is closed, the worker serves on' do
      closed = Queue.new
      f = fake do |_, _, idx|
        next FakeFcgi.answer("\r\nok") if idx > 1
        Array.new(40) { FakeFcgi.stdout(idx == 1 && closed.empty? ? 'x' * 60_000 : '') }.tap { |a| a[0] = FakeFcgi.stdout("\r\n") }
      end
      gateway_with(%(location "/f", fastcgi: "127.0.0.1:#{f.port}"))
      c = connect(@port)
      c.request('GET', '/f', 'Host' => 'x')
      sleep 0.2
      c.close
      expect(http_get(@port, '/fast').body).to eq('fast')
      r = http_get(@port, '/f', timeout: 10)
      expect([r.status, r.body]).to eq([200, 'ok'])
      expect(f.connections).to eq(2)
    end

    it 'a kept connection the server closes after each answer is replaced (pooled_exchange.c): GET twice and a POST' do
      f = fake { |p, stdin, _| [:close_after, FakeFcgi.answer("\r\n#{p['REQUEST_METHOD']} #{stdin.bytesize}")] }
      gateway_with(%(location "/f", fastcgi: "127.0.0.1:#{f.port}"))
      c = connect(@port)
      %w[GET GET].each do |m|
        c.request(m, '/f', 'Host' => 'x')
        r = c.read_response
        expect([r.status, r.body]).to eq([200, "#{m} 0"])
      end
      # A POST is never resent once sent: it must not trust a connection whose
      # close already arrived (the close is given time to arrive here).
      sleep 0.1
      r = http_request(@port, 'POST', '/f', {}, 'a' * 1000)
      expect([r.status, r.body]).to eq([200, 'POST 1000'])
      expect(f.connections).to eq(3)
    end

    it 'streams a request body with a Content-Length as FCGI_STDIN' do
      got = Queue.new
      f = fake { |p, stdin, _| got << [p['CONTENT_LENGTH'], stdin.bytesize]; FakeFcgi.answer("\r\nok") }
      gateway_with(%(location "/f", fastcgi: "127.0.0.1:#{f.port}"))
      body = 'z' * 300_000
      expect(http_request(@port, 'POST', '/f', {}, body).body).to eq('ok')
      expect(got.pop).to eq(['300000', 300_000])
    end
  end

  # ---------------------------------------------------------------------------
  describe 'header_filter: and body_filter: on fastcgi: locations' do
    # /big: 1 MiB over several records; /head: a body the gateway must drop
    # for HEAD; anything else echoes SCRIPT_NAME.
    def responder
      fake do |p, _, _|
        if p['REQUEST_URI'].start_with?('/ff/big')
          FakeFcgi.answer("X-Up: yes\r\nContent-Length: #{1 << 20}\r\n\r\n" + 'b' * (1 << 20))
        else
          FakeFcgi.answer("X-Up: yes\r\nContent-Type: text/plain\r\n\r\nup:#{p['REQUEST_URI']}")
        end
      end
    end

    def filtered_gateway(f)
      gateway_with(<<~LOC)
        location "/ff/", fastcgi: "127.0.0.1:#{f.port}",
                 header_filter: ->(req) {
                   req.headers_out["X-Filtered"] = req.headers_out["X-Up"] + "!"
                   req.status = 203 if req.status == 200
                 }
        location "/slow/", fastcgi: "127.0.0.1:#{f.port}",
                 header_filter: ->(req) { Async.sleep(1.0); req.headers_out["X-Slept"] = "1.0" }
        location "/raise/", fastcgi: "127.0.0.1:#{f.port}", header_filter: ->(req) { raise "fcgi header filter broke" }
        location "/body/", fastcgi: "127.0.0.1:#{f.port}", body_filter: ->(body, req) { body.upcase }
        location "/both/", fastcgi: "127.0.0.1:#{f.port}",
                 header_filter: ->(req) { req.headers_out["X-Head"] = "1" },
                 body_filter: ->(body, req) { body + "|" + req.headers_out["X-Head"].to_s }
        location "/sub" do
          r = Async::HTTP.sub_request("/ff/x")
          "\#{r.status}|\#{r.headers["x-filtered"]}|\#{r.body}"
        end
      LOC
    end

    it 'a header_filter changes the status and headers of a streamed response, 1 MiB follows intact' do
      f = responder
      filtered_gateway(f)
      r = http_get(@port, '/ff/a')
      expect([r.status, r['x-filtered'], r.body]).to eq([203, 'yes!', 'up:/ff/a'])
      big = http_get(@port, '/ff/big', timeout: 10)
      expect([big.status, big['x-filtered'], big.body.bytesize]).to eq([203, 'yes!', 1 << 20])
      expect(big.body.count('b')).to eq(1 << 20)
      h = http_request(@port, 'HEAD', '/ff/h')
      expect([h.status, h['x-filtered']]).to eq([203, 'yes!'])
      expect(f.connections).to eq(1) # the paused exchange still ends cleanly and is pooled
    end

    it 'a header_filter may wait (Async.sleep) without blocking the worker; one that raises gives 500' do
      f = responder
      filtered_gateway(f)
      t = Thread.new { http_get(@port, '/slow/a') }
      sleep 0.05
      fast, took = timed { http_get(@port, '/fast') }
      expect(fast.body).to eq('fast')
      expect(t.alive?).to be(true), 'the filter (Async.sleep 1 s) was over before /fast was answered'
      expect(took).to be < slack(0.5)
      r = t.value
      expect([r.status, r['x-slept'], r.body]).to eq([200, '1.0', 'up:/slow/a'])
      expect(http_get(@port, '/raise/a').status).to eq(500)
      poll('the error in the log') { @gw.log.include?('fcgi header filter broke') }
      expect(http_get(@port, '/ff/after').body).to eq('up:/ff/after')
    end

    it 'a body_filter gets the whole body; with a header_filter too, that runs first' do
      f = responder
      filtered_gateway(f)
      r = http_get(@port, '/body/a')
      expect([r.status, r.body]).to eq([200, 'UP:/BODY/A'])
      b = http_get(@port, '/both/a')
      expect([b.status, b['x-head'], b.body]).to eq([200, '1', 'up:/both/a|1'])
    end

    it 'applies to a sub-request to the location; a client leaving while the filter waits drops the exchange' do
      f = responder
      filtered_gateway(f)
      expect(http_get(@port, '/sub').body).to eq('203|yes!|up:/ff/x')
      c = connect(@port)
      c.write("GET /slow/gone HTTP/1.1\r\nHost: x\r\n\r\n")
      sleep 0.05
      c.close
      sleep 1.1 # past the filter's sleep: nothing may resume on the freed request
      expect(http_get(@port, '/ff/after').status).to eq(203)
      expect(@gw.log).not_to match(GatewaySpec::CRASH_REPORT)
    end
  end

  # ---------------------------------------------------------------------------
  describe 'config' do
    it 'fastcgi: naming a group that is not a FastCGI one, or none, is a config error' do
      st, out, path = check_config(%(upstream :h, servers: ["127.0.0.1:9"]\nserver listen: #{free_port} do\n  location "/a", fastcgi: "h"\nend\n))
      expect([st, out]).to match([1, /#{Regexp.escape(path)}:3: .*not a FastCGI group/])
      st, out, = check_config(%(server listen: #{free_port} do\n  location "/a", fastcgi: "nope"\nend\n))
      expect([st, out]).to match([1, /not an upstream with protocol: :fastcgi/])
    end

    it 'split_path_info: a Regexp (or its source) of two groups on a fastcgi: location, else FILE:LINE' do
      listen = free_port
      st, out, path = check_config(<<~RUBY)
        server listen: #{listen} do
          location "/", root: "/tmp"
          location %r{\\.php$}, fastcgi: "127.0.0.1:9000",
                   split_path_info: %r{^(.+\\.php)}
        end
      RUBY
      expect([st, out]).to match([1, /#{Regexp.escape(path)}:3: .*split_path_info: must be a Regexp with two groups.*\(1 groups\)/])
      one = ->(loc) { check_config("server listen: #{listen} do\n  #{loc}\nend\n") }
      st, out, path = one.call('location "/a", fastcgi: "127.0.0.1:9000", split_path_info: "^(a)(b)(c)$"')
      expect([st, out]).to match([1, /#{Regexp.escape(path)}:2: .*\(3 groups\)/])
      st, out, path = one.call('location("/a", split_path_info: %r{(a)(b)}) { "x" }')
      expect([st, out]).to match([1, /#{Regexp.escape(path)}:2: .*split_path_info: applies to fastcgi: locations only/])
      st, out, path = one.call('location "/a", fastcgi: "127.0.0.1:9000", split_path_info: "^(.+?\\\\.php)(/.*$"')
      expect([st, out]).to match([1, /#{Regexp.escape(path)}:2: .*missing closing parenthesis/])
      st, out, = one.call('location "/a", fastcgi: "127.0.0.1:9000", split_path_info: "^(.+?\\\\.php)(/.*)$"')
      expect([st, out]).to match([0, /syntax is ok/])
    end

    it 'rejects host names, bad params and proxy_pass to a FastCGI group' do
      st, out, = check_config(%(upstream :p, servers: ["php.example:9000"], protocol: :fastcgi\nserver listen: #{free_port} do\nlocation("/") { "x" }\nend\n))
      expect([st, out]).to match([1, /:1: .*no host names/])
      st, out, = check_config(%(server listen: #{free_port} do\n  location "/a", fastcgi: "127.0.0.1:9000", params: { "A" => 1 }\nend\n))
      expect([st, out]).to match([1, /:2: .*params must be a Hash of String => String/])
      st, out, = check_config(%(upstream :p, servers: ["127.0.0.1:9000"], protocol: :fastcgi\nserver listen: #{free_port} do\n  location "/a", proxy_pass: "http://p/"\nend\n))
      expect([st, out]).to match([1, /a FastCGI upstream: use fastcgi:/])
    end
  end
end
