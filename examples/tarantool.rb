# The tarantool study's two paths to one Tarantool, side by side: the
# server-side Lua function process_request(req) makes the response
# ({status, headers, body}), reached over iproto or over HTTP.
#
#   /tnt        iproto: calls process_request with the request's method, path,
#               query and headers, and turns its [status, headers, body] into
#               the response; no HTTP backend in between
#   /tnt/json   the study's Lua + cjson variant: the same call, the reply
#               processed in Ruby and answered as JSON
#   /http       HTTP: proxy_pass to Tarantool's own HTTP/1.1 responder, which
#               calls the same process_request (keep-alive upstream)
#
# Run: the Tarantool side is examples/tarantool.lua (iproto on 3301, the HTTP
#      responder on 8081, written on Tarantool's socket module: Debian's
#      Tarantool 2.6 has no http.server):
#        tarantool examples/tarantool.lua 3301 8081
#      then: gateway -f examples/tarantool.rb
#        curl -si localhost:8080/tnt; curl -si localhost:8080/http
#        curl -si localhost:8081/        (Tarantool answering HTTP itself)
#      `rake bench:tarantool` measures the four (docs/tarantool-study.md).
tarantool :tnt, servers: ["127.0.0.1:3301"], pool: 8, timeout: 1.0
upstream :tarantool_http, servers: ["127.0.0.1:8081"], keepalive: 16

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

  location "/http", proxy_pass: "http://tarantool_http"
end
