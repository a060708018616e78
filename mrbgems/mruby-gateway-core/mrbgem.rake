MRuby::Gem::Specification.new('mruby-gateway-core') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'Gateway module: errors, logging, process facts'
end
