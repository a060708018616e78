MRuby::Gem::Specification.new('mruby-gateway-redis') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'Async::Redis: a non-blocking Redis client (hiredis reader), pooled per worker'
end
