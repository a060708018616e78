# Handler failures: exceptions become 500s and are logged with a backtrace;
# header values that would split the response are refused.
require_relative 'spec_helper'

RSpec.describe 'handler errors' do
  before(:each) do
    gateway_with(<<~'RUBY', server: '')
      location "/boom" do
        raise "boom-from-handler"
      end
      location "/crlf" do
        [200, {"x-bad" => "a\r\nInjected: yes"}, ["body"]]
      end
      location "/lf" do
        [200, {"x-bad" => "a\nInjected: yes"}, ["body"]]
      end
      location "/nul" do
        [200, {"x-bad" => "a\0b"}, ["body"]]
      end
      location "/badname" do
        [200, {"x-bad\r\nInjected" => "yes"}, ["body"]]
      end
      location "/partial" do
        Nginx.rputs "partial"
        raise "late-failure"
      end
      location "/" do "fine" end
    RUBY
  end

  it 'an exception in a handler gives a 500' do
    r = http_get(@port, '/boom')
    expect(r.status).to eq(500)
    expect(r.body).not_to include('boom-from-handler')
  end

  it 'an exception in a handler is logged with its message and a backtrace into the config' do
    http_get(@port, '/boom')
    path = Regexp.escape(@gw.config_path)
    poll('the error in the log', timeout: 3) { @gw.log.include?('boom-from-handler') }
    poll('a backtrace line FILE:LINE in the log', timeout: 3) { @gw.log =~ /#{path}:4\b/ }
  end

  it 'after an exception the same worker serves the next request normally' do
    before_pid = worker_pid(@port)
    expect(http_get(@port, '/boom').status).to eq(500)
    r = http_get(@port, '/')
    expect(r.status).to eq(200)
    expect(r.body).to eq('fine')
    expect(worker_pid(@port)).to eq(before_pid)
  end

  it 'an exception on a keep-alive connection does not break the connection' do
    c = connect(@port)
    c.request('GET', '/boom')
    expect(c.read_response.status).to eq(500)
    c.request('GET', '/')
    r = c.read_response
    expect([r.status, r.body]).to eq([200, 'fine'])
  end

  it 'an exception after Nginx.rputs never produces a 200 with the partial body' do
    c = connect(@port)
    c.request('GET', '/partial')
    r = begin
      c.read_response
    rescue GatewaySpec::ConnectionClosed
      nil
    end
    expect(r.status).to eq(500) if r # or the connection was closed without a response
  end

  {
    'CR LF' => '/crlf', 'a bare LF' => '/lf', 'NUL' => '/nul'
  }.each do |what, path|
    it "a header value containing #{what} gives a 500 and the header never reaches the wire" do
      bytes = raw_request(@port, build_request('GET', path, 'Connection' => 'close'))
      expect(bytes).to start_with('HTTP/1.1 500 ')
      expect(bytes).not_to match(/x-bad/i)
      expect(bytes).not_to include('Injected')
      poll('an error about the header in the log', timeout: 3) { @gw.log =~ /header/i }
    end
  end

  it 'a header name containing CR LF gives a 500 and never reaches the wire' do
    bytes = raw_request(@port, build_request('GET', '/badname', 'Connection' => 'close'))
    expect(bytes).to start_with('HTTP/1.1 500 ')
    expect(bytes).not_to include('Injected')
  end
end
