# Large HTTP/2 downloads with flat memory: a 1 GiB static file (sparse, with
# random bytes at a few odd offsets so the hash sees order and position)
# downloads whole and correct over h2c and over h2 (TLS) -- and over
# HTTP/1.1 on TLS, which cannot use sendfile -- while the worker's RSS stays
# flat; a slow h2 reader of a big file makes the gateway buffer
# only a bounded amount and does not stall another stream of its connection
# (spec/support/h2_slow_reader.py, python3-h2).
require_relative 'spec_helper'
require 'digest'
require 'fileutils'
require 'open3'

RSpec.describe 'HTTP/2 large downloads' do
  LARGE_MIB = 1024 * 1024
  LARGE_GIB = 1024 * LARGE_MIB
  SLOW_READER = File.expand_path('support/h2_slow_reader.py', __dir__)
  SLOW_READER_PY = File.exist?('/usr/bin/python3') ? '/usr/bin/python3' : 'python3' # Debian's, with python3-h2

  before(:all) do
    # One 1 GiB file for every example: sparse, plus 4 KiB of random bytes at a few odd offsets.
    @dir = Dir.mktmpdir('gateway-h2-large-')
    @public = File.join(@dir, 'public')
    FileUtils.mkdir_p(@public)
    path = File.join(@public, 'huge.bin')
    rnd = Random.new(42)
    File.open(path, 'wb') do |f|
      f.truncate(LARGE_GIB)
      [0, 12_345_677, 500 * LARGE_MIB + 3, LARGE_GIB - 4096].each do |off|
        f.seek(off)
        f.write(rnd.bytes(4096))
      end
    end
    @sha = Digest::SHA256.file(path).hexdigest
    File.write(File.join(@public, 'small.txt'), "small\n")
    File.open(File.join(@public, 'big.bin'), 'wb') { |f| f.truncate(256 * LARGE_MIB) }
    out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
                              '-keyout', File.join(@dir, 'site.key'), '-out', File.join(@dir, 'site.pem'), '-days', '2',
                              '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost')
    raise "openssl req failed: #{out}" unless st.success?
  end

  after(:all) { FileUtils.rm_rf(@dir) if @dir }

  before(:each) do
    @port = free_port
    @tls_port = free_port
    root = %(location "/", root: #{@public.inspect})
    tls = "workers: 1, tls: { cert: #{File.join(@dir, 'site.pem').inspect}, key: #{File.join(@dir, 'site.key').inspect} }"
    px = %(location "/px/", proxy_pass: "http://127.0.0.1:#{@port}/") # back to this server, over HTTP/1.1
    @gw = start_gateway(config_with("#{px}\n#{root}", port: @port, server: 'http2: true, workers: 1') +
                        config_with(root, port: @tls_port, server: tls),
                        ports: [@port, @tls_port], env: rss_env)
  end

  # curl's output streamed through SHA-256 while the worker's RSS is sampled:
  # [bytes, sha256, peak RSS growth KiB, curl's http version, seconds].
  def download(worker, *curl_args, url)
    before = rss_kib(worker)
    peak = before
    digest = Digest::SHA256.new
    bytes = 0
    t0 = GatewaySpec.now
    err = nil
    Open3.popen3('curl', '-sS', '--max-time', (240 * GatewaySpec::SLACK).to_s, '-w', '%{stderr}%{http_version}',
                 *curl_args, url) do |i, o, e, w|
      i.close
      errt = Thread.new { e.read }
      buf = +''
      last = 0
      while o.read(4 * LARGE_MIB, buf)
        digest << buf
        bytes += buf.bytesize
        if bytes - last >= 64 * LARGE_MIB
          peak = [peak, rss_kib(worker)].max
          last = bytes
        end
      end
      err = errt.value
      raise "curl failed: #{err}" unless w.value.success?
    end
    peak = [peak, rss_kib(worker)].max
    [bytes, digest.hexdigest, peak - before, err.strip, GatewaySpec.now - t0]
  end

  def tls_worker
    out, st = Open3.capture2('curl', '-sS', '-k', "https://127.0.0.1:#{@tls_port}/pid")
    raise 'no pid' unless st.success?
    out.to_i
  end

  it 'downloads 1 GiB whole and correct over h2c with the worker RSS flat' do
    worker = worker_pid(@port)
    bytes, sha, growth, version, secs = download(worker, '--http2-prior-knowledge', "http://127.0.0.1:#{@port}/huge.bin")
    expect(version).to eq('2')
    expect(bytes).to eq(LARGE_GIB)
    expect(sha).to eq(@sha)
    expect(growth).to be < 8 * 1024 # KiB: the file is never held, only a few stream windows
    puts "  h2c 1 GiB: #{(LARGE_GIB / LARGE_MIB / secs).round} MiB/s, worker RSS +#{growth} KiB" if ENV['VERBOSE']
  end

  # The response streams from the upstream connection into the client's
  # stream: the upstream is read only as fast as the client's window opens.
  it 'downloads 1 GiB whole and correct over h2c through proxy_pass with the worker RSS flat' do
    worker = worker_pid(@port)
    bytes, sha, growth, version, secs = download(worker, '--http2-prior-knowledge', "http://127.0.0.1:#{@port}/px/huge.bin")
    expect(version).to eq('2')
    expect(bytes).to eq(LARGE_GIB)
    expect(sha).to eq(@sha)
    expect(growth).to be < 16 * 1024 # KiB (the issue's bound); both sides of the proxy are this worker
    puts "  h2c via proxy_pass 1 GiB: #{(LARGE_GIB / LARGE_MIB / secs).round} MiB/s, worker RSS +#{growth} KiB" if ENV['VERBOSE']
  end

  it 'downloads 1 GiB whole and correct over h2 (TLS, ALPN) with the worker RSS flat' do
    worker = tls_worker
    bytes, sha, growth, version, secs = download(worker, '--http2', '-k', "https://127.0.0.1:#{@tls_port}/huge.bin")
    expect(version).to eq('2')
    expect(bytes).to eq(LARGE_GIB)
    expect(sha).to eq(@sha)
    expect(growth).to be < 8 * 1024
    puts "  h2 1 GiB: #{(LARGE_GIB / LARGE_MIB / secs).round} MiB/s, worker RSS +#{growth} KiB" if ENV['VERBOSE']
  end

  # Not HTTP/2, but the same edge: a TLS connection cannot use sendfile(2),
  # the file must go through the encryption (it once went out in clear text).
  it 'downloads 1 GiB whole and correct over HTTP/1.1 on TLS with the worker RSS flat' do
    worker = tls_worker
    bytes, sha, growth, version, = download(worker, '--http1.1', '-k', "https://127.0.0.1:#{@tls_port}/huge.bin")
    expect(version).to eq('1.1')
    expect(bytes).to eq(LARGE_GIB)
    expect(sha).to eq(@sha)
    expect(growth).to be < 8 * 1024
  end

  it 'a slow reader of a big file is buffered only a bounded amount and does not stall another stream' do
    worker = worker_pid(@port)
    before = rss_kib(worker)
    lines = []
    Open3.popen2e(SLOW_READER_PY, SLOW_READER, @port.to_s, '/big.bin', '/small.txt') do |i, o, w|
      i.close
      o.each_line do |l|
        lines << l.chomp
        next unless l.start_with?('holding')

        # stream 1 is stalled on its window now; the gateway must not read the file ahead into memory
        sleep 0.5
        @held_growth = rss_kib(worker) - before
      end
      w.value
    end
    expect(lines.grep(/\Asmall /)).to eq((0...5).map { |k| "small #{3 + 2 * k} 200 6" })
    expect(lines.find { |l| l.start_with?('holding') }).to match(/\Aholding 65535\z/)
    expect(@held_growth).to be < 2 * 1024 # KiB: at most the stream's queue (128 KiB) and buffers
    expect(lines.last).to eq("big 200 #{256 * LARGE_MIB}")
  end

end
