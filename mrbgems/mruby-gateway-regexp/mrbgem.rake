MRuby::Gem::Specification.new('mruby-gateway-regexp') do |spec|
  spec.license = 'MIT'
  spec.authors = 'gateway'
  spec.summary = 'Regexp and MatchData on PCRE2 (gateway/base/regex.c), and the String methods that take one'
end
