MRuby::Gem::Specification.new('mruby-gateway-nginx') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'ngx_mruby compatibility names: Nginx.rputs, Nginx::Async, ...'
end
