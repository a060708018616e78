MRuby::Gem::Specification.new('mruby-httprequest') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.add_dependency 'mruby-gateway-core' # Gateway.split_host_port
  spec.summary = 'HttpRequest: a deliberately blocking HTTP/1.1 client, API-compatible with mruby-httprequest (it stalls the worker event loop while it waits)'
end
