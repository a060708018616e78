# Request limits and timeouts (server listen: ..., limits: {...}), and the
# answers for malformed or unsupported requests.
require_relative 'spec_helper'

RSpec.describe 'limits' do
  # Small limits so the examples are quick. Timeouts are seconds (Float ok).
  def start_limited(**overrides)
    limits = { max_request_line: 100, max_header_size: 300, max_headers: 5, max_body: 10,
               header_timeout: 5, body_timeout: 5, keepalive_timeout: 5, send_timeout: 5 }.merge(overrides)
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      server listen: "127.0.0.1:#{@port}", limits: #{limits.inspect.gsub(/:(\w+)=>/, '\1: ')} do
        location "/big" do "x" * (16 * 1024 * 1024) end
        location "/" do |req| "\#{req.path}:\#{req.body}" end
      end
    RUBY
  end

  def start_default
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      server listen: "127.0.0.1:#{@port}" do
        location "/" do |req| "\#{req.path}:\#{req.body.size}" end
      end
    RUBY
  end

  def status_of(bytes)
    bytes[%r{\AHTTP/1\.[01] (\d{3}) }, 1]&.to_i
  end

  describe 'with the default limits' do
    before(:each) { start_default }

    it 'accepts a request line under 8192 bytes' do
      path = "/#{'a' * 8000}"
      r = http_get(@port, path)
      expect(r.status).to eq(200)
      expect(r.body).to eq("#{path}:0")
    end

    it 'answers 414 to a request line over 8192 bytes' do
      bytes = raw_request(@port, build_request('GET', "/#{'a' * 9000}"))
      expect(status_of(bytes)).to eq(414), bytes[0, 200].inspect
    end

    it 'answers 431 to a header block over 16384 bytes' do
      bytes = raw_request(@port, build_request('GET', '/', 'X-Big' => 'b' * 17_000))
      expect(status_of(bytes)).to eq(431), bytes[0, 200].inspect
    end

    it 'answers 431 to more than 100 header fields' do
      headers = (1..101).to_h { |i| ["X-H#{i}", 'v'] }
      bytes = raw_request(@port, build_request('GET', '/', headers))
      expect(status_of(bytes)).to eq(431), bytes[0, 200].inspect
    end

    it 'accepts a 1 MiB body and answers 413 to one byte more' do
      body = 'z' * 1_048_576
      r = http_request(@port, 'POST', '/', {}, body, timeout: 10)
      expect(r.status).to eq(200)
      expect(r.body).to eq('/:1048576')
      c = connect(@port)
      c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n")
      expect(c.read_response.status).to eq(413)
    end
  end

  describe 'with configured limits' do
    it 'answers 414 to a request line over max_request_line' do
      start_limited
      bytes = raw_request(@port, build_request('GET', "/#{'a' * 200}"))
      expect(status_of(bytes)).to eq(414), bytes[0, 200].inspect
    end

    it 'serves a request line under max_request_line' do
      start_limited
      expect(http_get(@port, "/#{'a' * 20}").status).to eq(200)
    end

    it 'answers 431 to a header block over max_header_size' do
      start_limited
      bytes = raw_request(@port, build_request('GET', '/', 'X-Big' => 'b' * 400))
      expect(status_of(bytes)).to eq(431), bytes[0, 200].inspect
    end

    it 'answers 431 to more than max_headers header fields' do
      start_limited
      headers = (1..5).to_h { |i| ["X-H#{i}", 'v'] } # + Host = 6
      bytes = raw_request(@port, build_request('GET', '/', headers))
      expect(status_of(bytes)).to eq(431), bytes[0, 200].inspect
    end

    it 'serves a request with max_headers header fields' do
      start_limited
      headers = (1..3).to_h { |i| ["X-H#{i}", 'v'] } # + Host + Connection = 5
      expect(http_get(@port, '/', headers).status).to eq(200)
    end

    it 'serves a body of exactly max_body bytes' do
      start_limited
      r = http_request(@port, 'POST', '/', {}, '0123456789')
      expect([r.status, r.body]).to eq([200, '/:0123456789'])
    end

    it 'answers 413 to a Content-Length over max_body before the body is sent' do
      start_limited
      c = connect(@port)
      c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
      expect(c.read_response(timeout: 3).status).to eq(413)
    end

    it 'never runs a request smuggled in the refused body of a 413' do
      start_limited
      smuggled = build_request('GET', '/smuggled')
      body = smuggled + ('p' * (100 - smuggled.size))
      bytes = raw_request(@port, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n#{body}",
                          read_timeout: 1)
      expect(status_of(bytes)).to eq(413)
      expect(bytes).not_to include('/smuggled')
    end

    it 'answers 413 without 100 Continue when Expect: 100-continue comes with a too large body' do
      start_limited
      c = connect(@port)
      c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
      expect(c.read_response(timeout: 3).status).to eq(413)
    end

    it 'answers 413 to a chunked body that grows over max_body' do
      start_limited
      c = connect(@port)
      c.write("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" \
              "8\r\n01234567\r\n8\r\n89abcdef\r\n")
      expect(c.read_response(timeout: 3).status).to eq(413)
    end
  end

  describe 'timeouts' do
    it 'answers 408 with Connection: close (RFC 9110 §15.5.9) and closes a connection whose header block stalls, after header_timeout' do
      start_limited(header_timeout: 0.3)
      c = connect(@port)
      c.write("GET / HTTP/1.1\r\nHost: x\r\n")
      elapsed = c.wait_closed(within: 3)
      expect(elapsed).not_to be_nil, 'connection still open after 3s'
      expect(elapsed).to be_between(0.2, 2.0 * GatewaySpec::SLACK)
      expect(c.pending).to start_with("HTTP/1.1 408 Request Timeout\r\n").and include("\r\nConnection: close\r\n")
    end

    it 'closes a connection that trickles its header block byte by byte, after header_timeout' do
      start_limited(header_timeout: 0.5)
      c = connect(@port)
      start = GatewaySpec.now
      request = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: #{'s' * 100}\r\n"
      closed_at = nil
      request.each_char do |ch| # one byte every 50 ms for up to 5 s
        begin
          c.write(ch)
        rescue Errno::EPIPE, Errno::ECONNRESET
          closed_at = GatewaySpec.now - start
          break
        end
        if c.wait_closed(within: 0.05)
          closed_at = GatewaySpec.now - start
          break
        end
      end
      expect(closed_at).not_to be_nil, 'the trickling client was never cut off'
      expect(closed_at).to be < 2.0 * GatewaySpec::SLACK
    end

    it 'closes a connection that sends nothing, after header_timeout' do
      start_limited(header_timeout: 0.3)
      c = connect(@port)
      elapsed = c.wait_closed(within: 3)
      expect(elapsed).not_to be_nil, 'connection still open after 3s'
      expect(elapsed).to be_between(0.2, 2.0 * GatewaySpec::SLACK)
    end

    it 'closes an idle keep-alive connection silently after keepalive_timeout' do
      start_limited(keepalive_timeout: 0.3)
      c = connect(@port)
      c.request('GET', '/x')
      expect(c.read_response.status).to eq(200)
      elapsed = c.wait_closed(within: 3)
      expect(elapsed).not_to be_nil, 'idle connection still open after 3s'
      expect(elapsed).to be_between(0.2, 2.0 * GatewaySpec::SLACK)
      expect(c.pending).to eq('')
    end

    it 'answers 408 with Connection: close (RFC 9110 §15.5.9) and closes a connection whose body stalls, after body_timeout' do
      start_limited(body_timeout: 0.3)
      c = connect(@port)
      c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n012")
      elapsed = c.wait_closed(within: 3)
      expect(elapsed).not_to be_nil, 'connection still open after 3s'
      expect(elapsed).to be_between(0.2, 2.0 * GatewaySpec::SLACK)
      expect(c.pending).to start_with("HTTP/1.1 408 Request Timeout\r\n").and include("\r\nConnection: close\r\n")
    end

    it 'gives up on a client that does not read its response, after send_timeout' do
      start_limited(send_timeout: 0.3)
      c = connect(@port, rcvbuf: 4096)
      c.request('GET', '/big')
      # The client stalls (the behaviour under test) longer than send_timeout...
      sleep 1.0
      # ...then drains: it gets what the kernel buffered, then the close.
      expect(c.wait_closed(within: 10)).not_to be_nil
      expect(c.pending.bytesize).to be < 16 * 1024 * 1024
    end
  end

  describe 'malformed and unsupported requests' do
    before(:each) { start_limited }

    it 'answers a malformed request with 400 and Connection: close, then closes' do
      c = connect(@port)
      c.write("GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n")
      r = c.read_response
      expect(r.status).to eq(400)
      expect(r['connection']).to match(/close/i)
      expect(c.closed?(within: 2)).to be(true)
    end

    it 'answers a garbage request line with 400 and closes' do
      c = connect(@port)
      c.write("\x01\x02 nonsense\r\n\r\n")
      r = c.read_response
      expect(r.status).to eq(400)
      expect(c.closed?(within: 2)).to be(true)
    end

    it 'answers GET / HTTP/2.0 with 505' do
      bytes = raw_request(@port, "GET / HTTP/2.0\r\nHost: x\r\n\r\n")
      expect(status_of(bytes)).to eq(505), bytes[0, 200].inspect
    end
  end
end
