MRuby::Gem::Specification.new('mruby-gateway-cache') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'Gateway::Cache: the response cache\'s zones (cache), a location\'s cache: option, purge'
end
