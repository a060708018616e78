# ngx_mruby compatibility: handler code written for ngx_mruby runs unchanged.
# Differences (on purpose): output after Nginx.return is sent, and an empty
# 200 is a valid response.
module Nginx
  # nginx's handler results (a rewrite or access phase that returns OK or
  # DECLINED lets the request go on).
  OK = 0
  ERROR = -1
  AGAIN = -2
  BUSY = -3
  DONE = -4
  DECLINED = -5

  HTTP_CONTINUE = 100
  HTTP_OK = 200
  HTTP_CREATED = 201
  HTTP_ACCEPTED = 202
  HTTP_NO_CONTENT = 204
  HTTP_MOVED_PERMANENTLY = 301
  HTTP_MOVED_TEMPORARILY = 302
  HTTP_SEE_OTHER = 303
  HTTP_NOT_MODIFIED = 304
  HTTP_TEMPORARY_REDIRECT = 307
  HTTP_BAD_REQUEST = 400
  HTTP_UNAUTHORIZED = 401
  HTTP_FORBIDDEN = 403
  HTTP_NOT_FOUND = 404
  HTTP_NOT_ALLOWED = 405
  HTTP_REQUEST_TIME_OUT = 408
  HTTP_INTERNAL_SERVER_ERROR = 500
  HTTP_NOT_IMPLEMENTED = 501
  HTTP_BAD_GATEWAY = 502
  HTTP_SERVICE_UNAVAILABLE = 503
  HTTP_GATEWAY_TIME_OUT = 504

  LOG_STDERR = 0
  LOG_EMERG = 1
  LOG_ALERT = 2
  LOG_CRIT = 3
  LOG_ERR = 4
  LOG_WARN = 5
  LOG_NOTICE = 6
  LOG_INFO = 7
  LOG_DEBUG = 8

  # Nginx.rputs, Nginx.echo and Nginx.return are natives (src/nginx.c).

  def self.errlogger(level, msg)
    lv = { 1 => :crit, 2 => :crit, 3 => :crit, 4 => :error, 5 => :warn, 6 => :notice, 7 => :info, 8 => :debug }[level] || :error
    Gateway.log(lv, msg)
  end

  def self.log(level, msg)
    errlogger(level, msg)
  end

  def self.module_name
    "gateway"
  end

  # Nginx::Request.new is the current request (a Gateway::Request).
  class Request
    def self.new
      Gateway::Request.current
    end
  end

  class Headers_in
    def self.new
      Gateway::Request.current.headers
    end
  end

  class Headers_out
    def self.new
      Gateway::Request.current.headers_out
    end
  end
end

module Nginx
  # ngx_mruby's non-blocking calls. Nginx::Async.sleep takes milliseconds.
  module Async
    def self.sleep(ms)
      unless ms.is_a?(Integer) && ms > 0
        raise ArgumentError, "Nginx::Async.sleep: milliseconds must be an Integer > 0, got #{ms.inspect}"
      end
      async = ::Async
      async._gw_sleep(ms / 1000.0) # Async.sleep without its Numeric check
      async._await
      nil
    end

    module HTTP
      # sub_request(path, args = nil): args is the sub-request's query string.
      def self.sub_request(path, args = nil)
        path = "#{path}?#{args}" if args
        http = ::Async::HTTP
        http._gw_set_last_response(http._gw_start(path, http::GET, nil, nil, nil).join)
        nil
      end

      def self.last_response
        ::Async::HTTP.last_response
      end
    end
  end
end
