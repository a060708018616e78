# ngx_mruby compatibility: handler code written for ngx_mruby runs unchanged
# where docs/ngx_mruby.md's compatibility table says so. Differences (on purpose):
# output after Nginx.return is sent, and an empty 200 is a valid response;
# where nginx answers with its own version or paths, the gateway answers
# with its own (Nginx.nginx_version is the gateway's version, Nginx::Server's
# document_root and path the config file's folder).
module Nginx
  # nginx's handler results (a rewrite or access phase that returns OK or
  # DECLINED lets the request go on).
  OK = 0
  ERROR = -1
  AGAIN = -2
  BUSY = -3
  DONE = -4
  DECLINED = -5
  ABORT = -6
  # ngx_mruby's flags are the Strings nginx's config uses.
  FALSE = "0"
  TRUE = "1"

  HTTP_CONTINUE = 100
  HTTP_SWITCHING_PROTOCOLS = 101
  HTTP_PROCESSING = 102
  HTTP_OK = 200
  HTTP_CREATED = 201
  HTTP_ACCEPTED = 202
  HTTP_NO_CONTENT = 204
  HTTP_PARTIAL_CONTENT = 206
  HTTP_SPECIAL_RESPONSE = 300
  HTTP_MOVED_PERMANENTLY = 301
  HTTP_MOVED_TEMPORARILY = 302
  HTTP_SEE_OTHER = 303
  HTTP_NOT_MODIFIED = 304
  HTTP_TEMPORARY_REDIRECT = 307
  HTTP_BAD_REQUEST = 400
  HTTP_UNAUTHORIZED = 401
  HTTP_FORBIDDEN = 403
  HTTP_NOT_FOUND = 404
  HTTP_NOT_ALLOWED = 405
  HTTP_REQUEST_TIME_OUT = 408
  HTTP_CONFLICT = 409
  HTTP_LENGTH_REQUIRED = 411
  HTTP_PRECONDITION_FAILED = 412
  HTTP_REQUEST_ENTITY_TOO_LARGE = 413
  HTTP_REQUEST_URI_TOO_LARGE = 414
  HTTP_UNSUPPORTED_MEDIA_TYPE = 415
  HTTP_RANGE_NOT_SATISFIABLE = 416
  HTTP_TOO_MANY_REQUESTS = 429
  HTTP_CLOSE = 444
  HTTP_NGINX_CODES = 494
  HTTP_REQUEST_HEADER_TOO_LARGE = 494
  HTTPS_CERT_ERROR = 495
  HTTPS_NO_CERT = 496
  HTTP_TO_HTTPS = 497
  HTTP_CLIENT_CLOSED_REQUEST = 499
  HTTP_INTERNAL_SERVER_ERROR = 500
  HTTP_NOT_IMPLEMENTED = 501
  HTTP_BAD_GATEWAY = 502
  HTTP_SERVICE_UNAVAILABLE = 503
  HTTP_GATEWAY_TIME_OUT = 504
  HTTP_INSUFFICIENT_STORAGE = 507

  LOG_STDERR = 0
  LOG_EMERG = 1
  LOG_ALERT = 2
  LOG_CRIT = 3
  LOG_ERR = 4
  LOG_WARN = 5
  LOG_NOTICE = 6
  LOG_INFO = 7
  LOG_DEBUG = 8

  # nginx's levels onto the error log's (emerg and alert are crit there).
  LOG_LEVELS = { 0 => :error, 1 => :crit, 2 => :crit, 3 => :crit, 4 => :error, 5 => :warn, 6 => :notice,
                 7 => :info, 8 => :debug }

  # Nginx.rputs, Nginx.echo and Nginx.return are natives (src/nginx.c).

  def self.errlogger(level, msg)
    Gateway.log(LOG_LEVELS[level] || :error, msg.to_s)
  end

  def self.log(level, msg)
    errlogger(level, msg)
  end

  # Nginx.status_code = 204: as Nginx.return 204.
  def self.status_code=(status)
    Gateway::Request.current.status = status
  end

  # The name ngx_mruby code prints and compares ("Hello #{module_name}").
  def self.module_name
    "ngx_mruby"
  end

  # Where a version is expected, the gateway's own.
  def self.nginx_version
    _gw_version
  end

  def self.server_version
    _gw_version
  end

  def self.module_version
    _gw_version
  end

  # Nginx.redirect "http://example.com/" (302), Nginx.redirect url, 301:
  # an external redirect (Location and the status). Nginx.redirect "/path"
  # (a path, no status): an internal one -- the path's location answers
  # this request, in-process (the same method, headers and body), and its
  # status, headers and body become this response.
  def self.redirect(url, status = nil)
    url = url.to_s
    req = Gateway::Request.current
    if status.nil? && url.start_with?("/")
      res = ::Async::HTTP.sub_request(url, method: req.method, headers: req.headers.to_h, body: req.body)
      req.status = res.status
      res.headers.each do |k, v|
        next if %w[content-length date connection transfer-encoding].include?(k)
        req.headers_out[k] = v
      end
      req.write(res.body) unless res.body.empty?
    else
      req.headers_out["Location"] = url
      req.status = status || HTTP_MOVED_TEMPORARILY
    end
    nil
  end

  # URL encoding helpers (Nginx::Utils-style).
  module Utils
    UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
    HEX = "0123456789abcdefABCDEF"

    def self.escape(s)
      out = ""
      s.to_s.each_byte do |b|
        c = b.chr
        out << (UNRESERVED.include?(c) ? c : "%%%02X" % b)
      end
      out
    end

    def self.unescape(s)
      s = s.to_s
      return s unless s.include?("%") || s.include?("+")
      out = ""
      i = 0
      while i < s.size
        c = s[i]
        h = s[i + 1, 2]
        if c == "%" && h && h.size == 2 && HEX.include?(h[0]) && HEX.include?(h[1])
          out << h.to_i(16).chr
          i += 3
        else
          out << (c == "+" ? " " : c)
          i += 1
        end
      end
      out
    end

    # {"a" => "1", b: 2} -> "a=1&b=2" (keys and values percent-encoded).
    def self.encode_parameters(h)
      h.map { |k, v| "#{escape(k)}=#{escape(v)}" }.join("&")
    end

    # "a=1&b=&c" -> {"a" => "1", "b" => "", "c" => ""} (decoded; in order).
    def self.decode_parameters(s)
      h = {}
      s.to_s.split("&").each do |pair|
        next if pair.empty?
        k, v = pair.split("=", 2)
        h[unescape(k)] = unescape(v || "")
      end
      h
    end
  end

  # Nginx::Request.new is the current request (a Gateway::Request).
  class Request
    def self.new
      Gateway::Request.current
    end
  end

  class Headers_in
    def self.new
      Gateway::Request.current.headers
    end
  end

  class Headers_out
    def self.new
      Gateway::Request.current.headers_out
    end
  end

  # The client connection's addresses.
  class Connection
    def initialize
      @a = Nginx._gw_addresses
    end

    def remote_ip
      @a[0]
    end

    def remote_port
      @a[1]
    end

    def local_ip
      @a[2]
    end

    def local_port
      @a[3]
    end
  end

  # The TLS handshake being decided, inside `tls: { on_handshake: ->(ssl) { ... } }`
  # (the hook's argument, or Nginx::SSL.new there as in ngx_mruby's
  # mruby_ssl_handshake_handler). A path is loaded once per worker; *_data
  # takes PEM text. Outside the hook every method raises.
  class SSL
    # The SNI name, "" when the client sent none (as ngx_mruby).
    def servername
      SSL._gw_servername || ""
    end

    # The local port the client connected to.
    def local_port
      SSL._gw_info(0)
    end

    # The protocol version being negotiated: "TLSv1.2", "TLSv1.3".
    def tls_version
      SSL._gw_info(1)
    end

    # Nginx.errlogger, with nginx's " while SSL handshaking, client: ADDR".
    def self.errlogger(level, msg)
      Nginx.errlogger(level, "#{msg} while SSL handshaking, client: #{_gw_info(2)}")
    end

    def certificate=(path)
      SSL._gw_set(0, path)
    end

    def certificate_key=(path)
      SSL._gw_set(1, path)
    end

    def certificate_data=(pem)
      SSL._gw_set(2, pem)
    end

    def certificate_key_data=(pem)
      SSL._gw_set(3, pem)
    end
  end

  # The gateway has no document root: both are the config file's folder.
  class Server
    def document_root
      Nginx._gw_config_dir
    end

    def path
      Nginx._gw_config_dir
    end
  end

  # Body filter API: inside a body_filter, the response body being filtered.
  class Filter
    def initialize
      @req = Gateway::Request.current
    end

    def body
      @req._response_body
    end

    def body=(s)
      @req._replace_response_body(s.to_s)
    end

    alias output body
    alias output= body=
  end

  # An upstream group of this worker: u.server = "host:port" replaces its
  # first server for the requests that follow (in this worker only).
  class Upstream
    def initialize(name)
      @name = name.to_s
      Nginx._gw_upstream(@name) # raises for an unknown group
    end

    def server
      Nginx._gw_upstream(@name)[0]
    end

    def server=(addr)
      Nginx._gw_upstream_set_server(@name, addr.to_s)
    end

    def keepalive_cache
      Nginx._gw_upstream(@name)[1]
    end
  end

  # nginx's variables of the current request: var.host, var.arg_id,
  # var.http_user_agent, var.request_uri... (nil when unset or empty), and
  # user variables: var.set("name", v) or var.name = v, read back later in
  # the same request (as Strings, like nginx's).
  class Var
    def initialize(req = nil)
      @req = req || Gateway::Request.current
    end

    def get(name)
      name = name.to_s
      vars = @req._nginx_vars
      v = vars.key?(name) ? vars[name] : builtin(name)
      v.nil? || v == "" ? nil : v
    end
    alias [] get

    def set(name, value)
      @req._nginx_vars[name.to_s] = value.nil? ? nil : value.to_s
    end
    alias []= set

    def exist?(name)
      !get(name).nil?
    end

    def method_missing(name, *args)
      n = name.to_s
      if n.end_with?("=") && args.size == 1
        set(n[0..-2], args[0])
      elsif args.empty?
        get(n)
      else
        super
      end
    end

    def respond_to_missing?(_name, _all = false)
      true
    end

    private

    def builtin(name)
      r = @req
      case name
      when "host" then (r.hostname || Nginx._gw_addresses[2]).to_s.downcase
      when "uri", "document_uri" then r.uri
      when "args", "query_string" then r.query
      when "is_args" then r.query.empty? ? "" : "?"
      when "request_method" then r.method
      when "request_uri" then r.unparsed_uri
      when "request" then "#{r.method} #{r.unparsed_uri} #{r.http_version}"
      when "server_protocol" then r.http_version
      when "scheme" then r.scheme
      when "https" then r.tls? ? "on" : ""
      when "remote_addr" then r.remote_addr
      when "remote_port" then Nginx._gw_addresses[1].to_s
      when "server_addr" then Nginx._gw_addresses[2]
      when "server_port" then Nginx._gw_addresses[3].to_s
      when "server_name" then r.hostname
      when "hostname" then Nginx._gw_hostname
      when "content_length" then r.headers["content-length"]
      when "content_type" then r.headers["content-type"]
      when "request_body" then r.body
      when "pid" then Gateway.pid.to_s
      when "nginx_version" then Nginx.nginx_version
      when "status" then r.status.to_s
      else
        if name.start_with?("arg_")
          key = name[4..-1]
          r.query.split("&").each do |pair|
            k, v = pair.split("=", 2)
            return v || "" if k == key
          end
          nil
        elsif name.start_with?("http_")
          r.headers[name[5..-1].tr("_", "-")]
        elsif name.start_with?("sent_http_")
          v = r.headers_out[name[10..-1].tr("_", "-")]
          v.is_a?(Array) ? v.join(", ") : v
        elsif name.start_with?("cookie_")
          key = name[7..-1]
          (r.headers["cookie"] || "").split(";").each do |c|
            k, v = c.strip.split("=", 2)
            return v if k == key
          end
          nil
        end
      end
    end
  end
end

# Per-request storage: Userdata.new.x = 1, read later in the same request
# (another phase, a filter). Outside a request, one store for the worker.
#
# In a tls on_handshake hook: the connection's store, which each request on
# that connection starts from (a copy).
class Userdata
  def self.new(_key = nil)
    return Nginx::SSL._gw_userdata if Nginx::SSL._gw_in_handshake?
    req = Gateway::Request.current rescue nil
    req ? req._userdata : (@worker ||= _make)
  end

  def self._make(from = nil)
    u = allocate
    u.instance_variable_set(:@h, from ? from._h.dup : {})
    u
  end

  def _h
    @h
  end

  def method_missing(name, *args)
    n = name.to_s
    if n.end_with?("=") && args.size == 1
      @h[n[0..-2]] = args[0]
    elsif args.empty?
      @h[n]
    else
      super
    end
  end

  def respond_to_missing?(_name, _all = false)
    true
  end
end

module Kernel
  # ngx_mruby (nginx) and mod_mruby (Apache) share code through these.
  def server_name
    "NGINX"
  end

  def get_server_class
    Nginx
  end
end

module Gateway
  # ngx_mruby's request methods, on the gateway's request.
  class Request
    def var
      @_nginx_var ||= Nginx::Var.new(self)
    end

    def _nginx_vars
      @_nginx_vars ||= {}
    end

    def _userdata
      @_userdata ||= Userdata._make(Nginx._gw_conn_userdata) # what its TLS handshake kept, if any
    end

    # The path, percent-decoded (nginx's $uri).
    def uri
      p = path
      p.include?("%") ? Nginx::Utils.unescape(p.gsub("+", "%2B")) : p
    end

    # r.uri = "/new": the path from now on (later phases, proxy_pass).
    def uri=(p)
      @_unparsed_uri ||= target
      q = query
      _set_target(q.empty? ? p.to_s : "#{p}?#{q}")
    end

    # The request-target as received.
    def unparsed_uri
      @_unparsed_uri || target
    end

    def args=(q)
      @_unparsed_uri ||= target
      q = q.to_s
      _set_target(q.empty? ? path : "#{path}?#{q}")
    end

    def uri_args
      Nginx::Utils.decode_parameters(query)
    end

    def uri_args=(h)
      self.args = Nginx::Utils.encode_parameters(h)
    end

    def post_args
      Nginx::Utils.decode_parameters(body)
    end

    # The body is read before a handler runs: read_body has nothing to do.
    def read_body
      nil
    end

    def get_body
      b = body
      b.empty? ? nil : b
    end

    def content_type=(v)
      headers_out["Content-Type"] = v
    end

    def content_type
      headers_out["Content-Type"]
    end

    def authority
      headers["host"]
    end

    alias protocol http_version
  end

  class Headers
    # []= nil deletes the field (ngx_mruby); an Array keeps several values.
    def []=(name, value)
      if value.nil?
        @h.delete(name.to_s.downcase)
      else
        @h[name.to_s.downcase] = value
      end
    end

    # All fields as a Hash, names in their usual capitalisation
    # ("Content-Type": the gateway keeps request header names lower-case).
    def all
      h = {}
      @h.each { |k, v| h[k.split("-").map(&:capitalize).join("-")] = v }
      h
    end

    def user_agent
      self["user-agent"]
    end
  end

  class ResponseHeaders
    # One String, or an Array when the field was set several times.
    def [](name)
      list = @req._get_headers(name.to_s)
      list.size > 1 ? list : list[0]
    end

    # Replaces any earlier value; an Array sends one field per element, nil
    # removes the field.
    def []=(name, value)
      @req._delete_header(name.to_s)
      if value.is_a?(Array)
        value.each { |v| @req._set_header(name, v) }
      elsif !value.nil?
        @req._set_header(name, value)
      end
    end

    # All fields as a Hash, names as they were set.
    def all
      h = {}
      @req._response_header_pairs.each do |k, v|
        h[k] = h.key?(k) ? [h[k], v].flatten : v
      end
      h
    end
  end
end

module Nginx
  # ngx_mruby's non-blocking calls. Nginx::Async.sleep takes milliseconds.
  module Async
    INTEGER = ::Integer
    EXCEPTION = ::Exception

    # (`C === x`: is_a? without its argument parsing, once per request.)
    def self.sleep(ms)
      unless INTEGER === ms && ms > 0
        raise ArgumentError, "Nginx::Async.sleep: milliseconds must be an Integer > 0, got #{ms.inspect}"
      end
      v = ::Async._gw_sleep(ms / 1000.0) # Async.sleep without its Numeric check: arms, parks
      raise v if EXCEPTION === v
      nil
    end

    module HTTP
      # sub_request(path, args = nil): args is the sub-request's query string,
      # or a Hash sent URL-encoded. A path no location matches answers 404
      # with an empty body, and the request's own status becomes 404 unless
      # its handler sets one or writes output (as in ngx_mruby).
      # Once per request: constants found in this first scope, natives
      # called on self (_gw_no_location?, last_response: src/nginx.c), and
      # Task#join's native called without its Ruby frame.
      HASH = ::Hash
      ASYNC_HTTP = ::Async::HTTP
      EXCEPTION = ::Exception

      def self.sub_request(path, args = nil)
        args = Nginx::Utils.encode_parameters(args) if HASH === args
        path = "#{path}#{path.include?('?') ? '&' : '?'}#{args}" if args && !args.to_s.empty?
        http = ASYNC_HTTP
        if _gw_no_location?(path)
          req = Gateway::Request.current
          req._default_status = 404
          res = ::Async::HTTP::Response.allocate
          res.instance_variable_set(:@status, 404)
          res.instance_variable_set(:@body, "")
          res.instance_variable_set(:@_raw, "")
          http._gw_set_last_response(res)
          return nil
        end
        r = http._gw_start(path, http::GET, nil, nil, nil)._gw_join # Task#join
        raise r if EXCEPTION === r
        http._gw_set_last_response(r)
        nil
      end
    end
  end
end
