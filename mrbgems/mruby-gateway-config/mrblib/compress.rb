# Compression on the fly (`compress:`) and multi-range answers (`max_ranges:`)
# of a server or location, checked here (so an error names the config line)
# and handed to the core (gateway/core/compress.c, gateway/handler/static/static.c) as plain
# values: Location#compress (a Hash, or nil: off) and Location#max_ranges.
module Gateway
  module Compress
    CODINGS = [:zstd, :br, :gzip]
    LEVELS = { gzip: 1..9, br: 0..11, zstd: 1..19 }
    DEFAULTS = {
      encodings: [:zstd, :br, :gzip],
      level: { gzip: 1, br: 1, zstd: 3 },
      min_length: 256,
      types: ["text/*", "application/json", "application/javascript", "application/x-javascript",
              "application/ecmascript", "application/xml", "application/wasm", "image/svg+xml", "*/*+json", "*/*+xml"]
    }
    DEFAULT_MAX_RANGES = 100

    # v: true (the defaults), false or nil (off), or a Hash over the
    # defaults. Returns the Hash the core reads, or nil.
    def self.options(where, v)
      return nil if v.nil? || v == false
      return copy(DEFAULTS) if v == true
      unless v.is_a?(Hash)
        raise ArgumentError, "#{where}: compress must be true, false or a Hash like { encodings: [:br, :gzip], level: { gzip: 5 } }, got #{v.inspect}"
      end
      h = copy(DEFAULTS)
      v.each do |k, x|
        case k
        when :encodings
          list = x.is_a?(Array) ? x.map { |e| e.is_a?(String) ? e.to_sym : e } : nil
          unless list && !list.empty? && list.all? { |e| CODINGS.include?(e) } && list.uniq.size == list.size
            raise ArgumentError, "#{where}: compress: encodings must be a non-empty list of :zstd, :br, :gzip (each once), got #{x.inspect}"
          end
          h[:encodings] = list
        when :level
          raise ArgumentError, "#{where}: compress: level must be a Hash like { gzip: 1, br: 1, zstd: 3 }, got #{x.inspect}" unless x.is_a?(Hash)
          x.each do |c, n|
            c = c.to_sym if c.is_a?(String)
            raise ArgumentError, "#{where}: compress: level: unknown encoding #{c.inspect} (known: gzip, br, zstd)" unless LEVELS.key?(c)
            unless n.is_a?(Integer) && LEVELS[c].include?(n)
              raise ArgumentError, "#{where}: compress: level: #{c} must be an Integer from #{LEVELS[c].first} to #{LEVELS[c].last}, got #{n.inspect}"
            end
            h[:level][c] = n
          end
        when :min_length
          unless x.is_a?(Integer) && x >= 0
            raise ArgumentError, "#{where}: compress: min_length must be an Integer >= 0 (bytes), got #{x.inspect}"
          end
          h[:min_length] = x
        when :types
          unless x.is_a?(Array) && !x.empty? && x.all? { |t| t.is_a?(String) && t.include?("/") && !t.include?(";") && t.bytesize < 128 }
            raise ArgumentError, "#{where}: compress: types must be a non-empty list of media types like [\"text/*\", \"application/json\"], got #{x.inspect}"
          end
          h[:types] = x.map(&:downcase)
        else
          raise ArgumentError, "#{where}: compress: unknown key #{k.inspect} (known: #{DEFAULTS.keys.join(', ')})"
        end
      end
      h
    end

    def self.copy(h)
      { encodings: h[:encodings].dup, level: h[:level].dup, min_length: h[:min_length], types: h[:types].dup }
    end

    # max_ranges: an Integer from 0 (no ranges at all) to 10000.
    def self.max_ranges(where, v)
      return v if v.is_a?(Integer) && v >= 0 && v <= 10_000
      raise ArgumentError, "#{where}: max_ranges must be an Integer from 0 (ranges off) to 10000, got #{v.inspect}"
    end
  end

  class Location
    attr_accessor :compress, :max_ranges
  end

  class Server
    attr_accessor :compress, :max_ranges
  end
end
