# PROXY protocol v1 and v2 on listeners (`server ..., proxy_protocol: true`,
# docs/fleet.md): the header, written here byte by byte from Ruby and
# Python or by a real HAProxy (Debian's, send-proxy and send-proxy-v2) in
# front, names the client; req.remote_addr, $remote_addr and the
# X-Forwarded-For sent upstream carry it, over HTTP/1.1, TLS, h2c and h2.
# A missing, malformed, oversized or slow header, or a peer not allowed,
# closes the connection with a log line and a counter.
require_relative 'spec_helper'
require_relative 'haproxy_helper'
require 'json'
require 'openssl'
require 'open3'
require 'timeout'

module ProxyProtocolHelpers
  V2_SIG = "\r\n\r\n\x00\r\nQUIT\n".b
  PY = File.exist?('/usr/bin/python3') ? '/usr/bin/python3' : 'python3' # Debian's, with python3-h2

  def v1(src, dst = '127.0.0.1', sport = 40_000, dport = 80)
    "PROXY TCP4 #{src} #{dst} #{sport} #{dport}\r\n".b
  end

  def v2(src, dst = '127.0.0.1', sport = 40_000, dport = 80, cmd: 0x21, fam: 0x11, tlvs: ''.b)
    addrs = fam == 0x11 ? [src, dst].map { |a| a.split('.').map(&:to_i).pack('C4') }.join + [sport, dport].pack('nn') : ''.b
    V2_SIG + [cmd, fam, addrs.bytesize + tlvs.bytesize].pack('CCn') + addrs + tlvs
  end

  # self_signed_localhost written into dir: [cert, key] paths.
  def self_signed(dir)
    cert, key = self_signed_localhost
    File.write(File.join(dir, 'pp.pem'), cert.to_pem)
    File.write(File.join(dir, 'pp.key'), key.to_pem)
    %w[pp.pem pp.key]
  end

  # One request on a TCP connection that first writes `prefix` (bound to
  # `from`); the response (GatewaySpec::Response), or nil if closed unanswered.
  def via(port, prefix, path = '/', from: nil, tls: false, headers: {})
    sock = from ? Socket.tcp('127.0.0.1', port, from, 0, connect_timeout: 2) : Socket.tcp('127.0.0.1', port, connect_timeout: 2)
    sock.write(prefix) unless prefix.empty?
    io = sock
    if tls
      ctx = OpenSSL::SSL::SSLContext.new
      ctx.verify_mode = OpenSSL::SSL::VERIFY_NONE
      io = OpenSSL::SSL::SSLSocket.new(sock, ctx)
      io.hostname = 'localhost'
      io.sync_close = true
      Timeout.timeout(5 * GatewaySpec::SLACK) { io.connect }
    end
    io.write(build_request('GET', path, { 'Host' => 'localhost', 'Connection' => 'close' }.merge(headers)))
    raw = +''.b
    read_until_closed(io, raw)
    raw.empty? ? nil : parse_response(raw)
  rescue Errno::EPIPE, Errno::ECONNRESET, OpenSSL::SSL::SSLError
    nil # closed before the request could be written
  ensure
    io&.close rescue nil
    sock&.close rescue nil
  end

  def read_until_closed(io, raw)
    Timeout.timeout(5 * GatewaySpec::SLACK) do
      loop { raw << io.readpartial(65_536) }
    rescue EOFError, Errno::ECONNRESET
      nil
    end
  end

  def status_json(port)
    JSON.parse(http_get(port, '/status').body)
  end

  def counter(port, name)
    status_json(port)['workers'].sum { |w| w[name].to_i }
  end

  def access_lines
    File.exist?(@access) ? File.read(@access).lines.map(&:chomp) : []
  end

  def wait_access_line(re)
    line = nil
    poll("an access log line matching #{re.inspect}") { line = access_lines.find { |l| l.match?(re) } }
    line
  end
end

RSpec.describe 'PROXY protocol on listeners' do
  include ProxyProtocolHelpers

  before(:each) do
    @access = File.join(spec_dir, 'access.log')
    @up = fake_upstream do |peer|
      req = peer.read_request
      peer.respond(200, {}, "xff=#{req['X-Forwarded-For']}")
    end
    @pp, @tls, @h2c, @only10, @st = Array.new(5) { free_port }
    cert, key = self_signed(spec_dir)
    body = <<~RUBY
      location "/" do |req| "addr=\#{req.remote_addr}" end
      location "/up", proxy_pass: "http://127.0.0.1:#{@up.port}"
      location "/ngx" do |req| c = Nginx::Connection.new; "ngx=\#{c.remote_ip}:\#{c.remote_port} var=\#{Nginx::Var.new.remote_addr}" end
    RUBY
    # ready: false: the PROXY-protocol ports take no plain request (start_gateway waits until each accepts).
    @gw = start_gateway(<<~RUBY, ports: [@st, @pp, @tls, @h2c, @only10], ready: false)
      access_log "#{@access}", format: '$remote_addr|$proxy_protocol_addr|$realip_remote_addr|$request|$status|$http2'
      server listen: "127.0.0.1:#{@pp}", proxy_protocol: true, limits: { header_timeout: 1 } do
        #{body}
      end
      server listen: "127.0.0.1:#{@tls}", proxy_protocol: true, tls: { cert: "#{cert}", key: "#{key}" }, http2: true do
        #{body}
      end
      server listen: "127.0.0.1:#{@h2c}", proxy_protocol: true, http2: true do
        #{body}
      end
      server listen: "127.0.0.1:#{@only10}", proxy_protocol: true, proxy_protocol_from: ["10.0.0.0/8", "::1"] do
        #{body}
      end
      server listen: "127.0.0.1:#{@st}" do
        location "/status", status: true
      end
    RUBY
  end

  it 'v1 over HTTP/1.1: the carried address is req.remote_addr, $remote_addr, $proxy_protocol_addr and what X-Forwarded-For appends' do
    r = via(@pp, v1('192.0.2.7', '127.0.0.1', 51_234, @pp))
    expect([r.status, r.body]).to eq([200, 'addr=192.0.2.7'])
    expect(wait_access_line(%r{\A192\.0\.2\.7\|})).to eq('192.0.2.7|192.0.2.7|127.0.0.1|GET / HTTP/1.1|200|-')
    r = via(@pp, v1('198.51.100.4'), '/up', headers: { 'X-Forwarded-For' => '203.0.113.1' })
    expect(r.body).to eq('xff=203.0.113.1, 198.51.100.4')
    r = via(@pp, v1('192.0.2.8', '127.0.0.1', 40_001, @pp), '/ngx') # ngx_mruby's names, as nginx's realip sets them
    expect(r.body).to eq('ngx=192.0.2.8:40001 var=192.0.2.8')
    expect(counter(@st, 'proxy_protocol_headers')).to eq(3)
  end

  it 'v2 over HTTP/1.1 (with TLVs), and every request of a keep-alive connection keeps the address' do
    tlvs = [0x02, 11].pack('Cn') + 'example.com' + [0x20, 9, 1, 0, 0x21, 1].pack('CnCNCn') + 'X' + [0x04, 0].pack('Cn')
    sock = Socket.tcp('127.0.0.1', @pp, connect_timeout: 2)
    sock.write(v2('203.0.113.9', tlvs: tlvs.b))
    conn = GatewaySpec::Conn.allocate
    conn.instance_variable_set(:@sock, sock)
    conn.instance_variable_set(:@eof, false)
    2.times do
      conn.request('GET', '/', { 'Host' => 'x' })
      expect(conn.read_response.body).to eq('addr=203.0.113.9')
    end
    sock.close
  end

  it 'takes a header that arrives in pieces (one byte at a time) and what follows it in the same segment' do
    sock = Socket.tcp('127.0.0.1', @pp, connect_timeout: 2)
    hdr = v2('192.0.2.33')
    hdr.bytes[0...-1].each { |b| sock.write(b.chr); sleep 0.01 }
    sock.write(hdr[-1] + build_request('GET', '/', 'Host' => 'x', 'Connection' => 'close'))
    raw = Timeout.timeout(5 * GatewaySpec::SLACK) { sock.read }
    expect(parse_response(raw).body).to eq('addr=192.0.2.33')
    sock.close
  end

  it 'LOCAL (v2) and UNKNOWN (v1) keep the socket address; $proxy_protocol_addr is then "-"' do
    expect(via(@pp, v2(nil, cmd: 0x20, fam: 0x00)).body).to eq('addr=127.0.0.1')
    expect(via(@pp, "PROXY UNKNOWN\r\n").body).to eq('addr=127.0.0.1')
    expect(wait_access_line(%r{\A127\.0\.0\.1\|-\|127\.0\.0\.1\|GET /})).not_to be_nil
  end

  it 'v1 and v2 before a TLS handshake (HTTP/1.1 by ALPN default)' do
    r = via(@tls, v1('192.0.2.10'), tls: true)
    expect(r.body).to eq('addr=192.0.2.10')
    r = via(@tls, v2('192.0.2.11'), tls: true)
    expect(r.body).to eq('addr=192.0.2.11')
  end

  it 'v1 and v2 before the HTTP/2 preface (h2c) and before a TLS handshake choosing h2' do
    [[@h2c, '1', '192.0.2.20', nil], [@h2c, '2', '192.0.2.21', nil], [@tls, '1', '192.0.2.22', 'tls'],
     [@tls, '2', '192.0.2.23', 'tls']].each do |port, ver, src, tls|
      out, err, st = Open3.capture3(ProxyProtocolHelpers::PY, File.join(__dir__, 'support/pp_h2_client.py'), port.to_s, ver, src, *tls)
      expect(st).to be_success, err
      expect(out.chomp).to eq("200 addr=#{src}")
    end
    expect(wait_access_line(%r{\A192\.0\.2\.23\|})).to end_with('|h2')
    expect(wait_access_line(%r{\A192\.0\.2\.21\|})).to end_with('|h2c')
  end

  it 'closes a connection without a header, with a malformed or an oversized one, with a log line and a counter' do
    before = counter(@st, 'proxy_protocol_rejected')
    expect(via(@pp, '')).to be_nil # a plain request: no header
    expect(via(@pp, "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n")).to be_nil
    expect(via(@pp, ProxyProtocolHelpers::V2_SIG + [0x21, 0x41, 12].pack('CCn') + ("\0" * 12))).to be_nil # family 4
    expect(via(@pp, "PROXY UNKNOWN #{'x' * 120}\r\n")).to be_nil
    expect(via(@pp, ProxyProtocolHelpers::V2_SIG + [0x21, 0x11, 5000].pack('CCn'))).to be_nil # over 4 KiB, known from 16 bytes
    poll('the counter') { counter(@st, 'proxy_protocol_rejected') == before + 5 }
    expect(@gw.log).to include('no PROXY protocol header; closing (proxy_protocol)')
    expect(@gw.log).to include('malformed PROXY v1 line')
    expect(@gw.log).to include('PROXY v2 address family unknown')
    expect(@gw.log).to include('PROXY v1 line longer than 107 bytes')
    expect(@gw.log).to include('PROXY v2 header over 4096 bytes')
    expect(counter(@st, 'proxy_protocol_headers')).to eq(0)
    expect(access_lines.reject { |l| l.include?('GET /status') }).to eq([]) # no request ran
  end

  it 'closes a connection whose header is not complete within header_timeout (bytes do not push it back)' do
    sock = Socket.tcp('127.0.0.1', @pp, connect_timeout: 2)
    t0 = GatewaySpec.now
    closed = nil
    Timeout.timeout(5 * GatewaySpec::SLACK) do
      'PROXY TCP4 1.2.3.4'.each_char do |c|
        sock.write(c)
        sleep 0.1
      end
      closed = sock.read # EOF once closed
    rescue Errno::EPIPE, Errno::ECONNRESET
      closed = ''
    end
    expect(closed).to eq('')
    expect(GatewaySpec.now - t0).to be_between(0.9, 3 * GatewaySpec::SLACK)
    poll('the counter') { counter(@st, 'proxy_protocol_timeouts') == 1 }
    expect(@gw.log).to include('no complete PROXY protocol header within header_timeout')
    sock.close
  end

  it 'closes a connection from a peer not in proxy_protocol_from before reading anything' do
    poll('the readiness probe counted') { counter(@st, 'proxy_protocol_untrusted') >= 1 } # it was one
    before = counter(@st, 'proxy_protocol_untrusted')
    expect(via(@only10, v1('192.0.2.7'))).to be_nil
    poll('the counter') { counter(@st, 'proxy_protocol_untrusted') == before + 1 }
    expect(@gw.log).to include('127.0.0.1: peer not in proxy_protocol_from; closing (proxy_protocol)')
    prom = http_get(@st, '/status?format=prometheus').body
    expect(prom).to match(/^gateway_proxy_protocol_untrusted_total\{port="#{@only10}",worker="0",pid="\d+"\} #{before + 1}$/)
  end
end

RSpec.describe 'PROXY protocol through HAProxy' do
  include ProxyProtocolHelpers
  include HAProxyHelper

  def start_haproxy(backends)
    cfg = +"global\n  maxconn 200\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n"
    ports = backends.map do |name, target, send|
      fp = free_port
      cfg << "frontend f_#{name}\n  bind 127.0.0.1:#{fp}\n  default_backend b_#{name}\n"
      cfg << "backend b_#{name}\n  server g #{target} #{send}\n"
      fp
    end
    start_haproxy_cfg(cfg)
    ports.each { |p| poll("haproxy on #{p}") { port_open?(p) } }
    ports
  end

  after(:each) { stop_haproxy }

  it 'a client bound to 127.0.0.9 is seen as 127.0.0.9 through send-proxy and send-proxy-v2 (HTTP/1.1, TLS, h2c, h2)' do
    skip 'haproxy is not installed (setup.sh installs it)' unless haproxy?
    @access = File.join(spec_dir, 'access.log')
    plain, tls = free_port, free_port
    cert, key = self_signed(spec_dir)
    start_gateway(<<~RUBY, ports: [plain, tls], ready: false)
      access_log "#{@access}", format: '$remote_addr|$proxy_protocol_addr|$realip_remote_addr|$http2'
      server listen: "127.0.0.1:#{plain}", proxy_protocol: true, proxy_protocol_from: ["127.0.0.1"], http2: true do
        location "/" do |req| "addr=\#{req.remote_addr}" end
      end
      server listen: "127.0.0.1:#{tls}", proxy_protocol: true, tls: { cert: "#{cert}", key: "#{key}" }, http2: true do
        location "/" do |req| "addr=\#{req.remote_addr}" end
      end
    RUBY
    p1, p2, t1, t2 = start_haproxy([['v1', "127.0.0.1:#{plain}", 'send-proxy'], ['v2', "127.0.0.1:#{plain}", 'send-proxy-v2'],
                                    ['t1', "127.0.0.1:#{tls}", 'send-proxy'], ['t2', "127.0.0.1:#{tls}", 'send-proxy-v2']])
    [p1, p2].each { |p| expect(via(p, '', from: '127.0.0.9').body).to eq('addr=127.0.0.9') }
    [t1, t2].each { |p| expect(via(p, '', from: '127.0.0.9', tls: true).body).to eq('addr=127.0.0.9') }
    [p1, p2].each { |p| expect(curl('--interface', '127.0.0.9', '--http2-prior-knowledge', "http://127.0.0.1:#{p}/")).to eq('addr=127.0.0.9') }
    [t1, t2].each { |p| expect(curl('-k', '--http2', '--interface', '127.0.0.9', "https://localhost:#{p}/")).to eq('addr=127.0.0.9') }
    poll('8 access log lines') { access_lines.size == 8 }
    expect(access_lines.tally).to eq('127.0.0.9|127.0.0.9|127.0.0.1|-' => 4, '127.0.0.9|127.0.0.9|127.0.0.1|h2c' => 2,
                                     '127.0.0.9|127.0.0.9|127.0.0.1|h2' => 2)
  end
end

RSpec.describe 'proxy_protocol config' do
  it 'rejects bad values at FILE:LINE' do
    [['proxy_protocol: "yes"', 'server: proxy_protocol must be true or false'],
     ['proxy_protocol: true, proxy_protocol_from: ["10.0.0.0/33"]', 'server: proxy_protocol_from must be an address or range'],
     ['proxy_protocol: true, proxy_protocol_from: []', 'server: proxy_protocol_from must be an address or range'],
     ['proxy_protocol_from: ["10.0.0.0/8"]', 'server: proxy_protocol_from needs proxy_protocol: true']].each do |opts, msg|
      status, output, path = check_config(<<~RUBY)
        # fleet
        server listen: #{free_port}, #{opts} do
          location("/") { "x" }
        end
      RUBY
      expect(status).to eq(1), output
      expect(output).to include("#{path}:2: #{msg}")
    end
  end
end
