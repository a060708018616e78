# Scripted edge routing: the handler picks the upstream per request.
#
#   build/gateway -f examples/routing.rb
#   curl http://127.0.0.1:8080/api/users                     -> stable (2/3) or stable-b (1/3)
#   curl -H 'x-canary: 1' http://127.0.0.1:8080/api/users    -> canary
#   curl -H 'cookie: user=42' http://127.0.0.1:8080/cart/    -> the same server every time for user 42
#
# The three "services" are servers of this same file, so the example runs on
# its own; in real use they are other processes or hosts.

# Two groups. keepalive: idle connections kept per server; weights split the
# load (2:1 here); a server that refuses connections is skipped for 10 s.
upstream :stable, servers: [{ address: "127.0.0.1:9101", weight: 2 }, "127.0.0.1:9102"],
                  keepalive: 64, max_fails: 1, fail_timeout: 10
upstream :canary, servers: ["127.0.0.1:9103"]
# balance: :hash keeps a key (here a user id) on one server.
upstream :carts, servers: ["127.0.0.1:9101", "127.0.0.1:9102"], balance: :hash

server listen: "127.0.0.1:8080", workers: 1 do
  # Canary by header: the script decides, then hands the request over.
  location "/api/" do |req|
    if req.headers["x-canary"] == "1"
      req.proxy_pass "http://canary"
    else
      req.proxy_pass "http://stable"
    end
  end

  # Sticky routing by a cookie value.
  location "/cart/" do |req|
    pair = req.headers["cookie"].to_s.split(";").map(&:strip).find { |c| c.start_with?("user=") }
    user = pair ? pair[5..-1] : req.remote_addr
    req.proxy_pass "http://carts", hash_key: user
  end

  # A plain reverse proxy, no script: the prefix /static is replaced by /files.
  location "/static", proxy_pass: "http://127.0.0.1:9101/files"

  # Refuse what no upstream should see.
  location "/admin" do
    [403, { "content-type" => "text/plain" }, ["forbidden\n"]]
  end
end

# The demo services: each names itself, so you can see where a request went.
server listen: "127.0.0.1:9101" do
  location "/" do |req| "stable-a #{req.path}\n" end
end
server listen: "127.0.0.1:9102" do
  location "/" do |req| "stable-b #{req.path}\n" end
end
server listen: "127.0.0.1:9103" do
  location "/" do |req| "canary #{req.path}\n" end
end
