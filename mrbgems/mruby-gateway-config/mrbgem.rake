MRuby::Gem::Specification.new('mruby-gateway-config') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'The configuration DSL: server, location, upstream'
end
