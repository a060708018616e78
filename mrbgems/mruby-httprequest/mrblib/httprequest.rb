# HttpRequest - the deliberately BLOCKING HTTP/1.1 client, API-compatible
# with mruby-httprequest as ngx_mruby users know it:
#
#   HttpRequest.new.get("http://127.0.0.1:48080/mruby")["body"]
#
# Every call resolves, connects, sends and waits for the whole response on
# the worker's own thread: while it waits, the worker's event loop serves
# nobody. That is the point of this gem (compare Async::HTTP). A deadline
# (default 5 s for connect + send + receive) keeps a dead upstream from
# wedging the worker for ever; name resolution is plain getaddrinfo and
# cannot be cut short.
#
# The wire work and HTTP/1.x response parsing (llhttp) are in
# src/httprequest.c: HttpRequest._exchange and HttpRequest._parse.
class HttpRequest
  DEFAULT_TIMEOUT = 5.0
  DEFAULT_MAX_RESPONSE_SIZE = 64 * 1024 * 1024
  DEFAULT_USER_AGENT = "mruby-httprequest (gateway; blocking)"
  DEFAULT_ACCEPT = "*/*"
  SEP = "\r\n"

  # Methods whose request carries a body: sent with Content-Length even when
  # the body is empty, since many servers answer 411 otherwise.
  BODY_METHODS = ["POST", "PUT", "PATCH"]

  def self.__gateway_error(name)
    return nil unless Object.const_defined?(:Gateway)
    gw = Object.const_get(:Gateway)
    return nil unless gw.const_defined?(name, false)
    c = gw.const_get(name)
    (c.is_a?(Class) && c <= StandardError) ? c : nil
  end

  # Everything that goes wrong (bad response, refused connection, unknown
  # host, response too large). A Gateway::UpstreamError in the gateway.
  class Error < (HttpRequest.__gateway_error(:UpstreamError) || StandardError)
  end

  # No complete response within the timeout. A Gateway::TimeoutError in the
  # gateway (so `rescue Gateway::Error` catches both); outside it, an
  # HttpRequest::Error.
  class TimeoutError < (HttpRequest.__gateway_error(:TimeoutError) || HttpRequest::Error)
  end

  # ------------------------------------------------------------------------
  # URL: http://host[:port][/path][?query][#fragment]
  class URL
    attr_reader :scheme, :host, :port, :path, :query, :fragment

    # mruby-http's HTTP::Parser#parse_url called it schema.
    def schema
      @scheme
    end

    def initialize(scheme, host, port, path, query = nil, fragment = nil)
      @scheme = scheme
      @host = host
      @port = port
      @path = path
      @query = query
      @fragment = fragment
    end

    # The request-target: path plus "?query".
    def request_uri
      @query ? "#{@path}?#{@query}" : @path
    end

    # The Host header value: "[v6]" bracketed, ":port" unless 80.
    def host_header
      h = @host.include?(":") ? "[#{@host}]" : @host
      @port == 80 ? h : "#{h}:#{@port}"
    end

    def to_s
      "#{@scheme}://#{host_header}#{request_uri}"
    end

    def self.bad(url, why)
      raise ArgumentError, "HttpRequest: #{why}: #{url.inspect}"
    end

    # True when the string has a space, a control character or DEL.
    def self.unsafe?(s)
      s.bytes.each { |b| return true if b <= 0x20 || b == 0x7f }
      false
    end

    def self.parse(url)
      return url if url.is_a?(URL)
      bad(url, "the URL must be a String") unless url.is_a?(String)
      s = url.strip
      sep = s.index("://")
      bad(url, "not an absolute http:// URL") unless sep
      scheme = s[0, sep].downcase
      if scheme == "https"
        raise ArgumentError, "HttpRequest: https is not supported (this client speaks plain http:// only): #{url}"
      end
      bad(url, "unsupported URL scheme '#{scheme}' (only http:// is supported)") unless scheme == "http"
      rest = s[(sep + 3)..-1] || ""

      fragment = nil
      i = rest.index("#")
      if i
        fragment = rest[(i + 1)..-1]
        rest = rest[0, i]
      end

      # The authority ends at the first "/" or "?".
      cut = rest.length
      j = rest.index("/")
      cut = j if j && j < cut
      j = rest.index("?")
      cut = j if j && j < cut
      authority = rest[0, cut]
      target = rest[cut..-1] || ""

      bad(url, "user:password@ in the URL is not supported") if authority.include?("@")
      hp = Gateway.split_host_port(authority)
      unless hp # only a "[...": the bracketed forms
        bad(url, authority.index("]") ? "garbage after the [IPv6] address" : "unterminated [IPv6] address")
      end
      host, port_str = hp
      bad(url, "IPv6 addresses must be in brackets") if !authority.start_with?("[") && host.include?(":")
      bad(url, "no host in the URL") if host.nil? || host.empty?
      bad(url, "the host has a space or control character") if unsafe?(host)

      port = 80
      if port_str && !port_str.empty?
        port_str.bytes.each { |b| bad(url, "the port is not a number") unless b >= 0x30 && b <= 0x39 }
        bad(url, "the port is out of range") if port_str.length > 5
        port = port_str.to_i
        bad(url, "the port is out of range") if port < 1 || port > 65535
      end

      query = nil
      q = target.index("?")
      if q
        query = target[(q + 1)..-1]
        path = target[0, q]
      else
        path = target
      end
      path = "/" if path.empty?
      if unsafe?(path) || (query && unsafe?(query))
        bad(url, "the path or query has a space or control character (percent-encode it)")
      end
      URL.new(scheme, host, port, path, query, fragment)
    end
  end

  # ------------------------------------------------------------------------
  # Response, as mruby-simplehttp's SimpleHttpResponse: res["body"],
  # res["code"] (Integer), res["status"] ("200 OK"), res["header"] (the raw
  # header block), res["content-type"] (any header, by lower-case name), and
  # the same as methods. res["headers"] / res.headers: Hash of lower-case
  # names; a header sent more than once gives an Array of its values.
  class Response
    attr_reader :http_version, :reason

    # raw: the response bytes as they came off the wire (the end of the
    # string counts as the end of the connection), or the parts array
    # HttpRequest._exchange returns. head: it answers a HEAD request.
    def initialize(raw, head = false, max_size = HttpRequest::DEFAULT_MAX_RESPONSE_SIZE)
      parts = raw.is_a?(Array) ? raw : HttpRequest._parse(raw.to_s, head ? true : false, max_size)
      major, minor, code, reason, fields, body = parts
      @http_version = "#{major}.#{minor}"
      @reason = reason
      @headers = {}
      lines = ["HTTP/#{@http_version} #{code} #{reason}"]
      fields.each do |name, value|
        lines << "#{name}: #{value}"
        k = name.downcase
        if @headers.key?(k)
          old = @headers[k]
          if old.is_a?(Array)
            old << value
          else
            @headers[k] = [old, value]
          end
        else
          @headers[k] = value
        end
      end
      @response = {}
      @headers.each { |k, v| @response[k] = v }
      # The reserved keys win over a header of the same name.
      @response["header"] = lines.join(SEP)
      @response["headers"] = @headers
      @response["body"] = body
      @response["status"] = reason.empty? ? code.to_s : "#{code} #{reason}"
      @response["code"] = code
    end

    def [](key)
      @response[key.to_s.downcase]
    end

    def []=(key, value)
      @response[key.to_s.downcase] = value
    end

    def header; @response["header"]; end
    def headers; @headers; end
    def body; @response["body"]; end
    def status; @response["status"]; end
    def code; @response["code"]; end
    def date; @response["date"]; end
    def content_type; @response["content-type"]; end
    def content_length; @response["content-length"]; end

    def each(&block)
      @response.each { |k, v| block.call(k, v) } if block
      self
    end

    def each_name(&block)
      @response.each_key { |k| block.call(k) } if block
      self
    end

    def to_h
      @response.dup
    end

    def inspect
      b = body
      "#<HttpRequest::Response #{status.inspect} headers=#{@headers.size} body=#{b ? b.bytesize : 0} bytes>"
    end
    alias to_s inspect
  end

  # ------------------------------------------------------------------------
  attr_reader :timeout, :max_response_size
  attr_accessor :user_agent

  # HttpRequest.new                       # 5 s, 64 MiB, default User-Agent
  # HttpRequest.new(timeout: 2.0)         # seconds, for connect + send + receive
  # HttpRequest.new(max_response_size: 1024 * 1024, user_agent: "x")
  def initialize(options = nil, **kw)
    @timeout = DEFAULT_TIMEOUT
    @max_response_size = DEFAULT_MAX_RESPONSE_SIZE
    @user_agent = DEFAULT_USER_AGENT
    opts = {}
    if options
      raise ArgumentError, "HttpRequest.new takes options as a Hash" unless options.is_a?(Hash)
      options.each { |k, v| opts[k.to_s] = v }
    end
    kw.each { |k, v| opts[k.to_s] = v }
    opts.each do |k, v|
      case k
      when "timeout" then self.timeout = v
      when "max_response_size" then self.max_response_size = v
      when "user_agent" then @user_agent = v
      else raise ArgumentError, "HttpRequest.new: unknown option #{k}"
      end
    end
  end

  def timeout=(secs)
    unless secs.is_a?(Numeric) && secs > 0 && secs <= 86400
      raise ArgumentError, "HttpRequest: timeout must be a positive number of seconds, got #{secs.inspect}"
    end
    @timeout = secs.to_f
  end

  def max_response_size=(bytes)
    unless bytes.is_a?(Integer) && bytes > 0
      raise ArgumentError, "HttpRequest: max_response_size must be a positive Integer, got #{bytes.inspect}"
    end
    @max_response_size = bytes
  end

  # The original's signatures: get/post/put take a body, head/delete do not.
  def get(url, body = nil, headers = {})
    request("GET", url, body, headers)
  end

  def head(url, headers = {})
    request("HEAD", url, nil, headers)
  end

  def post(url, body = nil, headers = {})
    request("POST", url, body, headers)
  end

  def put(url, body = nil, headers = {})
    request("PUT", url, body, headers)
  end

  def patch(url, body = nil, headers = {})
    request("PATCH", url, body, headers)
  end

  def delete(url, headers = {})
    request("DELETE", url, nil, headers)
  end

  # One blocking exchange on a fresh connection; returns a Response.
  # body: String, or a Hash sent form-encoded (as the original did).
  def request(method, url, body = nil, headers = {})
    u = URL.parse(url)
    bytes = build_request(method, u, body, headers)
    head = method.to_s.upcase == "HEAD"
    Response.new(HttpRequest._exchange(u.host, u.port, bytes, @timeout, @max_response_size, head))
  end

  # The request bytes, exactly as sent: request line, Host first, the
  # caller's headers, then User-Agent / Accept unless given, Content-Length,
  # Connection: close; then the body.
  def build_request(method, url, body = nil, headers = {})
    u = URL.parse(url)
    m = method.to_s.upcase
    raise ArgumentError, "HttpRequest: bad method #{method.inspect}" unless token?(m)
    if body.is_a?(Hash)
      form = true
      body = encode_parameters(body)
    elsif !body.nil?
      body = body.to_s
    end
    headers ||= {}
    raise ArgumentError, "HttpRequest: headers must be a Hash" unless headers.is_a?(Hash)

    given = {}
    lines = []
    headers.each do |k, v|
      name = k.to_s
      raise ArgumentError, "HttpRequest: bad header name #{name.inspect}" unless token?(name)
      lname = name.downcase
      # Framing is ours: one request per connection, a length we computed.
      next if lname == "connection" || lname == "content-length" || lname == "transfer-encoding"
      given[lname] = true
      (v.is_a?(Array) ? v : [v]).each do |val|
        val = val.to_s
        if val.include?("\r") || val.include?("\n") || val.include?("\0")
          raise ArgumentError, "HttpRequest: header #{name} has a CR, LF or NUL in its value"
        end
        lines << "#{name}: #{val}"
      end
    end
    out = ["#{m} #{u.request_uri} HTTP/1.1"]
    out << "Host: #{u.host_header}" unless given["host"]
    out.concat(lines)
    out << "User-Agent: #{@user_agent}" unless given["user-agent"] || @user_agent.nil?
    out << "Accept: #{DEFAULT_ACCEPT}" unless given["accept"]
    if form && !given["content-type"]
      out << "Content-Type: application/x-www-form-urlencoded"
    end
    if body
      out << "Content-Length: #{body.bytesize}"
    elsif BODY_METHODS.include?(m)
      out << "Content-Length: 0"
    end
    out << "Connection: close"
    out.join(SEP) + SEP + SEP + (body || "")
  end

  # "a=1&b=x%20y" from a Hash (or ["a", "b"] -> "a&b"), as the original.
  def encode_parameters(params, delimiter = "&", quote = nil)
    q = quote.to_s
    list = if params.is_a?(Hash)
      params.map { |k, v| "#{escape(k)}=#{q}#{escape(v)}#{q}" }
    else
      params.map { |v| escape(v) }
    end
    delimiter ? list.join(delimiter) : list
  end

  # Percent-encodes every byte but the unreserved ones (A-Z a-z 0-9 - . _ ~).
  def escape(str)
    out = ""
    str.to_s.bytes.each do |b|
      if (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) ||
         b == 0x2d || b == 0x2e || b == 0x5f || b == 0x7e
        out << b.chr
      else
        out << "%" << HEX[b >> 4] << HEX[b & 15]
      end
    end
    out
  end

  HEX = "0123456789ABCDEF"
  TOKEN_PUNCT = '!#$%&\'*+-.^_`|~'

  private

  # RFC 9110 token: what a method or a header name may be.
  def token?(s)
    return false if s.empty?
    s.bytes.each do |b|
      next if (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39)
      next if TOKEN_PUNCT.include?(b.chr)
      return false
    end
    true
  end
end
