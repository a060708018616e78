MRuby::Gem::Specification.new('mruby-gateway-shdict') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'Gateway::SharedDict: a dictionary shared by a server\'s workers (shared_dict)'
end
