# The tarantool study's /tnt route: the gateway speaks iproto to Tarantool
# and the server-side Lua function process_request(req) makes the response
# ({status, headers, body}); no HTTP backend in between.
#
#   /tnt        calls process_request with the request's method, path, query
#               and headers, and turns its [status, headers, body] into the
#               response
#   /tnt/json   the /lua variant: the same call, the reply processed in Ruby
#               and answered as JSON
#
# Run: tarantool with a script such as
#        box.cfg{listen = 3301}
#        box.schema.user.grant('guest', 'execute', 'universe', nil, {if_not_exists = true})
#        function process_request(req) return {200, {["x-a"] = "1"}, "body"} end
#      then: gateway -f examples/tarantool.rb; curl -si localhost:8080/tnt
tarantool :tnt, servers: ["127.0.0.1:3301"], pool: 8, timeout: 1.0

module Tnt
  def self.request_table(req)
    { "method" => req.method, "path" => req.path, "query" => req.query.to_s, "headers" => req.headers.to_h }
  end

  # process_request's first return value: [status, {name => value}, body].
  def self.process(req)
    Async::Tarantool[:tnt].call("process_request", [request_table(req)]).first
  end
end

server listen: 8080, workers: 2 do
  location "/tnt/json" do |req|
    status, headers, body = Tnt.process(req)
    [200, { "content-type" => "application/json" },
     [JSON.generate({ "status" => status, "headers" => headers, "body" => body, "length" => body.to_s.bytesize }) + "\n"]]
  end

  location "/tnt" do |req|
    begin
      status, headers, body = Tnt.process(req)
      [status, headers, [body.to_s]]
    rescue Gateway::TimeoutError, Gateway::UpstreamError => e
      [502, { "content-type" => "text/plain" }, ["tarantool: #{e.message}\n"]]
    end
  end
end
