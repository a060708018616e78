# Non-blocking primitives. Each native arms its event and records the fiber;
# this wrapper then yields; the completion resumes the fiber with a value or
# an exception, raised here.
module Async
  # mruby 3.1 resolves a constant by walking every enclosing scope: these
  # aliases are found in the first one on the per-request paths below.
  EXCEPTION = ::Exception

  # (`C === v` rather than `v.is_a?(C)`: the same test, without is_a?'s
  # argument parsing, on paths every request may take.)
  NUMERIC = ::Numeric

  # Async.sleep(0.01): suspends this handler for 10 ms without blocking the
  # worker (_gw_sleep arms the timer and parks the fiber in one call).
  def self.sleep(seconds)
    raise ArgumentError, "Async.sleep: seconds must be a Numeric, got #{seconds.inspect}" unless NUMERIC === seconds
    v = _gw_sleep(seconds.to_f)
    raise v if EXCEPTION === v
    nil
  end
end

module Async
  module HTTP
    # What a sub-request answered. Also readable the mruby-httprequest way:
    # res["body"], res["code"], res["headers"]. Made by the core, which
    # builds #headers (a Gateway::Headers) on first use only.
    class Response
      attr_reader :status, :body

      alias code status

      def [](key)
        case key.to_s
        when "body" then @body
        when "code", "status" then @status
        when "headers" then headers
        else headers[key]
        end
      end

      def inspect
        "#<Async::HTTP::Response #{@status} #{@body.size} bytes>"
      end
    end

    # A sub-request running in the background: start now, join later.
    class Task
      EXCEPTION = ::Exception

      # Waits (without blocking the worker) and returns the Response; raises
      # Gateway::UpstreamError or Gateway::TimeoutError if it failed.
      def join
        r = @done ? @result : _gw_join # parks until the task completes
        raise r if EXCEPTION === r
        r
      end

      def done?
        @done == true
      end
    end

    GET = "GET".freeze

    # Async::HTTP.start("/path" or "http://host:port/path", method:, headers:, body:, timeout:) -> Task
    # (_gw_start checks the arguments.)
    def self.start(target, method: GET, headers: nil, body: nil, timeout: nil)
      _gw_start(target, method.equal?(GET) ? GET : method.to_s.upcase, headers, body, timeout)
    end

    # Waits for one sub-request and returns its Response (also kept as last_response).
    def self.sub_request(target, method: GET, headers: nil, body: nil, timeout: nil)
      _gw_set_last_response(_gw_start(target, method.equal?(GET) ? GET : method.to_s.upcase, headers, body, timeout).join)
    end

    # last_response: the Response of this request's latest sub_request
    # (ngx_mruby's form); a native, like _gw_set_last_response.

    # Runs all sub-requests in parallel and returns their Responses in order.
    # Items may be targets or Tasks already started.
    def self.all(targets)
      tasks = []
      i = 0
      while i < targets.size
        t = targets[i]
        tasks << (t.is_a?(Task) ? t : start(t))
        i += 1
      end
      results = []
      i = 0
      while i < tasks.size # a plain loop: joining yields, which a C-method block cannot
        results << tasks[i].join
        i += 1
      end
      results
    end
  end
end
