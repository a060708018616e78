/* test_ws_frame.c - RFC 6455 frames (gateway/handler/websocket/ws_frame.c): the handshake key,
 * the encoder, and the parser fed whole and byte by byte: masking,
 * fragmentation, control frames between fragments, and every refusal with
 * its close code.
 * unit: ws_frame -lcrypto */
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "ws_frame.h"

/* A masked client frame of payload into out; returns its length. */
static size_t client_frame(uint8_t *out, int fin, int rsv, int opcode, const void *payload, size_t len)
{
  static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
  size_t n = gw_ws_frame_head(out, fin, opcode, len);
  out[0] |= (uint8_t)(rsv << 4);
  out[1] |= 0x80;
  memcpy(out + n, mask, 4);
  memcpy(out + n + 4, payload, len);
  gw_ws_mask(out + n + 4, len, mask, 0);
  return n + 4 + len;
}

/* Parses all of data, whole or in pieces of `step` bytes; returns the first
 * event other than NONE (or NONE) and leaves the parser there. */
static gw_ws_event_t parse_all(gw_ws_parser_t *p, const uint8_t *data, size_t len, size_t step, size_t *consumed)
{
  size_t at = 0;
  while (at < len) {
    size_t n = len - at < step ? len - at : step, used;
    gw_ws_event_t ev = gw_ws_parse(p, data + at, n, &used);
    at += used;
    if (ev != GW_WS_EV_NONE) {
      *consumed = at;
      return ev;
    }
  }
  *consumed = at;
  return GW_WS_EV_NONE;
}

static void test_accept(void)
{
  char out[29];
  /* RFC 6455 section 1.3's example */
  gw_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", 24, out);
  CHECK_EQ_STR(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  CHECK(gw_ws_key_valid("dGhlIHNhbXBsZSBub25jZQ==", 24));
  CHECK(!gw_ws_key_valid("dGhlIHNhbXBsZSBub25jZQ=", 23));
  CHECK(!gw_ws_key_valid("dGhlIHNhbXBsZSBub25j*Q==", 24));
  CHECK(!gw_ws_key_valid("", 0));
}

static void test_encoder(void)
{
  uint8_t h[GW_WS_MAX_HEAD];
  CHECK_EQ_UINT(gw_ws_frame_head(h, 1, GW_WS_TEXT, 5), 2);
  CHECK_EQ_UINT(h[0], 0x81);
  CHECK_EQ_UINT(h[1], 5);
  CHECK_EQ_UINT(gw_ws_frame_head(h, 0, GW_WS_BINARY, 126), 4);
  CHECK_EQ_UINT(h[0], 0x02);
  CHECK_EQ_UINT(h[1], 126);
  CHECK_EQ_UINT(h[2] << 8 | h[3], 126);
  CHECK_EQ_UINT(gw_ws_frame_head(h, 1, GW_WS_BINARY, 65536), 10);
  CHECK_EQ_UINT(h[1], 127);
  CHECK_EQ_UINT(h[7], 1);
  CHECK_EQ_UINT(h[8], 0);
}

static void test_utf8(void)
{
  static const struct { const char *s; int ok; } cases[] = {
    {"hello", 1}, {"\xc3\xa9", 1}, {"\xe2\x82\xac", 1}, {"\xf0\x9f\x98\x80", 1}, {"\xf4\x8f\xbf\xbf", 1},
    {"\xc0\xaf", 0},          /* overlong */
    {"\xe0\x80\xaf", 0},      /* overlong */
    {"\xed\xa0\x80", 0},      /* a surrogate */
    {"\xf4\x90\x80\x80", 0},  /* past U+10FFFF */
    {"\xff", 0}, {"\x80", 0}, {"\xc3\x28", 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    uint32_t st = 0;
    int r = gw_ws_utf8_check(&st, (const uint8_t *)cases[i].s, strlen(cases[i].s));
    if (!CHECK_EQ_INT(r == 0 && st == 0, cases[i].ok)) unit_note("case %zu", i);
  }
  /* Split anywhere, the verdict is the same. */
  const char *euro = "a\xe2\x82\xac";
  for (size_t cut = 0; cut <= 4; cut++) {
    uint32_t st = 0;
    CHECK_EQ_INT(gw_ws_utf8_check(&st, (const uint8_t *)euro, cut), 0);
    CHECK_EQ_INT(gw_ws_utf8_check(&st, (const uint8_t *)euro + cut, 4 - cut), 0);
    CHECK_EQ_UINT(st, 0);
  }
  uint32_t st = 0;
  CHECK_EQ_INT(gw_ws_utf8_check(&st, (const uint8_t *)"\xe2\x82", 2), 0);
  CHECK(st != 0); /* incomplete */
}

/* Text in three fragments with a ping between them, parsed at every step size. */
static void test_fragments(void)
{
  uint8_t buf[512];
  size_t n = 0;
  n += client_frame(buf + n, 0, 0, GW_WS_TEXT, "Hel", 3);
  n += client_frame(buf + n, 1, 0, GW_WS_PING, "pi", 2);
  n += client_frame(buf + n, 0, 0, GW_WS_CONT, "lo \xe2\x82", 5); /* a euro sign split across fragments */
  n += client_frame(buf + n, 1, 0, GW_WS_CONT, "\xac!", 2);
  n += client_frame(buf + n, 1, 0, GW_WS_BINARY, "\x00\xff", 2);
  n += client_frame(buf + n, 1, 0, GW_WS_CLOSE, "\x03\xe8" "bye", 5);
  for (size_t step = 1; step <= n; step++) {
    gw_ws_parser_t p;
    gw_ws_parser_init(&p, 1024);
    size_t at = 0, used;
    int ok = CHECK_EQ_INT(parse_all(&p, buf, n, step, &used), GW_WS_EV_PING);
    at += used;
    ok &= CHECK_EQ_UINT(p.ctl_len, 2) && CHECK(memcmp(p.ctl, "pi", 2) == 0);
    ok &= CHECK_EQ_INT(parse_all(&p, buf + at, n - at, step, &used), GW_WS_EV_MESSAGE);
    at += used;
    ok &= CHECK_EQ_UINT(p.msg_len, 10) && CHECK(memcmp(p.msg, "Hello \xe2\x82\xac!", 10) == 0) && CHECK(!p.msg_binary);
    ok &= CHECK_EQ_INT(parse_all(&p, buf + at, n - at, step, &used), GW_WS_EV_MESSAGE);
    at += used;
    ok &= CHECK_EQ_UINT(p.msg_len, 2) && CHECK(p.msg_binary);
    ok &= CHECK_EQ_INT(parse_all(&p, buf + at, n - at, step, &used), GW_WS_EV_CLOSE);
    at += used;
    ok &= CHECK_EQ_INT(p.close_code, 1000) && CHECK_EQ_UINT(at, n);
    if (!ok) unit_note("step %zu", step);
    gw_ws_parser_free(&p);
  }
}

/* One bad input, parsed whole and byte by byte: an ERROR with code. */
static void expect_error(const char *name, const uint8_t *data, size_t len, size_t max, int code)
{
  for (size_t step = 1; step <= len; step = step == 1 ? len : len + 1) {
    gw_ws_parser_t p;
    gw_ws_parser_init(&p, max);
    size_t used;
    gw_ws_event_t ev;
    size_t at = 0;
    do {
      ev = parse_all(&p, data + at, len - at, step, &used);
      at += used;
    } while (ev != GW_WS_EV_NONE && ev != GW_WS_EV_ERROR && at < len);
    if (!(CHECK_EQ_INT(ev, GW_WS_EV_ERROR) && CHECK_EQ_INT(p.error_code, code))) unit_note("%s, step %zu", name, step);
    gw_ws_parser_free(&p);
  }
}

static void test_refusals(void)
{
  uint8_t b[300], big[200];
  size_t n;
  memset(big, 'x', sizeof(big));
  n = client_frame(b, 1, 0, GW_WS_TEXT, "hi", 2);
  b[1] &= 0x7f; /* unmasked */
  expect_error("unmasked", b, n, 100, 1002);
  n = client_frame(b, 1, 4, GW_WS_TEXT, "hi", 2);
  expect_error("rsv1", b, n, 100, 1002);
  n = client_frame(b, 1, 0, 0x3, "hi", 2);
  expect_error("opcode 3", b, n, 100, 1002);
  n = client_frame(b, 1, 0, 0xB, "hi", 2);
  expect_error("opcode 0xB", b, n, 100, 1002);
  n = client_frame(b, 0, 0, GW_WS_PING, "hi", 2);
  expect_error("fragmented ping", b, n, 100, 1002);
  n = client_frame(b, 1, 0, GW_WS_PING, big, 126);
  expect_error("126-byte ping", b, n, 1000, 1002);
  n = client_frame(b, 1, 0, GW_WS_CONT, "hi", 2);
  expect_error("lone continuation", b, n, 100, 1002);
  n = client_frame(b, 0, 0, GW_WS_TEXT, "hi", 2);
  n += client_frame(b + n, 1, 0, GW_WS_TEXT, "hi", 2);
  expect_error("text inside text", b, n, 100, 1002);
  n = client_frame(b, 1, 0, GW_WS_TEXT, big, 101);
  expect_error("over max", b, n, 100, 1009);
  n = client_frame(b, 0, 0, GW_WS_BINARY, big, 60);
  n += client_frame(b + n, 1, 0, GW_WS_CONT, big, 60);
  expect_error("fragments over max", b, n, 100, 1009);
  n = client_frame(b, 1, 0, GW_WS_TEXT, "a\xff", 2);
  expect_error("bad utf-8", b, n, 100, 1007);
  n = client_frame(b, 0, 0, GW_WS_TEXT, "a\xe2\x82", 3);
  n += client_frame(b + n, 1, 0, GW_WS_CONT, "(", 1);
  expect_error("utf-8 broken across fragments", b, n, 100, 1007);
  n = client_frame(b, 1, 0, GW_WS_TEXT, "a\xe2\x82", 3);
  expect_error("utf-8 cut at the end", b, n, 100, 1007);
  n = client_frame(b, 1, 0, GW_WS_CLOSE, "\x03", 1);
  expect_error("1-byte close", b, n, 100, 1002);
  n = client_frame(b, 1, 0, GW_WS_CLOSE, "\x03\xed", 2); /* 1005 */
  expect_error("close 1005", b, n, 100, 1002);
  n = client_frame(b, 1, 0, GW_WS_CLOSE, "\x03\xe8\xff", 3);
  expect_error("close reason not utf-8", b, n, 100, 1007);
  /* A 64-bit length with the top bit set. */
  uint8_t huge[14] = {0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4};
  expect_error("top bit", huge, sizeof(huge), 100, 1002);
}

static void test_empty_close_and_limits(void)
{
  uint8_t b[300];
  gw_ws_parser_t p;
  gw_ws_parser_init(&p, 4);
  size_t n = client_frame(b, 1, 0, GW_WS_TEXT, "four", 4), used;
  n += client_frame(b + n, 1, 0, GW_WS_CLOSE, "", 0);
  CHECK_EQ_INT(parse_all(&p, b, n, n, &used), GW_WS_EV_MESSAGE); /* exactly the limit */
  CHECK_EQ_INT(gw_ws_parse(&p, b + used, n - used, &used), GW_WS_EV_CLOSE);
  CHECK_EQ_INT(p.close_code, GW_WS_NO_STATUS);
  gw_ws_parser_free(&p);
}

int main(void)
{
  test_accept();
  test_encoder();
  test_utf8();
  test_fragments();
  test_refusals();
  test_empty_close_and_limits();
  return unit_done();
}
