# TLS options over real handshakes: ciphers: (TLS 1.2) and ciphersuites:
# (TLS 1.3) decide what is negotiated and refuse a client offering nothing
# else; session tickets are one key set for all the workers of a server
# (made by the master) and a new one after a reload; without tickets, a TLS
# 1.2 session is resumed from the worker's session cache (by its ID).
require 'openssl'
require 'open3'
require_relative 'spec_helper'

RSpec.describe 'TLS options (ciphers:, ciphersuites:, tickets, the session cache)' do
  PID_AND_CIPHER = 'location "/" do |req| "#{Gateway.pid} #{req.tls_protocol} #{req.tls_cipher}" end'

  before(:each) do
    out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
                              '-keyout', File.join(spec_dir, 'site.key'), '-out', File.join(spec_dir, 'site.pem'),
                              '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost')
    raise out unless st.success?
  end

  def config(tls_extra: '', workers: 1)
    <<~RUBY
      server listen: "127.0.0.1:#{@port}", workers: #{workers},
             tls: { cert: "site.pem", key: "site.key"#{tls_extra} } do
        #{PID_AND_CIPHER}
      end
    RUBY
  end

  def start(**opts)
    @port = free_port
    @gw = start_gateway(config(**opts), ports: @port, ready: false)
  end

  # openssl s_client ARGS against the gateway; its output (the handshake
  # outcome is read from it, not its exit status).
  def s_client(*args)
    out, = Open3.capture2e('timeout', '10', 'openssl', 's_client', '-connect', "127.0.0.1:#{@port}",
                           '-servername', 'localhost', *args, stdin_data: "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    out
  end

  # One request on a new TLS connection: [pid, protocol, cipher, session reused?, session].
  def tls_get(version: nil, session: nil, tickets: true)
    ctx = OpenSSL::SSL::SSLContext.new
    ctx.verify_mode = OpenSSL::SSL::VERIFY_NONE
    ctx.min_version = ctx.max_version = version if version
    ctx.options |= OpenSSL::SSL::OP_NO_TICKET unless tickets
    ctx.session_cache_mode = OpenSSL::SSL::SSLContext::SESSION_CACHE_CLIENT
    tcp = Socket.tcp('127.0.0.1', @port, connect_timeout: slack(2))
    ssl = OpenSSL::SSL::SSLSocket.new(tcp, ctx)
    ssl.sync_close = true
    ssl.hostname = 'localhost'
    ssl.session = session if session
    ssl.connect
    ssl.write("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    raw = +''
    deadline = GatewaySpec.now + slack(5)
    begin
      loop do
        raise GatewaySpec::TimeoutError, "no answer: #{raw.inspect}" if GatewaySpec.now > deadline
        raw << ssl.read_nonblock(65_536)
      rescue IO::WaitReadable
        IO.select([ssl], nil, nil, 0.1)
      end
    rescue EOFError
      nil # Connection: close
    end
    body = raw.split("\r\n\r\n", 2)[1].to_s
    pid, proto, cipher = body.split(' ')
    [pid.to_i, proto, cipher, ssl.session_reused?, ssl.session]
  ensure
    ssl&.close rescue nil
  end

  describe 'ciphers: (TLS 1.2)' do
    it 'only the listed cipher is negotiated, and a client offering only another one gets a handshake_failure alert' do
      start(tls_extra: ', protocols: ["TLSv1.2"], ciphers: "ECDHE-ECDSA-CHACHA20-POLY1305"')
      _, proto, cipher, = tls_get
      expect([proto, cipher]).to eq(%w[TLSv1.2 ECDHE-ECDSA-CHACHA20-POLY1305])
      out = s_client('-tls1_2', '-cipher', 'ECDHE-ECDSA-AES128-GCM-SHA256')
      expect(out).to match(/alert handshake failure.*SSL alert number 40/)
    end

    it 'without ciphers: the default list picks an ECDHE-ECDSA AEAD cipher (not only ChaCha20)' do
      start(tls_extra: ', protocols: ["TLSv1.2"]')
      out = s_client('-tls1_2', '-cipher', 'ECDHE-ECDSA-AES128-GCM-SHA256')
      expect(out).to match(/Cipher is ECDHE-ECDSA-AES128-GCM-SHA256/)
    end

    it 'a list with no usable cipher is a config error naming it' do
      @port = free_port
      st, out, = check_config(config(tls_extra: ', ciphers: "NO-SUCH-CIPHER"'))
      expect(st).to eq(1), out
      expect(out).to include('ciphers NO-SUCH-CIPHER: no usable cipher in the list')
    end
  end

  describe 'ciphersuites: (TLS 1.3)' do
    it 'only the listed suite is negotiated, and a client offering only another one is refused' do
      start(tls_extra: ', protocols: ["TLSv1.3"], ciphersuites: "TLS_CHACHA20_POLY1305_SHA256"')
      _, proto, cipher, = tls_get
      expect([proto, cipher]).to eq(%w[TLSv1.3 TLS_CHACHA20_POLY1305_SHA256])
      out = s_client('-tls1_3', '-ciphersuites', 'TLS_AES_128_GCM_SHA256')
      expect(out).to match(/alert handshake failure.*SSL alert number 40/)
      expect(s_client('-tls1_3', '-ciphersuites', 'TLS_CHACHA20_POLY1305_SHA256')).to include('New, TLSv1.3, Cipher is TLS_CHACHA20_POLY1305_SHA256')
    end

    it 'a list with no usable suite is a config error naming it' do
      @port = free_port
      st, out, = check_config(config(tls_extra: ', ciphersuites: "TLS_NOPE"'))
      expect(st).to eq(1), out
      expect(out).to include('ciphersuites TLS_NOPE: no usable TLS 1.3 suite in the list')
    end
  end

  describe 'session tickets' do
    # SO_REUSEPORT spreads new connections over the workers by their source
    # port: 30 connections reach both workers (all on one: 2^-29).
    it 'a ticket from one worker resumes the session on every worker (one key set per server, from the master)' do
      start(workers: 2, tls_extra: ', protocols: ["TLSv1.2"]')
      first_pid, _, _, reused, session = tls_get
      expect(reused).to be(false)
      seen = Hash.new { |h, k| h[k] = [] }
      30.times do
        pid, _, _, r, = tls_get(session: session)
        seen[pid] << r
      end
      expect(seen.keys.size).to eq(2), "connections reached #{seen.keys.inspect} only"
      expect(seen.keys).to include(first_pid)
      expect(seen.values.flatten.uniq).to eq([true]), seen.inspect
    end

    it 'a reload makes new ticket keys: a ticket from before it is not resumed, one from after it is' do
      start(workers: 1, tls_extra: ', protocols: ["TLSv1.2"]')
      _, _, _, _, old_session = tls_get
      expect(tls_get(session: old_session)[3]).to be(true)
      @gw.signal('HUP')
      poll('the reload', timeout: 10) { @gw.log.include?('reloaded: generation 1') }
      old_pid = @gw.log[/worker \S+\[(\d+)\]/, 1]
      poll('a worker of the new generation to answer', timeout: 10) { tls_get[0] != old_pid.to_i }
      expect(tls_get(session: old_session)[3]).to be(false)
      _, _, _, _, new_session = tls_get
      expect(tls_get(session: new_session)[3]).to be(true)
    end
  end

  it 'without tickets, a TLS 1.2 session is resumed by its ID from the session cache (same worker)' do
    start(workers: 1, tls_extra: ', protocols: ["TLSv1.2"]')
    _, _, _, reused, session = tls_get(tickets: false)
    expect(reused).to be(false)
    expect(session.to_der).not_to be_empty
    expect(session.id).not_to be_empty # a session ID, not a ticket, names it
    3.times { expect(tls_get(session: session, tickets: false)[3]).to be(true) }
  end
end
