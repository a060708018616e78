# Compression on the fly (compress: on a server or location): gzip, br and
# zstd negotiated from Accept-Encoding, on Ruby responses, proxy_pass and
# static files, over HTTP/1.1 and HTTP/2; the cases it must leave alone; a
# streamed body compressed as it arrives (SSE stays live), bounded memory,
# and a client that leaves mid-stream.
require 'open3'
require 'zlib'
require_relative 'spec_helper'

RSpec.describe 'compress:' do
  # The same JSON made by the spec and by the config (an mruby string literal is limited to 64 KiB).
  BODY_RUBY = <<~'R'.strip
    ("[" + (1..2000).map { |i| "{\"id\":#{i},\"name\":\"item #{i}\",\"tags\":[\"a\",\"b\",\"c\"]}" }.join(",") + "]")
  R
  JSON_BODY = eval(BODY_RUBY).freeze # rubocop:disable Security/Eval

  # Decodes body by its coding with real tools: Python's zlib for gzip, the
  # brotli and zstd command-line decoders.
  def decode(coding, body)
    case coding
    when 'gzip'
      out, st = Open3.capture2('python3', '-c', 'import sys,zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read(), 31))',
                               stdin_data: body, binmode: true)
    when 'br' then out, st = Open3.capture2('brotli', '-d', '-c', stdin_data: body, binmode: true)
    when 'zstd' then out, st = Open3.capture2('zstd', '-d', '-c', '-q', stdin_data: body, binmode: true)
    else raise "no decoder for #{coding.inspect}"
    end
    raise "#{coding} decoder failed" unless st.success?
    out
  end

  def get(path, headers = {})
    http_get(@port, path, headers, timeout: 10)
  end

  def start(extra_server = '', locations = '')
    @port = free_port
    @dir = spec_dir
    File.write(File.join(@dir, 'data.json'), JSON_BODY)
    File.write(File.join(@dir, 'page.html'), '<p>hello</p>' * 500)
    File.write(File.join(@dir, 'page2.html'), '<p>precompressed</p>' * 500)
    File.binwrite(File.join(@dir, 'page2.html.gz'), Zlib.gzip('<p>precompressed</p>' * 500))
    File.write(File.join(@dir, 'photo.png'), 'P' * 5000)
    File.write(File.join(@dir, 'big.txt'), ('lorem ipsum dolor sit amet ' * 40 + "\n") * 2000) # 2 MB: sendfile'd
    @gw = start_gateway(<<~RUBY, ports: [@port])
      JSON_BODY = #{BODY_RUBY}
      server listen: "127.0.0.1:#{@port}", workers: 1#{extra_server} do
        location "/json" do |req|
          req.headers_out["Content-Type"] = "application/json"
          req.headers_out["ETag"] = '"v1"'
          JSON_BODY
        end
        location "/files/", alias: "#{@dir}/", gzip_static: true
        #{locations}
      end
    RUBY
  end

  context 'on a server (compress: true)' do
    before { start(', compress: true, http2: true') }

    it 'compresses a Ruby response with each coding the client accepts, the server preferring zstd, br, gzip' do
      { 'gzip' => 'gzip', 'br' => 'br', 'zstd' => 'zstd', 'gzip, br' => 'br', 'gzip, deflate, br, zstd' => 'zstd',
        'br;q=0, gzip' => 'gzip', '*' => 'zstd', '*;q=0.5, zstd;q=0' => 'br' }.each do |ae, coding|
        r = get('/json', 'Accept-Encoding' => ae)
        expect(r.status).to eq(200)
        expect(r['content-encoding']).to eq(coding), "Accept-Encoding: #{ae}"
        expect(r['vary']).to eq('Accept-Encoding')
        expect(r['etag']).to eq('W/"v1"')
        expect(r['content-length'].to_i).to eq(r.body.bytesize)
        expect(r.body.bytesize).to be < JSON_BODY.bytesize / 4
        expect(decode(coding, r.body)).to eq(JSON_BODY)
      end
    end

    it 'sends it as it is to a client that accepts none, refuses them (q=0) or prefers identity' do
      [nil, 'deflate', 'gzip;q=0, br;q=0, zstd;q=0', '*;q=0', 'identity', 'gzip;q=0.5, identity'].each do |ae|
        r = get('/json', ae ? { 'Accept-Encoding' => ae } : {})
        expect(r['content-encoding']).to be_nil, "Accept-Encoding: #{ae.inspect}"
        expect(r['vary']).to eq('Accept-Encoding') # the answer depends on it all the same
        expect(r['etag']).to eq('"v1"')
        expect(r.body).to eq(JSON_BODY)
      end
    end

    it 'works with curl --compressed (gzip, br and zstd)' do
      %w[gzip br zstd].each do |c|
        out = curl('--compressed', '-H', "Accept-Encoding: #{c}", '-D', '-', "http://127.0.0.1:#{@port}/json")
        head, body = out.split("\r\n\r\n", 2)
        expect(head).to match(/^content-encoding: #{c}\r?$/i)
        expect(body).to eq(JSON_BODY)
      end
    end

    it 'compresses a static file from the memory cache, read, or too big for it (otherwise sendfile)' do
      %w[data.json page.html big.txt].each do |f|
        whole = File.binread(File.join(@dir, f))
        %w[gzip br zstd].each do |c|
          r = get("/files/#{f}", 'Accept-Encoding' => c)
          expect(r['content-encoding']).to eq(c), "#{f} #{c}"
          expect(r['accept-ranges']).to be_nil
          expect(r['etag']).to start_with('W/"')
          expect(decode(c, r.body)).to eq(whole)
        end
      end
      r = get('/files/big.txt', 'Accept-Encoding' => 'gzip')
      expect(r['transfer-encoding']).to eq('chunked') # its length is not known beforehand
      expect(r['content-length']).to be_nil
    end

    it 'leaves a precompressed sibling (gzip_static) as it is, and an image type not listed' do
      r = get('/files/page2.html', 'Accept-Encoding' => 'gzip, br, zstd')
      expect(r['content-encoding']).to eq('gzip')
      expect(r.count('vary')).to eq(1)
      expect(Zlib.gunzip(r.body)).to eq('<p>precompressed</p>' * 500)
      r = get('/files/photo.png', 'Accept-Encoding' => 'gzip')
      expect(r['content-encoding']).to be_nil
      expect(r['vary']).to eq('Accept-Encoding') # gzip_static's own
      expect(r.body).to eq('P' * 5000)
    end

    it 'skips HEAD, 304, 206 and small bodies' do
      r = http_request(@port, 'HEAD', '/files/page.html', { 'Accept-Encoding' => 'gzip' })
      expect(r['content-encoding']).to be_nil
      expect(r['content-length'].to_i).to eq(6000)
      etag = get('/files/page.html')['etag']
      r = get('/files/page.html', 'Accept-Encoding' => 'gzip', 'If-None-Match' => etag)
      expect(r.status).to eq(304)
      expect(r['content-encoding']).to be_nil
      r = get('/files/page.html', 'Accept-Encoding' => 'gzip', 'Range' => 'bytes=0-99')
      expect(r.status).to eq(206)
      expect(r['content-encoding']).to be_nil
      expect(r.body).to eq(('<p>hello</p>' * 500)[0, 100])
      r = get('/small', 'Accept-Encoding' => 'gzip') # 404: "404 Not Found\n", under min_length
      expect(r['content-encoding']).to be_nil
      expect(r['vary']).to be_nil
    end

    it 'compresses over HTTP/2 (nghttp)' do
      out, st = Open3.capture2('nghttp', '-n', '-v', '-H', 'accept-encoding: br', "http://127.0.0.1:#{@port}/json")
      expect(st.success?).to be true
      expect(out).to match(/content-encoding: br/)
      expect(out).to match(/vary: accept-encoding/i)
      out, st = Open3.capture2('nghttp', '-H', 'accept-encoding: zstd', "http://127.0.0.1:#{@port}/files/big.txt",
                               binmode: true)
      expect(st.success?).to be true
      expect(decode('zstd', out)).to eq(File.binread(File.join(@dir, 'big.txt')))
    end
  end

  context 'settings' do
    it 'takes a location\'s own encodings, levels, min_length and types over the server\'s' do
      start(', compress: { encodings: [:gzip] }', <<~RUBY)
        location "/only-br", compress: { encodings: [:br], level: { br: 5 }, min_length: 10, types: ["text/*"] } do |req|
          "x" * 20
        end
        location "/off", compress: false do |req|
          req.headers_out["Content-Type"] = "application/json"
          JSON_BODY
        end
        location "/vary" do |req|
          req.headers_out["Content-Type"] = "text/html"
          req.headers_out["Vary"] = "Cookie"
          req.headers_out["Cache-Control"] = req.var.arg_nt ? "public, no-transform" : "public"
          JSON_BODY
        end
        location "/encoded" do |req|
          req.headers_out["Content-Type"] = "text/html"
          req.headers_out["Content-Encoding"] = "identity-but-mine"
          "y" * 1000
        end
      RUBY
      r = get('/json', 'Accept-Encoding' => 'br, zstd, gzip')
      expect(r['content-encoding']).to eq('gzip') # the server's list: gzip only
      r = get('/only-br', 'Accept-Encoding' => 'gzip, br')
      expect(r['content-encoding']).to eq('br')
      expect(decode('br', r.body)).to eq('x' * 20)
      expect(get('/only-br', 'Accept-Encoding' => 'gzip')['content-encoding']).to be_nil
      expect(get('/off', 'Accept-Encoding' => 'gzip')['content-encoding']).to be_nil
      r = get('/vary', 'Accept-Encoding' => 'gzip')
      expect(r['content-encoding']).to eq('gzip')
      expect(r['vary']).to eq('Cookie, Accept-Encoding')
      r = get('/vary?nt=1', 'Accept-Encoding' => 'gzip')
      expect(r['content-encoding']).to be_nil
      expect(r.body).to eq(JSON_BODY)
      r = get('/encoded', 'Accept-Encoding' => 'gzip')
      expect(r['content-encoding']).to eq('identity-but-mine')
      expect(r.body).to eq('y' * 1000)
    end

    it 'runs after the location\'s filters: they see the plain body, the client gets it compressed' do
      start(', compress: true', <<~RUBY)
        location "/upper", body_filter: ->(body) { body.upcase } do |req|
          req.headers_out["Content-Type"] = "text/plain"
          "abc" * 1000
        end
        location "/typed/", alias: "#{spec_dir}/", header_filter: ->(req) { req.headers_out["Content-Type"] = "text/plain" }
      RUBY
      r = get('/upper', 'Accept-Encoding' => 'gzip')
      expect(r['content-encoding']).to eq('gzip')
      expect(decode('gzip', r.body)).to eq('ABC' * 1000)
      # a header filter makes a type compressible on a file too big for the memory cache (otherwise sendfile)
      File.binwrite(File.join(spec_dir, 'big.bin'), 'z' * 300_000)
      r = get('/typed/big.bin', 'Accept-Encoding' => 'br')
      expect(r['content-encoding']).to eq('br')
      expect(decode('br', r.body)).to eq('z' * 300_000)
      expect(get('/typed/big.bin').body).to eq('z' * 300_000)
    end

    it 'rejects bad values with the config file and line' do
      [['compress: 5', /compress must be true, false or a Hash/],
       ['compress: { encodings: [:deflate] }', /encodings must be a non-empty list of :zstd, :br, :gzip/],
       ['compress: { level: { gzip: 10 } }', /level: gzip must be an Integer from 1 to 9/],
       ['compress: { min_length: -1 }', /min_length must be an Integer >= 0/],
       ['compress: { types: "text/html" }', /types must be a non-empty list of media types/],
       ['compress: { speed: 1 }', /unknown key :speed/]].each do |opt, msg|
        path = write_config(<<~RUBY)
          server listen: "127.0.0.1:#{free_port}" do
            location "/", #{opt} do "x" end
          end
        RUBY
        res = run_gateway('-t', '-f', path)
        expect(res.exitstatus).to eq(1), opt
        expect(res.output).to match(/#{Regexp.escape(path)}:2: .*#{msg.source}/), "#{opt}: #{res.output}"
      end
    end
  end

  context 'through proxy_pass' do
    after { @up&.stop }

    it 'compresses a proxied body, known length or chunked' do
      @up = fake_upstream do |peer|
        while (req = peer.read_request)
          if req.target == '/chunked'
            peer.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            JSON_BODY.scan(/.{1,3000}/m).each { |part| peer.write("#{part.bytesize.to_s(16)}\r\n#{part}\r\n") }
            peer.write("0\r\n\r\n")
          else
            peer.respond(200, { 'Content-Type' => 'application/json; charset=utf-8', 'ETag' => '"up"' }, JSON_BODY)
          end
        end
      end
      start(', compress: true', <<~RUBY)
        location "/up/", proxy_pass: "http://127.0.0.1:#{@up.port}/"
      RUBY
      %w[gzip br zstd].each do |c|
        %w[/up/known /up/chunked].each do |path|
          r = get(path, 'Accept-Encoding' => c)
          expect(r.status).to eq(200)
          expect(r['content-encoding']).to eq(c)
          expect(r['content-length']).to be_nil
          expect(r['transfer-encoding']).to eq('chunked')
          expect(decode(c, r.body)).to eq(JSON_BODY)
        end
      end
      expect(get('/up/known', 'Accept-Encoding' => 'gzip')['etag']).to eq('W/"up"')
    end

    # The text an upstream sends: hex of a seeded random stream (it
    # compresses about 2:1 and never repeats, whatever the window).
    def hex_stream(total)
      rng = Random.new(7)
      out = +''
      out << rng.bytes(64 * 1024).unpack1('H*') while out.bytesize < total
      out[0, total]
    end

    # An upstream sending `total` bytes of that text with Content-Length, in
    # 128 KiB writes; counts what it wrote.
    def text_upstream(total)
      written = [0]
      up = fake_upstream do |peer|
        peer.read_request
        peer.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: #{total}\r\n\r\n")
        rng = Random.new(7)
        left = total
        while left > 0
          piece = rng.bytes(64 * 1024).unpack1('H*')
          n = [left, piece.bytesize].min
          peer.write(piece[0, n])
          written[0] += n
          left -= n
        end
        sleep 0.2
      rescue IOError, SystemCallError
        nil # the client left and the gateway closed us: expected in the abort example
      end
      [up, written]
    end

    def start_big(up, env: {})
      gateway_with(%(location "/big", proxy_pass: "http://127.0.0.1:#{up.port}/"),
                   server: 'workers: 1, compress: true, http2: true', env: env)
      worker_pid
    end

    it 'streams a 20 MB proxied body through gzip with the worker RSS bounded' do
      total = 20 * 1024 * 1024
      @up, = text_upstream(total)
      worker = start_big(@up, env: rss_env)
      before = rss_kib(worker)
      peak = before
      sock = TCPSocket.new('127.0.0.1', @port)
      sock.write("GET /big HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
      raw = ''.b
      buf = ''.b
      reads = 0
      loop do
        sock.readpartial(1 << 20, buf)
        raw << buf
        peak = [peak, rss_kib(worker)].max if (reads += 1) % 8 == 0
        break if raw.end_with?("\r\n0\r\n\r\n")
      end
      sock.close
      head, body = raw.split("\r\n\r\n", 2)
      expect(head).to match(/^Content-Encoding: gzip\r?$/i)
      data = +''
      while (m = body.match(/\A([0-9a-f]+)\r\n/)) && m[1].hex > 0
        data << body[m[0].bytesize, m[1].hex]
        body = body[(m[0].bytesize + m[1].hex + 2)..]
      end
      expect(Zlib::Inflate.new(31).inflate(data) == hex_stream(total)).to be true
      expect(data.bytesize).to be < total * 0.6
      expect(peak - before).to be < 16 * 1024 # KiB: nowhere near the 20 MB body
    end

    it 'holds the upstream back for a slow reader, and frees everything when the client leaves mid-stream (HTTP/1.1, HTTP/2)' do
      @up, written = text_upstream(512 * 1024 * 1024)
      worker = start_big(@up, env: rss_env)
      before = rss_kib(worker)
      %w[gzip br zstd].each do |c|
        sock = TCPSocket.new('127.0.0.1', @port)
        sock.write("GET /big HTTP/1.1\r\nHost: x\r\nAccept-Encoding: #{c}\r\n\r\n")
        got = 0
        got += sock.readpartial(65536).bytesize while got < 100_000
        if c == 'gzip' # the client stops reading: the upstream must not run ahead
          sleep 1.5 # a fixed pause on purpose: the upstream must NOT get far meanwhile
          expect(written[0]).to be < 64 * 1024 * 1024
          expect(rss_kib(worker) - before).to be < 16 * 1024
        end
        sock.close # mid-stream
      end
      %w[gzip zstd].each do |c| # HTTP/2: the client resets the stream, the connection goes on
        out, st = Open3.capture2e('/usr/bin/python3', File.expand_path('support/h2_abort_stream.py', __dir__), @port.to_s, '/big', c)
        expect(st.success?).to be(true), out
        expect(out).to include("encoding #{c}\n")
        expect(out).to match(/^got \d+$/)
        expect(out).to include("pid #{worker}\n")
      end
      sent = written[0]
      sleep 0.5 # a fixed pause on purpose: the upstreams must have been closed
      expect(written[0] - sent).to be < 8 * 1024 * 1024
      expect(written[0]).to be < 5 * 128 * 1024 * 1024
      expect(worker_pid).to eq(worker) # still serving
      # under ASan the gateway's exit after this example reports any leak, and spec_helper fails on it
    end

    it 'keeps a server-sent-events stream live: the first event arrives before the upstream ends' do
      release = Queue.new
      @up = fake_upstream do |peer|
        peer.read_request
        peer.write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        ev = "data: first event\n\n"
        peer.write("#{ev.bytesize.to_s(16)}\r\n#{ev}\r\n")
        release.pop
        ev = "data: second event\n\n"
        peer.write("#{ev.bytesize.to_s(16)}\r\n#{ev}\r\n0\r\n\r\n")
      end
      start(', compress: true', %(location "/events", proxy_pass: "http://127.0.0.1:#{@up.port}/"))
      sock = TCPSocket.new('127.0.0.1', @port)
      sock.write("GET /events HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
      buf = +''
      inflater = Zlib::Inflate.new(31)
      text = +''
      deadline = GatewaySpec.now + 5 * GatewaySpec::SLACK
      until text.include?("data: first event\n\n")
        raise 'the first event did not arrive while the upstream held the stream open' if GatewaySpec.now > deadline
        next unless IO.select([sock], nil, nil, 0.1)
        buf << sock.readpartial(65536)
        next unless (i = buf.index("\r\n\r\n"))
        head = buf[0, i + 2] # each field line with its CRLF
        expect(head).to match(/^Content-Encoding: gzip\r$/i)
        body = buf[(i + 4)..]
        chunks = +''
        while (m = body.match(/\A([0-9a-f]+)\r\n/)) && body.bytesize >= m[0].bytesize + m[1].hex + 2
          chunks << body[m[0].bytesize, m[1].hex]
          body = body[(m[0].bytesize + m[1].hex + 2)..]
        end
        text << inflater.inflate(chunks) unless chunks.empty?
        buf = buf[0, i + 4] + body # the head and what is left of the chunked body
      end
      expect(text).to eq("data: first event\n\n")
      release << true
      sock.close
    end
  end
end
