# Static files: the options of a `location "/p", root: "public"` (or alias:)
# location, checked here and handed to the core (gateway/handler/static/static.c) as one
# Hash in Location#static.
module Gateway
  module Static
    KEYS = [:root, :alias, :index, :autoindex, :types, :default_type, :fallback, :follow_symlinks,
            :gzip_static, :open_file_cache, :memory_cache, :ruby_files]
    OPEN_FILE_CACHE = { max: 1000, valid: 1.0 }
    MEMORY_CACHE = { max_file: 65_536, budget: 16 << 20 }

    # opts: the location's static keywords (nil values: not given). Returns
    # the Hash the core reads, or nil when neither root: nor alias: is given.
    def self.options(where, opts)
      opts.each_key do |k|
        raise ArgumentError, "#{where}: unknown option #{k.inspect}" unless KEYS.include?(k)
      end
      given = opts.reject { |_, v| v.nil? }
      return nil if given.empty?
      root = given[:root]
      al = given[:alias]
      raise ArgumentError, "#{where}: give root: or alias:, not both" if root && al
      unless root || al
        raise ArgumentError, "#{where}: #{given.keys.map(&:inspect).join(', ')} need root: or alias:"
      end
      dir = root || al
      raise ArgumentError, "#{where}: #{root ? 'root' : 'alias'} must be a folder name (a non-empty String)" unless dir.is_a?(String) && !dir.empty?
      index = given.fetch(:index, ["index.html"])
      index = [index] if index.is_a?(String)
      unless index.is_a?(Array) && index.all? { |i| i.is_a?(String) && !i.empty? && !i.include?("/") }
        raise ArgumentError, "#{where}: index must be file names like [\"index.html\"], got #{index.inspect}"
      end
      types = given.fetch(:types, {})
      unless types.is_a?(Hash) && types.all? { |k, v| (k.is_a?(String) || k.is_a?(Symbol)) && v.is_a?(String) && v.include?("/") }
        raise ArgumentError, "#{where}: types must map extensions to media types, like { \"wasm\" => \"application/wasm\" }"
      end
      dt = given.fetch(:default_type, "application/octet-stream")
      raise ArgumentError, "#{where}: default_type must be a media type like \"text/plain\"" unless dt.is_a?(String) && dt.include?("/")
      ofc = cache_option(where, :open_file_cache, given.fetch(:open_file_cache, true), OPEN_FILE_CACHE)
      mem = cache_option(where, :memory_cache, given.fetch(:memory_cache, true), MEMORY_CACHE)
      fallback = Config.phase(where, :fallback, given[:fallback])
      unless fallback.nil? || fallback.respond_to?(:call)
        raise ArgumentError, "#{where}: fallback must be a Proc (->(req) { ... }) or a handler file path"
      end
      file = Config.file
      dir = file[0, file.rindex("/") + 1] + dir if !dir.start_with?("/") && file && file.include?("/")
      rf = given.fetch(:ruby_files, false)
      raise ArgumentError, "#{where}: ruby_files must be true or false, got #{rf.inspect}" unless rf == true || rf == false
      { ruby_files: rf, dir: dir, alias: !al.nil?, index: index, autoindex: given[:autoindex] ? true : false,
        types: types.map { |k, v| [k.to_s.start_with?(".") ? k.to_s[1..-1] : k.to_s, v] }.flatten, default_type: dt, fallback: fallback,
        follow_symlinks: given[:follow_symlinks] ? true : false, gzip_static: given[:gzip_static] ? true : false,
        open_file_cache: ofc, memory_cache: mem }
    end

    # true: the defaults; false: off (nil); a Hash: over the defaults.
    def self.cache_option(where, name, v, defaults)
      return nil if v == false
      return defaults.dup if v == true
      raise ArgumentError, "#{where}: #{name} must be true, false or a Hash like #{defaults.inspect}" unless v.is_a?(Hash)
      h = defaults.dup
      v.each do |k, x|
        raise ArgumentError, "#{where}: #{name}: unknown key #{k.inspect} (known: #{defaults.keys.join(', ')})" unless h.key?(k)
        raise ArgumentError, "#{where}: #{name}: #{k} must be a positive number, got #{x.inspect}" unless x.is_a?(Numeric) && x > 0
        h[k] = x
      end
      h
    end
  end
end
