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
