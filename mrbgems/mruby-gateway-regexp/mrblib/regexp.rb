# The Ruby half of Regexp: union, MatchData's small methods, and the String
# methods whose Regexp form calls a block (gsub/sub with a block or a Hash,
# scan) or which mruby writes in Ruby (sub, gsub, partition, rpartition). A
# String pattern still goes to mruby's own method, unchanged.
#
# Blocks run in Ruby frames here, never under a C function, so a block may
# wait (Async.sleep) like any handler code.
class Regexp
  def self.union(*pats)
    pats = pats[0] if pats.size == 1 && pats[0].is_a?(Array)
    return Regexp.new('(?!)') if pats.empty?
    if pats.size == 1
      p = pats[0]
      return p if p.is_a?(Regexp)
    end
    Regexp.new(pats.map { |p| p.is_a?(Regexp) ? p.to_s : Regexp.escape(p.to_s) }.join('|'))
  end

  def ~
    self =~ $_
  end
end

class MatchData
  def values_at(*idx)
    idx.map { |i| self[i] }
  end

  def ==(other)
    other.is_a?(MatchData) && string == other.string && regexp == other.regexp && offset(0) == other.offset(0)
  end

  def inspect
    s = "#<MatchData #{self[0].inspect}"
    names = regexp.names
    (1...size).each do |i|
      label = names.empty? ? i.to_s : (names[i - 1] || i.to_s)
      s << " #{label}:#{self[i].inspect}"
    end
    s << '>'
  end
end

class String
  alias __gw_str_sub sub
  alias __gw_str_gsub gsub
  alias __gw_str_sub! sub!
  alias __gw_str_gsub! gsub!
  alias __gw_str_partition partition
  alias __gw_str_rpartition rpartition

  def =~(other)
    raise TypeError, "type mismatch: String given" if other.is_a?(String)
    other =~ self
  end

  def match(re, pos = 0, &blk)
    re = Regexp.new(re) if re.is_a?(String)
    re.match(self, pos, &blk)
  end

  def match?(re, pos = 0)
    re = Regexp.new(re) if re.is_a?(String)
    re.match?(self, pos)
  end

  def sub(*args, &blk)
    return __gw_str_sub(*args, &blk) unless args[0].is_a?(Regexp)
    __gw_re_subst(args, false, &blk) || dup
  end

  def gsub(*args, &blk)
    return __gw_str_gsub(*args, &blk) unless args[0].is_a?(Regexp)
    return to_enum(:gsub, *args) if args.size == 1 && !blk
    __gw_re_subst(args, true, &blk) || dup
  end

  def sub!(*args, &blk)
    return __gw_str_sub!(*args, &blk) unless args[0].is_a?(Regexp)
    raise FrozenError, "can't modify frozen String" if frozen?
    s = __gw_re_subst(args, false, &blk)
    s && replace(s)
  end

  def gsub!(*args, &blk)
    return __gw_str_gsub!(*args, &blk) unless args[0].is_a?(Regexp)
    raise FrozenError, "can't modify frozen String" if frozen?
    s = __gw_re_subst(args, true, &blk)
    s && replace(s)
  end

  def scan(pat, &blk)
    pat = Regexp.new(Regexp.escape(pat)) if pat.is_a?(String)
    raise TypeError, "wrong argument type #{pat.class} (expected Regexp)" unless pat.is_a?(Regexp)
    out = blk ? nil : []
    pos = 0
    len = bytesize
    last = nil
    while pos <= len && (m = pat.__exec(self, pos))
      last = m
      item = m.size == 1 ? m[0] : m.captures
      b = m.begin(0)
      e = m.end(0)
      if blk
        Regexp.__set_last_match(m)
        blk.call(item)
      else
        out << item
      end
      pos = b == e ? pat.__next_pos(self, e) : e
    end
    Regexp.__set_last_match(last)
    blk ? self : out
  end

  def partition(sep)
    return __gw_str_partition(sep) unless sep.is_a?(Regexp)
    m = sep.match(self)
    return [dup, '', ''] unless m
    [m.pre_match, m[0], m.post_match]
  end

  def rpartition(sep)
    return __gw_str_rpartition(sep) unless sep.is_a?(Regexp)
    return ['', '', dup] unless rindex(sep)
    m = $~
    [m.pre_match, m[0], m.post_match]
  end

  # sub/gsub with a Regexp: args = [re] with a block, or [re, String or Hash].
  # The new String, or nil when nothing matched.
  def __gw_re_subst(args, global, &blk)
    raise ArgumentError, "wrong number of arguments (given #{args.size}, expected 1..2)" unless args.size == 1 || args.size == 2
    re = args[0]
    if args.size == 2
      rep = args[1]
      if rep.is_a?(Hash)
        blk = ->(s) { rep[s] }
      else
        raise TypeError, "no implicit conversion of #{rep.class} into String" unless rep.is_a?(String)
        return __gw_re_sub(re, rep, global)
      end
    end
    raise ArgumentError, 'wrong number of arguments (given 1, expected 2)' unless blk
    str = dup.freeze
    len = str.bytesize
    out = nil
    pos = 0
    last = 0
    m = nil
    while pos <= len && (md = re.__exec(str, pos))
      m = md
      b = md.begin(0)
      e = md.end(0)
      out ||= ''
      out << str.byteslice(last, b - last)
      Regexp.__set_last_match(md)
      out << blk.call(md[0]).to_s
      last = e
      break unless global
      pos = b == e ? re.__next_pos(str, e) : e
    end
    Regexp.__set_last_match(m)
    return nil unless out
    out << str.byteslice(last, len - last)
  end
end

module Gateway
  # split_path_info: (a fastcgi: location's, req.fastcgi_pass's), nginx's
  # fastcgi_split_path_info: a Regexp (or its source as a String) with two
  # groups, the script's path and PATH_INFO. Returns the Regexp; raises
  # ArgumentError naming `where` otherwise.
  def self._split_path_info(where, re)
    re = Regexp.new(re) if re.is_a?(String)
    unless re.is_a?(Regexp) && re.__groups == 2
      got = re.is_a?(Regexp) ? "#{re.inspect} (#{re.__groups} groups)" : re.inspect
      raise ArgumentError, "#{where}: split_path_info: must be a Regexp with two groups, the script and PATH_INFO " \
                           "(like %r{^(.+?\\.php)(/.*)$}), got #{got}"
    end
    re
  end
end
