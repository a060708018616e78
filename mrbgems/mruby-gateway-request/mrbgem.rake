MRuby::Gem::Specification.new('mruby-gateway-request') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'Gateway::Request and handler responses'
end
