# Static files: `location "/p", root: "public"` / `alias:` (gateway/handler/static/static.c),
# req.send_file, and fallback:. HTTP semantics (types, validators, 304,
# ranges, HEAD, precompressed siblings, 405), safety (no path leaves its
# root: dot segments plain and encoded, encoded slashes and NULs,
# backslashes, symlinks, FIFOs, devices, sockets), and the large-file path
# (sendfile: flat RSS, truncation mid-download, a slow reader).
#
# "Unreadable" (403): specs run as root, which reads a chmod 000 file all the
# same, so the unreadable case is a unix socket in the tree (open() fails
# with ENXIO) - the same code path as EACCES.
require_relative 'spec_helper'
require 'socket'
require 'time'

RSpec.describe 'static files' do
  FILE_MIB = 1024 * 1024

  # A document root with a few files, and a secret beside it.
  def docroot
    @docroot ||= begin
      d = File.join(spec_dir, 'public')
      FileUtils.mkdir_p(File.join(d, 'sub'))
      FileUtils.mkdir_p(File.join(d, 'empty'))
      File.write(File.join(d, 'a.txt'), "hello\n")
      File.write(File.join(d, 'style.css'), 'body{}')
      File.write(File.join(d, 'app.wasm'), "\0asm")
      File.write(File.join(d, 'noext'), 'x')
      File.write(File.join(d, 'zero'), '')
      File.write(File.join(d, 'ten.bin'), '0123456789')
      File.write(File.join(d, 'sub', 'index.html'), '<p>sub</p>')
      File.write(File.join(d, 'index.html'), '<p>root</p>')
      File.write(File.join(d, 'page.html'), 'plain page')
      File.binwrite(File.join(d, 'page.html.gz'), 'GZIPPED')
      File.binwrite(File.join(d, 'page.html.br'), 'BROTLI')
      File.write(File.join(d, '%2e%2e'), 'a file named %2e%2e')
      File.write(File.join(spec_dir, 'secret.txt'), 'SECRET')
      d
    end
  end

  def static_gateway(opts = '', extra: '', env: {})
    docroot
    gateway_with(<<~RUBY, server: '', env: env)
      location "/", root: "public"#{opts.empty? ? '' : ", #{opts}"}
      #{extra}
    RUBY
    @worker = worker_pid
  end

  def get(path, headers = {})
    http_get(@port, path, headers)
  end

  # The raw target goes out as written (no client-side normalisation).
  def raw_get(target)
    parse_response(raw_request(@port, "GET #{target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
  end

  describe 'HTTP' do
    before { static_gateway }

    it 'serves a file with its type from /etc/mime.types, Last-Modified, an nginx-style ETag and Accept-Ranges' do
      r = get('/style.css')
      expect(r.status).to eq(200)
      expect(r.body).to eq('body{}')
      expect(r['content-type']).to eq('text/css')
      st = File.stat(File.join(docroot, 'style.css'))
      expect(r['etag']).to eq(format('"%x-%x"', st.mtime.to_i, st.size))
      expect(r['last-modified']).to eq(st.mtime.httpdate)
      expect(r['accept-ranges']).to eq('bytes')
      expect(r['content-length']).to eq('6')
    end

    it 'a file without a known extension gets application/octet-stream; an empty file a 0-length body' do
      expect(get('/noext')['content-type']).to eq('application/octet-stream')
      r = get('/zero')
      expect([r.status, r.body, r['content-length']]).to eq([200, '', '0'])
    end

    it 'HEAD sends the headers and the length, no body' do
      r = http_request(@port, 'HEAD', '/a.txt')
      expect(r.status).to eq(200)
      expect(r['content-length']).to eq('6')
      c = connect(@port)
      c.request('HEAD', '/a.txt')
      c.read_response(head: true)
      c.request('GET', '/a.txt') # nothing of a body was sent after the HEAD
      expect(c.read_response.body).to eq("hello\n")
    end

    it 'If-None-Match with the ETag (or *) and If-Modified-Since not older than the file give 304' do
      etag = get('/a.txt')['etag']
      lm = get('/a.txt')['last-modified']
      r = get('/a.txt', 'If-None-Match' => etag)
      expect([r.status, r.body]).to eq([304, ''])
      expect(r['etag']).to eq(etag)
      expect(get('/a.txt', 'If-None-Match' => "\"x\", W/#{etag}").status).to eq(304)
      expect(get('/a.txt', 'If-None-Match' => '*').status).to eq(304)
      expect(get('/a.txt', 'If-None-Match' => '"other"').status).to eq(200)
      expect(get('/a.txt', 'If-Modified-Since' => lm).status).to eq(304)
      expect(get('/a.txt', 'If-Modified-Since' => (Time.now + 3600).httpdate).status).to eq(304)
      expect(get('/a.txt', 'If-Modified-Since' => (Time.now - 86_400).httpdate).status).to eq(200)
      expect(get('/a.txt', 'If-Modified-Since' => 'garbage').status).to eq(200)
      # If-None-Match wins over If-Modified-Since
      expect(get('/a.txt', 'If-None-Match' => '"other"', 'If-Modified-Since' => lm).status).to eq(200)
    end

    it 'a single Range gives 206 with Content-Range (also a suffix and an open end)' do
      r = get('/ten.bin', 'Range' => 'bytes=2-4')
      expect([r.status, r.body, r['content-range'], r['content-length']]).to eq([206, '234', 'bytes 2-4/10', '3'])
      r = get('/ten.bin', 'Range' => 'bytes=-3')
      expect([r.status, r.body, r['content-range']]).to eq([206, '789', 'bytes 7-9/10'])
      r = get('/ten.bin', 'Range' => 'bytes=8-')
      expect([r.status, r.body]).to eq([206, '89'])
      r = get('/ten.bin', 'Range' => 'bytes=5-100')
      expect([r.status, r.body, r['content-range']]).to eq([206, '56789', 'bytes 5-9/10'])
    end

    it 'an unsatisfiable Range gives 416 with Content-Range: bytes */SIZE' do
      r = get('/ten.bin', 'Range' => 'bytes=10-')
      expect([r.status, r['content-range']]).to eq([416, 'bytes */10'])
      expect(get('/zero', 'Range' => 'bytes=0-').status).to eq(416)
    end

    it 'a malformed Range gives the whole file with 200 (several: spec/ranges_spec.rb)' do
      r = get('/ten.bin', 'Range' => 'bytes=5-2')
      expect([r.status, r.body]).to eq([200, '0123456789'])
      expect(r['content-range']).to be_nil
      expect(get('/ten.bin', 'Range' => 'lines=1-2').status).to eq(200)
    end

    it 'If-Range: the range applies only while the ETag or date still matches' do
      etag = get('/ten.bin')['etag']
      lm = get('/ten.bin')['last-modified']
      expect(get('/ten.bin', 'Range' => 'bytes=0-1', 'If-Range' => etag).status).to eq(206)
      expect(get('/ten.bin', 'Range' => 'bytes=0-1', 'If-Range' => lm).status).to eq(206)
      r = get('/ten.bin', 'Range' => 'bytes=0-1', 'If-Range' => '"stale"')
      expect([r.status, r.body]).to eq([200, '0123456789'])
      expect(get('/ten.bin', 'Range' => 'bytes=0-1', 'If-Range' => 'Sun, 06 Nov 1994 08:49:37 GMT').status).to eq(200)
    end

    it 'methods other than GET and HEAD get 405 with Allow' do
      r = http_request(@port, 'POST', '/a.txt', {}, 'x')
      expect(r.status).to eq(405)
      expect(r['allow']).to eq('GET, HEAD')
      expect(http_request(@port, 'DELETE', '/a.txt').status).to eq(405)
    end

    it 'a directory gets its index; without the slash a 301 to it (query kept); no index: 403' do
      expect(get('/').body).to eq('<p>root</p>')
      r = get('/sub/')
      expect([r.status, r.body, r['content-type']]).to eq([200, '<p>sub</p>', 'text/html'])
      r = get('/sub?x=1')
      expect([r.status, r['location']]).to eq([301, '/sub/?x=1'])
      expect(get('/empty/').status).to eq(403)
      expect(get('/nope').status).to eq(404)
      expect(get('/nope/').status).to eq(404)
      expect(get('/a.txt/').status).to eq(404)
    end

  end

  it 'types: overrides the table, default_type: the fallback type; index: other names' do
    static_gateway('types: { "txt" => "text/x-mine", ".wasm" => "application/x-w" }, default_type: "text/plain", index: ["page.html"]')
    expect(get('/a.txt')['content-type']).to eq('text/x-mine')
    expect(get('/app.wasm')['content-type']).to eq('application/x-w')
    expect(get('/noext')['content-type']).to eq('text/plain')
    expect(get('/style.css')['content-type']).to eq('text/css')
    expect(get('/').body).to eq('plain page')
    expect(get('/sub/').status).to eq(403) # no page.html there
  end

  it 'gzip_static: the .br or .gz sibling when accepted, with Content-Encoding and Vary' do
    static_gateway('gzip_static: true')
    r = get('/page.html', 'Accept-Encoding' => 'gzip')
    expect([r.body, r['content-encoding'], r['vary'], r['content-type']]).to eq(['GZIPPED', 'gzip', 'Accept-Encoding', 'text/html'])
    r = get('/page.html', 'Accept-Encoding' => 'gzip, br')
    expect([r.body, r['content-encoding']]).to eq(%w[BROTLI br])
    r = get('/page.html', 'Accept-Encoding' => 'br;q=0, gzip')
    expect(r.body).to eq('GZIPPED')
    r = get('/page.html')
    expect([r.body, r['content-encoding'], r['vary']]).to eq(['plain page', nil, 'Accept-Encoding'])
    r = get('/a.txt', 'Accept-Encoding' => 'gzip') # no sibling
    expect([r.body, r['content-encoding']]).to eq(["hello\n", nil])
  end

  it 'autoindex: true lists a directory without an index as HTML (names escaped)' do
    File.write(File.join(docroot, 'empty', 'a<b>.txt'), 'x')
    FileUtils.mkdir_p(File.join(docroot, 'empty', 'd'))
    static_gateway('autoindex: true')
    r = get('/empty/')
    expect(r.status).to eq(200)
    expect(r['content-type']).to start_with('text/html')
    expect(r.body).to include('<a href="a%3Cb%3E.txt">a&lt;b&gt;.txt</a>')
    expect(r.body).to include('<a href="d/">d/</a>')
  end

  it 'alias: replaces the location prefix; root: appends the URI' do
    docroot
    FileUtils.mkdir_p(File.join(docroot, 'assets'))
    File.write(File.join(docroot, 'assets', 'x.js'), 'root-x')
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      server listen: "127.0.0.1:#{@port}" do
        location "/static/", alias: "public/"
        location "/assets/", root: "public"
      end
    RUBY
    expect(get('/static/a.txt').body).to eq("hello\n")
    expect(get('/static/sub/').body).to eq('<p>sub</p>')
    expect(get('/assets/x.js').body).to eq('root-x')
    expect(get('/static/../secret.txt').status).to eq(400)
  end

  describe 'safety' do
    before do
      docroot
      File.symlink(File.join(spec_dir, 'secret.txt'), File.join(docroot, 'out-link'))
      File.symlink('a.txt', File.join(docroot, 'in-link'))
      File.symlink(spec_dir, File.join(docroot, 'dir-link'))
      File.symlink('/dev/null', File.join(docroot, 'devnull'))
      File.mkfifo(File.join(docroot, 'fifo'))
      @sock = UNIXServer.new(File.join(docroot, 'sock'))
    end
    after { @sock&.close }

    def expect_safe(env = {})
      static_gateway('', env: env)
      %w[/../secret.txt /%2e%2e/secret.txt /%2E%2E/secret.txt /sub/../../secret.txt /.%2e/secret.txt
         /sub%2f..%2f..%2fsecret.txt /a%00.txt /a%5c..%5csecret.txt /sub\\..\\..\\secret.txt /%zz].each do |t|
        r = raw_get(t)
        expect(r.status).to eq(400), "#{t}: #{r.status}"
        expect(r.body).not_to include('SECRET')
      end
      r = raw_get('/%252e%252e/secret.txt') # decoded once: a literal name "%2e%2e" folder
      expect(r.status).to eq(404)
      expect(raw_get('/%252e%252e').body).to eq('a file named %2e%2e')
      expect(get('/sub/%2e%2e/a.txt').body).to eq("hello\n") # stays inside: fine
      # symlinks: none is followed (follow_symlinks: false), in or out of the root
      %w[/out-link /in-link /dir-link/secret.txt /devnull].each do |t|
        r = get(t)
        expect(r.status).to eq(403), "#{t}: #{r.status}"
        expect(r.body).not_to include('SECRET')
      end
      t0 = GatewaySpec.now
      expect(get('/fifo').status).to eq(403) # opened O_NONBLOCK, never read: no stall
      expect(GatewaySpec.now - t0).to be < 2 * GatewaySpec::SLACK
      expect(get('/sock').status).to eq(403) # unreadable: open() fails (ENXIO)
      expect(get('/a.txt').body).to eq("hello\n")
      expect(worker_pid).to eq(@worker)
    end

    it 'no request path leaves the root, no symlink is followed, FIFOs, devices and sockets get 403 (openat2)' do
      expect_safe
    end

    it 'the same with the O_NOFOLLOW walk that replaces openat2 on older kernels' do
      expect_safe('GATEWAY_NO_OPENAT2' => '1')
    end

    it 'follow_symlinks: true follows them (even out of the root); devices and FIFOs stay refused' do
      static_gateway('follow_symlinks: true')
      expect(get('/in-link').body).to eq("hello\n")
      expect(get('/out-link').body).to eq('SECRET')
      expect(get('/devnull').status).to eq(403)
      expect(get('/fifo').status).to eq(403)
      expect(raw_get('/../secret.txt').status).to eq(400)
    end
  end

  describe 'fallback: and req.send_file' do
    it 'fallback: runs Ruby when the file is missing; it may answer or send another file' do
      static_gateway('fallback: ->(req) { req.path.start_with?("/app") ? "app #{req.path}" : (req.status = 404; req.send_file("index.html")) }')
      expect(get('/a.txt').body).to eq("hello\n")
      r = get('/app/x')
      expect([r.status, r.body]).to eq([200, 'app /app/x'])
      r = get('/missing.css')
      expect([r.status, r.body, r['content-type']]).to eq([404, '<p>root</p>', 'text/html'])
      expect(get('/empty/').status).to eq(403) # not missing: refused, no fallback
    end

    it 'req.send_file works from any handler: absolute paths, and relative ones only under a root' do
      docroot
      secret = File.join(spec_dir, 'secret.txt')
      static_gateway('', extra: <<~RUBY)
        location "/abs" do |req| req.send_file(#{secret.inspect}) end
        location "/rel" do |req| req.send_file("a.txt") end
        location "/dir" do |req| req.send_file(#{spec_dir.inspect}) end
        location "/sub" do |req|
          r = Async::HTTP.sub_request("/ten.bin")
          "\#{r.status} \#{r.body}"
        end
      RUBY
      r = get('/abs')
      expect([r.status, r.body, r['content-type']]).to eq([200, 'SECRET', 'text/plain'])
      expect(get('/abs', 'Range' => 'bytes=1-2').body).to eq('EC')
      expect(get('/rel').status).to eq(500)
      expect(@gw.log).to match(/relative path needs a location with root/)
      expect(get('/dir').status).to eq(403)
      expect(get('/sub').body).to eq('200 0123456789')
    end
  end

  it 'over HTTP/2 too: a large file goes through the stream fallback (no sendfile on a stream), ranges included' do
    docroot
    big = Random.new(7).bytes(300_000)
    File.binwrite(File.join(docroot, 'big.bin'), big)
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      server listen: "127.0.0.1:#{@port}", http2: true do
        location "/", root: "public"
      end
    RUBY
    curl = ->(*args) { IO.popen(['curl', '-s', '--http2-prior-knowledge', *args], 'rb', &:read) }
    expect(curl.call("http://127.0.0.1:#{@port}/big.bin")).to eq(big)
    expect(curl.call('-r', '1000-1009', "http://127.0.0.1:#{@port}/big.bin")).to eq(big[1000, 10])
    expect(curl.call("http://127.0.0.1:#{@port}/a.txt")).to eq("hello\n")
  end

  it 'the memory cache and the open-file cache see a changed file within about a second' do
    static_gateway
    path = File.join(docroot, 'a.txt')
    expect(get('/a.txt').body).to eq("hello\n")
    File.write(path, "changed!\n")
    poll('the new content', timeout: 5) { get('/a.txt').body == "changed!\n" }
    File.delete(path)
    poll('a 404', timeout: 5) { get('/a.txt').status == 404 }
  end

  it 'a config with root: and a block, or a missing root folder, is refused at start-up' do
    path = write_config(%(server listen: 1 do\n  location "/", root: "x" do "a" end\nend\n))
    r = run_gateway('-t', '-f', path)
    expect(r.output).to match(/root:\/alias: take no handler block/)
    path = write_config(%(server listen: 1 do\n  location "/", root: "no-such-dir"\nend\n))
    r = run_gateway('-t', '-f', path)
    expect(r.output).to match(/root ".*no-such-dir": No such file or directory/)
    path = write_config(%(server listen: 1 do\n  location "/", index: ["a"]\nend\n))
    expect(run_gateway('-t', '-f', path).output).to match(/need root: or alias:/)
  end

  describe 'large files (sendfile)' do
    def download(request, max_seconds: 60, rate: nil)
      sock = TCPSocket.new('127.0.0.1', @port)
      sock.write(request)
      head = +''
      head << sock.readpartial(65536) until head.include?("\r\n\r\n")
      head, rest = head.split("\r\n\r\n", 2)
      count = rest.bytesize
      deadline = GatewaySpec.now + max_seconds * GatewaySpec::SLACK
      buf = +''
      begin
        while GatewaySpec.now < deadline
          sock.readpartial(FILE_MIB, buf)
          count += buf.bytesize
          yield count if block_given?
        end
      rescue EOFError, Errno::ECONNRESET
        return [head, count, true]
      ensure
        sock.close
      end
      [head, count, false]
    end

    it 'a 2 GiB file downloads whole with the worker RSS flat (< 4 MiB growth), then keep-alive goes on' do
      static_gateway
      File.open(File.join(docroot, 'huge.bin'), 'w') { |f| f.truncate(2048 * FILE_MIB) } # sparse
      before = rss_kib(@worker)
      c = connect(@port)
      c.write("GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n")
      head = +''
      sock = c.sock
      head << sock.readpartial(65536) until head.include?("\r\n\r\n")
      head, rest = head.split("\r\n\r\n", 2)
      expect(head).to match(/^Content-Length: #{2048 * FILE_MIB}\r?$/i)
      left = 2048 * FILE_MIB - rest.bytesize
      buf = +''
      left -= sock.readpartial([left, 4 * FILE_MIB].min, buf).bytesize while left > 0
      expect(rss_kib(@worker) - before).to be < 4 * 1024
      sock.write("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
      expect(c.read_response.body).to eq("hello\n")
    end

    it 'a range of a large file comes from its offset' do
      static_gateway
      data = Random.new(7).bytes(3 * FILE_MIB)
      File.binwrite(File.join(docroot, 'rand.bin'), data)
      r = get('/rand.bin', 'Range' => "bytes=#{FILE_MIB + 5}-#{2 * FILE_MIB + 9}")
      expect(r.status).to eq(206)
      expect(r.body).to eq(data[FILE_MIB + 5, FILE_MIB + 5])
      expect(get('/rand.bin').body).to eq(data)
    end

    it 'a file truncated mid-download ends the response early and closes; the worker lives on' do
      static_gateway
      path = File.join(docroot, 'shrink.bin')
      File.binwrite(path, 'x' * (64 * FILE_MIB))
      truncated = false
      head, count, closed = download("GET /shrink.bin HTTP/1.1\r\nHost: x\r\n\r\n", max_seconds: 20) do |n|
        if !truncated && n > FILE_MIB
          File.truncate(path, 2 * FILE_MIB)
          truncated = true
        end
      end
      expect(head).to match(/^Content-Length: #{64 * FILE_MIB}\r?$/i)
      expect(count).to be < 64 * FILE_MIB
      expect(closed).to be(true)
      expect(worker_pid).to eq(@worker)
      expect(@gw.log).to match(/ended \d+ bytes early/)
    end

    it 'a slow reader holds no buffer in the worker (< 2 MiB growth) and is served once it reads' do
      static_gateway
      File.open(File.join(docroot, 'big.bin'), 'w') { |f| f.truncate(256 * FILE_MIB) }
      before = rss_kib(@worker)
      c = connect(@port, rcvbuf: 4096)
      c.write("GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
      c.sock.readpartial(1000)
      sleep 1 # the client reads nothing meanwhile, on purpose
      expect(rss_kib(@worker) - before).to be < 2 * 1024
      expect(get('/a.txt').body).to eq("hello\n") # other clients are served meanwhile
      got = 0
      buf = +''
      deadline = GatewaySpec.now + 60 * GatewaySpec::SLACK
      got += c.sock.readpartial(4 * FILE_MIB, buf).bytesize while got < 256 * FILE_MIB - 2000 && GatewaySpec.now < deadline
      expect(got).to be >= 256 * FILE_MIB - 2000
    end

    it 'pipelined requests behind a large file are answered in order' do
      static_gateway
      File.binwrite(File.join(docroot, 'mid.bin'), 'm' * (5 * FILE_MIB))
      c = connect(@port)
      c.write("GET /mid.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /ten.bin HTTP/1.1\r\nHost: x\r\n\r\n")
      expect(c.read_response(timeout: 20).body.bytesize).to eq(5 * FILE_MIB)
      expect(c.read_response.body).to eq("hello\n")
      expect(c.read_response.body).to eq('0123456789')
    end
  end
end
