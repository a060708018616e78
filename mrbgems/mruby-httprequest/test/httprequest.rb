# mruby-level tests of HttpRequest: URL parsing, request building, response
# parsing of canned bytes, and the two network failures one process can
# stage against itself on 127.0.0.1 (a blocking client cannot talk to a
# server running in the same thread): connection refused, and a listener that
# never answers (the kernel completes the handshake from the listen backlog;
# nobody ever reads or writes, so the receive times out).

def hr_crlf(s)
  s.split("\n", -1).join("\r\n")
end

def hr_parse(raw, head = false, max = HttpRequest::DEFAULT_MAX_RESPONSE_SIZE)
  HttpRequest::Response.new(raw, head, max)
end

def hr_raises_message(klass)
  yield
  nil
rescue klass => e
  e.message
end

# -- URL ----------------------------------------------------------------------

assert('HttpRequest parses a URL with a port') do
  u = HttpRequest::URL.parse("http://127.0.0.1:48080/mruby")
  assert_equal "http", u.scheme
  assert_equal "http", u.schema
  assert_equal "127.0.0.1", u.host
  assert_equal 48080, u.port
  assert_equal "/mruby", u.path
  assert_nil u.query
  assert_equal "/mruby", u.request_uri
  assert_equal "127.0.0.1:48080", u.host_header
end

assert('HttpRequest URL defaults: port 80, path /') do
  u = HttpRequest::URL.parse("http://example.com")
  assert_equal 80, u.port
  assert_equal "/", u.path
  assert_equal "example.com", u.host_header
  u = HttpRequest::URL.parse("HTTP://Example.com:/")
  assert_equal 80, u.port
  assert_equal "Example.com", u.host
end

assert('HttpRequest URL query and fragment') do
  u = HttpRequest::URL.parse("http://h:81/a/b?x=1&y=2#frag")
  assert_equal "/a/b", u.path
  assert_equal "x=1&y=2", u.query
  assert_equal "frag", u.fragment
  assert_equal "/a/b?x=1&y=2", u.request_uri
  u = HttpRequest::URL.parse("http://h?q=1")
  assert_equal "/", u.path
  assert_equal "q=1", u.query
  assert_equal "/?q=1", u.request_uri
  assert_equal "http://h:81/a/b?x=1&y=2", HttpRequest::URL.parse("http://h:81/a/b?x=1&y=2").to_s
end

assert('HttpRequest URL with a bracketed IPv6 address') do
  u = HttpRequest::URL.parse("http://[::1]:8080/x")
  assert_equal "::1", u.host
  assert_equal 8080, u.port
  assert_equal "[::1]:8080", u.host_header
  assert_equal "[::1]", HttpRequest::URL.parse("http://[::1]/").host_header
end

assert('HttpRequest refuses https with a clear ArgumentError') do
  msg = hr_raises_message(ArgumentError) { HttpRequest::URL.parse("https://127.0.0.1/") }
  assert_include msg, "https is not supported"
  assert_raise(ArgumentError) { HttpRequest.new.get("https://127.0.0.1:48080/mruby") }
end

assert('HttpRequest refuses malformed URLs') do
  ["ftp://h/", "127.0.0.1/x", "http://", "http:///path", "http://h:0/", "http://h:65536/",
   "http://h:8o/", "http://h:123456/", "http://u:p@h/", "http://[::1/", "http://::1/",
   "http://h/a b", "http://h/a\r\nX: y", "http://h/?a\tb"].each do |bad|
    assert_raise(ArgumentError) { HttpRequest::URL.parse(bad) }
  end
  assert_raise(ArgumentError) { HttpRequest::URL.parse(nil) }
end

# -- request bytes --------------------------------------------------------------

assert('HttpRequest builds a GET') do
  req = HttpRequest.new.build_request("GET", "http://127.0.0.1:48080/mruby?a=1")
  lines = req.split("\r\n")
  assert_equal "GET /mruby?a=1 HTTP/1.1", lines[0]
  assert_equal "Host: 127.0.0.1:48080", lines[1]
  assert_include lines, "Connection: close"
  assert_include lines, "Accept: */*"
  assert_include lines, "User-Agent: #{HttpRequest::DEFAULT_USER_AGENT}"
  assert_false req.include?("Content-Length")
  assert_equal "\r\n\r\n", req[-4, 4]
  assert_equal "Host: example.com", HttpRequest.new.build_request("get", "http://example.com/").split("\r\n")[1]
end

assert('HttpRequest builds a POST with Content-Length in bytes') do
  body = "caf\xC3\xA9"
  req = HttpRequest.new.build_request("post", "http://127.0.0.1/p", body)
  head, sent = req.split("\r\n\r\n", 2)
  assert_equal "POST /p HTTP/1.1", head.split("\r\n")[0]
  assert_include head.split("\r\n"), "Content-Length: 5"
  assert_equal body, sent
  assert_include HttpRequest.new.build_request("POST", "http://h/").split("\r\n"), "Content-Length: 0"
  assert_include HttpRequest.new.build_request("PATCH", "http://h/", "").split("\r\n"), "Content-Length: 0"
  assert_false HttpRequest.new.build_request("DELETE", "http://h/").include?("Content-Length")
end

assert('HttpRequest form-encodes a Hash body') do
  req = HttpRequest.new.build_request("POST", "http://h/", { "a" => 1, "b c" => "x/y&z" })
  head, sent = req.split("\r\n\r\n", 2)
  assert_equal "a=1&b%20c=x%2Fy%26z", sent
  assert_include head.split("\r\n"), "Content-Type: application/x-www-form-urlencoded"
  assert_include head.split("\r\n"), "Content-Length: #{sent.bytesize}"
end

assert('HttpRequest caller headers: override, repeat, framing stays ours') do
  req = HttpRequest.new.build_request("GET", "http://h:8080/", nil,
                                      { "Host" => "other", "User-Agent" => "ua/1", "X-Many" => ["1", "2"],
                                        "Connection" => "keep-alive", "content-length" => "99", :accept => "text/plain" })
  lines = req.split("\r\n")
  assert_include lines, "Host: other"
  assert_false lines.include?("Host: h:8080")
  assert_include lines, "User-Agent: ua/1"
  assert_include lines, "X-Many: 1"
  assert_include lines, "X-Many: 2"
  assert_include lines, "accept: text/plain"
  assert_false lines.include?("Accept: */*")
  assert_include lines, "Connection: close"
  assert_false lines.include?("Connection: keep-alive")
  assert_false req.include?("99")
end

assert('HttpRequest refuses header injection and bad names') do
  hr = HttpRequest.new
  assert_raise(ArgumentError) { hr.build_request("GET", "http://h/", nil, { "X" => "a\r\nEvil: 1" }) }
  assert_raise(ArgumentError) { hr.build_request("GET", "http://h/", nil, { "X" => "a\nb" }) }
  assert_raise(ArgumentError) { hr.build_request("GET", "http://h/", nil, { "Bad Name" => "v" }) }
  assert_raise(ArgumentError) { hr.build_request("GET", "http://h/", nil, { "" => "v" }) }
  assert_raise(ArgumentError) { hr.build_request("GE T", "http://h/") }
end

assert('HttpRequest#escape and #encode_parameters') do
  hr = HttpRequest.new
  assert_equal "a-b.c_d~e", hr.escape("a-b.c_d~e")
  assert_equal "%20%2B%3D%26%C3%A9", hr.escape(" +=&\xC3\xA9")
  assert_equal "k=v&n=1", hr.encode_parameters({ "k" => "v", :n => 1 })
  assert_equal "a&b%20c", hr.encode_parameters(["a", "b c"])
end

# -- options --------------------------------------------------------------------

assert('HttpRequest options: timeout, max_response_size, user_agent') do
  assert_equal 5.0, HttpRequest.new.timeout
  assert_equal 64 * 1024 * 1024, HttpRequest.new.max_response_size
  assert_equal 2.0, HttpRequest.new(timeout: 2).timeout
  assert_equal 0.5, HttpRequest.new({ "timeout" => 0.5 }).timeout
  hr = HttpRequest.new(max_response_size: 1024, user_agent: "me")
  assert_equal 1024, hr.max_response_size
  assert_include hr.build_request("GET", "http://h/").split("\r\n"), "User-Agent: me"
  hr.timeout = 1.5
  assert_equal 1.5, hr.timeout
  assert_raise(ArgumentError) { HttpRequest.new(timeout: 0) }
  assert_raise(ArgumentError) { HttpRequest.new(timeout: "5") }
  assert_raise(ArgumentError) { HttpRequest.new(max_response_size: -1) }
  assert_raise(ArgumentError) { HttpRequest.new(bogus: 1) }
end

assert('HttpRequest error classes') do
  assert_true HttpRequest::Error <= StandardError
  assert_true HttpRequest::TimeoutError <= StandardError
  if Object.const_defined?(:Gateway) && Gateway.const_defined?(:UpstreamError, false)
    assert_true HttpRequest::Error <= Gateway::UpstreamError
  end
  if Object.const_defined?(:Gateway) && Gateway.const_defined?(:TimeoutError, false)
    assert_true HttpRequest::TimeoutError <= Gateway::TimeoutError
  else
    assert_true HttpRequest::TimeoutError <= HttpRequest::Error
  end
end

# -- responses (canned bytes) -----------------------------------------------------

HR_OK = hr_crlf(<<EOS)
HTTP/1.1 200 OK
Date: Fri, 30 Mar 2018 16:55:37 GMT
Content-Type: text/html; charset=utf-8
Set-Cookie: a=1
Set-Cookie: b=2
Content-Length: 11

Hello World
EOS

assert('HttpRequest::Response with a Content-Length body') do
  res = hr_parse(HR_OK + "trailing junk is ignored")
  assert_equal "Hello World", res["body"]
  assert_equal "Hello World", res.body
  assert_equal 200, res["code"]
  assert_kind_of Integer, res.code
  assert_equal "200 OK", res.status
  assert_equal "200 OK", res["status"]
  assert_equal "OK", res.reason
  assert_equal "1.1", res.http_version
  assert_equal "text/html; charset=utf-8", res["content-type"]
  assert_equal "text/html; charset=utf-8", res["Content-Type"]
  assert_equal "text/html; charset=utf-8", res.content_type
  assert_equal "11", res.content_length
  assert_equal "Fri, 30 Mar 2018 16:55:37 GMT", res.date
  assert_kind_of Hash, res.headers
  assert_equal res.headers, res["headers"]
  assert_equal "11", res.headers["content-length"]
  assert_equal ["a=1", "b=2"], res.headers["set-cookie"]
  assert_equal "HTTP/1.1 200 OK", res.header.split("\r\n")[0]
  assert_include res.header.split("\r\n"), "Content-Length: 11"
  names = []
  res.each_name { |n| names << n }
  assert_include names, "body"
  assert_include names, "content-type"
  res["body"] = "changed"
  assert_equal "changed", res.body
end

assert('HttpRequest::Response with a chunked body') do
  raw = hr_crlf("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n4\nWiki\n5\npedia\nE\n in\n\nchunks.\n0\n\n")
  res = hr_parse(raw)
  assert_equal "Wikipedia in\r\n\r\nchunks.", res.body
  assert_equal "chunked", res["transfer-encoding"]
end

assert('HttpRequest::Response with a close-delimited body') do
  assert_equal "until close", hr_parse(hr_crlf("HTTP/1.0 200 OK\nContent-Type: text/plain\n\n") + "until close").body
  assert_equal "eof", hr_parse(hr_crlf("HTTP/1.1 200 OK\n\n") + "eof").body
  assert_equal "", hr_parse(hr_crlf("HTTP/1.1 200 OK\n\n")).body
end

assert('HttpRequest::Response to HEAD has no body') do
  res = hr_parse(hr_crlf("HTTP/1.1 200 OK\nContent-Length: 1234\n\n"), true)
  assert_equal 200, res.code
  assert_equal "", res.body
  assert_equal "1234", res["content-length"]
end

assert('HttpRequest::Response skips 1xx interim responses') do
  raw = hr_crlf("HTTP/1.1 100 Continue\n\nHTTP/1.1 103 Early Hints\nLink: </a.css>\n\n" \
                "HTTP/1.1 201 Created\nLocation: /x\nContent-Length: 2\n\nok")
  res = hr_parse(raw)
  assert_equal 201, res.code
  assert_equal "201 Created", res.status
  assert_equal "ok", res.body
  assert_equal "/x", res["location"]
  assert_nil res["link"]
end

assert('HttpRequest::Response: 204 and 304 have no body') do
  assert_equal "", hr_parse(hr_crlf("HTTP/1.1 204 No Content\n\n")).body
  assert_equal 304, hr_parse(hr_crlf("HTTP/1.1 304 Not Modified\nETag: \"x\"\n\n")).code
end

assert('HttpRequest::Response: a reserved key wins over a same-named header') do
  res = hr_parse(hr_crlf("HTTP/1.1 404 Not Found\nBody: header\nCode: 1\nContent-Length: 4\n\nnope"))
  assert_equal 404, res["code"]
  assert_equal "nope", res["body"]
  assert_equal "header", res.headers["body"]
end

assert('HttpRequest::Response refuses truncated or malformed responses') do
  assert_raise(HttpRequest::Error) { hr_parse(hr_crlf("HTTP/1.1 200 OK\nContent-Length: 10\n\n") + "short") }
  assert_raise(HttpRequest::Error) { hr_parse(hr_crlf("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n5\nab")) }
  assert_raise(HttpRequest::Error) { hr_parse(hr_crlf("HTTP/1.1 200 OK\nContent-Le")) }
  assert_raise(HttpRequest::Error) { hr_parse("SSH-2.0-OpenSSH_9.0\r\n") }
  assert_raise(HttpRequest::Error) { hr_parse("") }
  msg = hr_raises_message(HttpRequest::Error) { hr_parse(hr_crlf("HTTP/1.1 200 OK\nContent-Length: 10\n\nshort")) }
  assert_include msg, "HttpRequest: "
end

assert('HttpRequest::Response size guard') do
  big = hr_crlf("HTTP/1.1 200 OK\nContent-Length: 100\n\n") + ("x" * 100)
  assert_equal 100, hr_parse(big).body.bytesize
  msg = hr_raises_message(HttpRequest::Error) { hr_parse(big, false, 64) }
  assert_include msg, "exceeds the limit of 64 bytes"
end

# -- the network, against ourselves on 127.0.0.1 -----------------------------------

if Object.const_defined?(:TCPServer)
  assert('HttpRequest: connection refused is an HttpRequest::Error') do
    server = TCPServer.new("127.0.0.1", 0)
    port = server.local_address.ip_port
    server.close # nobody listens there now
    msg = hr_raises_message(HttpRequest::Error) { HttpRequest.new(timeout: 2).get("http://127.0.0.1:#{port}/mruby") }
    assert_equal "HttpRequest: connect to 127.0.0.1:#{port} failed: Connection refused", msg
  end

  assert('HttpRequest: an upstream that never answers times out, and says the worker was blocked') do
    server = TCPServer.new("127.0.0.1", 0) # listening: the connect succeeds, nobody answers
    port = server.local_address.ip_port
    begin
      t0 = Time.now
      msg = hr_raises_message(HttpRequest::TimeoutError) do
        HttpRequest.new(timeout: 0.3).get("http://127.0.0.1:#{port}/mruby")["body"]
      end
      elapsed = Time.now - t0
      assert_equal "HttpRequest: no response from 127.0.0.1:#{port} within 0.3s " \
                   "(this blocking call stalled the worker's event loop the whole time)", msg
      assert_true elapsed >= 0.29
      assert_true elapsed < 3.0
    ensure
      server.close
    end
  end
end
