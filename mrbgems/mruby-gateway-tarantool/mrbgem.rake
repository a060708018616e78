MRuby::Gem::Specification.new('mruby-gateway-tarantool') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'Async::Tarantool: a non-blocking iproto client (msgpack-c), pooled and pipelined per worker'
  spec.linker.libraries << 'msgpackc'
end
