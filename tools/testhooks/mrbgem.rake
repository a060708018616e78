# Fault injection for the specs, linked only into build/gateway-test (never
# into build/gateway): see tools/testhooks/src/testhooks.c.
MRuby::Gem::Specification.new('mruby-gateway-testhooks') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'GatewayTest: fault injection for the specs (test binary only)'
end
