# ngx_mruby's Rack-based API: `run app` in a handler, where app.call(env)
# returns [status, headers, body].
module Nginx
  module Rack
    # env["rack.input"]: the request body, read as an IO.
    class Input
      def initialize(body)
        @body = body
        @pos = 0
      end

      def read(len = nil)
        rest = @body[@pos..-1] || ""
        return (len ? nil : "") if rest.empty? && len
        s = len ? rest[0, len] : rest
        @pos += s.size
        s
      end

      def gets
        return nil if @pos >= @body.size
        i = @body.index("\n", @pos)
        s = i ? @body[@pos..i] : @body[@pos..-1]
        @pos += s.size
        s
      end

      def each
        while (l = gets)
          yield l
        end
      end

      def rewind
        @pos = 0
      end
    end

    # env["rack.logger"]: the error log, at nginx's levels.
    class Logger
      { fatal: :crit, emerg: :crit, alert: :crit, crit: :crit, error: :error, warn: :warn, notice: :notice,
        info: :info, debug: :debug }.each do |name, level|
        define_method(name) do |msg = nil, &blk|
          Gateway.log(level, (blk ? blk.call : msg).to_s)
        end
      end
    end

    def self.env(req)
      host = req.hostname || ""
      a = Nginx._gw_addresses
      env = {
        "REQUEST_METHOD" => req.method,
        "SCRIPT_NAME" => "",
        "PATH_INFO" => req.uri,
        "REQUEST_URI" => req.unparsed_uri,
        "QUERY_STRING" => req.query,
        "SERVER_NAME" => host,
        "SERVER_ADDR" => a[2].to_s,
        "SERVER_PORT" => a[3].to_s,
        "REMOTE_ADDR" => req.remote_addr,
        "SERVER_PROTOCOL" => req.http_version,
        "rack.url_scheme" => req.scheme,
        "rack.multithread" => false,
        "rack.multiprocess" => true,
        "rack.run_once" => false,
        "rack.hijack?" => false,
        "rack.input" => Input.new(req.body),
        "rack.errors" => Logger.new,
        "rack.logger" => Logger.new,
        "server.name" => "NGINX",
        "server.version" => Nginx.nginx_version
      }
      req.headers.each do |k, v|
        key = k.upcase.tr("-", "_")
        if key == "CONTENT_TYPE" || key == "CONTENT_LENGTH"
          env[key] = v
        else
          env["HTTP_#{key}"] = v
        end
      end
      env
    end
  end
end

module Kernel
  # run(app): calls app.call(env) and returns its [status, headers, body],
  # which the handler answers with (ngx_mruby writes `run app` as the
  # handler's last line). A status of Nginx::DECLINED sets the headers and
  # returns Nginx::DECLINED, so an access or rewrite phase goes on.
  def run(app)
    req = Gateway::Request.current
    result = app.call(Nginx::Rack.env(req))
    unless result.is_a?(Array) && result.size == 3
      raise TypeError, "run: the app must return [status, headers, body], got #{result.inspect[0, 80]}"
    end
    status, headers, = result
    raise TypeError, "run: the status must be an Integer, got #{status.inspect}" unless status.is_a?(Integer)
    if status == Nginx::DECLINED
      headers.each { |k, v| req.headers_out.add(k, v) } if headers
      return Nginx::DECLINED
    end
    result
  end
end
