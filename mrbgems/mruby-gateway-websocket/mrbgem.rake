MRuby::Gem::Specification.new('mruby-gateway-websocket') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'Gateway::WebSocket: the connection a websocket: location\'s block gets'
end
