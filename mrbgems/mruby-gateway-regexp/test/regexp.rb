# Regexp on PCRE2 in mruby 3.1: literals, $~ and $1, MatchData, the String
# methods. Offsets are bytes (mruby's strings are bytes).

assert('a regexp literal is a Regexp with its source and options') do
  re = /a(b)c/i
  assert_kind_of Regexp, re
  assert_equal 'a(b)c', re.source
  assert_equal Regexp::IGNORECASE, re.options
  assert_equal Regexp::EXTENDED | Regexp::MULTILINE, /x/mx.options
end

assert('%r{} keeps slashes unescaped in its source') do
  assert_equal 'a/b', %r{a/b}.source
  assert_equal 'a/b', /a\/b/.source
  assert_equal '/a\/b/', %r{a/b}.inspect
end

assert('an interpolated literal compiles what the interpolation gives') do
  x = 'b+'
  re = /a#{x}c/
  assert_equal 'ab+c', re.source
  assert_equal 0, re =~ 'abbbc'
end

assert('a literal evaluated twice is the same cached object, frozen') do
  a = []
  2.times { a << /cached-literal/ }
  assert_true a[0].equal?(a[1])
  assert_true a[0].frozen?
end

assert('Regexp.new gives a new object equal to the literal') do
  re = Regexp.new('ab', Regexp::IGNORECASE)
  assert_false re.equal?(/ab/i)
  assert_equal(/ab/i, re)
  assert_not_equal(/ab/, re)
  assert_equal(/ab/i.hash, re.hash)
  assert_equal(/ab/m, Regexp.compile('ab', 'm'))
  assert_equal(/ab/i, Regexp.new('ab', true))
  assert_equal(/ab/i, Regexp.new(/ab/i))
end

assert('=~ with a literal on the left sets $~ and $1..$9') do
  assert_equal 2, /c(d)(e)?/ =~ 'abcd'
  assert_equal 'cd', $~[0]
  assert_equal 'd', $1
  assert_nil $2
  assert_nil $3
end

assert('a failed match sets $~ and every $n to nil') do
  /(a)(b)(c)/ =~ 'abc'
  assert_equal 'c', $3
  assert_nil(/x/ =~ 'abc')
  assert_nil $~
  assert_nil $1
  assert_nil $3
end

assert('String =~ Regexp works like Regexp =~ String') do
  assert_equal 1, 'xab' =~ /a(b)/
  assert_equal 'b', $1
  assert_raise(TypeError) { 'a' =~ 'a' }
end

assert('=~ with nil is nil') do
  assert_nil(/a/ =~ nil)
end

assert('case/when with a regexp matches with === and sets $~') do
  r = case '/users/42'
      when %r{\A/posts/(\d+)} then "post #{$1}"
      when %r{\A/users/(\d+)} then "user #{$1}"
      end
  assert_equal 'user 42', r
  assert_false(/a/ === 5)
  assert_true(/a/ === :cat)
end

assert('$9 is the ninth group') do
  /(1)(2)(3)(4)(5)(6)(7)(8)(9)/ =~ '123456789'
  assert_equal '9', $9
end

assert('match returns a MatchData and takes a start position') do
  m = /(\d+)/.match('ab12cd34', 4)
  assert_equal '34', m[1]
  assert_equal 6, m.begin(0)
  assert_nil(/(\d+)/.match('ab', 0))
  assert_equal '34', /\d+/.match('ab12cd34', -2)[0]
end

assert('match with a block yields the MatchData') do
  assert_equal 'b', /a(b)/.match('ab') { |m| m[1] }
end

assert('match? does not touch $~') do
  /(z)/ =~ 'z'
  assert_true(/a/.match?('cat'))
  assert_false(/x/.match?('cat'))
  assert_equal 'z', $1
  assert_true 'cat'.match?(/a/)
end

assert('MatchData: [] by index, negative index, name and Symbol') do
  m = /(?<year>\d{4})-(?<mon>\d\d)/.match('on 2024-05!')
  assert_equal '2024-05', m[0]
  assert_equal '2024', m[1]
  assert_equal '05', m[-1]
  assert_equal '2024', m['year']
  assert_equal '05', m[:mon]
  assert_nil m[5]
  assert_raise(IndexError) { m['nope'] }
  assert_equal ['2024', '05'], m[1, 2]
  assert_equal ['2024-05', '2024'], m[0..1]
end

assert('MatchData: captures, named_captures, names, to_a, size, values_at') do
  m = /(?<a>x)(?<b>y)?/.match('x')
  assert_equal ['x', nil], m.captures
  assert_equal({ 'a' => 'x', 'b' => nil }, m.named_captures)
  assert_equal ['a', 'b'], m.names
  assert_equal ['x', 'x', nil], m.to_a
  assert_equal 3, m.size
  assert_equal 3, m.length
  assert_equal ['x', nil], m.values_at(0, 2)
  assert_equal 'x', m.to_s
end

assert('MatchData: pre_match, post_match, begin, end, offset in bytes') do
  m = /b(c)/.match('abcd')
  assert_equal 'a', m.pre_match
  assert_equal 'd', m.post_match
  assert_equal 1, m.begin(0)
  assert_equal 3, m.end(0)
  assert_equal [2, 3], m.offset(1)
  assert_equal 'abcd', m.string
  assert_true m.string.frozen?
  assert_equal(/b(c)/, m.regexp)
  m2 = /(x)?y/.match('y')
  assert_nil m2.begin(1)
  assert_equal [nil, nil], m2.offset(1)
  assert_raise(IndexError) { m.begin(7) }
end

assert('MatchData keeps the subject as it was when the string changes later') do
  s = 'hello'.dup
  m = /l+/.match(s)
  s << ' world'
  assert_equal 'o', m.post_match
end

assert('MatchData#inspect shows the groups') do
  assert_equal '#<MatchData "ab" 1:"b">', /a(b)/.match('ab').inspect
  assert_equal '#<MatchData "ab" x:"b">', /a(?<x>b)/.match('ab').inspect
end

assert('options: i ignores case, x ignores spaces and comments, m lets . match a newline') do
  assert_equal 0, /abc/i =~ 'ABC'
  assert_equal 0, /a b c # letters
                  /x =~ 'abc'
  assert_nil(/a.b/ =~ "a\nb")
  assert_equal 0, /a.b/m =~ "a\nb"
  assert_equal 0, /(?m:a.b)/ =~ "a\nb"
  assert_equal 0, /(?i)abc/ =~ 'AbC'
end

assert('^ and $ are line anchors, \A \z \Z are string anchors (as in Ruby)') do
  assert_equal 2, /^b/ =~ "a\nb"
  assert_equal 0, /a$/ =~ "a\nb"
  assert_nil(/\Ab/ =~ "a\nb")
  assert_nil(/a\z/ =~ "a\n")
  assert_equal 0, /a\Z/ =~ "a\n"
end

assert('\h is a hex digit (Ruby), not horizontal space (PCRE2)') do
  assert_equal 'fF09', 'xfF09z'[/\h+/]
  assert_nil(/\h/ =~ ' ')
  assert_equal 'xz', 'fxz'[/\H+/]
  assert_equal 'a1', 'a1g'[/[\h]+/]
end

assert('\u escapes are code points') do
  assert_equal 0, /\u00e9/ =~ "\u00e9"
  assert_equal 0, /\u{e9 41}/ =~ "\u00e9A"
end

assert('patterns are UTF-8: . is one character, /n is bytes') do
  assert_equal ["h", "\u00e9", "!"], "h\u00e9!".scan(/./)
  assert_equal 4, "h\u00e9!".scan(/./n).size
  assert_equal 0, /\u00c9/i =~ "\u00e9"
end

assert('a subject that is not valid UTF-8 does not crash; its bad bytes never match') do
  assert_equal 1, /b/ =~ "\xffb"
  assert_nil(/\A./ =~ "\xff")
  assert_equal 0, /\A./n =~ "\xff"
  assert_equal ['a', 'b'], "a\xff,b".split(/,/).map { |s| s.delete("\xff") }
end

assert('a pattern that is not valid UTF-8 matches bytes') do
  assert_equal 1, Regexp.new("\xff") =~ "a\xff"
end

assert('a bad pattern raises RegexpError with the message, the offset and the pattern') do
  e = assert_raise(RegexpError) { Regexp.new('a[b') }
  assert_include e.message, 'missing terminating ]'
  assert_include e.message, 'offset 3'
  assert_include e.message, '/a[b/'
  assert_raise(RegexpError) { Regexp.new('(') }
  assert_raise(ArgumentError) { Regexp.new('a', 'q') }
end

assert('a catastrophic pattern raises RegexpError (match limit) instead of spinning') do
  e = assert_raise(RegexpError) { /(a+)+$/ =~ ('a' * 40) + 'b' }
  assert_include e.message, 'limit exceeded'
  assert_equal 4, /(a+)+$/ =~ 'bbbba'
end

assert('Regexp.match_limit can be read and set') do
  old = Regexp.match_limit
  assert_kind_of Integer, old
  Regexp.match_limit = 10
  assert_raise(RegexpError) { /(a+)+$/ =~ ('a' * 12) + 'b' }
  Regexp.match_limit = old
  assert_nil(/(a+)+$/ =~ ('a' * 12) + 'b')
  assert_raise(ArgumentError) { Regexp.match_limit = 0 }
end

assert('to_s embeds the options, inspect is the literal') do
  assert_equal '(?i-mx:ab)', /ab/i.to_s
  assert_equal '(?mix:ab)', /ab/mix.to_s
  assert_equal '/ab/mi', /ab/im.inspect
  assert_equal '/ab/n', /ab/n.inspect
  assert_equal 0, /x#{/ab/i}y/ =~ 'xABy'
end

assert('Regexp.escape and quote escape what is special') do
  assert_equal 'a\.b\*c\ d\n\[\]', Regexp.escape("a.b*c d\n[]")
  assert_equal '\-\?\+\^\$\|\(\)\{\}\\\\\#', Regexp.quote('-?+^$|(){}\\#')
  assert_equal 0, Regexp.new(Regexp.escape('1.5+x')) =~ '1.5+x'
end

assert('Regexp.union joins escaped strings and regexps') do
  re = Regexp.union('a.b', /c+/i)
  assert_equal 'a\.b|(?i-mx:c+)', re.source
  assert_equal 0, re =~ 'CC'
  assert_equal(/x/, Regexp.union(/x/))
  assert_equal 'a|b', Regexp.union(['a', 'b']).source
  assert_nil Regexp.union =~ 'anything'
end

assert('Regexp.last_match is $~, or one of its groups') do
  /(a)(b)/ =~ 'ab'
  assert_equal 'ab', Regexp.last_match[0]
  assert_equal 'b', Regexp.last_match(2)
end

assert('names and named_captures of a Regexp') do
  re = /(?<a>.)(?<b>.)(?<a>.)/
  assert_equal ['a', 'b'], re.names
  assert_equal({ 'a' => [1, 3], 'b' => [2] }, re.named_captures)
  assert_true(/a/i.casefold?)
end

assert('a named group used twice gives its last group that took part') do
  m = /(?<n>a)|(?<n>b)/.match('b')
  assert_equal 'b', m[:n]
end

assert('sub and gsub with a Regexp and a String replacement expand \0 \1 \k<name> \\\\') do
  assert_equal 'x-a-y', 'xay'.sub(/(a)/, '-\1-')
  assert_equal '<a><b>', 'ab'.gsub(/./, '<\0>')
  assert_equal '[b]', 'b'.sub(/(?<n>b)/, '[\k<n>]')
  assert_equal 'a\\b', 'ab'.sub(/(?=b)/, '\\\\')
  assert_equal 'xx', 'ab'.gsub(/a|b/, 'x')
  assert_equal 'ab', 'ab'.sub(/z/, 'x')
  assert_equal 'a-', 'ab'.sub(/b/, "\\&-".sub('&', '9'))
  assert_equal '(a)(b)', 'ab'.gsub(/(a)|(b)/, '(\1\2)')
  assert_equal 'xab', 'ab'.sub(/a/, "x\\0")
  assert_equal 'pre:a post:c', 'abc'.sub(/b/, " pre:\\` post:\\'").sub(/\Aa /, '').sub(/c\z/, '')
end

assert('gsub with an empty match goes between characters') do
  assert_equal '-a-b-c-', 'abc'.gsub(/x*/, '-')
  assert_equal "-h-\u00e9-", "h\u00e9".gsub(//, '-')
end

assert('gsub with a block sees $~ and $1 of each match') do
  r = 'a1b22'.gsub(/\d+/) { |s| "<#{s}:#{$~.begin(0)}>" }
  assert_equal 'a<1:1>b<22:3>', r
  assert_equal '22', $~[0]
  assert_equal 'x=1,y=2', 'x1y2'.gsub(/([a-z])(\d)/) { "#{$1}=#{$2}," }.chomp(',')
end

assert('gsub with a Hash replaces each match by its value') do
  assert_equal '1-2-', 'a-b-c'.gsub(/[abc]/, 'a' => '1', 'b' => '2')
end

assert('sub! and gsub! change the string, or return nil when nothing matched') do
  s = 'aaa'.dup
  assert_equal 'bbb', s.gsub!(/a/, 'b')
  assert_equal 'bbb', s
  assert_nil s.sub!(/a/, 'c')
  assert_equal 'cbb', s.sub!(/b/) { 'c' }
  assert_raise(FrozenError) { 'x'.freeze.gsub!(/x/, 'y') }
end

assert('sub and gsub with a String pattern behave as before') do
  assert_equal 'a.c', 'abc'.sub('b', '.')
  assert_equal 'x.x', 'x*x'.gsub('*', '.')
  assert_equal 'abc', 'abc'.sub('.', 'x')
  assert_equal 'ayc', 'abc'.gsub('b') { 'y' }
  s = 'hello'.dup
  assert_equal 'hexlo', s.sub!('l', 'x')
end

assert('scan without groups gives the matches, with groups the groups') do
  assert_equal ['1', '22', '333'], 'a1b22c333'.scan(/\d+/)
  assert_equal [['a', '1'], ['b', '22']], 'a1b22'.scan(/([a-z])(\d+)/)
  assert_equal ['', 'b', '', ''], 'abc'.scan(/b*/)
  assert_equal ['.'], 'a.b'.scan('.')
end

assert('scan with a block yields each and sets $~') do
  seen = []
  r = 'k1=v1;k2=v2'.scan(/(\w+)=(\w+)/) { |k, v| seen << [k, v, $~.begin(0)] }
  assert_equal 'k1=v1;k2=v2', r
  assert_equal [['k1', 'v1', 0], ['k2', 'v2', 6]], seen
end

assert('split with a Regexp as CRuby does it') do
  assert_equal ['a', 'b', '', 'c'], 'a,b,,c,,'.split(/,/)
  assert_equal ['a', 'b', '', 'c', '', ''], 'a,b,,c,,'.split(/,/, -1)
  assert_equal ['a', 'b,,c,,'], 'a,b,,c,,'.split(/,/, 2)
  assert_equal ['a', ',', 'b'], 'a,b'.split(/(,)/)
  assert_equal ['a', 'b', 'c'], 'abc'.split(//)
  assert_equal ['a', 'b', 'c'], 'a1b22c'.split(/\d+/)
  assert_equal ['a', 'b'], ' a  b'.split(/\s+/).reject(&:empty?)
  assert_equal ['', 'a'], ',a'.split(/,/)
  assert_equal [], ''.split(/,/)
  assert_equal ['abc'], 'abc'.split(/,/, 1)
  assert_equal ["h", "\u00e9"], "h\u00e9".split(//)
end

assert('split with a String behaves as before') do
  assert_equal ['a', 'b'], 'a b'.split
  assert_equal ['a', 'b', 'c'], 'a,b,c'.split(',')
  assert_equal ['a', 'b,c'], 'a,b,c'.split(',', 2)
end

assert('index and rindex with a Regexp, in bytes') do
  assert_equal 3, 'abc123'.index(/\d/)
  assert_equal 4, 'abc123'.index(/\d/, 4)
  assert_nil 'abc'.index(/\d/)
  assert_equal 5, 'abc123'.rindex(/\d/)
  assert_equal 3, 'abc123'.rindex(/\d/, 3)
  assert_equal 1, 'abc'.index('b')
  assert_equal 2, 'abcb'.rindex('c')
  assert_equal 3, "\u00e9ab".index(/b/)
end

assert('[] and slice with a Regexp, a capture number or a name') do
  assert_equal '123', 'abc123'[/\d+/]
  assert_equal 'c', 'abc123'[/([a-z])(\d)/, 1]
  assert_equal '1', 'abc123'.slice(/(?<d>\d)/, 'd')
  assert_nil 'abc'[/\d/]
  assert_equal 'b', 'abc'[1]
  assert_equal 'bc', 'abc'[1, 2]
  assert_equal 'bc', 'abc'['bc']
end

assert('start_with? a Regexp is anchored at the start') do
  assert_true '/api/v2'.start_with?(%r{/api/v\d})
  assert_equal '/api/v2', $~[0]
  assert_false 'x/api'.start_with?(/\/api/)
  assert_true 'abc'.start_with?('x', /a/)
  assert_true 'abc'.start_with?('ab')
end

assert('partition and rpartition with a Regexp') do
  assert_equal ['a', '12', 'b34'], 'a12b34'.partition(/\d+/)
  assert_equal ['a12b3', '4', ''], 'a12b34'.rpartition(/\d+/)
  assert_equal ['abc', '', ''], 'abc'.partition(/\d/)
  assert_equal ['', '', 'abc'], 'abc'.rpartition(/\d/)
  assert_equal ['a', ',', 'b'], 'a,b'.partition(',')
end

assert('String#match converts a String pattern to a Regexp') do
  assert_equal 'b', 'abc'.match('b.')[0][0]
  assert_equal 'c', 'abc'.match(/(c)/)[1]
end

assert('the cache holds at most 512 patterns and still answers right after eviction') do
  1000.times { |i| assert_equal 0, /\A#{i}\z/ =~ i.to_s }
  assert_equal 0, /\A7\z/ =~ '7'
end

assert('$~ is one global per VM (mruby 3.1): another fiber that matches replaces it') do
  f = Fiber.new do
    /(first)/ =~ 'first'
    m = $~
    Fiber.yield
    [$1, m[1]]
  end
  f.resume
  /(second)/ =~ 'second'
  assert_equal ['second', 'first'], f.resume
end

assert('Ruby constructs PCRE2 would read differently are refused, not misread') do
  assert_raise(RegexpError) { Regexp.new('[a-z&&[^aeiou]]') }
  assert_raise(RegexpError) { Regexp.new('[a[bc]]') }
  assert_equal 0, /[\[\]]/ =~ '['
  assert_equal 0, /[[:alpha:]&]/ =~ '&'
end

assert('__groups counts capture groups; Gateway._split_path_info wants two') do
  assert_equal 0, /abc/.__groups
  assert_equal 2, %r{^(.+?\.php)(/.*)$}.__groups
  assert_equal 2, /(?<a>x)(?:y)(z)/.__groups
  re = %r{^(.+?\.php)(/.*)$}
  assert_true re.equal?(Gateway._split_path_info("here", re))
  assert_equal re, Gateway._split_path_info("here", '^(.+?\.php)(/.*)$')
  e = assert_raise(ArgumentError) { Gateway._split_path_info("location \"/x\"", /^(.+\.php)/) }
  assert_include e.message, 'location "/x": split_path_info: must be a Regexp with two groups'
  assert_include e.message, '(1 groups)'
  assert_raise(ArgumentError) { Gateway._split_path_info("here", 42) }
  assert_raise(RegexpError) { Gateway._split_path_info("here", "(unclosed") }
end
