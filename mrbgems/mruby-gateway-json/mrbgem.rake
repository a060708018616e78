MRuby::Gem::Specification.new('mruby-gateway-json') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'JSON.parse / JSON.generate on YAJL (libyajl-dev)'
  spec.linker.libraries << 'yajl'
end
