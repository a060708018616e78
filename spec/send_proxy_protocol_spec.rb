# send_proxy_protocol: on an upstream group (docs/fleet.md): each new
# upstream connection starts with a PROXY protocol header naming the client,
# before anything else (TLS too); a pooled connection that announced one
# client never carries another client's request.
require_relative 'spec_helper'
require 'openssl'

RSpec.describe 'send_proxy_protocol' do
  # A fake upstream that reads a PROXY header (v1 or v2) at the start of each
  # connection, then answers every request on it with what the header said
  # ("v1 PROXY TCP4 ..." or "v2 SRC:PORT DST:PORT"). @announced: one entry per connection.
  def pp_upstream(tls: false)
    server = TCPServer.new('127.0.0.1', 0)
    @announced = Queue.new
    @threads = []
    ctx = tls_context if tls
    acceptor = Thread.new do
      loop do
        sock = server.accept
        @threads << Thread.new(sock) { |s| serve(s, ctx) }
      end
    rescue IOError
      nil
    end
    @cleanup = lambda do
      server.close
      acceptor.join(2)
      @threads.each(&:kill)
    end
    server.addr[1]
  end

  after(:each) { @cleanup&.call }

  def read_header(sock)
    first = sock.read(5)
    if first == 'PROXY'
      "v1 PROXY#{sock.gets("\r\n").chomp}"
    else
      rest = sock.read(11) # the signature's other 7 bytes, ver/cmd, family, length
      len = rest[-2, 2].unpack1('n')
      body = sock.read(len)
      fam = rest.getbyte(-3)
      return "v2 local" if rest.getbyte(-4) == 0x20
      raise "family #{fam}" unless fam == 0x11
      s, d = body[0, 4].unpack('C4').join('.'), body[4, 4].unpack('C4').join('.')
      sp, dp = body[8, 4].unpack('nn')
      "v2 #{s}:#{sp} #{d}:#{dp}"
    end
  end

  def serve(sock, ctx)
    said = read_header(sock)
    @announced << said
    io = sock
    if ctx
      io = OpenSSL::SSL::SSLSocket.new(sock, ctx)
      io.sync_close = true
      io.accept
    end
    loop do
      head = +''
      head << io.readpartial(4096) until head.include?("\r\n\r\n")
      io.write("HTTP/1.1 200 OK\r\nContent-Length: #{said.bytesize}\r\n\r\n#{said}")
    end
  rescue EOFError, IOError, Errno::ECONNRESET, OpenSSL::SSL::SSLError
    nil
  ensure
    io&.close rescue nil
  end

  def tls_context
    ctx = OpenSSL::SSL::SSLContext.new
    ctx.cert, ctx.key = self_signed_localhost
    ctx
  end

  def announced
    out = []
    out << @announced.pop until @announced.empty?
    out
  end

  def start(upstream_opts, server_opts = '', servers: nil)
    @port = free_port
    up = pp_upstream(tls: upstream_opts.include?('tls_verify'))
    servers ||= %(["127.0.0.1:#{up}"])
    servers = servers.sub('UP', up.to_s)
    @gw = start_gateway(<<~RUBY, ports: @port, ready: server_opts.empty?)
      upstream :app, servers: #{servers}, #{upstream_opts}
      server listen: "127.0.0.1:#{@port}"#{server_opts} do
        location "/", proxy_pass: "http://app"
      end
    RUBY
  end

  # requests on one keep-alive connection from `from`: the bodies, and the client port
  def on_one_connection(n, from:, prefix: '')
    sock = Socket.tcp('127.0.0.1', @port, from, 0, connect_timeout: 2)
    sock.write(prefix) unless prefix.empty?
    conn = GatewaySpec::Conn.allocate
    conn.instance_variable_set(:@sock, sock)
    conn.instance_variable_set(:@eof, false)
    bodies = Array.new(n) do
      conn.request('GET', '/', { 'Host' => 'x' })
      conn.read_response.body
    end
    [bodies, sock.local_address.ip_port]
  ensure
    sock&.close
  end

  it 'true (v1): a new upstream connection announces the client; kept-alive ones are reused only for that client connection' do
    start('send_proxy_protocol: true, keepalive: 8')
    announced # the readiness request's
    a, a_port = on_one_connection(3, from: '127.0.0.9')
    expect(a.uniq).to eq(["v1 PROXY TCP4 127.0.0.9 127.0.0.1 #{a_port} #{@port}"])
    b, b_port = on_one_connection(2, from: '127.0.0.10')
    expect(b.uniq).to eq(["v1 PROXY TCP4 127.0.0.10 127.0.0.1 #{b_port} #{@port}"])
    c, c_port = on_one_connection(1, from: '127.0.0.9') # the same address, a new connection (port)
    expect(c).to eq(["v1 PROXY TCP4 127.0.0.9 127.0.0.1 #{c_port} #{@port}"])
    expect(announced.size).to eq(3) # one upstream connection per client connection, each header once
  end

  it ':v2 writes the binary header' do
    start('send_proxy_protocol: :v2')
    a, a_port = on_one_connection(2, from: '127.0.0.9')
    expect(a.uniq).to eq(["v2 127.0.0.9:#{a_port} 127.0.0.1:#{@port}"])
  end

  it 'announces the address a PROXY header gave this gateway (a chain of balancers)' do
    start('send_proxy_protocol: :v1', ', proxy_protocol: true')
    a, = on_one_connection(1, from: '127.0.0.9', prefix: "PROXY TCP4 192.0.2.7 127.0.0.1 5555 80\r\n")
    expect(a).to eq(["v1 PROXY TCP4 192.0.2.7 127.0.0.1 5555 #{@port}"])
  end

  it 'writes the header before the TLS handshake of an https:// server' do
    start('send_proxy_protocol: :v2, tls_verify: false', servers: '["https://127.0.0.1:UP"]')
    a, a_port = on_one_connection(2, from: '127.0.0.9')
    expect(a.uniq).to eq(["v2 127.0.0.9:#{a_port} 127.0.0.1:#{@port}"])
  end

  it 'rejects bad values at FILE:LINE' do
    [['send_proxy_protocol: :v3', 'upstream app: send_proxy_protocol must be true (v1), :v1, :v2 or false'],
     ['send_proxy_protocol: true, protocol: :fastcgi', 'upstream app: send_proxy_protocol is for HTTP/1.1 groups']].each do |opts, msg|
      status, output, path = check_config("# up\nupstream :app, servers: [\"127.0.0.1:9\"], #{opts}\nserver listen: #{free_port} do\n  location(\"/\") { \"x\" }\nend\n")
      expect(status).to eq(1), output
      expect(output).to include("#{path}:2: #{msg}")
    end
  end
end
