# `tls: { on_handshake: ->(ssl) { ... } }`: a Ruby hook per TLS handshake
# that chooses the certificate (ngx_mruby's Nginx::SSL): by path (loaded
# once per worker, re-read on reload) or PEM data, by SNI name; a hook that
# raises, waits (Async), or names a bad file fails that handshake with an
# error-log line and the worker goes on.
require_relative 'spec_helper'
require 'openssl'
require 'open3'
require 'timeout'

RSpec.describe 'TLS on_handshake hook' do
  # A self-signed certificate for name: [pem_path, key_path].
  def make_cert(base, name)
    cert = File.join(spec_dir, "#{base}.pem")
    key = File.join(spec_dir, "#{base}.key")
    out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                              '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', "/CN=#{name}",
                              '-addext', "subjectAltName=DNS:#{name}")
    raise "openssl req failed: #{out}" unless st.success?
    [cert, key]
  end

  # The certificate the server presents for SNI `name` (nil: none sent), or
  # the exception of a failed handshake.
  def presented(name)
    tcp = Socket.tcp('127.0.0.1', @port, connect_timeout: 2)
    ctx = OpenSSL::SSL::SSLContext.new
    ctx.verify_mode = OpenSSL::SSL::VERIFY_NONE
    ssl = OpenSSL::SSL::SSLSocket.new(tcp, ctx)
    ssl.hostname = name if name
    ssl.sync_close = true
    Timeout.timeout(5 * GatewaySpec::SLACK) { ssl.connect }
    ssl.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    body = +''
    Timeout.timeout(5 * GatewaySpec::SLACK) { loop { body << ssl.readpartial(4096) } } rescue EOFError
    [ssl.peer_cert.subject.to_s, body.split("\r\n\r\n", 2)[1]]
  rescue OpenSSL::SSL::SSLError, Errno::ECONNRESET => e
    e
  ensure
    ssl&.close rescue nil
    tcp&.close rescue nil
  end

  before(:each) do
    make_cert('default', 'default.test')
    make_cert('a', 'a.test')
    make_cert('b', 'b.test')
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      DIR = #{spec_dir.inspect}
      server listen: "127.0.0.1:#{@port}", workers: 1, tls: { cert: "default.pem", key: "default.key", on_handshake: ->(ssl) {
        case ssl.servername
        when "a.test" then ssl.certificate = "\#{DIR}/a.pem"; ssl.certificate_key = "\#{DIR}/a.key"
        when "b.test" then ssl.certificate_data = File.read("\#{DIR}/b.pem"); ssl.certificate_key_data = File.read("\#{DIR}/b.key")
        when "compat.test" then s = Nginx::SSL.new; s.certificate = "\#{DIR}/b.pem"; s.certificate_key = "\#{DIR}/b.key"
        when "sleep.test" then Async.sleep(0.1)
        when "raise.test" then raise "no certificate here"
        when "missing.test" then ssl.certificate = "\#{DIR}/missing.pem"; ssl.certificate_key = "\#{DIR}/a.key"
        when "half.test" then ssl.certificate = "\#{DIR}/a.pem"
        when "mismatch.test" then ssl.certificate = "\#{DIR}/a.pem"; ssl.certificate_key = "\#{DIR}/b.key"
        end
      } } do
        location "/" do |req| "sni=\#{req.tls_server_name}" end
        location "/outside" do Nginx::SSL.new.servername end
      end
    RUBY
  end

  it 'chooses the certificate by SNI name, from a file or PEM data; the default otherwise' do
    expect(presented('a.test')).to eq(['/CN=a.test', 'sni=a.test'])
    expect(presented('b.test')).to eq(['/CN=b.test', 'sni=b.test'])
    expect(presented('compat.test')).to eq(['/CN=b.test', 'sni=compat.test']) # Nginx::SSL.new inside the hook
    expect(presented('other.test')).to eq(['/CN=default.test', 'sni=other.test'])
    expect(presented(nil)[0]).to eq('/CN=default.test') # no SNI: servername is nil
  end

  it 'fails only that handshake, with an error-log line, when the hook raises, waits or names bad files' do
    {
      'raise.test' => 'the hook raised no certificate here (RuntimeError)',
      'sleep.test' => 'Async.sleep cannot wait in tls on_handshake: it runs synchronously',
      'missing.test' => 'missing.pem: No such file or directory',
      'half.test' => 'a certificate without certificate_key',
      'mismatch.test' => 'the certificate and key chosen cannot be used'
    }.each do |name, why|
      expect(presented(name)).to be_a(StandardError), name
      poll("the error line for #{name}") { @gw.log.include?(why) }
    end
    expect(@gw.log.scan(/\[error\].*TLS on_handshake: .*; failing the handshake/).size).to eq(5)
    expect(presented('a.test')).to eq(['/CN=a.test', 'sni=a.test']) # the worker goes on
  end

  it 'raises outside a handshake hook' do
    tcp = Socket.tcp('127.0.0.1', @port)
    ctx = OpenSSL::SSL::SSLContext.new
    ctx.verify_mode = OpenSSL::SSL::VERIFY_NONE
    ssl = OpenSSL::SSL::SSLSocket.new(tcp, ctx)
    ssl.connect
    ssl.write("GET /outside HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    resp = +''
    Timeout.timeout(5 * GatewaySpec::SLACK) { loop { resp << ssl.readpartial(4096) } } rescue EOFError
    expect(resp[%r{\AHTTP/1\.1 (\d+)}, 1]).to eq('500')
    expect(@gw.log).to include('Nginx::SSL can only be used inside a tls on_handshake hook')
  ensure
    ssl&.close rescue nil
  end

  it 'on_handshake must be a Proc (a FILE:LINE error)' do
    status, out, path = check_config(%(server listen: 18997, tls: { cert: "default.pem", key: "default.key", on_handshake: "x" } do location "/" do "x" end end))
    expect(status).to eq(1)
    expect(out).to include(path, 'tls: on_handshake must be a Proc')
  end

  it 'loads a file once per worker and again after a reload' do
    expect(presented('a.test')[0]).to eq('/CN=a.test')
    make_cert('a', 'a2.test') # a new pair in the same files
    expect(presented('a.test')[0]).to eq('/CN=a.test') # still the cached one
    @gw.signal('HUP')
    poll('the re-read certificate', timeout: 10, interval: 0.1) { presented('a.test')[0] == '/CN=a2.test' }
    # PEM data is parsed every time
    make_cert('b', 'b2.test')
    expect(presented('b.test')[0]).to eq('/CN=b2.test')
  end
end
