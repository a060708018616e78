MRuby::Gem::Specification.new('mruby-gateway-nginx') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'ngx_mruby compatibility: Nginx.rputs, Nginx::Var, Nginx::Async, Userdata, run(app), ...'
end
