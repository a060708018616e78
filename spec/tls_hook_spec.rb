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
    expect(out).to include(path, 'tls: on_handshake: must be a Proc (->(req) { ... }) or a handler file; no file')
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

# ngx_mruby's other Nginx::SSL items, with real clients (curl, openssl
# s_client): local_port, tls_version, servername "" without SNI,
# Nginx::SSL.errlogger, Userdata kept from the handshake for that
# connection's requests, and on_handshake: as a handler file compiled once
# (on_handshake_cache: true) or read per handshake (false).
RSpec.describe 'TLS on_handshake: ngx_mruby parity' do
  def make_cert(base, name)
    cert = File.join(spec_dir, "#{base}.pem")
    key = File.join(spec_dir, "#{base}.key")
    out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                              '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', "/CN=#{name}")
    raise "openssl req failed: #{out}" unless st.success?
  end

  # The subject openssl s_client sees for SNI name (nil: none sent).
  def s_client_subject(port, name)
    args = ['openssl', 's_client', '-connect', "127.0.0.1:#{port}"]
    args += ['-servername', name] if name
    pem, = Open3.capture2(*args, stdin_data: '', err: File::NULL)
    subj, = Open3.capture2('openssl', 'x509', '-noout', '-subject', stdin_data: pem)
    subj.strip
  end

  before(:each) do
    %w[default a b].each { |n| make_cert(n, "#{n}.test") }
    File.write(File.join(spec_dir, 'hook.rb'), <<~HOOK)
      ssl = Nginx::SSL.new
      if ssl.servername == "pick.test"
        ssl.certificate = "#{spec_dir}/a.pem"
        ssl.certificate_key = "#{spec_dir}/a.key"
      end
    HOOK
    @port, @cached, @fresh = free_port, free_port, free_port
    @gw = start_gateway(<<~RUBY, ports: [@port, @cached, @fresh])
      server listen: "127.0.0.1:#{@port}", workers: 1,
             tls: { cert: "default.pem", key: "default.key", protocols: ["TLSv1.2"], on_handshake: ->(ssl) {
               u = Userdata.new
               u.port = ssl.local_port
               u.version = ssl.tls_version
               u.name = ssl.servername.empty? ? "servername is empty" : ssl.servername
               Nginx::SSL.errlogger Nginx::LOG_NOTICE, "Servername is \#{ssl.servername}"
             } } do
        location "/" do "\#{Userdata.new.port} \#{Userdata.new.version} \#{Userdata.new.name}" end
        location "/set" do Userdata.new.name = "changed by a request"; "ok" end
      end
      server listen: "127.0.0.1:#{@cached}", workers: 1,
             tls: { cert: "default.pem", key: "default.key", on_handshake: "hook.rb" } do
        location "/" do "cached" end
      end
      server listen: "127.0.0.1:#{@fresh}", workers: 1,
             tls: { cert: "default.pem", key: "default.key", on_handshake: "hook.rb", on_handshake_cache: false } do
        location "/" do "fresh" end
      end
    RUBY
  end

  it 'local_port, tls_version, servername ("" without SNI) through Userdata kept for the connection (curl)' do
    expect(curl('-k', "https://127.0.0.1:#{@port}/")).to eq("#{@port} TLSv1.2 servername is empty")
    expect(curl('-k', '--resolve', "ngx.test:#{@port}:127.0.0.1", "https://ngx.test:#{@port}/"))
      .to eq("#{@port} TLSv1.2 ngx.test")
    # one connection, two requests: both see the handshake's values; a request's change stays its own
    out = curl('-k', "https://127.0.0.1:#{@port}/set", '--next', '-k', "https://127.0.0.1:#{@port}/")
    expect(out).to eq("ok#{@port} TLSv1.2 servername is empty")
    expect(curl('-k', "https://127.0.0.1:#{@port}/")).to eq("#{@port} TLSv1.2 servername is empty")
  end

  it 'Nginx::SSL.errlogger logs as nginx does (while SSL handshaking) (openssl s_client)' do
    s_client_subject(@port, 'log.test')
    poll('the errlogger line') { @gw.log.include?('Servername is log.test while SSL handshaking, client: 127.0.0.1') }
  end

  it 'a handler file: compiled once (cache), or read per handshake (on_handshake_cache: false)' do
    [@cached, @fresh].each do |port|
      expect(s_client_subject(port, 'pick.test')).to eq('subject=CN = a.test')
      expect(s_client_subject(port, 'other.test')).to eq('subject=CN = default.test')
    end
    hook = File.join(spec_dir, 'hook.rb')
    File.write(hook, File.read(hook).sub('/a.pem"', '/b.pem"').sub('/a.key"', '/b.key"'))
    expect(s_client_subject(@cached, 'pick.test')).to eq('subject=CN = a.test') # compiled at load
    expect(s_client_subject(@fresh, 'pick.test')).to eq('subject=CN = b.test')  # read again
    expect(curl('-k', '--resolve', "pick.test:#{@fresh}:127.0.0.1", "https://pick.test:#{@fresh}/")).to eq('fresh')
  end
end
