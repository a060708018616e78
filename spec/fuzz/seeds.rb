#!/usr/bin/env ruby
# Writes the seed corpora spec/fuzz/corpus/{request,upstream,iproto}/ (committed;
# rerun after changing a seed or the control-byte layout):
#
#   ruby spec/fuzz/seeds.rb
#
# Every seed is the harness's control bytes followed by the bytes on the wire
# (see README.md for the layout).
dir = File.expand_path('corpus', __dir__)

def u16(v) = [v].pack('v')

# fuzz_request: [flags, cut1 (u16), cut2 (u16)] + client bytes.
def req(flags = 0, cut1 = 0, cut2 = 0) = [flags].pack('C') + u16(cut1) + u16(cut2)

H = "Host: a\r\n"
request = {
  'get' => req + "GET / HTTP/1.1\r\n#{H}\r\n",
  'pipelined' => req(2, 20, 60) + "GET /a?x=1 HTTP/1.1\r\n#{H}\r\nHEAD /b HTTP/1.1\r\n#{H}\r\n" \
                                  "POST /c HTTP/1.1\r\n#{H}Content-Length: 5\r\n\r\nhelloGET /d HTTP/1.1\r\n#{H}Connection: close\r\n\r\n",
  'chunked_trailers' => req(1, 40) + "POST /up HTTP/1.1\r\n#{H}Transfer-Encoding: chunked\r\n\r\n" \
                                     "5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\nGET / HTTP/1.1\r\n#{H}\r\n",
  'smuggle_cl_te' => req + "POST / HTTP/1.1\r\n#{H}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /x HTTP/1.1\r\n#{H}\r\n",
  'smuggle_te_cl' => req + "POST / HTTP/1.1\r\n#{H}Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
  'duplicate_cl' => req + "POST / HTTP/1.1\r\n#{H}Content-Length: 1\r\nContent-Length: 1\r\n\r\nxx",
  'te_http10' => req + "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
  'te_gzip_chunked' => req + "POST / HTTP/1.1\r\n#{H}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
  'missing_host' => req + "GET / HTTP/1.1\r\nUser-Agent: x\r\n\r\n",
  'http10_keepalive' => req(1, 30) + "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /2 HTTP/1.0\r\n\r\n",
  'obs_fold' => req(1, 29) + "GET / HTTP/1.1\r\n#{H}X: a\r\n b\r\n\r\n",
  'bare_cr' => req + "GET / HTTP/1.1\r\n#{H}X: a\rb\r\n\r\n",
  'nul_in_value' => req + "GET / HTTP/1.1\r\n#{H}X: a\0b\r\n\r\n",
  'uri_too_long' => req + "GET /#{'a' * 80} HTTP/1.1\r\n#{H}\r\n",
  'too_many_headers' => req + "GET / HTTP/1.1\r\n#{H}" + (1..8).map { |i| "X-#{i}: #{i}\r\n" }.join + "\r\n",
  'header_too_large' => req + "GET / HTTP/1.1\r\n#{H}X: #{'v' * 300}\r\n\r\n",
  'body_too_large' => req + "POST / HTTP/1.1\r\n#{H}Content-Length: 100\r\n\r\n" + 'b' * 100,
  'chunked_too_large' => req(3) + "POST / HTTP/1.1\r\n#{H}Transfer-Encoding: chunked\r\n\r\n40\r\n#{'c' * 64}\r\n0\r\n\r\n",
  'http2_version' => req + "GET / HTTP/2.0\r\n#{H}\r\n",
  'expect_continue' => req(1, 70) + "PUT /f HTTP/1.1\r\n#{H}Expect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
  'expect_unknown' => req + "PUT /f HTTP/1.1\r\n#{H}Expect: 200-ok\r\nContent-Length: 3\r\n\r\nabc",
  'connect' => req + "CONNECT a:443 HTTP/1.1\r\n#{H}\r\n",
  'bytewise' => req(3) + "GET /bytes HTTP/1.1\r\n#{H}X: y\r\n\r\n",
  'half_close_mid_head' => req(4) + "GET / HTTP/1.1\r\nHo",
  'stopping_worker' => req(8) + "GET / HTTP/1.1\r\n#{H}\r\nGET / HTTP/1.1\r\n#{H}\r\n",
  'default_limits' => req(0x10) + "GET /#{'p' * 200} HTTP/1.1\r\n#{H}X: #{'v' * 500}\r\n\r\n",
  'chunk_size_overflow' => req + "POST / HTTP/1.1\r\n#{H}Transfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
  'garbage' => req + "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
}

# fuzz_upstream: 10 control bytes + response bytes.
def up(f0: 0, pause: 0, f2: 0, f3: 0, cut1: 0, cut2: 0, split: 0)
  [f0, pause, f2, f3].pack('C4') + u16(cut1) + u16(cut2) + u16(split)
end

STREAM = 1
HEAD_M = 1 << 1
POST_M = 2 << 1
TWO = 1 << 5
STALE = 1 << 6
def slices(n) = n << 3

ok = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
upstream = {
  'cl' => up + ok,
  'chunked_trailers' => up(f0: STREAM | slices(2), pause: 0x55, cut1: 40, cut2: 60) +
                        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n",
  'continue_then_200' => up(f0: slices(1), cut1: 25) + "HTTP/1.1 100 Continue\r\n\r\n" + ok,
  'early_hints' => up(f0: STREAM) + "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok,
  'no_content' => up + "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
  'not_modified' => up(f0: STREAM, f2: 1 << 5) + "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n",
  'close_delimited' => up(f0: STREAM | slices(3)) + "HTTP/1.0 200 OK\r\nX: y\r\n\r\nuntil the end",
  'close_delimited_11' => up + "HTTP/1.1 200 OK\r\n\r\nbody until eof",
  'garbage' => up + "\x00\xffHTTP/9 abc\r\n\r\n",
  'empty_header_name' => up + "HTTP/1.1 200 OK\r\n: x\r\n\r\n",
  'empty_header_line' => up + "HTTP/1.1 200 OK\r\n: \r\nContent-Length: 0\r\n\r\n",
  'switching' => up + "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
  'cl_and_te' => up + "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
  'head' => up(f0: HEAD_M) + "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
  'keepalive_two' => up(f0: TWO, split: ok.bytesize) + ok + ok,
  'stale_retry' => up(f0: TWO | STALE, split: ok.bytesize) + ok + ok,
  'stale_post' => up(f0: TWO | STALE | POST_M, split: ok.bytesize) + ok + ok,
  'cancel_in_body' => up(f0: STREAM, f2: 2 | (1 << 2)) +
                      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n1\r\nb\r\n1\r\nc\r\n0\r\n\r\n",
  'pause_outside' => up(f0: slices(2), f3: (1 << 5) | 3, cut1: 10, cut2: 30) + ok,
  'too_large' => up(f3: 1 << 4) + "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n" + 'x' * 20,
  'trailing_bytes' => up(f0: TWO, split: ok.bytesize + 4) + ok + "JUNK" + ok,
  'http10_keepalive' => up(f0: TWO, split: 60) + "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi" + ok
}

# fuzz_iproto: [mode] + bytes; mode even: reply packets, odd: a greeting.
def pkt(body) = "\xce".b + [body.bytesize].pack('N') + body.b
ok_hdr = "\x83\x00\x00\x01\x07\x05\xce\x00\x00\x00\x50".b
iproto = {
  'greeting' => "\x01" + "Tarantool 2.6.0 (Binary) 7b1d9c3e-0000-0000-0000-000000000000".ljust(63) + "\n" +
                'c2FsdHNhbHRzYWx0c2FsdHNhbHRzYWx0c2FsdHNhbHQ='.ljust(63) + "\n",
  'ping' => "\x00".b + pkt(ok_hdr),
  'data' => "\x00".b + pkt(ok_hdr + "\x81\x30\xdd\x00\x00\x00\x02\x93\xcc\xc8\x81\xa3x-a\xa11\xa4body\xc0".b),
  'error' => "\x00".b + pkt("\x82\x00\xcd\x80\x20\x01\x02".b + "\x81\x31\xa4boom".b),
  'two' => "\x00".b + pkt(ok_hdr) + pkt("\x82\x00\x00\x01\x08".b + "\x81\x30\x92\xcb@\t!\xfb\x00\x00\x00\x00\xd6\x02abcd".b),
  'deep' => "\x00".b + pkt(ok_hdr + "\x81\x30".b + "\x91".b * 40 + "\xc0".b),
  'huge_count' => "\x00".b + pkt(ok_hdr + "\x81\x30\xdd\xff\xff\xff\xff\x00".b)
}

{ 'request' => request, 'upstream' => upstream, 'iproto' => iproto }.each do |name, seeds|
  d = File.join(dir, name)
  Dir.mkdir(d) unless Dir.exist?(d)
  seeds.each { |file, bytes| File.binwrite(File.join(d, file), bytes.b) }
  puts "#{d}: #{seeds.size} seeds"
end
