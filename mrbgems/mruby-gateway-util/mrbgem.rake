MRuby::Gem::Specification.new('mruby-gateway-util') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'Helpers handlers reach for: Digest, Base64 (libcrypto), URL escaping, Time formats, Process.pid, ENV'
  spec.linker.libraries << 'crypto'
end
