# Async::HTTP.sub_request to HTTP/2 upstreams: "h2c://" (cleartext, prior
# knowledge) and "h2://" (TLS, ALPN h2, the parent location's tls_ca:) go
# through the one upstream client (httpclient.c) like http:// URLs do. The
# upstream is a second gateway on free ports: an h2c listener and a TLS
# listener (a self-signed localhost certificate), each answering with the
# HTTP version and scheme it saw, so a sub-request that fell back to
# HTTP/1.1 would show.
require_relative 'spec_helper'

RSpec.describe 'Async::HTTP.sub_request to h2c:// and h2:// URLs' do
  before(:each) do
    @h2c = free_port
    @h2 = free_port
    @down = free_port # nothing listens there
    cert, key = self_signed_localhost
    File.write("#{spec_dir}/cert.pem", cert.to_pem)
    File.write("#{spec_dir}/key.pem", key.to_pem)
    back = <<~RUBY
      server listen: "127.0.0.1:#{@h2c}", http2: true do
        location "/v" do |req| "\#{req.http_version} \#{req.scheme} \#{req.method} \#{req.headers['x-a']} \#{req.body.bytesize}" end
        location "/big" do "z" * 300_000 end
        location "/missing" do [404, {"x-why" => "gone"}, ["no"]] end
      end
      server listen: "127.0.0.1:#{@h2}", tls: { cert: "#{spec_dir}/cert.pem", key: "#{spec_dir}/key.pem" } do
        location "/v" do |req| "\#{req.http_version} \#{req.scheme} \#{req.method} \#{req.headers['x-a']} \#{req.body.bytesize}" end
      end
    RUBY
    @back = start_gateway(back, ports: [@h2c, @h2], name: 'back.rb')
    gateway_with(<<~RUBY)
      location "/c" do |req|
        r = Async::HTTP.sub_request("h2c://127.0.0.1:#{@h2c}/v", headers: {"x-a" => "1"})
        "\#{r.status}|\#{r.body}"
      end
      location "/c_post" do |req|
        r = Async::HTTP.sub_request("h2c://127.0.0.1:#{@h2c}/v", method: "POST", headers: {"x-a" => "2"}, body: "abc" * 1000)
        "\#{r.status}|\#{r.body}"
      end
      location "/c_big" do |req|
        Async::HTTP.sub_request("h2c://127.0.0.1:#{@h2c}/big").body.bytesize.to_s
      end
      location "/c_missing" do |req|
        r = Async::HTTP.sub_request("h2c://127.0.0.1:#{@h2c}/missing")
        "\#{r.status}|\#{r.headers['x-why']}|\#{r.body}"
      end
      location "/c_all" do |req|
        Async::HTTP.all(["h2c://127.0.0.1:#{@h2c}/v", "h2c://localhost:#{@h2c}/v"]).map(&:body).join(",")
      end
      # /fails?down or /fails?untrusted: the exception a failed sub-request raises
      location "/fails" do |req|
        url = { "down" => "h2c://127.0.0.1:#{@down}/v", "untrusted" => "h2://localhost:#{@h2}/v" }[req.query]
        begin
          Async::HTTP.sub_request(url)
          "no error"
        rescue => e
          e.class.to_s
        end
      end
      location "/s", tls_ca: "#{spec_dir}/cert.pem" do |req|
        r = Async::HTTP.sub_request("h2://localhost:#{@h2}/v", method: "PUT", headers: {"x-a" => "3"}, body: "xy")
        "\#{r.status}|\#{r.body}"
      end
    RUBY
  end

  def get_body(path)
    r = http_get(@port, path, timeout: 10)
    expect(r.status).to eq(200), "#{path}: #{r.status} #{r.body}\n#{@gw.log}"
    r.body
  end

  it 'reaches an h2c upstream over HTTP/2 (headers, status and body back)' do
    expect(get_body('/c')).to eq('200|HTTP/2.0 http GET 1 0')
  end

  it 'sends a method and a body to an h2c upstream' do
    expect(get_body('/c_post')).to eq('200|HTTP/2.0 http POST 2 3000')
  end

  it 'collects a large h2c response body (more than one flow-control window)' do
    expect(get_body('/c_big')).to eq('300000')
  end

  it 'returns an h2c upstream\'s 404 as a Response with its headers' do
    expect(get_body('/c_missing')).to eq('404|gone|no')
  end

  it 'reaches an h2 upstream over TLS with the location\'s tls_ca: (certificate checked)' do
    expect(get_body('/s')).to eq('200|HTTP/2.0 https PUT 3 2')
  end

  it 'fails an h2 upstream whose certificate is not trusted: Gateway::UpstreamError' do
    expect(get_body('/fails?untrusted')).to eq('Gateway::UpstreamError')
    expect(@gw.log).to match(/certificate verify failed|verif/i)
  end

  it 'resolves a host name for h2c:// and runs HTTP/2 sub-requests side by side with Async::HTTP.all' do
    expect(get_body('/c_all')).to eq('HTTP/2.0 http GET  0,HTTP/2.0 http GET  0')
  end

  it 'raises Gateway::UpstreamError when the h2c upstream refuses the connection' do
    expect(get_body('/fails?down')).to eq('Gateway::UpstreamError')
  end
end
