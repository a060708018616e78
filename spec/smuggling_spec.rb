# Request framing that proxies disagree about (request smuggling): the
# gateway answers 400, closes, and never runs what follows on the connection.
require_relative 'spec_helper'

RSpec.describe 'ambiguous request framing' do
  before(:each) do
    @port = free_port
    start_gateway(<<~RUBY, ports: @port)
      server listen: "127.0.0.1:#{@port}" do
        location "/" do |req| "served \#{req.path}" end
      end
    RUBY
  end

  # The bad request, then a harmless one that must never be answered.
  def expect_rejected(bad)
    bytes = raw_request(@port, bad + build_request('GET', '/after'), read_timeout: 2)
    expect(bytes).to match(%r{\AHTTP/1\.[01] 400 }), "expected 400, got #{bytes[0, 300].inspect}"
    expect(bytes).not_to include('served /')
    r = parse_response(bytes)
    expect(r['connection']).to match(/close/i)
  end

  it 'rejects obs-fold (a header line starting with a space)' do
    expect_rejected("GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n")
  end

  it 'rejects obs-fold (a header line starting with a tab)' do
    expect_rejected("GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n")
  end

  it 'rejects a bare CR inside a header value' do
    expect_rejected("GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n")
  end

  it 'rejects Transfer-Encoding in an HTTP/1.0 request' do
    expect_rejected("POST /a HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
  end

  it 'rejects Content-Length together with Transfer-Encoding' do
    expect_rejected("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" \
                    "0\r\n\r\n")
  end

  it 'rejects duplicate Content-Length headers with equal values' do
    expect_rejected("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc")
  end

  it 'rejects duplicate Content-Length headers with different values' do
    expect_rejected("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd")
  end

  it 'rejects a Content-Length that is not a plain number' do
    expect_rejected("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc")
  end

  it 'rejects a Transfer-Encoding whose last coding is not chunked' do
    expect_rejected("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n")
  end

  it 'still serves a well-formed request the same way (control)' do
    bytes = raw_request(@port, build_request('GET', '/ok', 'Connection' => 'close'))
    expect(bytes).to start_with('HTTP/1.1 200 ')
    expect(bytes).to end_with('served /ok')
  end
end
