# Non-blocking primitives. Each native arms its event and records the fiber;
# this wrapper then yields; the completion resumes the fiber with a value or
# an exception, raised here.
module Async
  def self._await
    v = Fiber.yield
    raise v if v.is_a?(Exception)
    v
  end

  # Async.sleep(0.01): suspends this handler for 10 ms without blocking the worker.
  def self.sleep(seconds)
    raise ArgumentError, "Async.sleep: seconds must be a Numeric, got #{seconds.inspect}" unless seconds.is_a?(Numeric)
    _gw_sleep(seconds.to_f)
    _await
    nil
  end
end
