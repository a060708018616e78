# What the logs and metrics say about HTTP/2: the access log's $http2 (h2,
# h2c, -) and $stream_id, the status page's h2 counters and gauges, and the
# --trace line naming the stream.
require_relative 'spec_helper'
require 'json'
require 'open3'

RSpec.describe 'HTTP/2 in the access log, status and trace' do
  before(:each) do
    @port = free_port
    @tls_port = free_port
    cert = File.join(spec_dir, 'site.pem')
    key = File.join(spec_dir, 'site.key')
    out, st = Open3.capture2e('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
                              '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=localhost')
    raise "openssl req failed: #{out}" unless st.success?
    @gw = start_gateway(<<~RUBY, ports: [@port, @tls_port], args: ['--trace'])
      access_log :stderr, format: 'AL "$request" $status $server_protocol http2=$http2 stream=$stream_id'
      server listen: "127.0.0.1:#{@port}", http2: true, workers: 1 do
        location "/v" do "v" end
        location "/sleep" do Async.sleep(1.5); "slept" end
        location "/status", status: true
      end
      server listen: "127.0.0.1:#{@tls_port}", workers: 1, tls: { cert: "site.pem", key: "site.key" } do
        location "/t" do "t" end
      end
    RUBY
  end

  def stats(port = @port)
    JSON.parse(curl("http://127.0.0.1:#{port}/status"))['workers'].find { |w| w['port'] == port }
  end

  it 'logs $http2 and $stream_id: h2c by preface or Upgrade, h2 over TLS, - for HTTP/1.1' do
    _, st = Open3.capture2e('nghttp', '-n', "http://127.0.0.1:#{@port}/v?a", "http://127.0.0.1:#{@port}/v?b")
    expect(st).to be_success
    curl('--http2', "http://127.0.0.1:#{@port}/v?up")
    curl('--http2', '-k', "https://127.0.0.1:#{@tls_port}/t")
    curl('--http1.1', "http://127.0.0.1:#{@port}/v?one")
    poll('the access log lines') { @gw.log.scan(/^AL /).size >= 5 }
    log = @gw.log
    ids = log.scan(%r{AL "GET /v\?[ab] HTTP/2\.0" 200 HTTP/2\.0 http2=h2c stream=(\d+)}).flatten.map(&:to_i)
    expect(ids.size).to eq(2)
    expect(ids.uniq.size).to eq(2)
    expect(ids).to all(be_odd)
    expect(log).to include('AL "GET /v?up HTTP/2.0" 200 HTTP/2.0 http2=h2c stream=1')
    expect(log).to include('AL "GET /t HTTP/2.0" 200 HTTP/2.0 http2=h2 stream=1')
    expect(log).to include('AL "GET /v?one HTTP/1.1" 200 HTTP/1.1 http2=- stream=-')
  end

  it 'counts HTTP/2 connections and streams, and shows the open ones' do
    before = stats
    expect(before).to include('h2_connections', 'h2_streams', 'h2_connections_active', 'h2_streams_open')
    sleeper = Thread.new { Open3.capture2e('nghttp', '-n', "http://127.0.0.1:#{@port}/sleep?1", "http://127.0.0.1:#{@port}/sleep?2") }
    poll('two open streams', timeout: 5, interval: 0.05) do
      s = stats
      s['h2_streams_open'] == 2 && s['h2_connections_active'] == 1
    end
    sleeper.value
    curl('--http2', "http://127.0.0.1:#{@port}/v")
    after = stats
    expect(after['h2_connections'] - before['h2_connections']).to eq(2)
    expect(after['h2_streams'] - before['h2_streams']).to eq(3)
    prom = curl("http://127.0.0.1:#{@port}/status?format=prometheus")
    expect(prom).to match(/^gateway_h2_streams_total\{port="#{@port}".*\} \d+$/)
  end

  it '--trace names the stream and the connection kind' do
    curl('--http2-prior-knowledge', "http://127.0.0.1:#{@port}/v")
    curl('--http1.1', "http://127.0.0.1:#{@port}/v?plain")
    poll('the trace lines') { @gw.log.include?('GET /v +') }
    expect(@gw.log).to match(%r{trace #\d+ GET /v \+[\d.]+ ms: routed to a mruby location \(HTTP/2\.0 stream 1, h2c\)})
    expect(@gw.log).to match(%r{trace #\d+ GET /v \+[\d.]+ ms: routed to a mruby location$})
  end
end
