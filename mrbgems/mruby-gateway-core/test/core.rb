assert('Gateway errors form one hierarchy') do
  assert_true Gateway::UpstreamError.ancestors.include?(Gateway::Error)
  assert_true Gateway::TimeoutError.ancestors.include?(Gateway::Error)
  assert_true Gateway::Error.ancestors.include?(StandardError)
end

assert('Gateway.log rejects an unknown level') do
  assert_raise(ArgumentError) { Gateway.log(:loud, "x") }
end

assert('Gateway.pid is this process id') do
  assert_kind_of Integer, Gateway.pid
end

assert('Gateway.split_host_port splits host:port and [v6]:port') do
  assert_equal ["example.com", "8080"], Gateway.split_host_port("example.com:8080")
  assert_equal ["example.com", nil], Gateway.split_host_port("example.com")
  assert_equal ["h", ""], Gateway.split_host_port("h:")
  assert_equal ["::1", "53"], Gateway.split_host_port("[::1]:53")
  assert_equal ["::1", nil], Gateway.split_host_port("[::1]")
  assert_equal ["::1", "80"], Gateway.split_host_port("::1:80")
  assert_equal ["", "80"], Gateway.split_host_port(":80")
end

assert('Gateway.split_host_port rejects a bad [v6] form') do
  assert_nil Gateway.split_host_port("[::1")
  assert_nil Gateway.split_host_port("[::1]x")
  assert_nil Gateway.split_host_port("[::1]x:80")
end

assert('Gateway.port_string? takes 1..65535 in digits only') do
  assert_true Gateway.port_string?("1")
  assert_true Gateway.port_string?("65535")
  assert_false Gateway.port_string?("0")
  assert_false Gateway.port_string?("65536")
  assert_false Gateway.port_string?("")
  assert_false Gateway.port_string?("x")
  assert_false Gateway.port_string?("+80")
  assert_false Gateway.port_string?("000080")
end
