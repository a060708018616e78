# JSON.parse
assert('JSON.parse reads an object into a Hash with String keys') do
  assert_equal({ "a" => 1, "b" => [true, false, nil] }, JSON.parse('{"a":1,"b":[true,false,nil]}'.sub("nil", "null")))
end

assert('JSON.parse reads a scalar at the top level') do
  assert_equal 42, JSON.parse("42")
  assert_equal "x", JSON.parse('"x"')
  assert_nil JSON.parse("null")
end

assert('JSON.parse with symbolize_names: true gives Symbol keys') do
  assert_equal({ a: { b: 1 } }, JSON.parse('{"a":{"b":1}}', symbolize_names: true))
end

assert('JSON.parse takes its options as a trailing Hash too') do
  assert_equal({ a: 1 }, JSON.parse('{"a":1}', { symbolize_names: true }))
end

assert('JSON.parse gives frozen String keys') do
  assert_true JSON.parse('{"k":1}').keys[0].frozen?
end

assert('JSON.parse keeps the last of duplicate keys') do
  assert_equal({ "a" => 2 }, JSON.parse('{"a":1,"a":2}'))
end

assert('JSON.parse keeps the order of object members') do
  assert_equal %w[z a m], JSON.parse('{"z":1,"a":2,"m":3}').keys
end

# Integer#== of Debian's mruby 3.1 is false for two equal Integers beyond
# 62 bits (heap-boxed): compare their text.
assert('JSON.parse reads integers exactly, at both ends of Integer') do
  assert_equal "9223372036854775807", JSON.parse("9223372036854775807").to_s
  assert_equal "-9223372036854775808", JSON.parse("-9223372036854775808").to_s
  assert_kind_of Integer, JSON.parse("-9223372036854775808")
  assert_equal 0, JSON.parse("-0")
end

assert('JSON.parse reads an integer beyond Integer as a Float') do
  v = JSON.parse("123456789012345678901234567890")
  assert_kind_of Float, v
  assert_equal 1.2345678901234568e+29, v
end

assert('JSON.parse reads fractions and exponents as Floats') do
  assert_equal 0.1, JSON.parse("0.1")
  assert_equal(-2.5e-3, JSON.parse("-2.5E-3"))
  assert_equal 1.0e20, JSON.parse("1e20")
end

assert('JSON.parse decodes the simple escapes') do
  assert_equal "\"\\/\b\f\n\r\t", JSON.parse('"\\"\\\\\\/\\b\\f\\n\\r\\t"')
end

assert('JSON.parse decodes \\u escapes to UTF-8, surrogate pairs included') do
  assert_equal "\u00e9\u20ac\u{1F600}", JSON.parse('"\\u00e9\\u20AC\\ud83d\\ude00"')
end

assert('JSON.parse decodes \\u0000 to a NUL byte') do
  assert_equal "a\0b", JSON.parse('"a\\u0000b"')
end

assert('JSON.parse turns a lone high surrogate into U+FFFD') do
  assert_equal "\u{FFFD}x", JSON.parse('"\\ud800x"')
end

assert('JSON.parse turns a lone low surrogate into U+FFFD') do
  assert_equal "\u{FFFD}", JSON.parse('"\\udc00"')
end

assert('JSON.parse does not pair a high surrogate with a non-surrogate escape') do
  assert_equal "\u{FFFD}A", JSON.parse('"\\ud800\\u0041"')
end

assert('JSON.parse decodes escapes in keys too') do
  assert_equal({ "\u00e9\n" => 1 }, JSON.parse('{"\\u00e9\\n":1}'))
end

assert('JSON.parse decodes an escaped quote before other escaped strings') do
  assert_equal ['a"', '\\', 'b'], JSON.parse('["a\\"", "\\\\", "b"]')
end

assert('JSON.parse keeps UTF-8 text as it is') do
  assert_equal ["h\u00e9llo \u{1F600}"], JSON.parse("[\"h\u00e9llo \u{1F600}\"]")
end

assert('JSON.parse raises ParserError on invalid UTF-8, with its byte offset') do
  e = assert_raise(JSON::ParserError) { JSON.parse("[\"ab\xff\"]") }
  assert_include e.message, "invalid UTF-8 at byte 4"
end

assert('JSON.parse rejects an overlong UTF-8 form') do
  assert_raise(JSON::ParserError) { JSON.parse("\"\xc0\xaf\"") }
end

assert('JSON.parse rejects a UTF-8 encoded surrogate') do
  assert_raise(JSON::ParserError) { JSON.parse("\"\xed\xa0\x80\"") }
end

assert('JSON.parse rejects a code point beyond U+10FFFF') do
  assert_raise(JSON::ParserError) { JSON.parse("\"\xf4\x90\x80\x80\"") }
end

assert('JSON.parse rejects a truncated UTF-8 sequence at the end') do
  assert_raise(JSON::ParserError) { JSON.parse("\"\xe2\x82") }
end

assert('JSON.parse raises ParserError on empty input') do
  assert_raise(JSON::ParserError) { JSON.parse("") }
  assert_raise(JSON::ParserError) { JSON.parse("  \n") }
end

assert('JSON.parse raises ParserError on trailing garbage') do
  assert_raise(JSON::ParserError) { JSON.parse("[1] x") }
  assert_raise(JSON::ParserError) { JSON.parse("1 2") }
end

assert('JSON.parse accepts whitespace around the value') do
  assert_equal [1], JSON.parse(" \t\r\n[1]\n ")
end

assert('JSON.parse names the byte offset of a syntax error') do
  e = assert_raise(JSON::ParserError) { JSON.parse('{"a": tru}') }
  assert_include e.message, "at byte"
  assert_include e.message, "invalid"
end

assert('JSON.parse rejects what RFC 8259 does not allow') do
  ['[1,]', '{"a":1,}', '{a:1}', "'x'", '01', '.5', '1.', 'NaN', 'Infinity', '/*c*/1', '"a' + "\x01" + '"', '[', '"\\x"'].each do |bad|
    assert_raise(JSON::ParserError) { JSON.parse(bad) }
  end
end

assert('JSON::ParserError is a StandardError') do
  assert_true JSON::ParserError.ancestors.include?(StandardError)
end

assert('JSON.parse raises NestingError beyond max_nesting (default 100)') do
  assert_equal 100, JSON.parse("[" * 100 + "]" * 100).flatten.size + 100
  e = assert_raise(JSON::NestingError) { JSON.parse("[" * 101 + "]" * 101) }
  assert_include e.message, "nesting of 101 is too deep"
end

assert('JSON::NestingError is a ParserError') do
  assert_true JSON::NestingError.ancestors.include?(JSON::ParserError)
end

assert('JSON.parse takes max_nesting: n, and false for no limit') do
  assert_raise(JSON::NestingError) { JSON.parse('{"a":[1]}', max_nesting: 1) }
  assert_equal({ "a" => [1] }, JSON.parse('{"a":[1]}', max_nesting: 2))
  deep = "[" * 5000 + "]" * 5000
  assert_kind_of Array, JSON.parse(deep, max_nesting: false)
end

assert('JSON.parse raises TypeError for a non-String') do
  assert_raise(TypeError, NoMethodError) { JSON.parse(12) }
end

assert('JSON.parse builds a large document that survives garbage collection') do
  doc = "[" + (1..20000).map { |i| "{\"id\":#{i},\"name\":\"n#{i}\",\"tags\":[\"a\",\"b\"]}" }.join(",") + "]"
  v = JSON.parse(doc)
  GC.start
  assert_equal 20000, v.size
  assert_equal({ "id" => 20000, "name" => "n20000", "tags" => ["a", "b"] }, v[-1])
end

# JSON.generate
assert('JSON.generate writes the core types compactly') do
  assert_equal '{"a":[1,2.5,"s",true,false,null]}', JSON.generate({ "a" => [1, 2.5, "s", true, false, nil] })
end

assert('JSON.generate writes a Symbol as a String, as key and as value') do
  assert_equal '{"k":"v"}', JSON.generate({ k: :v })
end

assert('JSON.generate writes other keys by their to_s') do
  assert_equal '{"1":2,"":3}', JSON.generate({ 1 => 2, nil => 3 })
end

assert('JSON.generate writes a scalar at the top level') do
  assert_equal '"x"', JSON.generate("x")
  assert_equal "null", JSON.generate(nil)
  assert_equal "-7", JSON.generate(-7)
end

assert('JSON.generate writes a parsed Float back as the text it came from') do
  text = "[0.1,100.0,-0.0,1.0e+16,1.5e-05,123.456,2.5,1.0e-300,0.001,12345.678,-7.25,3.0e+100,0.00123,-0.5,99999999999999.9]"
  assert_equal text, JSON.generate(JSON.parse(text))
end

assert('JSON.generate writes Float#to_s forms: .0 on whole numbers, e+NN from 1e16, e-NN below 1e-4') do
  assert_equal "[1.0,0.0001,1.0e-05,1000000000000000.0,1.0e+16]",
               JSON.generate([1.0, 1.0e-4, 1.0e-5, 1.0e15, 1.0e16])
end

assert('JSON.generate round-trips computed Floats exactly') do
  [1.0 / 3, 2.0 / 3, 0.1 + 0.2, 1.0e-300 / 3, 1.7e308, Math::PI, -Math::E, 2.0**-1074 * 9].each do |f|
    assert_equal f, JSON.parse(JSON.generate([f]))[0]
  end
end

assert('JSON.generate writes Integers exactly') do
  assert_equal "[9223372036854775807,-9223372036854775808]", JSON.generate([9223372036854775807, -9223372036854775807 - 1])
end

assert('JSON.generate raises GeneratorError for NaN and Infinity') do
  assert_raise(JSON::GeneratorError) { JSON.generate([0.0 / 0.0]) }
  assert_raise(JSON::GeneratorError) { JSON.generate([1.0 / 0.0]) }
  assert_raise(JSON::GeneratorError) { JSON.generate(-1.0 / 0.0) }
end

assert('JSON.generate escapes control characters, the quote and the backslash') do
  assert_equal '"\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f"', JSON.generate("\"\\\b\f\n\r\t\0\x1f")
end

assert('JSON.generate keeps UTF-8 and the slash as they are') do
  assert_equal "\"h\u00e9/\u{1F600}\u2028\"", JSON.generate("h\u00e9/\u{1F600}\u2028")
end

assert('JSON.generate raises GeneratorError on a String that is not UTF-8') do
  assert_raise(JSON::GeneratorError) { JSON.generate(["ok", "\xff"]) }
end

assert('JSON.generate raises NestingError beyond 100 levels, and on a cycle') do
  deep = []
  100.times { deep = [deep] }
  assert_raise(JSON::NestingError) { JSON.generate(deep) }
  a = []
  a << a
  assert_raise(JSON::NestingError) { JSON.generate(a) }
end

class JsonTestPoint
  def initialize(x) @x = x end
  def to_s() "P(#{@x})" end
end

class JsonTestCustom
  def to_json(*) '{"custom":true}' end
end

assert('JSON.generate writes other objects by their to_s, as CRuby does') do
  assert_equal '["P(1)"]', JSON.generate([JsonTestPoint.new(1)])
end

assert('JSON.generate inserts the text of an object\'s own to_json') do
  assert_equal '[{"custom":true}]', JSON.generate([JsonTestCustom.new])
end

assert('JSON.generate round-trips what JSON.parse read') do
  text = "{\"a\":[1,-2,3.25,\"x\\ny\",{\"b\":null}],\"c\":true,\"d\":\"\u00e9\"}"
  assert_equal text, JSON.generate(JSON.parse(text))
end

# to_json, pretty_generate, dump, load
assert('to_json answers the same text as JSON.generate') do
  assert_equal '{"a":[1,"b"]}', { "a" => [1, "b"] }.to_json
  assert_equal '"s"', "s".to_json
  assert_equal '"sym"', :sym.to_json
  assert_equal "1", 1.to_json
  assert_equal "1.5", 1.5.to_json
  assert_equal "true", true.to_json
  assert_equal "null", nil.to_json
end

assert('JSON.pretty_generate indents by 2 spaces as CRuby') do
  expected = "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    {\n      \"c\": null\n    }\n  ],\n  \"e\": {},\n  \"f\": []\n}"
  assert_equal expected, JSON.pretty_generate({ "a" => 1, "b" => [1, { "c" => nil }], "e" => {}, "f" => [] })
end

assert('JSON.pretty_generate writes a scalar as generate does') do
  assert_equal "1", JSON.pretty_generate(1)
end

assert('JSON.dump is generate, and JSON.load is parse') do
  assert_equal '{"a":1}', JSON.dump({ "a" => 1 })
  assert_equal({ "a" => 1 }, JSON.load('{"a":1}'))
end

assert('JSON.load of nil or an empty String is nil') do
  assert_nil JSON.load(nil)
  assert_nil JSON.load("")
end

assert('JSON.parse shares repeated keys, and a key outlives the object a duplicate dropped') do
  pad = (1..3000).map { |i| "{\"x#{i % 7}\":\"#{'v' * 40}\"}" }.join(",")
  v = JSON.parse("{\"a\":{\"kk\":1},\"a\":2,\"pad\":[#{pad}],\"b\":{\"kk\":3}}")
  GC.start
  assert_equal({ "kk" => 3 }, v["b"])
  assert_equal 2, v["a"]
  assert_true v["pad"][0].keys[0].equal?(v["pad"][7].keys[0])
end
