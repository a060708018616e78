/* test_proxy_proto.c - proxy_proto.c: PROXY protocol v1 and v2 headers,
 * whole, cut short at every byte, malformed, oversized; TLVs; writing.
 * unit: proxy_proto addr */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "proxy_proto.h"
#include "unit.h"

static int parse(const void *p, size_t n, gw_proxy_header_t *h)
{
  const char *why;
  int r = gw_proxy_parse(p, n, h, &why);
  if (r < 0 && why == NULL) return -100; /* an error must say why */
  return r;
}

static const char *src_text(const gw_proxy_header_t *h, char *buf, size_t size)
{
  gw_addr_format(&h->src.sa, h->src_len, buf, size);
  return buf;
}

/* Every proper prefix of a good header asks for more. */
static void check_prefixes(const void *p, size_t n)
{
  gw_proxy_header_t h;
  for (size_t i = 0; i < n; i++)
    if (parse(p, i, &h) != GW_PROXY_MORE) {
      CHECK(!"a prefix did not ask for more");
      unit_note("prefix of %zu of %zu bytes", i, n);
      return;
    }
}

static void test_v1(void)
{
  gw_proxy_header_t h;
  char buf[64];
  const char *l = "PROXY TCP4 127.0.0.9 127.0.0.1 51234 8080\r\nGET / HTTP/1.1\r\n";
  size_t hl = strlen("PROXY TCP4 127.0.0.9 127.0.0.1 51234 8080\r\n");
  CHECK_EQ_INT(parse(l, strlen(l), &h), (int)hl);
  CHECK_EQ_INT(h.version, 1);
  CHECK_EQ_INT(h.local, 0);
  CHECK_STR(src_text(&h, buf, sizeof(buf)), "127.0.0.9:51234");
  gw_addr_format(&h.dst.sa, h.dst_len, buf, sizeof(buf));
  CHECK_STR(buf, "127.0.0.1:8080");
  check_prefixes(l, hl);

  l = "PROXY TCP6 2001:db8::1 ::1 65535 0\r\n";
  CHECK_EQ_INT(parse(l, strlen(l), &h), (int)strlen(l));
  CHECK_STR(src_text(&h, buf, sizeof(buf)), "[2001:db8::1]:65535");
  l = "PROXY UNKNOWN\r\n";
  CHECK_EQ_INT(parse(l, strlen(l), &h), (int)strlen(l));
  CHECK_EQ_INT(h.local, 1);
  l = "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n";
  CHECK_EQ_INT(parse(l, strlen(l), &h), (int)strlen(l));
  CHECK_EQ_INT(h.local, 1);

  const char *bad[] = {
      "GET / HTTP/1.1\r\n", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n",
      "PROXY TCP4 ::1 ::1 1 2\r\n", "PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
      "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", "PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
      "PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", "PROXY \r\n", "PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
      "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n", "PROXX TCP4", "proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
      "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\x01\r\n"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int r = parse(bad[i], strlen(bad[i]), &h);
    if (!CHECK(r == GW_PROXY_BAD)) unit_note("accepted or wrong code %d: %s", r, bad[i]);
  }
  char big[200];
  memset(big, 'x', sizeof(big));
  memcpy(big, "PROXY UNKNOWN ", 14);
  CHECK_EQ_INT(parse(big, 106, &h), GW_PROXY_MORE);
  CHECK_EQ_INT(parse(big, 107, &h), GW_PROXY_TOO_BIG);
  CHECK_EQ_INT(parse(big, sizeof(big), &h), GW_PROXY_TOO_BIG);
  memcpy(big + 105, "\r\n", 2); /* exactly 107 bytes: the longest allowed */
  CHECK_EQ_INT(parse(big, sizeof(big), &h), 107);
}

static size_t v2(unsigned char *b, int cmd, int fam, const void *addrs, size_t alen, const void *tlvs, size_t tlen)
{
  memcpy(b, GW_PROXY_V2_SIG, 12);
  b[12] = (unsigned char)(0x20 | cmd);
  b[13] = (unsigned char)fam;
  b[14] = (unsigned char)((alen + tlen) >> 8);
  b[15] = (unsigned char)(alen + tlen);
  if (alen) memcpy(b + 16, addrs, alen);
  if (tlen) memcpy(b + 16 + alen, tlvs, tlen);
  return 16 + alen + tlen;
}

static void test_v2(void)
{
  gw_proxy_header_t h;
  unsigned char b[8192];
  char buf[64];
  const unsigned char a4[12] = {127, 0, 0, 9, 127, 0, 0, 1, 0xc8, 0x22, 0x1f, 0x90};
  size_t n = v2(b, 1, 0x11, a4, 12, NULL, 0);
  memcpy(b + n, "\x16\x03\x01", 3); /* a ClientHello follows: not taken */
  CHECK_EQ_INT(parse(b, n + 3, &h), (int)n);
  CHECK_EQ_INT(h.version, 2);
  CHECK_EQ_INT(h.local, 0);
  CHECK_STR(src_text(&h, buf, sizeof(buf)), "127.0.0.9:51234");
  check_prefixes(b, n);

  unsigned char a6[36] = {0};
  a6[15] = 1; a6[31] = 1; a6[32] = 0x04; a6[33] = 0xd2;
  const unsigned char tl[] = {0x02, 0, 11, 'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm', /* authority */
                              0x20, 0, 9, 0x01, 0, 0, 0, 0, 0x21, 0, 1, 'X', /* SSL with a version sub-TLV */
                              0x04, 0, 0};                                    /* NOOP */
  n = v2(b, 1, 0x21, a6, 36, tl, sizeof(tl));
  CHECK_EQ_INT(parse(b, n, &h), (int)n);
  CHECK_STR(src_text(&h, buf, sizeof(buf)), "[::1]:1234");
  CHECK_EQ_UINT(h.ntlvs, 4);
  CHECK_MEM(h.authority, h.authority_len, "example.com", 11);
  check_prefixes(b, n);

  n = v2(b, 0, 0x00, NULL, 0, NULL, 0); /* LOCAL: a health check from the balancer */
  CHECK_EQ_INT(parse(b, n, &h), 16);
  CHECK_EQ_INT(h.local, 1);
  n = v2(b, 0, 0x11, a4, 12, NULL, 0); /* LOCAL with addresses: ignored */
  CHECK_EQ_INT(parse(b, n, &h), 28);
  CHECK_EQ_INT(h.local, 1);
  unsigned char un[216] = {0};
  n = v2(b, 1, 0x31, un, 216, NULL, 0); /* unix: keep the socket's */
  CHECK_EQ_INT(parse(b, n, &h), (int)n);
  CHECK_EQ_INT(h.local, 1);

  /* malformed */
  n = v2(b, 2, 0x11, a4, 12, NULL, 0);
  CHECK_EQ_INT(parse(b, n, &h), GW_PROXY_BAD); /* command 2 */
  n = v2(b, 1, 0x41, a4, 12, NULL, 0);
  CHECK_EQ_INT(parse(b, n, &h), GW_PROXY_BAD); /* family 4 */
  n = v2(b, 1, 0x13, a4, 12, NULL, 0);
  CHECK_EQ_INT(parse(b, n, &h), GW_PROXY_BAD); /* transport 3 */
  n = v2(b, 1, 0x21, a4, 12, NULL, 0);
  CHECK_EQ_INT(parse(b, n, &h), GW_PROXY_BAD); /* IPv6 in 12 bytes */
  n = v2(b, 1, 0x11, a4, 12, NULL, 0);
  b[12] = 0x11;
  CHECK_EQ_INT(parse(b, n, &h), GW_PROXY_BAD); /* version 1 in a v2 header */
  const unsigned char t_short[] = {0x02, 0, 5, 'a'};
  n = v2(b, 1, 0x11, a4, 12, t_short, sizeof(t_short));
  CHECK_EQ_INT(parse(b, n, &h), GW_PROXY_BAD); /* a TLV past the end */
  const unsigned char t_cut[] = {0x02, 0};
  n = v2(b, 1, 0x11, a4, 12, t_cut, sizeof(t_cut));
  CHECK_EQ_INT(parse(b, n, &h), GW_PROXY_BAD);
  const unsigned char t_ssl[] = {0x20, 0, 3, 1, 0, 0};
  n = v2(b, 1, 0x11, a4, 12, t_ssl, sizeof(t_ssl));
  CHECK_EQ_INT(parse(b, n, &h), GW_PROXY_BAD); /* SSL TLV under its 5 fixed bytes */
  const unsigned char t_sub[] = {0x20, 0, 7, 1, 0, 0, 0, 0, 0x21, 0};
  n = v2(b, 1, 0x11, a4, 12, t_sub, sizeof(t_sub));
  CHECK_EQ_INT(parse(b, n, &h), GW_PROXY_BAD); /* a sub-TLV cut short */
  unsigned char sig[16];
  memcpy(sig, GW_PROXY_V2_SIG, 12);
  sig[5] = 'X';
  CHECK_EQ_INT(parse(sig, 12, &h), GW_PROXY_BAD);
  CHECK_EQ_INT(parse(sig, 5, &h), GW_PROXY_MORE);
  CHECK_EQ_INT(parse("\x16\x03\x01", 3, &h), GW_PROXY_BAD); /* a ClientHello without a header */
  CHECK_EQ_INT(parse("PRI * HTTP/2.0", 14, &h), GW_PROXY_BAD);

  /* oversized: known from the first 16 bytes */
  static unsigned char pad[4096];
  n = v2(b, 1, 0x11, a4, 12, pad, 4096 - 16 - 12);
  CHECK_EQ_INT(parse(b, n, &h), 4096); /* the largest: 1356 empty TLVs of type 0 */
  CHECK_EQ_UINT(h.ntlvs, 1356);
  n = v2(b, 1, 0x11, a4, 12, pad, 4096 - 16 - 12 - 1);
  CHECK_EQ_INT(parse(b, n, &h), GW_PROXY_BAD); /* ... and 2 bytes that are no TLV */
  b[14] = (unsigned char)((4096 - 16 + 1) >> 8);
  b[15] = (unsigned char)(4096 - 16 + 1);
  CHECK_EQ_INT(parse(b, 16, &h), GW_PROXY_TOO_BIG);
  b[14] = b[15] = 0xff;
  CHECK_EQ_INT(parse(b, 16, &h), GW_PROXY_TOO_BIG);
}

static void test_write(void)
{
  unsigned char b[256];
  gw_sockaddr_t s, d;
  socklen_t sl, dl;
  gw_addr_parse_literal("127.0.0.9", 9, &s, &sl);
  gw_addr_parse_literal("127.0.0.1", 9, &d, &dl);
  gw_addr_set_port(&s, 51234);
  gw_addr_set_port(&d, 8080);
  int n = gw_proxy_write(1, &s.sa, &d.sa, b, sizeof(b));
  CHECK_MEM(b, n, "PROXY TCP4 127.0.0.9 127.0.0.1 51234 8080\r\n", 43);
  gw_proxy_header_t h;
  char buf[64];
  n = gw_proxy_write(2, &s.sa, &d.sa, b, sizeof(b));
  CHECK_EQ_INT(n, 28);
  CHECK_EQ_INT(parse(b, (size_t)n, &h), 28);
  CHECK_STR(src_text(&h, buf, sizeof(buf)), "127.0.0.9:51234");
  gw_addr_parse_literal("::1", 3, &s, &sl);
  gw_addr_set_port(&s, 1);
  n = gw_proxy_write(1, &s.sa, &d.sa, b, sizeof(b)); /* families differ */
  CHECK_MEM(b, n, "PROXY UNKNOWN\r\n", 15);
  n = gw_proxy_write(2, NULL, NULL, b, sizeof(b));
  CHECK_EQ_INT(n, 16);
  CHECK_EQ_INT(parse(b, 16, &h), 16);
  CHECK_EQ_INT(h.local, 1);
  gw_addr_parse_literal("::1", 3, &d, &dl);
  n = gw_proxy_write(2, &s.sa, &d.sa, b, sizeof(b));
  CHECK_EQ_INT(n, 52);
  CHECK_EQ_INT(parse(b, (size_t)n, &h), 52);
  CHECK_STR(src_text(&h, buf, sizeof(buf)), "[::1]:1");
  CHECK_EQ_INT(gw_proxy_write(2, &s.sa, &d.sa, b, 40), -1);
  CHECK_EQ_INT(gw_proxy_write(1, &s.sa, &d.sa, b, 10), -1);
}

int main(void)
{
  test_v1();
  test_v2();
  test_write();
  return UNIT_DONE();
}
