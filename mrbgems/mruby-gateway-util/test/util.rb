# URL escaping
assert('Gateway::Util.escape keeps the RFC 3986 unreserved characters') do
  assert_equal "AZaz09-._~", Gateway::Util.escape("AZaz09-._~")
end

assert('Gateway::Util.escape writes every other byte as upper-case %XX, a space as %20') do
  assert_equal "a%20b%2F%3F%26%3D%2B%C3%A9", Gateway::Util.escape("a b/?&=+\u00e9")
end

assert('Gateway::Util.escape takes any object by its to_s') do
  assert_equal "12", Gateway::Util.escape(12)
end

assert('Gateway::Util.unescape decodes %XX in either case and + as a space') do
  assert_equal "a b/\u00e9 c", Gateway::Util.unescape("a%20b%2f%C3%A9+c")
end

assert('Gateway::Util.unescape leaves a malformed % sequence as it is') do
  assert_equal "100%", Gateway::Util.unescape("100%")
  assert_equal "%zz%4", Gateway::Util.unescape("%zz%4")
end

assert('Gateway::Util.unescape undoes escape') do
  s = "k=v&x=\u00e9 /~\0"
  assert_equal s, Gateway::Util.unescape(Gateway::Util.escape(s))
end

assert('Gateway::Util.encode_parameters joins escaped pairs with &') do
  assert_equal "q=a%20b&n=1", Gateway::Util.encode_parameters({ "q" => "a b", n: 1 })
end

assert('Nginx::Utils is Gateway::Util (ngx_mruby name)') do
  assert_equal "x%20y", Nginx::Utils.escape("x y")
  assert_equal "a=1", Nginx::Utils.encode_parameters({ a: 1 })
end

# Digest
assert('Digest::MD5.hexdigest is the RFC 1321 value') do
  assert_equal "900150983cd24fb0d6963f7d28e17f72", Digest::MD5.hexdigest("abc")
end

assert('Digest::SHA1.hexdigest is the FIPS 180 value') do
  assert_equal "a9993e364706816aba3e25717850c26c9cd0d89d", Digest::SHA1.hexdigest("abc")
end

assert('Digest::SHA256.hexdigest is the FIPS 180 value') do
  assert_equal "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", Digest::SHA256.hexdigest("abc")
end

assert('Digest::*.digest is the raw bytes') do
  assert_equal 16, Digest::MD5.digest("").bytesize
  assert_equal 20, Digest::SHA1.digest("").bytesize
  assert_equal 32, Digest::SHA256.digest("").bytesize
  assert_equal Digest::SHA256.hexdigest("x"), Digest::SHA256.digest("x").unpack("H*")[0]
end

assert('Digest::*.base64digest is the digest in strict Base64') do
  assert_equal "kAFQmDzST7DWlj99KOF/cg==", Digest::MD5.base64digest("abc")
end

assert('Digest hashes binary data with NUL bytes') do
  assert_not_equal Digest::SHA1.hexdigest("a"), Digest::SHA1.hexdigest("a\0")
end

# Base64
assert('Base64.strict_encode64 pads and adds no newline') do
  assert_equal "", Base64.strict_encode64("")
  assert_equal "Zg==", Base64.strict_encode64("f")
  assert_equal "Zm8=", Base64.strict_encode64("fo")
  assert_equal "Zm9v", Base64.strict_encode64("foo")
end

assert('Base64.encode64 ends every 60-character line with a newline') do
  assert_equal "Zm9v\n", Base64.encode64("foo")
  assert_equal "YWFh" * 15 + "\nYWFh\n", Base64.encode64("a" * 48)
end

assert('Base64.urlsafe_encode64 uses - and _, padding optional') do
  assert_equal "-_8=", Base64.urlsafe_encode64("\xfb\xff")
  assert_equal "-_8", Base64.urlsafe_encode64("\xfb\xff", padding: false)
end

assert('Base64.decode64 skips newlines and other non-Base64 characters') do
  assert_equal "foobar", Base64.decode64("Zm9v\nYmFy\n")
  assert_equal "foo", Base64.decode64("Zm9v!")
end

assert('Base64.decode64 decodes unpadded text too') do
  assert_equal "fo", Base64.decode64("Zm8")
end

assert('Base64.strict_decode64 decodes exact Base64') do
  assert_equal "\0\xff binary", Base64.strict_decode64(Base64.strict_encode64("\0\xff binary"))
end

assert('Base64.strict_decode64 raises ArgumentError on anything else') do
  assert_raise(ArgumentError) { Base64.strict_decode64("Zm9v\n") }
  assert_raise(ArgumentError) { Base64.strict_decode64("Zm8") }
  assert_raise(ArgumentError) { Base64.strict_decode64("Zm9=") }
end

assert('Base64.urlsafe_decode64 takes - and _ with or without padding') do
  assert_equal "\xfb\xff", Base64.urlsafe_decode64("-_8")
  assert_equal "\xfb\xff", Base64.urlsafe_decode64("-_8=")
end

# Time
assert('Time#httpdate is the IMF-fixdate in GMT') do
  assert_equal "Sun, 06 Nov 1994 08:49:37 GMT", Time.gm(1994, 11, 6, 8, 49, 37).httpdate
end

assert('Time#httpdate of a local time is the same instant in GMT') do
  t = Time.at(784111777)
  assert_equal "Sun, 06 Nov 1994 08:49:37 GMT", t.httpdate
end

assert('Time#iso8601 of a UTC time ends in Z') do
  assert_equal "1994-11-06T08:49:37Z", Time.gm(1994, 11, 6, 8, 49, 37).iso8601
end

assert('Time#iso8601 takes fraction digits') do
  t = Time.at(784111777, 123456).getutc
  assert_equal "1994-11-06T08:49:37.123Z", t.iso8601(3)
  assert_equal "1994-11-06T08:49:37.123456Z", t.xmlschema(6)
end

assert('Time#iso8601 of a local time has its UTC offset') do
  t = Time.at(0).getlocal
  s = t.iso8601
  assert_equal 25, s.size
  assert_include ["+", "-"], s[19]
  assert_equal ":", s[22]
  off = (s[20, 2].to_i * 3600 + s[23, 2].to_i * 60) * (s[19] == "-" ? -1 : 1)
  assert_equal Time.gm(t.year, t.month, t.day, t.hour, t.min, t.sec).to_i - off, t.to_i
end

assert('Time.httpdate reads the three HTTP date forms as UTC') do
  t = Time.gm(1994, 11, 6, 8, 49, 37)
  assert_equal t, Time.httpdate("Sun, 06 Nov 1994 08:49:37 GMT")
  assert_equal t, Time.httpdate("Sunday, 06-Nov-94 08:49:37 GMT")
  assert_equal t, Time.httpdate("Sun Nov  6 08:49:37 1994")
  assert_true Time.httpdate("Sun, 06 Nov 1994 08:49:37 GMT").utc?
end

assert('Time.httpdate reads back what Time#httpdate wrote') do
  t = Time.at(1_700_000_000)
  assert_equal t.to_i, Time.httpdate(t.httpdate).to_i
end

assert('Time.httpdate raises ArgumentError on anything else') do
  ["", "yesterday", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT"].each do |bad|
    assert_raise(ArgumentError) { Time.httpdate(bad) }
  end
end

# Process and ENV
assert('Process.pid is this process id') do
  assert_equal Gateway.pid, Process.pid
  assert_kind_of Integer, Process.pid
end

assert('ENV[] reads the environment, nil when unset') do
  assert_kind_of String, ENV["PATH"]
  assert_nil ENV["GATEWAY_TEST_SURELY_UNSET_VARIABLE"]
end

assert('ENV.fetch raises KeyError when unset, or gives the default or the block value') do
  assert_raise(KeyError) { ENV.fetch("GATEWAY_TEST_SURELY_UNSET_VARIABLE") }
  assert_equal "d", ENV.fetch("GATEWAY_TEST_SURELY_UNSET_VARIABLE", "d")
  assert_equal "GATEWAY_TEST_SURELY_UNSET_VARIABLE!", ENV.fetch("GATEWAY_TEST_SURELY_UNSET_VARIABLE") { |k| "#{k}!" }
  assert_equal ENV["PATH"], ENV.fetch("PATH")
end

assert('ENV.key? says whether a variable is set') do
  assert_true ENV.key?("PATH")
  assert_false ENV.key?("GATEWAY_TEST_SURELY_UNSET_VARIABLE")
end

assert('ENV.to_h is a Hash of every variable') do
  h = ENV.to_h
  assert_kind_of Hash, h
  assert_equal ENV["PATH"], h["PATH"]
end

assert('ENV is read-only: assignment raises') do
  assert_raise(Gateway::Env::ReadOnlyError) { ENV["X"] = "1" }
  assert_raise(Gateway::Env::ReadOnlyError) { ENV.delete("PATH") }
  assert_nil ENV["X"]
end
