assert('listen accepts a port') do
  assert_equal ["0.0.0.0", 8080], Gateway::Server.parse_listen(8080)
end

assert('listen accepts host:port') do
  assert_equal ["127.0.0.1", 58080], Gateway::Server.parse_listen("127.0.0.1:58080")
end

assert('listen rejects a name without a port') do
  assert_raise(ArgumentError) { Gateway::Server.parse_listen("nope") }
end

assert('listen rejects port 0 and 70000') do
  assert_raise(ArgumentError) { Gateway::Server.parse_listen(0) }
  assert_raise(ArgumentError) { Gateway::Server.parse_listen("1.2.3.4:70000") }
end

assert('limits merge over the defaults') do
  l = Gateway::Server.merge_limits(max_body: 10)
  assert_equal 10, l[:max_body]
  assert_equal 8192, l[:max_request_line]
end

assert('an unknown limit is an error') do
  assert_raise(ArgumentError) { Gateway::Server.merge_limits(max_bodyy: 10) }
end

assert('"= /x" is an exact location') do
  loc = Gateway::Location.new("= /x", proc {}, nil, nil, false)
  assert_true loc.exact
  assert_equal "/x", loc.path
end

assert('a location needs a handler or proxy_pass, not both') do
  assert_raise(ArgumentError) { Gateway::Location.new("/x", nil, nil, nil, false) }
  assert_raise(ArgumentError) { Gateway::Location.new("/x", proc {}, "http://127.0.0.1:1/", nil, false) }
end

assert('a proxy_pass location streams request bodies unless request_buffering: true') do
  loc = Gateway::Location.new("/u", nil, "http://127.0.0.1:1/", nil, false, max_body: 5)
  assert_false loc.request_buffering
  assert_equal 5, loc.max_body
  loc = Gateway::Location.new("/u", nil, "http://127.0.0.1:1/", nil, false, request_buffering: true)
  assert_true loc.request_buffering
  assert_nil loc.max_body
  assert_raise(ArgumentError) { Gateway::Location.new("/u", proc {}, nil, nil, false, request_buffering: true) }
  assert_raise(ArgumentError) { Gateway::Location.new("/u", proc {}, nil, nil, false, max_body: 0) }
end

assert('a location path must start with a slash') do
  assert_raise(ArgumentError) { Gateway::Location.new("x", proc {}, nil, nil, false) }
end

assert('a location defined twice is an error') do
  s = Gateway::Server.new(1, 1, {})
  s.location("/a") { "a" }
  assert_raise(ArgumentError) { s.location("/a") { "b" } }
end

assert('root: makes a static location with defaults; alias: replaces the prefix') do
  s = Gateway::Server.new(1, 1, {})
  loc = s.location("/a", root: "/srv/www")
  st = loc.static
  assert_equal "/srv/www", st[:dir]
  assert_false st[:alias]
  assert_equal ["index.html"], st[:index]
  assert_equal({ max: 1000, valid: 1.0 }, st[:open_file_cache])
  assert_equal 65_536, st[:memory_cache][:max_file]
  assert_true s.location("/b", alias: "/srv/b", open_file_cache: false).static[:alias]
  assert_nil s.location("/c", alias: "/srv/c", memory_cache: false).static[:memory_cache]
end

assert('static options are checked') do
  s = Gateway::Server.new(1, 1, {})
  assert_raise(ArgumentError) { s.location("/a", root: "/x", alias: "/y") }
  assert_raise(ArgumentError) { s.location("/b", index: ["i.html"]) }
  assert_raise(ArgumentError) { s.location("/c", root: "/x") { "block" } }
  assert_raise(ArgumentError) { s.location("/d", root: "/x", types: { "a" => 1 }) }
  assert_raise(ArgumentError) { s.location("/e", root: "/x", memory_cache: { nope: 1 }) }
  assert_raise(ArgumentError) { s.location("/f", root: "/x", rooot: 1) }
  assert_equal ["wasm", "application/wasm"], s.location("/g", root: "/x", types: { ".wasm" => "application/wasm" }).static[:types]
end

assert('cpu_limit defaults to 5 s; a location inherits its server\'s unless it has its own') do
  s = Gateway::Server.new(1, 1, {})
  assert_equal 5, s.cpu_limit
  assert_equal 5, s.location("/a") { "a" }.cpu_limit
  assert_equal 0.5, s.location("/b", cpu_limit: 0.5) { "b" }.cpu_limit
  assert_nil s.location("/c", cpu_limit: nil) { "c" }.cpu_limit
  s = Gateway::Server.new(1, 1, {}, cpu_limit: nil)
  assert_nil s.location("/a") { "a" }.cpu_limit
  assert_equal 2, s.location("/b", cpu_limit: 2) { "b" }.cpu_limit
end

assert('cpu_limit must be a positive number of seconds or nil') do
  assert_raise(ArgumentError) { Gateway::Server.new(1, 1, {}, cpu_limit: 0) }
  assert_raise(ArgumentError) { Gateway::Server.new(1, 1, {}, cpu_limit: "5") }
  assert_raise(ArgumentError) { Gateway::Server.new(1, 1, {}).location("/x", cpu_limit: -1) { "x" } }
end

assert('Gateway::CPULimitExceeded is an Exception, not a StandardError') do
  assert_true Gateway::CPULimitExceeded < Exception
  assert_false Gateway::CPULimitExceeded.ancestors.include?(StandardError)
end

assert('tls: ocsp and on_handshake are parsed per certificate') do
  hook = ->(ssl) { ssl }
  t = Gateway::TLS.parse(cert: "a.pem", key: "a.key", ocsp: "a.ocsp.der", on_handshake: hook)
  assert_equal "a.ocsp.der", t[:certs][0][:ocsp]
  assert_equal hook, t[:on_handshake]
  assert_nil Gateway::TLS.parse(cert: "a.pem", key: "a.key")[:on_handshake]
end

assert('tls: a bad ocsp or on_handshake is an error') do
  assert_raise(ArgumentError) { Gateway::TLS.parse(cert: "a.pem", key: "a.key", ocsp: 5) }
  assert_raise(ArgumentError) { Gateway::TLS.parse(cert: "a.pem", key: "a.key", ocsp: "") }
  assert_raise(ArgumentError) { Gateway::TLS.parse(cert: "a.pem", key: "a.key", on_handshake: "x") }
end

assert('tls_* options of a location: nil without them, checked and defaulted with them') do
  s = Gateway::Server.new(1, 1, {})
  assert_nil s.location("/a", proxy_pass: "https://127.0.0.1:8443/").tls_client
  t = s.location("/b", proxy_pass: "https://127.0.0.1:8443/", tls_ca: "ca.pem").tls_client
  assert_true t[:verify]
  assert_equal "ca.pem", t[:ca]
  assert_nil t[:server_name]
  assert_false s.location("/c", proxy_pass: "https://h/", tls_verify: false).tls_client[:verify]
  assert_nil s.location("/d") { "x" }.tls_client
  assert_equal "api.example", s.location("/e", tls_server_name: "api.example") { "x" }.tls_client[:server_name]
  assert_raise(ArgumentError) { s.location("/f", proxy_pass: "https://h/", tls_verify: "no") }
  assert_raise(ArgumentError) { s.location("/g", proxy_pass: "https://h/", tls_ca: "") }
  assert_raise(ArgumentError) { s.location("/h", proxy_pass: "https://h/", tls_cert: "c.pem") } # without tls_key
  assert_raise(ArgumentError) { s.location("/i", proxy_pass: "https://h/", tls_server_name: "a b") }
end

assert('upstream groups take https:// servers and tls_* options; not for FastCGI') do
  up = Gateway::Upstream.new("tls", ["https://127.0.0.1:8443", "10.0.0.1:80"], 8)
  assert_equal ["https://127.0.0.1:8443", "10.0.0.1:80"], up.servers
  assert_raise(ArgumentError) { Gateway::Upstream.new("bad", ["https://"], 8) }
  assert_raise(ArgumentError) { Gateway::Upstream.new("bad", ["https://h"], 8) } # a port is required
  assert_raise(ArgumentError) { Gateway::Upstream.new("bad", ["ftp://h:1"], 8) }
  assert_raise(ArgumentError) { Gateway::Upstream.new("f", ["https://127.0.0.1:9000"], 8, protocol: :fastcgi) }
end

assert('grpc_pass: "host:port" is proxy_pass to h2c://host:port') do
  s = Gateway::Server.new(1, 1, {})
  assert_equal "h2c://127.0.0.1:50051", s.location("/a.B/", grpc_pass: "127.0.0.1:50051").proxy_pass
  assert_equal "h2c://users", s.location("/c.D/", grpc_pass: "grpc://users").proxy_pass
  assert_raise(ArgumentError) { s.location("/e", grpc_pass: "127.0.0.1:1", proxy_pass: "http://127.0.0.1:2") }
  assert_raise(ArgumentError) { s.location("/f", grpc_pass: "h2c://127.0.0.1:1/x") }
  assert_raise(ArgumentError) { s.location("/g", grpc_pass: 42) }
end

assert('grpc_pass: "grpcs://host:port" is proxy_pass to h2://host:port, with the tls_* settings') do
  s = Gateway::Server.new(1, 1, {})
  l = s.location("/a.B/", grpc_pass: "grpcs://127.0.0.1:50051", tls_verify: false)
  assert_equal "h2://127.0.0.1:50051", l.proxy_pass
  assert_equal "h2://users", s.location("/c.D/", grpc_pass: "grpcs://users").proxy_pass
  e = assert_raise(ArgumentError) { s.location("/h", grpc_pass: "grpcs://127.0.0.1:1/x") }
  assert_include e.message, "grpc_pass must be"
  assert_raise(ArgumentError) { s.location("/i", grpc_pass: "grpcs://") }
end

assert('proxy_pass takes h2:// (HTTP/2 over TLS) and h2c:// URLs') do
  assert_equal "h2://127.0.0.1:1", Gateway::Location.new("/x", nil, "h2://127.0.0.1:1", nil, false).proxy_pass
  assert_equal "h2://api.example/p", Gateway::Location.new("/z", nil, "h2://api.example/p", nil, false).proxy_pass
  assert_equal "h2c://127.0.0.1:1/p", Gateway::Location.new("/y", nil, "h2c://127.0.0.1:1/p", nil, false).proxy_pass
  assert_raise(ArgumentError) { Gateway::Location.new("/w", nil, "h2://", nil, false) }
end

assert('an upstream of h2c:// servers is an h2c group, all or none') do
  up = Gateway::Upstream.new(:g1, ["h2c://127.0.0.1:1", { address: "h2c://127.0.0.1:2", weight: 2 }], 4)
  assert_equal :h2c, up.protocol
  assert_equal ["127.0.0.1:1", "127.0.0.1:2"], up.servers
  assert_raise(ArgumentError) { Gateway::Upstream.new(:g2, ["h2c://127.0.0.1:1", "127.0.0.1:2"], 4) }
  assert_raise(ArgumentError) { Gateway::Upstream.new(:g4, ["h2c://127.0.0.1:1"], 4, protocol: :fastcgi) }
end

assert('an upstream of h2:// servers is an HTTP/2 group over TLS (its servers as https://)') do
  up = Gateway::Upstream.new(:g5, ["h2://127.0.0.1:1", { address: "h2://api.example:443", weight: 2 }], 4)
  assert_equal :h2c, up.protocol
  assert_equal ["https://127.0.0.1:1", "https://api.example:443"], up.servers
  assert_raise(ArgumentError) { Gateway::Upstream.new(:g6, ["h2://127.0.0.1:1", "127.0.0.1:2"], 4) }
  assert_raise(ArgumentError) { Gateway::Upstream.new(:g7, ["h2://127.0.0.1"], 4) } # a port is required
  assert_raise(ArgumentError) { Gateway::Upstream.new(:g8, ["h2://127.0.0.1:1"], 4, protocol: :fastcgi) }
end
