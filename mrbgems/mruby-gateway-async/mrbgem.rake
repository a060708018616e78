MRuby::Gem::Specification.new('mruby-gateway-async') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'Non-blocking primitives: Async.sleep, Async::HTTP'
end
