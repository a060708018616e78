# The configuration DSL. A config file is an mruby script evaluated once by the
# master; its top-level `server` and `upstream` calls fill Gateway::Config.current,
# which the C core reads (gateway/process/config_load.c). Every validation error is raised
# here, so its backtrace points at the user's file and line.
module Gateway
  class Config
    attr_reader :servers, :upstreams

    def self.current
      @current ||= Config.new
    end

    # Config.file: the main config file being evaluated (set by the core,
    # mrblib/include.rb): handler files are relative to its folder.

    # A phase value as the core takes it: a Proc as is, a String the path of
    # a handler file (relative to the config file's folder), compiled now into
    # a lambda taking the request (`return` ends it; errors name the file),
    # false or nil: none.
    # Either is adapted to the arguments the core calls it with (ARITY), as
    # its code declares them: a handler file (code reading `req`) gets the
    # request whatever the phase (a body filter's file reads the body with
    # Nginx::Filter); a lambda declaring fewer parameters gets the first
    # ones (->(body) { } as a body filter); one that can take none of the
    # counts is this line's error, not a failure per request.
    def self.phase(where, name, value)
      return adapt(where, name, value) unless value.is_a?(String)
      path = value.start_with?("/") || file.nil? || !file.include?("/") ? value : file[0, file.rindex("/") + 1] + value
      # A file that is not there is this line's error; one that does not
      # compile is the file's own (FILE:LINE from the compiler).
      unless Gateway._file?(path)
        raise ArgumentError, "#{where}: #{name}: must be a Proc (->(req) { ... }) or a handler file; no file #{path}"
      end
      code = Gateway._compile_file(path)
      case ARITY.fetch(name, 1)
      when 0 then -> { code.call(nil) }
      when 2 then ->(body, req) { code.call(req); nil } # it sets the body itself (Nginx::Filter#body=)
      else code
      end
    end

    # What the core passes each phase: (req); a body filter (body, req);
    # init_worker/exit_worker nothing.
    ARITY = { body_filter: 2, init_worker: 0, exit_worker: 0 }

    def self.adapt(where, name, value)
      return value unless value.is_a?(Proc) && value.lambda?
      n = ARITY.fetch(name, 1)
      a = value.arity
      required = a >= 0 ? a : -a - 1
      return value if required <= n && (a < 0 || a == n)
      if a >= 0 && a < n
        return a == 0 ? ->(*_) { value.call } : ->(x, *_) { value.call(x) }
      end
      takes = n == 2 ? "(body, req)" : n == 1 ? "(req)" : "no arguments"
      raise ArgumentError, "#{where}: #{name}: the lambda takes #{a >= 0 ? a : "at least #{required}"} argument(s); it is called with #{takes}"
    end

    # Called by the core before each load (start-up, reload).
    def self.reset
      @current = Config.new
    end

    attr_accessor :resolver, :vm_memory_limit

    def initialize
      @servers = []
      @upstreams = {}
      @resolver = nil
    end
  end

  # Limits and timeouts of a server. Sizes in bytes, times in seconds (Float ok).
  DEFAULT_LIMITS = {
    max_request_line: 8192,   # longer request-target -> 414
    max_header_size: 16384,   # larger header block -> 431
    max_headers: 100,         # more header fields -> 431
    max_body: 1_048_576,      # larger body -> 413
    header_timeout: 10,       # whole header block must arrive within this
    body_timeout: 10,         # max gap between two reads of the body
    keepalive_timeout: 75,    # idle keep-alive connection is closed after this
    send_timeout: 10,         # max time the client may leave our output unread
  }

  # CPU seconds a request's Ruby code may run without waiting (between two
  # waits: Async.sleep, a sub-request, ...) before it is interrupted with
  # Gateway::CPULimitExceeded: a server's default, which a location may
  # override; nil: no limit.
  DEFAULT_CPU_LIMIT = 5
  # A location's cpu_limit: not given (the server's applies).
  CPU_LIMIT_UNSET = Object.new.freeze

  # cpu_limit: a positive number of seconds, or nil (no limit).
  def self.check_cpu_limit(who, v)
    return if v.nil? || (v.is_a?(Numeric) && v > 0 && v <= 86_400)
    raise ArgumentError, "#{who}: cpu_limit must be a positive number of seconds (at most 86400) or nil (no limit), got #{v.inspect}"
  end

  class Location
    # Filters run on every response a location produces; a WebSocket's 101
    # and the tunnel after it are not such a response, so a filter given to
    # a websocket: location, or to one that sets tunnel_timeout: (it
    # tunnels), is an error; a websocket: location does not take the
    # server's. (A proxy_pass location with filters relays no upgrade: its
    # WebSocket handshakes are answered as plain requests.)
    def self.check_filters_apply(where, own, ph, websocket, tunnel_timeout)
      return unless websocket || tunnel_timeout
      [:header_filter, :body_filter].each do |k|
        if own[k]
          raise ArgumentError, "#{where}: #{k}: cannot apply to a WebSocket (its 101 and the tunnel after it are not filtered responses)"
        end
        if websocket
          ph[k] = nil
        elsif ph[k]
          raise ArgumentError, "#{where}: the server's #{k}: cannot apply to a WebSocket tunnel (tunnel_timeout:); give #{k}: false here"
        end
      end
    end

    # websocket: and its options; other content with it is an error.
    def self.check_websocket(where, websocket, max_message, protocols, other_content)
      if websocket.nil?
        raise ArgumentError, "#{where}: websocket_max_message:/websocket_protocols: need websocket:" if max_message || protocols
        return
      end
      raise ArgumentError, "#{where}: websocket: must be a Proc taking (ws, req), got #{websocket.inspect}" unless websocket.respond_to?(:call)
      raise ArgumentError, "#{where}: websocket: is the location's content: no block, content:, proxy_pass:, root: or other content with it" if other_content
      unless max_message.nil? || (max_message.is_a?(Integer) && max_message > 0 && max_message <= 1 << 30)
        raise ArgumentError, "#{where}: websocket_max_message: must be a number of bytes from 1 to 1 GiB, got #{max_message.inspect}"
      end
      return if protocols.nil?
      ok = protocols.is_a?(Array) && protocols.all? { |p| p.is_a?(String) && !p.empty? && p.bytes.all? { |b| b > 32 && b < 127 && !",;\"()<>@:/[]?={}\\".include?(b.chr) } }
      raise ArgumentError, "#{where}: websocket_protocols: must be an Array of tokens (e.g. [\"chat\"]), got #{protocols.inspect}" unless ok
    end

    # A Via pseudonym or host[:port] (RFC 9110 §7.6.3): token bytes, ':' and brackets.
    VIA_NAME_BYTES = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:[]"

    attr_reader :path, :exact, :handler, :proxy_pass, :body_filter, :status, :pass_host, :max_body,
                :request_buffering, :via, :header_filter, :rewrite, :access, :log, :dashboard, :allow, :regex,
                :no_regex, :fastcgi, :params, :script_filename,
                :static, :cpu_limit
    attr_accessor :tunnel_timeout # proxy_pass: a WebSocket tunnel idle this long (seconds) closes; nil: 60
    attr_accessor :split_path_info # fastcgi: a Regexp of two groups (Gateway._split_path_info), or nil
    # websocket: a Gateway::WebSocket::Runner around the block; its message
    # size limit (bytes, nil: 1 MiB) and subprotocols (Strings, nil: none)
    attr_accessor :websocket, :websocket_max_message, :websocket_protocols
    attr_accessor :tls_client # https upstreams: Gateway::TLS.client's Hash, or nil (the defaults)

    def initialize(path, handler, proxy_pass, body_filter, status, pass_host = false, max_body: nil,
                   request_buffering: false, via: nil, header_filter: nil, rewrite: nil, access: nil, log: nil,
                   dashboard: false, allow: nil, fastcgi: nil, params: nil, script_filename: nil, static: nil,
                   cpu_limit: Gateway::CPU_LIMIT_UNSET)
      # Regex locations (nginx's order, see router.c): %r{...}, "~ re"
      # (case-sensitive), "~* re" (case-insensitive); "^~ /prefix" is a prefix
      # that, when it is the longest match, skips the regex locations.
      @regex = nil
      @no_regex = false
      if path.is_a?(Regexp)
        @regex = path
        path = path.inspect
      elsif path.is_a?(String) && path.start_with?("~")
        src = path.start_with?("~*") ? path[2..-1].lstrip : path[1..-1].lstrip
        raise ArgumentError, "location #{path.inspect}: a regex location needs a pattern after ~ or ~*" if src.empty?
        @regex = Regexp.new(src, path.start_with?("~*") ? Regexp::IGNORECASE : 0)
      elsif path.is_a?(String) && path.start_with?("^~")
        @no_regex = true
        path = path[2..-1].lstrip
      end
      unless path.is_a?(String) && !path.empty?
        raise ArgumentError, "location: path must be a String like \"/api\" or \"= /exact\", got #{path.inspect}"
      end
      @exact = false
      if !@regex && path.start_with?("=")
        @exact = true
        path = path[1..-1].lstrip
      end
      raise ArgumentError, "location: path must start with \"/\", got #{path.inspect}" unless @regex || path.start_with?("/")
      if dashboard
        if handler || proxy_pass || status
          raise ArgumentError, "location #{path.inspect}: dashboard: true takes no handler block, proxy_pass: or status:"
        end
        unless allow.nil? || (allow.is_a?(Array) && allow.all? { |a| a.is_a?(String) && Gateway._ip?(a) })
          raise ArgumentError, "location #{path.inspect}: allow: must be an Array of IP addresses like [\"127.0.0.1\", \"::1\"], got #{allow.inspect}"
        end
        status = false
      elsif !allow.nil?
        raise ArgumentError, "location #{path.inspect}: allow: applies to dashboard locations"
      end
      @dashboard = dashboard ? true : false
      @allow = allow
      Location.check_fastcgi(path, handler, proxy_pass, status, fastcgi, params, script_filename)
      if static && (handler || proxy_pass || status || dashboard || fastcgi)
        raise ArgumentError, "location #{path.inspect}: root:/alias: take no handler block, proxy_pass:, fastcgi: or status: (use fallback:)"
      end
      if handler.nil? && proxy_pass.nil? && !status && !dashboard && fastcgi.nil? && !static
        raise ArgumentError, "location #{path.inspect}: give a handler block, proxy_pass:, fastcgi:, root:, alias: or status: true"
      end
      if status && (handler || proxy_pass)
        raise ArgumentError, "location #{path.inspect}: status: true takes no handler block or proxy_pass:"
      end
      if handler && proxy_pass
        raise ArgumentError, "location #{path.inspect}: give a handler block or proxy_pass:, not both"
      end
      if proxy_pass && !(proxy_pass.is_a?(String) && Gateway._proxy_url_valid?(proxy_pass))
        raise ArgumentError, "location #{path.inspect}: proxy_pass must be a URL like \"http://127.0.0.1:8080/path\", " \
                             "\"h2c://127.0.0.1:50051\", \"h2://host:443\", \"http://GROUP/path\" or \"unix:/path.sock\", got #{proxy_pass.inspect}"
      end
      h2_scheme = proxy_pass.is_a?(String) && ["h2c://", "h2://"].find { |p| proxy_pass.start_with?(p) }
      if h2_scheme
        host = proxy_pass[h2_scheme.size..-1].split("/")[0].to_s
        up = Gateway::Config.current.upstreams[host]
        if up && up.protocol != :h2c
          raise ArgumentError, "location #{path.inspect}: proxy_pass #{proxy_pass}: upstream #{host} is not an HTTP/2 group (give its servers as \"h2c://host:port\" or \"h2://host:port\")"
        end
      end
      if body_filter && !body_filter.respond_to?(:call)
        raise ArgumentError, "location #{path.inspect}: body_filter must be a Proc (e.g. ->(body) { body })"
      end
      { rewrite: rewrite, access: access, log: log, content: handler }.each do |name, v|
        next if v.nil? || v.respond_to?(:call)
        raise ArgumentError, "location #{path.inspect}: #{name} must be a Proc (->(req) { ... }) or a handler file path, got #{v.inspect}"
      end
      if header_filter && !header_filter.respond_to?(:call)
        raise ArgumentError, "location #{path.inspect}: header_filter must be a Proc (e.g. ->(req) { req.headers_out[\"x-a\"] = \"1\" })"
      end
      unless max_body.nil? || (max_body.is_a?(Integer) && max_body > 0)
        raise ArgumentError, "location #{path.inspect}: max_body must be a positive Integer (bytes), got #{max_body.inspect}"
      end
      if request_buffering && !proxy_pass
        raise ArgumentError, "location #{path.inspect}: request_buffering: applies to proxy_pass: locations only"
      end
      via = "gateway" if via == true
      unless via.nil? || via == false || (via.is_a?(String) && !via.empty? && via.bytes.all? { |b| VIA_NAME_BYTES.include?(b.chr) })
        raise ArgumentError, "location #{path.inspect}: via must be true or a name like \"edge-1\" (no spaces), got #{via.inspect}"
      end
      raise ArgumentError, "location #{path.inspect}: via: does not apply to a status location" if via && status
      Gateway.check_cpu_limit("location #{path.inspect}", cpu_limit) unless cpu_limit.equal?(Gateway::CPU_LIMIT_UNSET)
      @cpu_limit = cpu_limit.equal?(Gateway::CPU_LIMIT_UNSET) ? DEFAULT_CPU_LIMIT : cpu_limit
      @via = via || nil
      @max_body = max_body
      @request_buffering = request_buffering ? true : false
      @path = path
      @handler = handler
      @proxy_pass = proxy_pass
      @body_filter = body_filter
      @header_filter = header_filter
      @rewrite = rewrite
      @access = access
      @log = log
      @status = status
      @pass_host = pass_host ? true : false
      @static = static
      @fastcgi = fastcgi
      @params = params
      @script_filename = script_filename
    end

    # fastcgi: "GROUP" | "unix:/path.sock" | "IP:port", params: { "NAME" => "value" },
    # script_filename: "/srv/app/index.php", split_path_info: %r{^(.+?\.php)(/.*)$}
    # (see docs/upstreams.md, "FastCGI").
    # set: { "name" => "literal" or ->(req) { value } }, as nginx's `set` and
    # ngx_mruby's `mruby_set`: evaluated first in the rewrite phase, in order,
    # into the request's variables (req.var.NAME, $NAME in a proxy_pass URL).
    def self.with_set(where, set, rewrite)
      unless set.is_a?(Hash) && set.all? { |k, v| (k.is_a?(String) || k.is_a?(Symbol)) && (v.is_a?(String) || v.respond_to?(:call)) }
        raise ArgumentError, "#{where}: set: must be a Hash of name => \"value\" or ->(req) { value }, got #{set.inspect}"
      end
      sets = set.map { |k, v| [k.to_s, v] }
      lambda do |req|
        vars = req.var
        sets.each { |name, v| vars.set(name, v.is_a?(String) ? v : v.call(req)) }
        rewrite ? rewrite.call(req) : nil
      end
    end

    VAR_NAME_BYTES = "_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    # proxy_pass: "http://$backend/x": the URL with the request's variables.
    def self.proxy_with_vars(url)
      lambda do |req|
        vars = req.var
        out = ""
        i = 0
        while (d = url.index("$", i))
          out << url[i...d]
          e = d + 1
          e += 1 while e < url.size && VAR_NAME_BYTES.include?(url[e])
          out << vars.get(url[(d + 1)...e]).to_s
          i = e
        end
        out << url[i..-1]
        req.proxy_pass(out)
      end
    end

    def self.check_fastcgi(path, handler, proxy_pass, status, fastcgi, params, script_filename)
      where = "location #{path.inspect}"
      if fastcgi.nil?
        raise ArgumentError, "#{where}: params: and script_filename: apply to fastcgi: locations only" if params || script_filename
        return
      end
      unless fastcgi.is_a?(String) && Gateway._fastcgi_target?(fastcgi)
        raise ArgumentError, "#{where}: fastcgi must be an upstream group name, \"unix:/path.sock\" or \"IP:port\", got #{fastcgi.inspect}"
      end
      raise ArgumentError, "#{where}: give fastcgi: or a handler block, proxy_pass:, status:, not both" if handler || proxy_pass || status
      up = Gateway::Config.current.upstreams[fastcgi]
      if up && up.protocol != :fastcgi
        raise ArgumentError, "#{where}: upstream #{fastcgi} is not a FastCGI group (give it protocol: :fastcgi)"
      end
      unless params.nil? || (params.is_a?(Hash) && params.all? { |k, v| k.is_a?(String) && !k.empty? && v.is_a?(String) && !k.include?("\0") && !v.include?("\0") })
        raise ArgumentError, "#{where}: params must be a Hash of String => String, got #{params.inspect}"
      end
      unless script_filename.nil? || (script_filename.is_a?(String) && !script_filename.empty? && !script_filename.include?("\0"))
        raise ArgumentError, "#{where}: script_filename must be a non-empty String, got #{script_filename.inspect}"
      end
    end
  end

  class Server
    attr_reader :host, :port, :workers, :limits, :locations, :cpu_affinity, :stall_timeout, :phases,
                :init_worker, :exit_worker, :cpu_limit, :reuseport
    attr_accessor :fleet # proxy_protocol:, proxy_protocol_from:, real_ip: (fleet.rb)

    # The content of a location that has only rewrite/access phases.
    NOT_FOUND = ->(req) { [404, { "content-type" => "text/plain; charset=utf-8" }, ["404 Not Found\n"]] }

    # The phases a location runs, in order (content is its handler); a
    # location takes the server's unless it gives its own (false: none).
    PHASES = [:rewrite, :access, :content, :header_filter, :body_filter, :log]

    def initialize(listen, workers, limits, cpu_affinity = nil, stall_timeout = 30, phases: {}, init_worker: nil,
                   exit_worker: nil, cpu_limit: DEFAULT_CPU_LIMIT, reuseport: nil)
      @host, @port = Server.parse_listen(listen)
      Gateway.check_cpu_limit("server", cpu_limit)
      @cpu_limit = cpu_limit.equal?(Gateway::CPU_LIMIT_UNSET) ? DEFAULT_CPU_LIMIT : cpu_limit
      where = "server #{listen.inspect}"
      @phases = {}
      phases.each { |k, v| @phases[k] = Config.phase(where, k, v) }
      @init_worker = Config.phase(where, :init_worker, init_worker)
      @exit_worker = Config.phase(where, :exit_worker, exit_worker)
      { init_worker: @init_worker, exit_worker: @exit_worker }.each do |name, v|
        next if v.nil? || v.respond_to?(:call)
        raise ArgumentError, "#{where}: #{name} must be a Proc (-> { ... }) or a file path, got #{v.inspect}"
      end
      unless stall_timeout.nil? || (stall_timeout.is_a?(Numeric) && stall_timeout > 0 && stall_timeout <= 86_400)
        raise ArgumentError, "server: stall_timeout must be a number of seconds (0 < s <= 86400) or nil, got #{stall_timeout.inspect}"
      end
      @stall_timeout = stall_timeout
      unless cpu_affinity.nil? || cpu_affinity == :auto ||
             (cpu_affinity.is_a?(Integer) && cpu_affinity >= 0 && cpu_affinity < 1024)
        raise ArgumentError, "server: cpu_affinity must be a CPU number (0, 1, ...) or :auto (worker i on the i-th CPU), got #{cpu_affinity.inspect}"
      end
      @cpu_affinity = cpu_affinity
      unless workers == :auto || (workers.is_a?(Integer) && workers >= 1 && workers <= 64)
        raise ArgumentError, "server: workers must be an Integer from 1 to 64 or :auto (one per CPU), got #{workers.inspect}"
      end
      @workers = workers
      unless reuseport.nil? || reuseport == true || reuseport == false
        raise ArgumentError, "server: reuseport must be true (a listening socket per worker) or false (one shared), got #{reuseport.inspect}"
      end
      @reuseport = reuseport
      @limits = Server.merge_limits(limits)
      @locations = []
    end

    # location "/prefix" do |req| ... end     longest matching prefix wins
    # location "= /exact" do |req| ... end    exact path only, tried first
    # location "/p", proxy_pass: "http://127.0.0.1:8080/x"
    #   pass_host: true sends the client's Host header upstream (default: the
    #   upstream's host:port, or the group name, as nginx's proxy_pass does)
    #   request_buffering: true reads a request body whole before proxying it
    #   (default: it streams upstream as it arrives)
    # location "/status", status: true       every worker's counters: JSON, or
    #   Prometheus text with ?format=prometheus
    # max_body: N (any location) overrides the server's limits[:max_body]
    # via: true or "NAME" adds "Via: 1.1 NAME" (default gateway) both ways
    #   when this location proxies (proxy_pass: or req.proxy_pass)
    # header_filter: ->(req) { ... } runs on the head of every response the
    #   location produces (req.status, req.headers_out) before it goes out:
    #   docs/filters.md
    # Phases (a Proc, a handler file path, or false: not the server's):
    #   rewrite: ->(req) { ... }   first; may set req.uri (routed again) or answer
    #   access: "auth.rb"           then; Nginx.return 403 (or any status, output,
    #                               a Rack triple) answers and ends the request
    #   content: "app.rb"           the handler, as the block does
    #   header_filter:, body_filter: on the response before it goes out
    #   log: ->(req) { ... }        after the response is queued; cannot wait
    # cpu_limit: SECONDS or nil, for this location's Ruby code (handler,
    #   filters) instead of the server's cpu_limit:
    # fastcgi: "php" (params:, script_filename:, split_path_info:) answers through a FastCGI
    #   server: see docs/upstreams.md, "FastCGI"
    # websocket: ->(ws, req) { ... } speaks WebSocket itself (Gateway::WebSocket;
    #   websocket_max_message: BYTES, websocket_protocols: ["chat"], and
    #   tunnel_timeout: as its idle timeout): see docs/protocols.md, "WebSocket"
    # tls_verify:, tls_ca:, tls_server_name:, tls_cert:, tls_key: for the
    #   https:// and h2:// (grpcs://) upstreams this location talks to
    #   (proxy_pass:, grpc_pass:, req.proxy_pass, sub-requests): see Gateway::TLS.client
    # compress: true | false | { ... } and max_ranges: N: the server's unless
    #   given (mrblib/compress.rb, docs/compression.md, docs/ranges.md)
    # cache: :zone | { zone:, key:, valid:, lock:, lock_timeout:, use_stale:,
    #   bypass:, status_header:, store_set_cookie: }: a response cache in front of the handler
    #   (docs/cache.md)
    def location(path, proxy_pass: nil, body_filter: nil, status: false, pass_host: false, max_body: nil,
                 request_buffering: false, via: nil, header_filter: nil, rewrite: nil, access: nil, content: nil,
                 log: nil, dashboard: false, allow: nil, fastcgi: nil, params: nil, script_filename: nil,
                 split_path_info: nil, set: nil,
                 cpu_limit: Gateway::CPU_LIMIT_UNSET, tunnel_timeout: nil, websocket: nil,
                 websocket_max_message: nil, websocket_protocols: nil, tls_verify: nil, tls_ca: nil,
                 tls_server_name: nil, tls_cert: nil, tls_key: nil, grpc_pass: nil, **static_opts, &handler)
      where = "location #{path.inspect}"
      # compress: and max_ranges: (compress.rb; mruby takes no more keyword parameters here)
      compress = static_opts.key?(:compress) ? Compress.options(where, static_opts.delete(:compress)) : @compress
      max_ranges = static_opts.key?(:max_ranges) ? Compress.max_ranges(where, static_opts.delete(:max_ranges)) : @max_ranges
      # cache: :zone or { zone:, ... } (mruby-gateway-cache's cache.rb, docs/cache.md)
      cache = static_opts.key?(:cache) ? Gateway::Cache.location_options(where, static_opts.delete(:cache)) : nil
      Location.check_websocket(where, websocket, websocket_max_message, websocket_protocols,
                               handler || content || proxy_pass || status || dashboard || fastcgi || !static_opts.empty?)
      tls_client = Gateway::TLS.client(where, tls_verify, tls_ca, tls_server_name, tls_cert, tls_key)
      unless grpc_pass.nil?
        raise ArgumentError, "#{where}: give grpc_pass: or proxy_pass:, not both" if proxy_pass
        # "grpcs://host:port": over TLS (h2://); "grpc://host:port" or "host:port": cleartext (h2c://)
        tls = grpc_pass.is_a?(String) && grpc_pass.start_with?("grpcs://")
        target = grpc_pass.is_a?(String) && grpc_pass.start_with?("grpc://") ? grpc_pass[7..-1] : grpc_pass
        target = grpc_pass[8..-1] if tls
        target = nil unless target.is_a?(String)
        unless target && !target.empty? && !target.include?("/") && (Upstream.host_port?(target) || !target.include?(":"))
          raise ArgumentError, "#{where}: grpc_pass must be \"host:port\", \"grpcs://host:port\" or an upstream group name, got #{grpc_pass.inspect}"
        end
        proxy_pass = tls ? "h2://#{target}" : "h2c://#{target}"
      end
      unless tunnel_timeout.nil? || (tunnel_timeout.is_a?(Numeric) && tunnel_timeout > 0 && tunnel_timeout <= 86_400 * 7)
        raise ArgumentError, "#{where}: tunnel_timeout: must be a number of seconds > 0 (at most a week), got #{tunnel_timeout.inspect}"
      end
      cpu_limit = @cpu_limit if cpu_limit.equal?(Gateway::CPU_LIMIT_UNSET)
      # static files (root:, alias:... in mrblib/static.rb): nil unless root: or alias: is given
      static = Static.options(where, static_opts)
      if static && (handler || content || proxy_pass || status)
        raise ArgumentError, "#{where}: root:/alias: take no handler block, content:, proxy_pass: or status: (use fallback:)"
      end
      raise ArgumentError, "#{where}: give a block or content:, not both" if handler && content
      own = { rewrite: rewrite, access: access, content: content || handler, header_filter: header_filter,
              body_filter: body_filter, log: log }
      ph = {}
      PHASES.each do |k|
        v = own[k].nil? ? @phases[k] : Config.phase(where, k, own[k])
        ph[k] = v || nil
      end
      ph[:content] = own[:content] if proxy_pass || status || dashboard || fastcgi || static # they are the content: the server's is not inherited
      ph[:content] = Gateway::WebSocket::Runner.new(websocket) if websocket # the block, once the handshake is done
      Location.check_filters_apply(where, own, ph, websocket, tunnel_timeout)
      ph[:rewrite] = Location.with_set(where, set, ph[:rewrite]) if set
      if proxy_pass.is_a?(String) && proxy_pass.include?("$") # variables (set:): the URL is made per request
        ph[:content] = Location.proxy_with_vars(proxy_pass)
        proxy_pass = nil
      end
      # Only phases before the content (a rewrite that redirects, an access
      # check): when they let the request through, nothing is there (404).
      if ph[:content].nil? && !(proxy_pass || status || dashboard || fastcgi || static || websocket) && (ph[:rewrite] || ph[:access])
        ph[:content] = NOT_FOUND
      end
      loc = Location.new(path, ph[:content], proxy_pass, ph[:body_filter], status, pass_host, max_body: max_body,
                         request_buffering: request_buffering, via: via, header_filter: ph[:header_filter],
                         rewrite: ph[:rewrite], access: ph[:access], log: ph[:log], dashboard: dashboard,
                         allow: allow, fastcgi: fastcgi, params: params, script_filename: script_filename,
                         static: static, cpu_limit: cpu_limit)
      loc.tunnel_timeout = tunnel_timeout
      unless split_path_info.nil?
        raise ArgumentError, "#{where}: split_path_info: applies to fastcgi: locations only" if fastcgi.nil?
        loc.split_path_info = Gateway._split_path_info(where, split_path_info)
      end
      if websocket
        loc.websocket = ph[:content]
        loc.websocket_max_message = websocket_max_message
        loc.websocket_protocols = websocket_protocols
      end
      loc.tls_client = tls_client
      loc.compress = compress
      loc.max_ranges = max_ranges
      loc.cache = cache
      if @locations.any? { |l| l.path == loc.path && l.exact == loc.exact }
        raise ArgumentError, "location #{path.inspect} is defined twice in this server"
      end
      @locations << loc
      loc
    end

    def self.parse_listen(listen)
      case listen
      when Integer
        host = "0.0.0.0"
        port = listen
      when String
        host, port_s = Gateway.split_host_port(listen)
        raise ArgumentError, "server: listen must be a port or \"host:port\", got #{listen.inspect}" unless port_s
        host = "0.0.0.0" if host.empty? || host == "*"
        raise ArgumentError, "server: listen must be a port or \"host:port\", got #{listen.inspect}" if port_s.empty? || !port_s.bytes.all? { |b| b >= 48 && b <= 57 }
        port = port_s.to_i
      else
        raise ArgumentError, "server: listen must be a port or \"host:port\", got #{listen.inspect}"
      end
      raise ArgumentError, "server: listen port must be 1..65535, got #{port}" unless port >= 1 && port <= 65535
      [host, port]
    end

    def self.port_string?(s)
      Gateway.port_string?(s)
    end

    def self.merge_limits(limits)
      raise ArgumentError, "server: limits must be a Hash, got #{limits.inspect}" unless limits.is_a?(Hash)
      merged = DEFAULT_LIMITS.dup
      limits.each do |k, v|
        raise ArgumentError, "server: unknown limit #{k.inspect} (known: #{DEFAULT_LIMITS.keys.join(', ')})" unless merged.key?(k)
        unless v.is_a?(Numeric) && v > 0
          raise ArgumentError, "server: limit #{k} must be a positive number, got #{v.inspect}"
        end
        merged[k] = v
      end
      merged
    end
  end

  class Upstream
    attr_reader :name, :servers, :keepalive, :balance, :max_fails, :fail_timeout, :connect_timeout, :timeout,
                :protocol
    attr_accessor :tls_client # its https:// servers: Gateway::TLS.client's Hash, or nil (the defaults)
    attr_accessor :send_proxy_protocol # 0, 1 or 2 (fleet.rb)
    attr_accessor :health_check # nil, or its Hash with every key (fleet.rb)

    BALANCE = [:round_robin, :least_conn, :hash]
    PROTOCOLS = [:http, :fastcgi, :h2c]

    def initialize(name, servers, keepalive, balance = :round_robin, max_fails = 1, fail_timeout = 10,
                   connect_timeout = 5, timeout = 60, protocol: :http)
      raise ArgumentError, "upstream #{name}: protocol must be one of #{PROTOCOLS.inspect}, got #{protocol.inspect}" unless PROTOCOLS.include?(protocol)
      @protocol = protocol
      unless (name.is_a?(Symbol) || name.is_a?(String)) && !name.to_s.empty?
        raise ArgumentError, "upstream: name must be a Symbol, got #{name.inspect}"
      end
      unless servers.is_a?(Array) && !servers.empty?
        raise ArgumentError, "upstream #{name}: servers must be a non-empty Array of \"host:port\""
      end
      @weights = []
      # "h2c://host:port" (cleartext) or "h2://host:port" (TLS, the group's
      # tls_* settings) servers: an HTTP/2 group, all or none.
      h2c = servers.map { |s| a = s.is_a?(Hash) ? s[:address] : s; a.is_a?(String) && (a.start_with?("h2c://") || a.start_with?("h2://")) }
      if h2c.any?
        raise ArgumentError, "upstream #{name}: either every server is h2c:// or h2://host:port, or none is" unless h2c.all?
        raise ArgumentError, "upstream #{name}: h2c:// and h2:// servers speak HTTP/2, not #{protocol.inspect}" unless protocol == :http || protocol == :h2c
        @protocol = protocol = :h2c
      end
      @servers = servers.map do |s|
        addr = s.is_a?(Hash) ? s[:address] : s
        addr = addr[6..-1] if protocol == :h2c && addr.start_with?("h2c://")
        addr = "https://#{addr[5..-1]}" if protocol == :h2c && addr.start_with?("h2://") # TLS, spoken as HTTP/2
        weight = s.is_a?(Hash) ? (s[:weight] || 1) : 1
        unless weight.is_a?(Integer) && weight >= 1 && weight <= 100
          raise ArgumentError, "upstream #{name}: weight must be an Integer from 1 to 100, got #{weight.inspect}"
        end
        @weights << weight
        https = addr.is_a?(String) && addr.start_with?("https://")
        unless addr.is_a?(String) && (addr.start_with?("unix:/") || Upstream.host_port?(https ? addr[8..-1] : addr))
          raise ArgumentError, "upstream #{name}: server must be \"host:port\", \"https://host:port\" or \"unix:/path\", got #{s.inspect}"
        end
        if https && protocol == :fastcgi
          raise ArgumentError, "upstream #{name}: a FastCGI server cannot be https://, got #{s.inspect}"
        end
        if protocol == :fastcgi && !Gateway._fastcgi_target?(addr)
          raise ArgumentError, "upstream #{name}: a FastCGI server must be \"IP:port\" or \"unix:/path\" (no host names), got #{s.inspect}"
        end
        addr
      end
      unless keepalive.is_a?(Integer) && keepalive >= 0
        raise ArgumentError, "upstream #{name}: keepalive must be an Integer >= 0, got #{keepalive.inspect}"
      end
      raise ArgumentError, "upstream #{name}: balance must be one of #{BALANCE.inspect}" unless BALANCE.include?(balance)
      unless max_fails.is_a?(Integer) && max_fails >= 0
        raise ArgumentError, "upstream #{name}: max_fails must be an Integer >= 0 (0: never mark a server down)"
      end
      { fail_timeout: fail_timeout, connect_timeout: connect_timeout, timeout: timeout }.each do |k, v|
        raise ArgumentError, "upstream #{name}: #{k} must be a positive number of seconds" unless v.is_a?(Numeric) && v > 0
      end
      @name = name.to_s
      @keepalive = keepalive
      @balance = balance
      @max_fails = max_fails
      @fail_timeout = fail_timeout
      @connect_timeout = connect_timeout
      @timeout = timeout
    end

    # "IP:port", "[v6]:port" or "host.name:port" (resolved on the worker's
    # loop with c-ares, honouring /etc/hosts and the answers' TTL).
    def self.host_port?(addr)
      host, port = Gateway.split_host_port(addr)
      return false unless port && !host.empty? && Gateway.port_string?(port)
      host.bytes.all? { |b| (b >= 48 && b <= 58) || b == 45 || b == 46 || (b >= 97 && b <= 122) || (b >= 65 && b <= 90) }
    end
  end
end

# server listen: 8080, workers: 1, limits: {...}, cpu_limit: 5 do
#   location "/" do |req| "hello" end
# end
# stall_timeout: a worker whose event loop has not turned for this many
# seconds (default 30; nil: never) is logged, killed and replaced.
# Phases given here (rewrite:, access:, content:, header_filter:,
# body_filter:, log:) apply to every location that gives none of its own;
# init_worker: and exit_worker: run in each worker at its start and exit.
# workers: N or :auto (one per online CPU); cpu_affinity: a CPU number for
# every worker, or :auto (worker i on the i-th CPU the gateway may use);
# reuseport: true gives each worker its own SO_REUSEPORT listening socket,
# false one socket shared by all (default: docs/configuration.md, "All cores").
# cpu_limit: CPU seconds a request's Ruby code may run between two waits
# before Gateway::CPULimitExceeded interrupts it (a 500); nil: no limit. A
# location's own cpu_limit: overrides it.
# compress: true or { encodings:, level:, min_length:, types: } and
# max_ranges: N are its locations' unless they give their own (compress.rb).
def server(listen:, workers: 1, limits: {}, cpu_affinity: nil, stall_timeout: 30, rewrite: nil, access: nil,
           content: nil, header_filter: nil, body_filter: nil, log: nil, init_worker: nil, exit_worker: nil,
           tls: nil, http2: nil, cpu_limit: Gateway::DEFAULT_CPU_LIMIT, reuseport: nil, proxy_protocol: false,
           proxy_protocol_from: nil, real_ip: nil, compress: nil, max_ranges: Gateway::Compress::DEFAULT_MAX_RANGES, &block)
  raise ArgumentError, "server: a block with locations is required" unless block
  fleet = Gateway::Fleet.server_options(proxy_protocol, proxy_protocol_from, real_ip) # fleet.rb
  tls_conf = Gateway::TLS.parse(tls) # TLS and HTTP/2 (tls.rb)
  http2 = Gateway::TLS.http2(http2, tls_conf)
  phases = { rewrite: rewrite, access: access, content: content, header_filter: header_filter,
             body_filter: body_filter, log: log }.reject { |_, v| v.nil? }
  srv = Gateway::Server.new(listen, workers, limits, cpu_affinity, stall_timeout, phases: phases,
                            init_worker: init_worker, exit_worker: exit_worker, cpu_limit: cpu_limit,
                            reuseport: reuseport)
  srv.tls = tls_conf
  srv.http2 = http2
  srv.tls_line = Gateway::TLS.caller_line if tls_conf
  srv.fleet = fleet
  srv.compress = Gateway::Compress.options("server", compress) # its locations' default (compress.rb)
  srv.max_ranges = Gateway::Compress.max_ranges("server", max_ranges)
  srv.instance_eval(&block)
  Gateway::Config.current.servers << srv
  srv
end

# upstream :app, servers: ["127.0.0.1:9001", {address: "127.0.0.1:9002", weight: 3}, "unix:/run/app.sock"],
#          keepalive: 128, balance: :round_robin, max_fails: 1, fail_timeout: 10,
#          connect_timeout: 5, timeout: 60
# keepalive: idle connections kept per server (default 128: more than a
# typical client concurrency, so a burst of 100 does not reopen connections).
# balance: :round_robin (weighted), :least_conn, or :hash (on the hash_key:
# given to req.proxy_pass). A server that fails max_fails times (connect
# errors, timeouts) is skipped for fail_timeout seconds.
# protocol: :fastcgi makes it a group of FastCGI servers (location fastcgi:).
# servers: "https://host:port" speak HTTPS (TLS), checked with tls_verify:,
# tls_ca:, tls_server_name:, tls_cert:, tls_key: (Gateway::TLS.client).
def upstream(name, servers:, keepalive: 128, balance: :round_robin, max_fails: 1, fail_timeout: 10,
             connect_timeout: 5, timeout: 60, protocol: :http, tls_verify: nil, tls_ca: nil, tls_server_name: nil,
             tls_cert: nil, tls_key: nil, send_proxy_protocol: false, health_check: nil)
  up = Gateway::Upstream.new(name, servers, keepalive, balance, max_fails, fail_timeout, connect_timeout, timeout,
                             protocol: protocol)
  up.send_proxy_protocol = Gateway::Fleet.send_proxy_protocol(up, send_proxy_protocol) # fleet.rb
  up.health_check = Gateway::Fleet.health_check(up, health_check)
  up.tls_client = Gateway::TLS.client("upstream #{up.name}", tls_verify, tls_ca, tls_server_name, tls_cert, tls_key)
  cfg = Gateway::Config.current
  raise ArgumentError, "upstream #{up.name} is defined twice" if cfg.upstreams.key?(up.name)
  cfg.upstreams[up.name] = up
  up
end

# resolver "127.0.0.1:53", timeout: 2, tries: 2
# The DNS servers for host names in proxy_pass URLs, upstream servers and URL
# sub-requests (default: /etc/resolv.conf). /etc/hosts is read first. A try
# waits `timeout` seconds (c-ares doubles it on each further round).
def resolver(servers, timeout: 2, tries: 2)
  list = servers.is_a?(Array) ? servers : [servers]
  ip_port = lambda do |x|
    next false unless x.is_a?(String) && !x.empty?
    next true if Gateway._ip?(x)                     # 10.0.0.1, ::1
    host, port = Gateway.split_host_port(x)          # [::1], [::1]:53, 127.0.0.1:5353
    next false unless host && Gateway._ip?(host)
    port ? Gateway.port_string?(port) : x.start_with?("[")
  end
  unless !list.empty? && list.all? { |x| ip_port.call(x) }
    raise ArgumentError, "resolver: give \"IP[:port]\" or an Array of them (addresses, not names), got #{servers.inspect}"
  end
  raise ArgumentError, "resolver: timeout must be a positive number of seconds" unless timeout.is_a?(Numeric) && timeout > 0
  raise ArgumentError, "resolver: tries must be an Integer from 1 to 10" unless tries.is_a?(Integer) && tries >= 1 && tries <= 10
  Gateway::Config.current.resolver = { servers: list.join(","), timeout: timeout, tries: tries }
end

# vm_memory_limit 256 * 1024 * 1024
# Caps the memory of each worker's mruby VM (default 512 MiB). A handler that
# allocates past it gets NoMemoryError: a 500 for that request, the worker
# and every other request carry on.
def vm_memory_limit(bytes)
  unless bytes.is_a?(Integer) && bytes >= 16 * 1024 * 1024
    raise ArgumentError, "vm_memory_limit: bytes must be an Integer of at least 16 MiB, got #{bytes.inspect}"
  end
  Gateway::Config.current.vm_memory_limit = bytes
end
