# The response cache (docs/cache.md): its zones, declared at the top of the
# config (`cache :api, memory: "64m", path: "/var/cache/gateway/api",
# max_size: "1g"`, mapped by the master before it forks), a location's
# `cache:` option, checked here so an error names the config line and
# handed to the core (gateway/cache.c) as a plain Hash, and
# Gateway::Cache[:api].purge / .purge_prefix / .stats at run time.
module Gateway
  class Cache
    USE_STALE = [:error, :timeout, :updating]
    LOCATION_KEYS = [:zone, :key, :valid, :lock, :lock_timeout, :use_stale, :bypass, :status_header, :store_set_cookie]
    DEFAULT_LOCK_TIMEOUT = 5
    MAX_SECONDS = 2_147_483_647

    # Gateway::Cache[:api] -> the zone, or nil if none is declared.
    def self.[](name)
      @zones ||= {}
      key = name.to_s
      @zones[key] ||= _gw_find(key)
    end

    attr_reader :name

    # purge(key): removes the entry stored under key (all its Vary
    # variants too). Returns the number of entries removed.
    def purge(key)
      raise TypeError, "Gateway::Cache#purge: the key must be a String, got #{key.class}" unless key.is_a?(String)
      _gw_purge(key)
    end

    # purge_prefix(prefix): removes every entry whose key starts with
    # prefix ("" removes all). Returns the number removed.
    def purge_prefix(prefix)
      raise TypeError, "Gateway::Cache#purge_prefix: the prefix must be a String, got #{prefix.class}" unless prefix.is_a?(String)
      _gw_purge_prefix(prefix)
    end

    def inspect
      s = stats
      "#<Gateway::Cache #{@name} #{s[:entries]} entries>"
    end

    # "64m", "512k", "1g" or a number of bytes (where: for the error).
    def self.size(where, v)
      return v if v.is_a?(Integer) && v > 0
      if v.is_a?(String)
        s = v.strip.downcase
        mult = { "k" => 1 << 10, "m" => 1 << 20, "g" => 1 << 30, "t" => 1 << 40 }[s[-1]]
        digits = mult ? s[0..-2] : s
        return digits.to_i * (mult || 1) if !digits.empty? && digits.bytes.all? { |b| b >= 48 && b <= 57 } && digits.to_i > 0
      end
      raise ArgumentError, "#{where} must be a number of bytes or a String like \"64m\", \"512k\", \"1g\", got #{v.inspect}"
    end

    # Seconds: a number >= 0, or a String like "30s", "10m", "1h", "1d".
    def self.seconds(where, v)
      n = v
      if v.is_a?(String) && v =~ /\A(\d+)([smhd])\z/
        n = $1.to_i * { "s" => 1, "m" => 60, "h" => 3600, "d" => 86_400 }[$2]
      end
      return n.to_i if n.is_a?(Numeric) && n >= 0 && n <= MAX_SECONDS
      raise ArgumentError, "#{where} must be seconds (a number >= 0, or \"30s\", \"10m\", \"1h\", \"1d\"), got #{v.inspect}"
    end

    # valid: { 200 => 600, [301, 302] => "1h", 404 => 60, any: 10 } as
    # [[status, seconds], ...] (status 0: any).
    def self.valid(where, v)
      unless v.is_a?(Hash)
        raise ArgumentError, "#{where}: cache: valid: must be a Hash like { 200 => 600, 404 => 60, any: 10 }, got #{v.inspect}"
      end
      out = []
      v.each do |k, t|
        secs = seconds("#{where}: cache: valid: #{k.inspect}", t)
        codes = k == :any ? [0] : k.is_a?(Array) ? k : [k]
        codes.each do |c|
          unless c == 0 || (c.is_a?(Integer) && c >= 200 && c <= 599)
            raise ArgumentError, "#{where}: cache: valid: keys are statuses (200..599), Arrays of them or :any, got #{k.inspect}"
          end
          out << [c, secs]
        end
      end
      out
    end

    def self.lambda_of(where, name, v)
      return nil if v.nil?
      unless v.respond_to?(:call)
        raise ArgumentError, "#{where}: cache: #{name}: must be a Proc taking the request (->(req) { ... }), got #{v.inspect}"
      end
      Gateway::Config.adapt("#{where}: cache", name, v)
    end

    # A location's cache: :zone, or { zone: :zone, ... }, or nil/false (off).
    # Returns the Hash the core reads, or nil.
    def self.location_options(where, v)
      return nil if v.nil? || v == false
      v = { zone: v } if v.is_a?(Symbol) || v.is_a?(String)
      unless v.is_a?(Hash)
        raise ArgumentError, "#{where}: cache must be a zone name (cache: :api) or a Hash like { zone: :api, valid: { 200 => 600 } }, got #{v.inspect}"
      end
      v.each_key do |k|
        raise ArgumentError, "#{where}: cache: unknown key #{k.inspect} (known: #{LOCATION_KEYS.join(', ')})" unless LOCATION_KEYS.include?(k)
      end
      zone = v[:zone]
      unless (zone.is_a?(Symbol) || zone.is_a?(String)) && Gateway::Config.current.caches.key?(zone.to_s)
        declared = Gateway::Config.current.caches.keys
        raise ArgumentError, "#{where}: cache: no cache zone #{zone.inspect} (declare it before the server with `cache #{zone.is_a?(Symbol) ? zone.inspect : ':name'}, memory: \"64m\"`; declared: #{declared.empty? ? 'none' : declared.join(', ')})"
      end
      lock = v.fetch(:lock, false)
      raise ArgumentError, "#{where}: cache: lock: must be true or false, got #{lock.inspect}" unless lock == true || lock == false
      lock_timeout = seconds("#{where}: cache: lock_timeout:", v.fetch(:lock_timeout, DEFAULT_LOCK_TIMEOUT))
      raise ArgumentError, "#{where}: cache: lock_timeout: must be at least 1 second" if lock_timeout < 1
      use_stale = v.fetch(:use_stale, [])
      use_stale = [use_stale] if use_stale.is_a?(Symbol)
      unless use_stale.is_a?(Array) && use_stale.all? { |s| USE_STALE.include?(s) }
        raise ArgumentError, "#{where}: cache: use_stale: must be a list of #{USE_STALE.map(&:inspect).join(', ')}, got #{v[:use_stale].inspect}"
      end
      sh = v.fetch(:status_header, true)
      raise ArgumentError, "#{where}: cache: status_header: must be true or false, got #{sh.inspect}" unless sh == true || sh == false
      ssc = v.fetch(:store_set_cookie, false)
      unless ssc == true || ssc == false
        raise ArgumentError, "#{where}: cache: store_set_cookie: must be true or false, got #{ssc.inspect}"
      end
      key = lambda_of(where, :key, v[:key])
      bypass = lambda_of(where, :bypass, v[:bypass])
      prepare = nil
      if key || bypass
        # Runs before the lookup, as an access phase: the key and the bypass verdict for this request.
        prepare = lambda do |req|
          k = key ? key.call(req) : nil
          unless k.nil? || k.is_a?(String)
            raise TypeError, "#{where}: cache: key: the lambda must return a String, got #{k.class}"
          end
          req._gw_cache_prepare(k, bypass ? (bypass.call(req) ? true : false) : false)
          nil
        end
      end
      { zone: zone.to_s, valid: valid(where, v.fetch(:valid, {})), lock: lock, lock_timeout: lock_timeout,
        use_stale: use_stale.uniq, status_header: sh, store_set_cookie: ssc, prepare: prepare }
    end
  end

  class Config
    # Zones declared by this config: name => true (locations check against it).
    def caches
      @caches ||= {}
    end
  end

  class Location
    attr_accessor :cache
  end
end

# cache :api, memory: "64m", path: "/var/cache/gateway/api", max_size: "1g"
# A response cache shared by every worker (a location's cache: :api). memory:
# the shared index and the small bodies; path: the folder of the large
# bodies (nil: memory only); max_size: the files' bytes at most (nil: no
# bound but the disk). A reload keeps its entries when memory: and path:
# are unchanged; a restart reloads them from path:.
def cache(name, memory:, path: nil, max_size: nil)
  unless (name.is_a?(Symbol) || name.is_a?(String)) && !name.to_s.empty? && name.to_s.bytesize <= 64
    raise ArgumentError, "cache: the name must be a Symbol like :api, got #{name.inspect}"
  end
  cfg = Gateway::Config.current
  raise ArgumentError, "cache #{name.inspect} is declared twice" if cfg.caches.key?(name.to_s)
  mem = Gateway::Cache.size("cache #{name.inspect}: memory:", memory)
  unless path.nil? || (path.is_a?(String) && path.start_with?("/") && path.bytesize < 3900)
    raise ArgumentError, "cache #{name.inspect}: path: must be an absolute folder name (or nil: memory only), got #{path.inspect}"
  end
  max = max_size.nil? ? 0 : Gateway::Cache.size("cache #{name.inspect}: max_size:", max_size)
  raise ArgumentError, "cache #{name.inspect}: max_size: needs path:" if max_size && path.nil?
  Gateway::Cache._gw_declare(name.to_s, mem, path, max)
  cfg.caches[name.to_s] = true
  nil
end
