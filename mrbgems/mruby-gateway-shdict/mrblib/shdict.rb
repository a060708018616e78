# Gateway::SharedDict: a dictionary in memory shared by every worker of the
# gateway (declared with `shared_dict :name, size: "10m"` at the top of the
# config; mapped by the master before it forks). Values: String, Integer,
# Float, true, false, nil. Least recently used entries are evicted when it is
# full. Every operation is atomic across the workers.
module Gateway
  class SharedDict
    class NoMemoryError < Gateway::Error; end

    # Gateway::SharedDict[:limits] -> the dictionary, or nil if none is declared.
    def self.[](name)
      @dicts ||= {}
      key = name.to_s
      @dicts[key] ||= _gw_find(key)
    end

    attr_reader :name

    # set(k, v, ttl: nil): stores v (ttl in seconds, Float ok; nil: never expires).
    def set(key, value, ttl: nil)
      _gw_set(key, value, ttl)
    end

    # add(k, v, ttl: nil): stores v only if k is absent; true if it did.
    def add(key, value, ttl: nil)
      _gw_add(key, value, ttl)
    end

    # incr(k, by = 1, init: 0, ttl: nil): atomically adds by; an absent key
    # starts from init and gets ttl (a present one keeps its expiry). Returns
    # the new value; raises TypeError if the value is not a number.
    def incr(key, by = 1, init: 0, ttl: nil)
      _gw_incr(key, by, init, ttl)
    end

    alias [] get

    def []=(key, value)
      _gw_set(key, value, nil)
    end

    # LRU evictions so far (to make room), and times a worker died holding
    # the lock mid-change and the dictionary was emptied.
    def stats
      e, r = _gw_stats
      { evictions: e, recoveries: r, count: count, size: size, free_space: free_space }
    end

    def inspect
      "#<Gateway::SharedDict #{@name} #{count} keys, #{free_space}/#{size} bytes free>"
    end

    # "10m", "512k", "1g" or a number of bytes.
    def self.parse_size(size)
      return size if size.is_a?(Integer)
      if size.is_a?(String)
        s = size.strip.downcase
        mult = { "k" => 1024, "m" => 1024 * 1024, "g" => 1024 * 1024 * 1024 }[s[-1]]
        digits = mult ? s[0..-2] : s
        return digits.to_i * (mult || 1) if !digits.empty? && digits.bytes.all? { |b| b >= 48 && b <= 57 }
      end
      raise ArgumentError, "shared_dict: size must be bytes or a String like \"10m\", \"512k\", got #{size.inspect}"
    end
  end
end

# shared_dict :limits, size: "10m"
# A dictionary shared by every worker (Gateway::SharedDict[:limits]). It
# survives worker restarts; a reload keeps it (and its data) when its size is
# unchanged and makes it anew, empty, when the size changed.
def shared_dict(name, size:)
  unless (name.is_a?(Symbol) || name.is_a?(String)) && !name.to_s.empty?
    raise ArgumentError, "shared_dict: the name must be a Symbol like :limits, got #{name.inspect}"
  end
  Gateway::SharedDict._gw_declare(name.to_s, Gateway::SharedDict.parse_size(size))
  nil
end
