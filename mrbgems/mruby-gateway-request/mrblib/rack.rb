# Rack-style handlers, as ngx_mruby's `run` (its rack-based API): the last
# expression of a handler (or handler file) is `run app`, where
# app.call(env) returns [status, headers, body] (body: a String or anything
# that answers each), which becomes the response.
module Gateway
  # rack.input: the request body, read as an IO would be.
  class RackInput
    def initialize(body)
      @body = body
      @pos = 0
    end

    def read(len = nil, buf = nil)
      rest = @body.bytesize - @pos
      return (len.nil? || len == 0 ? "" : nil) if rest <= 0 && !(len.nil? || len == 0)
      n = len.nil? ? rest : (len < rest ? len : rest)
      s = @body.byteslice(@pos, n) || ""
      @pos += n
      buf ? buf.replace(s) : s
    end

    def gets
      return nil if @pos >= @body.bytesize
      nl = @body.index("\n", @pos)
      n = nl ? nl - @pos + 1 : @body.bytesize - @pos
      read(n)
    end

    def each
      while (line = gets)
        yield line
      end
    end

    def rewind
      @pos = 0
    end
  end

  # rack.logger: Gateway.log at the matching level.
  class RackLogger
    [:debug, :info, :warn, :error].each do |level|
      define_method(level) { |msg = nil| Gateway.log(level, msg.to_s) }
    end

    def fatal(msg = nil)
      Gateway.log(:crit, msg.to_s)
    end
  end

  class Request
    # The Rack environment of this request.
    def rack_env
      host, port = Gateway.split_host_port(headers["host"] || "")
      env = {
        "REQUEST_METHOD" => method,
        "SCRIPT_NAME" => "",
        "PATH_INFO" => path,
        "QUERY_STRING" => query,
        "SERVER_NAME" => host.nil? || host.empty? ? "localhost" : host,
        "SERVER_PORT" => port.nil? || port.empty? ? "80" : port,
        "SERVER_PROTOCOL" => http_version,
        "REMOTE_ADDR" => remote_addr,
        "rack.url_scheme" => "http",
        "rack.input" => RackInput.new(body),
        "rack.errors" => RackLogger.new,
        "rack.logger" => RackLogger.new,
        "rack.multithread" => false,
        "rack.multiprocess" => true,
        "rack.run_once" => false,
        "rack.version" => [1, 3],
      }
      headers.each do |name, value|
        key = name.upcase.tr("-", "_")
        case key
        when "CONTENT_TYPE", "CONTENT_LENGTH" then env[key] = value
        else env["HTTP_" + key] = value
        end
      end
      env
    end
  end
end

module Kernel
  # run(app): the handler's response is app.call(env) (a Rack triple).
  def run(app)
    result = app.call(Gateway::Request.current.rack_env)
    unless result.is_a?(Array) && result.size == 3
      raise TypeError, "run: app.call(env) must return [status, headers, body], got #{result.inspect[0, 80]}"
    end
    status, hdrs, body = result
    unless body.is_a?(String) || body.is_a?(Array)
      parts = []
      body.each { |part| parts << part.to_s }
      body.close if body.respond_to?(:close)
      body = parts
    end
    [status, hdrs, body]
  end
end
