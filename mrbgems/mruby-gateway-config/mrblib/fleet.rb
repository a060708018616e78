# Options of `server` for running behind load balancers and proxies
# (docs/fleet.md):
#   proxy_protocol: true            every connection starts with a PROXY
#                                   protocol header (v1 or v2)
#   proxy_protocol_from: [ranges]   only these peers may send one (default: any)
#   real_ip: { from: [ranges], header: "X-Forwarded-For", recursive: false }
#                                   the client's address from a header that
#                                   trusted proxies set ("Forwarded": RFC 7239)
module Gateway
  module Fleet
    def self.cidrs(where, v)
      list = v.is_a?(Array) ? v : [v]
      unless !list.empty? && list.all? { |x| x.is_a?(String) && Gateway._cidr?(x) }
        raise ArgumentError, "#{where} must be an address or range (\"10.0.0.0/8\", \"::1\", \"2001:db8::/32\") " \
                             "or an Array of them, got #{v.inspect}"
      end
      list
    end

    REAL_IP_KEYS = [:from, :header, :recursive]

    def self.real_ip(v)
      return nil if v.nil?
      raise ArgumentError, "server: real_ip must be a Hash { from: [...], header: ..., recursive: ... }, got #{v.inspect}" unless v.is_a?(Hash)
      bad = v.keys - REAL_IP_KEYS
      raise ArgumentError, "server: real_ip: unknown key #{bad.first.inspect} (known: #{REAL_IP_KEYS.inspect})" unless bad.empty?
      raise ArgumentError, "server: real_ip: from: (the trusted proxies) is required" unless v.key?(:from)
      from = cidrs("server: real_ip: from", v[:from])
      header = v.fetch(:header, "X-Forwarded-For")
      unless header.is_a?(String) && !header.empty? && header.bytes.all? { |b| b > 32 && b < 127 && b != 58 }
        raise ArgumentError, "server: real_ip: header must be a header name (\"X-Forwarded-For\", \"X-Real-IP\", \"Forwarded\"), got #{header.inspect}"
      end
      recursive = v.fetch(:recursive, false)
      raise ArgumentError, "server: real_ip: recursive must be true or false, got #{recursive.inspect}" unless recursive == true || recursive == false
      { from: from, header: header.downcase, forwarded: header.downcase == "forwarded", recursive: recursive }
    end

    # upstream ..., send_proxy_protocol: false | true (v1) | :v1 | :v2
    def self.send_proxy_protocol(up, v)
      version = { false => 0, true => 1, v1: 1, v2: 2 }[v]
      unless version
        raise ArgumentError, "upstream #{up.name}: send_proxy_protocol must be true (v1), :v1, :v2 or false, got #{v.inspect}"
      end
      if version > 0 && up.protocol != :http
        raise ArgumentError, "upstream #{up.name}: send_proxy_protocol is for HTTP/1.1 groups (http:// and https:// servers), not #{up.protocol.inspect}"
      end
      version
    end

    HEALTH_CHECK_DEFAULTS = { path: "/", interval: 5, timeout: 1, fails: 2, passes: 2, expect: 200 }

    # upstream ..., health_check: { path: "/health", interval: 1.0, timeout: 0.5, fails: 2, passes: 2, expect: 200 }
    def self.health_check(up, v)
      return nil if v.nil? || v == false
      where = "upstream #{up.name}: health_check"
      v = {} if v == true
      raise ArgumentError, "#{where} must be a Hash { path:, interval:, timeout:, fails:, passes:, expect: } or true, got #{v.inspect}" unless v.is_a?(Hash)
      bad = v.keys - HEALTH_CHECK_DEFAULTS.keys
      raise ArgumentError, "#{where}: unknown key #{bad.first.inspect} (known: #{HEALTH_CHECK_DEFAULTS.keys.inspect})" unless bad.empty?
      if up.protocol != :http
        raise ArgumentError, "#{where} is for HTTP/1.1 groups (http:// and https:// servers), not #{up.protocol.inspect}"
      end
      h = HEALTH_CHECK_DEFAULTS.merge(v)
      path = h[:path]
      unless path.is_a?(String) && path.start_with?("/") && path.bytes.all? { |b| b > 32 && b < 127 }
        raise ArgumentError, "#{where}: path must be a request-target starting with \"/\" (no spaces), got #{path.inspect}"
      end
      { interval: 3600, timeout: 600 }.each do |k, max|
        x = h[k]
        unless x.is_a?(Numeric) && x >= 0.01 && x <= max
          raise ArgumentError, "#{where}: #{k} must be a number of seconds from 0.01 to #{max}, got #{x.inspect}"
        end
      end
      [:fails, :passes].each do |k|
        x = h[k]
        raise ArgumentError, "#{where}: #{k} must be an Integer from 1 to 100, got #{x.inspect}" unless x.is_a?(Integer) && x >= 1 && x <= 100
      end
      e = h[:expect]
      raise ArgumentError, "#{where}: expect must be an HTTP status (100..599), got #{e.inspect}" unless e.is_a?(Integer) && e >= 100 && e <= 599
      h
    end

    def self.server_options(proxy_protocol, from, real_ip)
      unless proxy_protocol == true || proxy_protocol == false
        raise ArgumentError, "server: proxy_protocol must be true or false, got #{proxy_protocol.inspect}"
      end
      raise ArgumentError, "server: proxy_protocol_from needs proxy_protocol: true" if !from.nil? && !proxy_protocol
      { proxy_protocol: proxy_protocol, proxy_protocol_from: from.nil? ? [] : cidrs("server: proxy_protocol_from", from),
        real_ip: real_ip(real_ip) }
    end
  end
end
