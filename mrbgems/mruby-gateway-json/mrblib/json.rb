# JSON as CRuby's json names it (the C half is src/json.c, on YAJL):
#   JSON.parse(str, symbolize_names: false, max_nesting: 100)
#   JSON.generate(obj) / obj.to_json / JSON.pretty_generate(obj)
#   JSON.dump(obj[, io]) / JSON.load(str_or_io)
# Errors: JSON::ParserError (a StandardError, byte offset in the message),
# JSON::NestingError (a ParserError), JSON::GeneratorError.
module JSON
  class << self
    # Options as keywords or as a trailing Hash (CRuby takes both);
    # max_nesting: false, nil or 0 switches the depth limit off.
    def parse(source, opts = nil)
      source = source.to_str unless source.is_a?(String)
      sym = false
      max = 100
      if opts
        sym = opts[:symbolize_names] ? true : false
        max = _max_nesting(opts, max)
      end
      _parse(source, sym, max)
    end

    def generate(obj, opts = nil)
      _generate(obj, false, opts ? _max_nesting(opts, 100) : 100)
    end

    # CRuby's layout: 2 spaces per level, "key": value, one element per line,
    # empty containers as {} and [].
    def pretty_generate(obj, opts = nil)
      _generate(obj, true, opts ? _max_nesting(opts, 100) : 100)
    end

    # JSON.dump(obj) is generate without a depth limit; with an IO-like
    # second argument the text is written to it and the IO returned.
    def dump(obj, io = nil)
      text = _generate(obj, false, 0)
      return text unless io
      io.write(text)
      io
    end

    # JSON.load(source): nil and an empty String give nil; an IO-like
    # source is read first; no depth limit.
    def load(source, opts = nil)
      source = source.read if source.respond_to?(:read)
      return nil if source.nil? || source.empty?
      parse(source, { max_nesting: false }.merge(opts || {}))
    end

    def _max_nesting(opts, default)
      return default unless opts.key?(:max_nesting)
      m = opts[:max_nesting]
      m ? Integer(m) : 0
    end
  end
end
