# The smallest useful config: one server, one location, a Ruby handler.
#   build/gateway -f examples/hello.rb      then: curl http://127.0.0.1:8080/hello
server listen: 8080, workers: 1 do
  # A String return value is a 200 text/plain response.
  location "/hello" do
    "hello, world\n"
  end

  # The handler receives the request; a Rack-style array sets status and headers.
  location "/echo" do |req|
    [200, { "content-type" => "text/plain" }, ["#{req.method} #{req.path}?#{req.query}\n"]]
  end
end
