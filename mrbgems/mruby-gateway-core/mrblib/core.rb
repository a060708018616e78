# The Gateway namespace and the errors every gem raises.
module Gateway
  # Base of every error the gateway raises into scripts.
  class Error < StandardError; end
  # An upstream (proxy or sub-request target) refused, reset or answered garbage.
  class UpstreamError < Error; end
  # An operation did not complete within its timeout.
  class TimeoutError < Error; end
  # A handler file that cannot be read or compiled; the message is
  # "FILE:LINE: message" (the config reports it as is).
  class HandlerFileError < ScriptError; end
  # A request's Ruby code ran on the CPU past its cpu_limit: without waiting.
  # An Exception, not a StandardError, so that `rescue => e` in a handler
  # does not swallow it; a handler that rescues it anyway and runs on is
  # stopped for good at twice the limit.
  class CPULimitExceeded < Exception; end

  LOG_LEVELS = [:debug, :info, :notice, :warn, :error, :crit]

  # The one host:port splitter of the Ruby side (gateway/net/addr.c is the C one):
  #   "h:80" -> ["h", "80"], "h" -> ["h", nil], "h:" -> ["h", ""],
  #   "[::1]:80" -> ["::1", "80"], "[::1]" -> ["::1", nil],
  #   "::1:80" -> ["::1", "80"] (unbracketed: split at the last ':').
  # The port is returned as text, unchecked (see port_string?); nil when a
  # "[" has no "]" or something other than ":port" follows the "]".
  def self.split_host_port(s)
    if s.start_with?("[")
      close = s.index("]")
      return nil unless close
      host = s[1...close]
      rest = s[(close + 1)..-1] || ""
      return [host, nil] if rest.empty?
      return rest.start_with?(":") ? [host, rest[1..-1]] : nil
    end
    i = s.rindex(":")
    i ? [s[0, i], s[(i + 1)..-1]] : [s, nil]
  end

  # A port as text: 1 to 5 ASCII digits, 1..65535.
  def self.port_string?(s)
    !s.empty? && s.length <= 5 && s.bytes.all? { |b| b >= 48 && b <= 57 } && s.to_i >= 1 && s.to_i <= 65535
  end

  # Gateway.log(:warn, "message") writes to the error log.
  def self.log(level, msg = nil)
    if msg.nil?
      msg = level
      level = :notice
    end
    i = LOG_LEVELS.index(level.to_sym)
    raise ArgumentError, "Gateway.log: unknown level #{level.inspect} (#{LOG_LEVELS.join(', ')})" unless i
    _gw_log(i, msg.to_s)
  end
end
