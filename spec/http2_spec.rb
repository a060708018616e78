# HTTP/2: h2c with prior knowledge next to HTTP/1.1 on one port, h2 over TLS
# (ALPN), every location kind over a stream, limits, and hostile clients
# (spec/support/h2_hostile.py, python3-h2) over real sockets.
require_relative 'spec_helper'
require 'open3'
require 'openssl'

RSpec.describe 'HTTP/2' do
  PY = File.exist?('/usr/bin/python3') ? '/usr/bin/python3' : 'python3' # Debian's, with python3-h2
  HOSTILE = File.expand_path('support/h2_hostile.py', __dir__)

  def start(body, server_opts: '', prelude: '')
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      #{prelude}
      server listen: "127.0.0.1:#{@port}", http2: true#{server_opts} do
        #{body}
      end
    RUBY
  end

  # --data-binary @file (a large body does not fit on a command line)
  def body_file(bytes)
    path = File.join(spec_dir, "body-#{bytes.bytesize}-#{bytes[0]}")
    File.binwrite(path, bytes)
    "@#{path}"
  end

  def h2c(path, *args)
    curl('--http2-prior-knowledge', *args, "http://127.0.0.1:#{@port}#{path}")
  end

  def hostile(scenario, timeout: 20)
    out, st = Open3.capture2e(PY, HOSTILE, @port.to_s, scenario)
    raise "h2_hostile #{scenario}: #{out}" unless st.success?
    out.lines.map(&:chomp)
  end

  describe 'h2c next to HTTP/1.1' do
    before(:each) do
      start(<<~'RUBY', prelude: %(access_log :stderr))
        location "/v" do |req| "#{req.http_version} #{req.scheme} #{req.headers['host']} #{req.method} #{req.query}" end
        location "/sleep" do Async.sleep(0.3); "slept" end
        location "/inner" do "inner" end
        location "/sub" do res = Async::HTTP.sub_request("/inner"); "sub:#{res.body}" end
        location "/echo" do |req| "#{req.body.bytesize}" end
        location "/big" do "y" * 300_000 end
        location "/small" do "small" end
        location "/hdr" do
          [201, { "X-Mixed-Case" => "v", "Set-Cookie" => "a=1", "Cache-Control" => "no-store", "ETAG" => '"e"',
                  "Access-Control-Allow-Origin" => "*", "Content-Tipe" => "t", "Keep-Alive" => "timeout=5",
                  "X-Content-Type-Options" => "nosniff", "Access-Control-Xllow-Origin" => "x" }, ["made"]]
        end
        location "/status", status: true
      RUBY
    end

    it 'answers prior-knowledge HTTP/2 and HTTP/1.1 on the same port' do
      expect(h2c('/v?x=1')).to eq("HTTP/2.0 http 127.0.0.1:#{@port} GET x=1")
      expect(curl('--http1.1', "http://127.0.0.1:#{@port}/v")).to eq("HTTP/1.1 http 127.0.0.1:#{@port} GET ")
      expect(@gw.log).to include('"GET /v?x=1 HTTP/2.0" 200')
    end

    it 'sends lower-case fields, the status, request bodies and large responses' do
      head = curl('--http2-prior-knowledge', '-D', '-', '-o', '/dev/null', "http://127.0.0.1:#{@port}/hdr")
      expect(head).to start_with('HTTP/2 201')
      expect(head).to include("x-mixed-case: v\r\n", "set-cookie: a=1\r\n", "server: gateway\r\n",
                              "cache-control: no-store\r\n", "etag: \"e\"\r\n", "access-control-allow-origin: *\r\n",
                              "content-tipe: t\r\n", "x-content-type-options: nosniff\r\n",
                              "access-control-xllow-origin: x\r\n") # names met often are sent as constants (h2.c known_field)
      expect(head).not_to match(/^(keep-alive|content-type):/i)
      body = 'z' * 200_000
      expect(h2c('/echo', '--data-binary', body_file(body))).to eq('200000')
      expect(h2c('/big').bytesize).to eq(300_000)
      expect(h2c('/sub')).to eq('sub:inner')
      expect(h2c('/status')).to include('"requests"')
    end

    it 'multiplexes: 20 streams that each sleep 0.3 s finish together on one connection' do
      _, t = timed { @out, = Open3.capture2e('nghttp', '-n', '-s', '-m', '20', "http://127.0.0.1:#{@port}/sleep") }
      expect(@out.scan(/ 200 /).size).to eq(20)
      expect(t).to be < slack(1.5)
    end

    it 'h2load: every request succeeds' do
      out, = Open3.capture2e('h2load', '-n', '3000', '-c', '4', '-m', '20', "http://127.0.0.1:#{@port}/v")
      expect(out).to include('3000 succeeded, 0 failed, 0 errored')
    end

    it 'closes a connection whose preface is wrong' do
      expect(hostile('bad_preface')).to eq(['closed'])
    end

    it 'sends GOAWAY (ENHANCE_YOUR_CALM) to a rapid-reset client (CVE-2023-44487) and keeps serving' do
      lines = hostile('rapid_reset')
      expect(lines).to include('goaway 11')
      expect(h2c('/v')).to start_with('HTTP/2.0')
    end

    it 'ends a CONTINUATION flood and a PING flood with GOAWAY or a close' do
      expect(hostile('continuation_flood').join(' ')).to match(/goaway (11|1|9)|closed/)
      expect(hostile('ping_flood').join(' ')).to match(/goaway 11|closed/)
      expect(h2c('/v')).to start_with('HTTP/2.0')
    end

    it 'a stream without window does not hold up another stream' do
      lines = hostile('slow_stream')
      expect(lines).to include('response 3 200 5') # /small
    end
  end

  it 'a zero-window client is closed after send_timeout' do
    start(%(location "/big" do "b" * 200_000 end), server_opts: ', limits: { send_timeout: 1 }')
    lines = hostile('zero_window')
    expect(lines).to include('closed')
    expect(lines.last).to match(/after [1-4]\./)
  end

  it 'limits request bodies as HTTP/1.1 does (413)' do
    start(%(location "/up" do |req| req.body.bytesize.to_s end), server_opts: ', limits: { max_body: 1000 }')
    code = curl('--http2-prior-knowledge', '-o', '/dev/null', '-w', '%{http_code}', '--data-binary', body_file('x' * 5000),
                "http://127.0.0.1:#{@port}/up")
    expect(code).to eq('413')
    expect(h2c('/up', '--data-binary', 'x' * 900)).to eq('900')
  end

  it 'proxies to an HTTP/1.1 upstream, streaming the request and response bodies' do
    up = fake_upstream do |peer|
      req = peer.read_request
      peer.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
      3.times { |i| peer.write("6\r\npiece#{i}\r\n") }
      peer.write("#{req.body.bytesize.to_s(16).size.to_s(16)}\r\n#{req.body.bytesize.to_s(16)}\r\n0\r\n\r\n")
    end
    start(%(location "/p", proxy_pass: "http://127.0.0.1:#{up.port}"))
    out = h2c('/p/x', '--data-binary', body_file('u' * 150_000))
    expect(out).to eq("piece0piece1piece2#{150_000.to_s(16)}")
    expect(h2c('/p/y', '--data-binary', 'v' * 10)).to eq("piece0piece1piece2#{10.to_s(16)}")
  end

  it 'a graceful stop sends GOAWAY and lets the open stream finish' do
    start(%(location "/sleep" do Async.sleep(0.5); "finished" end))
    r = Thread.new { Open3.capture2e('nghttp', '-v', "http://127.0.0.1:#{@port}/sleep") }
    sleep 0.2 # the request is in flight
    @gw.signal('QUIT')
    out, = r.value
    expect(out).to include('GOAWAY')
    expect(out).to include('finished')
    expect(@gw.wait_exit(5)).to be_truthy
  end

  describe 'over TLS' do
    include TLSSpecHelpers if defined?(TLSSpecHelpers)

    def cert(dir)
      out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                                '-nodes', '-keyout', "#{dir}/s.key", '-out', "#{dir}/s.pem", '-days', '2',
                                '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost')
      raise out unless st.success?
      "#{dir}/s.pem"
    end

    it 'negotiates h2 by ALPN (and http/1.1 when http2: false)' do
      ca = cert(spec_dir)
      @port = free_port
      port2 = free_port
      @gw = start_gateway(format(<<~'RUBY', @port, port2), ports: [@port, port2])
        server listen: "127.0.0.1:%d", tls: { cert: "s.pem", key: "s.key" } do
          location "/" do |req| "#{req.http_version} #{req.scheme} #{req.tls_protocol}" end
        end
        server listen: "127.0.0.1:%d", tls: { cert: "s.pem", key: "s.key" }, http2: false do
          location "/" do |req| "#{req.http_version} #{req.scheme}" end
        end
      RUBY
      expect(curl('--http2', '--cacert', ca, "https://localhost:#{@port}/")).to eq('HTTP/2.0 https TLSv1.3')
      expect(curl('--http2', '--cacert', ca, "https://localhost:#{port2}/")).to eq('HTTP/1.1 https')
      out, = Open3.capture2e('h2load', '-n', '200', '-c', '2', '-m', '10', "https://127.0.0.1:#{@port}/")
      expect(out).to include('200 succeeded, 0 failed')
      expect(out).to include('h2')
    end
  end
end
