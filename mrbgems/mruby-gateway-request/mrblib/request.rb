module Gateway
  # Header fields with lower-case names; lookups ignore case. (Not a Hash
  # subclass: mruby 3.1's VM reads h[k] of any Hash directly, bypassing an
  # overridden [].)
  class Headers
    include Enumerable

    def initialize(hash = {})
      @h = hash
    end

    def [](name)
      @h[name.to_s.downcase]
    end

    def []=(name, value)
      @h[name.to_s.downcase] = value
    end

    def fetch(name, *default, &blk)
      @h.fetch(name.to_s.downcase, *default, &blk)
    end

    def key?(name)
      @h.key?(name.to_s.downcase)
    end
    alias include? key?
    alias has_key? key?

    def delete(name)
      @h.delete(name.to_s.downcase)
    end

    def each(&blk)
      @h.each(&blk)
      self
    end

    def keys
      @h.keys
    end

    def size
      @h.size
    end

    def empty?
      @h.empty?
    end

    def to_h
      @h.dup
    end
    alias to_hash to_h

    def ==(other)
      other.respond_to?(:to_h) && @h == other.to_h
    end

    def inspect
      @h.inspect
    end
    alias to_s inspect
  end

  # Response headers of a request, as a small Hash-like view.
  class ResponseHeaders
    def initialize(req)
      @req = req
    end

    def [](name)
      @req._get_header(name.to_s)
    end

    # Replaces any earlier value of the same name.
    def []=(name, value)
      @req._delete_header(name.to_s)
      @req._set_header(name, value)
    end

    # Adds another field with this name (e.g. Set-Cookie).
    def add(name, value)
      @req._set_header(name, value)
    end

    def delete(name)
      @req._delete_header(name.to_s)
    end
  end

  # The request a handler block receives. Created by the core; reading
  # methods are natives (src/request.c).
  class Request
    def headers
      @headers ||= _headers
    end

    def headers_out
      @headers_out ||= ResponseHeaders.new(self)
    end

    # Answers in one go: req.respond(201, {"x-id" => "7"}, "made")
    def respond(status, headers = {}, body = nil)
      self.status = status
      headers.each { |k, v| headers_out[k] = v }
      write(body) if body
      self
    end

    # Hands the request to an upstream once the handler returns:
    #   req.proxy_pass "http://app"                        (an upstream group)
    #   req.proxy_pass "http://127.0.0.1:9001/v2"          (prefix replaced, as proxy_pass:)
    #   req.proxy_pass "http://app", hash_key: req.headers["x-user"]
    # Output written and a status set by the handler are discarded; the
    # upstream's response is sent, with the fields the handler set on
    # headers_out before (as nginx keeps headers_out; docs/filters.md).
    def proxy_pass(url, hash_key: nil)
      raise ArgumentError, "proxy_pass: url must be a String" unless url.is_a?(String)
      _proxy_pass(url, hash_key.nil? ? nil : hash_key.to_s)
    end

    # Hands the request to a FastCGI server once the handler returns:
    #   req.fastcgi_pass "php"                               (a protocol: :fastcgi group)
    #   req.fastcgi_pass "unix:/run/php/php8.2-fpm.sock", script_filename: "/srv/app/x.php"
    #   req.fastcgi_pass "php", split_path_info: %r{^(.+?\.php)(/.*)$}  (SCRIPT_NAME and PATH_INFO)
    # In a fastcgi: location its params:, script_filename: and split_path_info: apply too.
    def fastcgi_pass(target, script_filename: nil, split_path_info: nil)
      raise ArgumentError, "fastcgi_pass: target must be a String" unless target.is_a?(String)
      split = split_path_info.nil? ? nil : Gateway._split_path_info("fastcgi_pass", split_path_info)
      _fastcgi_pass(target, script_filename.nil? ? nil : script_filename.to_s)
      _fastcgi_split(split) if split
    end

    # Answers with a file once the handler returns, as a root:/alias:
    # location would (ETag, ranges, HEAD, caches):
    #   req.send_file "missing.html"       (beneath this location's root)
    #   req.send_file "/srv/files/a.pdf"   (absolute: opened as given)
    # A status set before (req.status = 404) is kept; output is discarded.
    def send_file(path)
      raise ArgumentError, "send_file: path must be a String" unless path.is_a?(String)
      _send_file(path)
    end

    # ngx_mruby-style names.
    alias uri path
    alias args query
    alias headers_in headers

    def hostname
      h = headers["host"]
      h ? h.split(":").first : nil
    end

    # A Rack-style [status, headers, body] becomes the response in the
    # native _rack (src/request.c); headers other than a Hash and bodies
    # other than a String or an Array come here, through their #each.
    def _rack_headers(hdrs)
      hdrs.each { |k, v| headers_out.add(k, v) }
    end

    def _rack_body(body)
      body.each { |part| write(part) }
    end
  end

  # The body of every handler fiber. The core starts it with the location's
  # block and the request, and turns the result into the response (a String
  # body, or Request#_rack for an Array); exceptions are logged, then a 500.
  #
  # Fibers are reused: after each job the runner reports it done and yields
  # the result in one call (Gateway._job_yield), and waits for the next job.
  # (Constants are looked up once per fiber, outside the loop: mruby 3.1
  # walks every enclosing scope for each constant reference.)
  RUNNER = Proc.new do |handler, req|
    gateway = Gateway
    while true
      r = begin
        handler.call(req)
      rescue Exception => e
        gateway._fail(req, e)
        nil
      end
      handler, req = gateway._job_yield(r) # job done, then Fiber.yield(r)
    end
  end

  # (A header filter runs in a RUNNER fiber too: filter.call(req).)

  # The body of a body-filter fiber: filter.call(body, req); a String result
  # replaces the response body, anything else keeps it.
  FILTER_RUNNER = Proc.new do |filter, req|
    gateway = Gateway
    string = String
    while true
      begin
        r = filter.call(req._response_body, req)
        req._replace_response_body(r) if string === r # is_a?, without its argument parsing
      rescue Exception => e
        gateway._fail(req, e)
      end
      filter, req = gateway._job_yield(nil) # job done, then Fiber.yield(nil)
    end
  end

  # The core resumes fibers through these (RESUME[n]: n values passed in),
  # not with mrb_fiber_resume() from C: mruby 3.1 loses its place in a fiber
  # resumed from C once a block run by a C method (instance_exec,
  # instance_eval, class_eval) returns in it -- the resume comes back early
  # and the fiber is broken. Resumed from Ruby, the fiber runs in the same VM
  # loop as this proc, with no C frame under it.
  RESUME = [nil,
            Proc.new { |fiber, a| fiber._gw_resume(a) },
            Proc.new { |fiber, a, b| fiber._gw_resume(a, b) }].freeze
end

# A request's fiber is the gateway's to resume. Resumed by a handler (say,
# through a Fiber.current another request kept), it would run that request's
# code inside this one, and its timer or sub-request would resume it again
# later. Fibers a handler makes for itself resume as usual.
class Fiber
  alias _gw_resume resume
  alias _gw_transfer transfer

  def resume(*args)
    raise FiberError, "a request's fiber cannot be resumed by a handler: only the gateway resumes it" if Gateway._request_fiber?(self)
    _gw_resume(*args)
  end

  def transfer(*args)
    raise FiberError, "a request's fiber cannot be transferred to by a handler: only the gateway resumes it" if Gateway._request_fiber?(self)
    _gw_transfer(*args)
  end
end
