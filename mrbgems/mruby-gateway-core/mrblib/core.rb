# The Gateway namespace and the errors every gem raises.
module Gateway
  # Base of every error the gateway raises into scripts.
  class Error < StandardError; end
  # An upstream (proxy or sub-request target) refused, reset or answered garbage.
  class UpstreamError < Error; end
  # An operation did not complete within its timeout.
  class TimeoutError < Error; end

  LOG_LEVELS = [:debug, :info, :notice, :warn, :error, :crit]

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
