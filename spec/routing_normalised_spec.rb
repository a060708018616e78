# Routing by the path nginx would route ($uri): a path whose percent-decoded,
# normalised form leads to another location than the path as received
# ("/%61dmin", "//admin", "/x/../admin" next to a location guarding
# "/admin") is refused with 400, over HTTP/1.1 and HTTP/2, with or without a
# body, and never reaches the other location; paths that route the same
# either way pass as received (an encoded slash stays encoded).
require 'open3'
require_relative 'spec_helper'

RSpec.describe 'routing by the normalised path' do
  before(:each) do
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      error_log :stderr, level: :info
      server listen: "127.0.0.1:#{@port}", http2: true do
        location "/admin" do |req| "admin \#{req.path}" end
        location "=/exact" do "exact" end
        location %r{\\.secret$} do "secret" end
        location "/" do |req| "open \#{req.path} \#{req.body.to_s.size}" end
      end
    RUBY
  end

  def get(path)
    r = raw_request(@port, "GET #{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    [r[%r{\AHTTP/1\.1 (\d+)}, 1].to_i, r.split("\r\n\r\n", 2)[1].to_s]
  end

  it 'a path that reaches another location once decoded or normalised is 400, never served by the one it names raw' do
    %w[/%61dmin /%61dmin/x //admin /./admin /x/../admin /%2Fadmin /%61dmin%2Fx /%65xact
       /x/..//exact].each do |path|
      status, body = get(path)
      expect([path, status]).to eq([path, 400])
      expect(body).not_to include('open'), "#{path} reached location \"/\": #{body}"
    end
    expect(@gw.log).to include('routed to another location')
  end

  it 'a path that does not decode (a malformed escape, %00, a ".." above the root) is 400' do
    %w[/a%zz /a%2 /a%00b /../etc /x/../../etc].each do |path|
      expect([path, get(path).first]).to eq([path, 400])
    end
  end

  it 'paths that route the same either way pass as received' do
    expect(get('/admin')).to eq([200, 'admin /admin'])
    expect(get('/admin/%7Euser')).to eq([200, 'admin /admin/%7Euser'])
    expect(get('/admin//x')).to eq([200, 'admin /admin//x'])
    expect(get('/api/a%2Fb')).to eq([200, 'open /api/a%2Fb 0']) # an encoded slash stays encoded
    expect(get('/a//b/./c')).to eq([200, 'open /a//b/./c 0'])
    expect(get('/Admin')).to eq([200, 'open /Admin 0']) # matching is case-sensitive, as nginx's
    expect(get('/exact')).to eq([200, 'exact'])
    expect(get('/x.secret')).to eq([200, 'secret'])
    expect(get('/x%2Esecret')).to eq([200, 'secret']) # the pattern sees the decoded path too
    expect(get('/admin/../admin/y')).to eq([200, 'admin /admin/../admin/y'])
  end

  it 'a request with a body is refused before its body is read' do
    r = raw_request(@port, "POST /%61dmin HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
    expect(r).to start_with('HTTP/1.1 400')
    r = raw_request(@port, "POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
    expect(r).to start_with('HTTP/1.1 200')
    expect(r).to end_with('open /plain 5')
  end

  it 'over HTTP/2 the same' do
    codes = %w[/%61dmin //admin /admin].map do |path|
      out, st = Open3.capture2e('curl', '-sS', '--http2-prior-knowledge', '--path-as-is', '-o', '/dev/null',
                                '-w', '%{http_code}', "http://127.0.0.1:#{@port}#{path}")
      expect(st.success?).to be(true), out
      out
    end
    expect(codes).to eq(%w[400 400 200])
    out, st = Open3.capture2e('curl', '-sS', '--http2-prior-knowledge', '--path-as-is', '-o', '/dev/null',
                              '-w', '%{http_code}', '--data', 'hello', "http://127.0.0.1:#{@port}/%61dmin")
    expect(st.success?).to be(true), out
    expect(out).to eq('400')
  end

  it 'the worker lives on' do
    expect(get('/admin').first).to eq(200)
    expect(@gw.alive?).to be(true)
    expect(@gw.log).not_to match(GatewaySpec::SANITIZER_REPORT)
  end
end
