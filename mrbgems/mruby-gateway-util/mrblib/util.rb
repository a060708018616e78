# The small helpers handlers reach for (natives in src/util.c):
#   Gateway::Util.escape / unescape / encode_parameters (also Nginx::Utils)
#   Digest::MD5 / SHA1 / SHA256 .hexdigest / .digest / .base64digest
#   Base64.encode64 / decode64 / strict_* / urlsafe_*
#   Time#httpdate, Time#iso8601 (xmlschema), Time.httpdate
#   Process.pid, and ENV read-only
module Gateway
  module Util
    # escape(str): every byte but A-Z a-z 0-9 - . _ ~ as %XX (space: %20).
    def self.escape(str)
      _escape(str.to_s)
    end

    # unescape(str): %XX decoded, '+' as a space (CGI.unescape).
    def self.unescape(str)
      _unescape(str.to_s)
    end

    # encode_parameters({ "a" => "x y", b: 1 }) -> "a=x%20y&b=1"; an Array
    # gives its escaped elements joined (ngx_mruby's signature).
    def self.encode_parameters(params, delimiter = "&", quote = nil)
      list = if params.is_a?(Hash)
               params.map { |k, v| "#{escape(k)}=#{quote}#{escape(v)}#{quote}" }
             else
               params.map { |v| escape(v) }
             end
      delimiter ? list.join(delimiter) : list
    end

    def self.hex(bytes)
      bytes.unpack("H*")[0]
    end
  end

  # ENV's class: reads the process environment; every writer raises.
  class Env
    class ReadOnlyError < StandardError; end

    def [](name)
      Util._getenv(name.to_str)
    end

    # fetch(name), fetch(name, default), fetch(name) { |name| ... }: as Hash#fetch.
    def fetch(name, *default)
      v = self[name]
      return v unless v.nil?
      return yield(name) if block_given?
      return default[0] unless default.empty?
      raise KeyError, "key not found: #{name.inspect}"
    end

    def key?(name)
      !self[name].nil?
    end
    alias include? key?
    alias has_key? key?
    alias member? key?

    def to_h
      Util._environ
    end
    alias to_hash to_h

    def keys
      to_h.keys
    end

    def each(&block)
      to_h.each(&block)
      self
    end

    def inspect
      to_h.inspect
    end

    [:[]=, :store, :delete, :clear, :update, :replace].each do |m|
      define_method(m) do |*|
        raise ReadOnlyError, "ENV is read-only in the gateway (ENV.#{m})"
      end
    end
  end
end

ENV = Gateway::Env.new unless Object.const_defined?(:ENV)

module Process
  def self.pid
    Gateway.pid
  end
end

module Nginx
  Utils = Gateway::Util unless const_defined?(:Utils)
end

module Digest
  # Digest::MD5.hexdigest(str), .digest(str), .base64digest(str).
  class Base
    def self.digest(str)
      Gateway::Util._digest(self::NAME, str.to_s)
    end

    def self.hexdigest(str)
      Gateway::Util.hex(digest(str))
    end

    def self.base64digest(str)
      Base64.strict_encode64(digest(str))
    end
  end

  class MD5 < Base; NAME = "md5"; end
  class SHA1 < Base; NAME = "sha1"; end
  class SHA256 < Base; NAME = "sha256"; end
end

module Base64
  # encode64: lines of 60 characters, each ending in "\n" (CRuby's).
  def self.encode64(str)
    s = Gateway::Util._b64encode(str.to_s)
    out = ""
    i = 0
    while i < s.size
      out << s[i, 60] << "\n"
      i += 60
    end
    out
  end

  def self.strict_encode64(str)
    Gateway::Util._b64encode(str.to_s)
  end

  def self.urlsafe_encode64(str, padding: true)
    s = strict_encode64(str).tr("+/", "-_")
    padding ? s : s.delete("=")
  end

  # decode64: lenient (skips what is not Base64, stops at '=').
  def self.decode64(str)
    Gateway::Util._b64decode(str.to_s, false)
  end

  # strict_decode64: ArgumentError unless the text is exact padded Base64.
  def self.strict_decode64(str)
    Gateway::Util._b64decode(str.to_s, true) or raise ArgumentError, "invalid base64"
  end

  # urlsafe_decode64: '-' and '_', padding optional (as CRuby).
  def self.urlsafe_decode64(str)
    s = str.to_s.tr("-_", "+/")
    s += "=" * ((4 - s.size % 4) % 4) unless s.end_with?("=")
    strict_decode64(s)
  end
end

class Time
  HTTP_DAYS = %w[Sun Mon Tue Wed Thu Fri Sat]
  HTTP_MONTHS = %w[Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec]

  # "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 IMF-fixdate, in UTC).
  def httpdate
    t = getutc
    format("%s, %02d %s %04d %02d:%02d:%02d GMT", HTTP_DAYS[t.wday], t.day, HTTP_MONTHS[t.month - 1],
           t.year, t.hour, t.min, t.sec)
  end

  # "1994-11-06T08:49:37Z" in UTC, "2024-01-02T03:04:05+09:00" otherwise;
  # fraction_digits: decimals of the second.
  def iso8601(fraction_digits = 0)
    s = format("%04d-%02d-%02dT%02d:%02d:%02d", year, month, day, hour, min, sec)
    if fraction_digits > 0
      s << "." << format("%06d", usec)[0, [fraction_digits, 6].min]
      s << "0" * (fraction_digits - 6) if fraction_digits > 6
    end
    return s << "Z" if utc?
    off = Time.gm(year, month, day, hour, min, sec).to_i - to_i
    sign = off < 0 ? "-" : "+"
    off = off.abs
    s << format("%s%02d:%02d", sign, off / 3600, off % 3600 / 60)
  end
  alias xmlschema iso8601

  # Time.httpdate(text): the three forms RFC 9110 §5.6.7 requires a
  # recipient to accept (IMF-fixdate, RFC 850, asctime), in UTC;
  # ArgumentError otherwise.
  def self.httpdate(text)
    w = text.to_s.strip.split(" ")
    case w.size
    when 6 # Sun, 06 Nov 1994 08:49:37 GMT
      raise ArgumentError, "not an HTTP date: #{text.inspect}" unless w[5] == "GMT"
      day, mon, year, clock = w[1], w[2], w[3], w[4]
    when 4 # Sunday, 06-Nov-94 08:49:37 GMT
      raise ArgumentError, "not an HTTP date: #{text.inspect}" unless w[3] == "GMT"
      day, mon, year = w[1].split("-")
      clock = w[2]
      y = year.to_i
      year = (y < 50 ? 2000 + y : 1900 + y).to_s if year && year.size == 2
    when 5 # Sun Nov  6 08:49:37 1994
      mon, day, clock, year = w[1], w[2], w[3], w[4]
    else
      raise ArgumentError, "not an HTTP date: #{text.inspect}"
    end
    m = HTTP_MONTHS.index(mon)
    hms = clock.to_s.split(":")
    nums = [year, day, *hms]
    unless m && hms.size == 3 && nums.all? { |n| n && !n.empty? && n.bytes.all? { |b| b >= 48 && b <= 57 } }
      raise ArgumentError, "not an HTTP date: #{text.inspect}"
    end
    Time.gm(year.to_i, m + 1, day.to_i, hms[0].to_i, hms[1].to_i, hms[2].to_i)
  end
end
