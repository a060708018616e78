/* test_fcgi.c - the FastCGI record codec and the CGI response head
 * (gateway/handler/fastcgi/fcgi_record.c): exact bytes of what we send, the decoder on every split
 * of a stream, the hostile records it must refuse, and head parsing.
 * unit: fcgi_record headers addr -levent */
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "fcgi_record.h"
#include "unit.h"

static void test_encoding(void)
{
  unsigned char b[16];
  gw_fcgi_put_begin(b, 1, 1);
  static const unsigned char want[16] = {1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  CHECK(memcmp(b, want, 16) == 0);
  gw_fcgi_put_header(b, GW_FCGI_STDIN, 0x1234, 0xfffe, 3);
  static const unsigned char h[8] = {1, 5, 0x12, 0x34, 0xff, 0xfe, 3, 0};
  CHECK(memcmp(b, h, 8) == 0);
  CHECK_EQ_UINT(gw_fcgi_pair_size(3, 5), 10);
  CHECK_EQ_UINT(gw_fcgi_pair_size(127, 128), 1 + 4 + 255);
  CHECK_EQ_UINT(gw_fcgi_pair_size((size_t)1 << 31, 1), 0);
  unsigned char p[400];
  char big[200];
  memset(big, 'v', sizeof(big));
  size_t n = gw_fcgi_put_pair(p, "NAME", 4, big, 200);
  CHECK_EQ_UINT(n, 1 + 4 + 4 + 200);
  CHECK(p[0] == 4 && p[1] == 0x80 && p[2] == 0 && p[3] == 0 && p[4] == 200);
  CHECK(memcmp(p + 5, "NAME", 4) == 0 && p[9] == 'v');
  /* records split at 65535, and the empty end record */
  struct evbuffer *out = evbuffer_new();
  char *data = calloc(1, 70000);
  CHECK(gw_fcgi_add_records(out, GW_FCGI_STDIN, 1, data, 70000) == 0);
  CHECK_EQ_UINT(evbuffer_get_length(out), 70000 + 16);
  CHECK(gw_fcgi_add_records(out, GW_FCGI_STDIN, 1, NULL, 0) == 0);
  CHECK_EQ_UINT(evbuffer_get_length(out), 70000 + 24);
  evbuffer_free(out);
  free(data);
}

/* A response: STDOUT "head + body" in two records (one padded), STDERR,
 * the end of STDOUT, END_REQUEST. */
static size_t build(unsigned char *w, unsigned id)
{
  unsigned char *p = w;
  const char *a = "Status: 404 Not Found\r\nX-A: 1\r\n\r\nbo";
  gw_fcgi_put_header(p, GW_FCGI_STDOUT, id, strlen(a), 5);
  p += 8;
  memcpy(p, a, strlen(a));
  p += strlen(a);
  memset(p, 0, 5);
  p += 5;
  gw_fcgi_put_header(p, GW_FCGI_STDERR, id, 4, 0);
  memcpy(p + 8, "oops", 4);
  p += 12;
  gw_fcgi_put_header(p, GW_FCGI_STDOUT, id, 2, 0);
  memcpy(p + 8, "dy", 2);
  p += 10;
  gw_fcgi_put_header(p, GW_FCGI_STDOUT, id, 0, 0);
  p += 8;
  gw_fcgi_put_header(p, GW_FCGI_END_REQUEST, id, 8, 0);
  memset(p + 8, 0, 8);
  p[11] = 7; /* app status 7 */
  p += 16;
  return (size_t)(p - w);
}

/* Decodes w in pieces cut at `cut`: stdout, stderr gathered; returns the
 * last outcome (END or ERROR). */
static gw_fcgi_out_t run(const unsigned char *w, size_t len, size_t cut, char *so, size_t *solen, char *se,
                         size_t *selen, gw_fcgi_decoder_t *d)
{
  gw_fcgi_decoder_init(d, 1);
  *solen = *selen = 0;
  size_t bounds[3] = {0, cut, len};
  for (int part = 0; part < 2; part++) {
    const char *p = (const char *)w + bounds[part];
    size_t left = bounds[part + 1] - bounds[part];
    for (int guard = 0; guard < 1000; guard++) {
      size_t used = 0;
      gw_fcgi_out_t o = gw_fcgi_decode(d, p, left, &used);
      p += used;
      left -= used;
      if (o == GW_FCGI_OUT_STDOUT && d->len) memcpy(so + *solen, d->data, d->len), *solen += d->len;
      if (o == GW_FCGI_OUT_STDERR && d->len) memcpy(se + *selen, d->data, d->len), *selen += d->len;
      if (o == GW_FCGI_OUT_END || o == GW_FCGI_OUT_ERROR) return o;
      if (o == GW_FCGI_NEED_MORE) break;
    }
  }
  return GW_FCGI_NEED_MORE;
}

static void test_decoder(void)
{
  unsigned char w[256];
  size_t len = build(w, 1);
  for (size_t cut = 0; cut <= len; cut++) {
    char so[256], se[256];
    size_t solen, selen;
    gw_fcgi_decoder_t d;
    gw_fcgi_out_t o = run(w, len, cut, so, &solen, se, &selen, &d);
    int ok = CHECK(o == GW_FCGI_OUT_END) && CHECK_EQ_UINT(solen, 37) && CHECK(memcmp(so + 33, "body", 4) == 0) &&
             CHECK_EQ_UINT(selen, 4) && CHECK_EQ_UINT(d.app_status, 7) && CHECK_EQ_INT(d.protocol_status, 0);
    if (!ok) unit_note("cut %zu", cut);
  }
  /* another request id, a bad version, an unknown type, a long END, bytes after END */
  char so[256], se[256];
  size_t solen, selen;
  gw_fcgi_decoder_t d;
  len = build(w, 2);
  CHECK(run(w, len, 3, so, &solen, se, &selen, &d) == GW_FCGI_OUT_ERROR);
  len = build(w, 1);
  w[0] = 2;
  CHECK(run(w, len, 0, so, &solen, se, &selen, &d) == GW_FCGI_OUT_ERROR);
  len = build(w, 1);
  w[1] = GW_FCGI_GET_VALUES_RESULT;
  CHECK(run(w, len, 0, so, &solen, se, &selen, &d) == GW_FCGI_OUT_ERROR);
  unsigned char e[40];
  gw_fcgi_put_header(e, GW_FCGI_END_REQUEST, 1, 9, 0);
  memset(e + 8, 0, 9);
  CHECK(run(e, 17, 0, so, &solen, se, &selen, &d) == GW_FCGI_OUT_ERROR);
  gw_fcgi_put_header(e, GW_FCGI_END_REQUEST, 1, 8, 2);
  memset(e + 8, 0, 12);
  gw_fcgi_decoder_init(&d, 1);
  size_t used;
  CHECK(gw_fcgi_decode(&d, (char *)e, 18, &used) == GW_FCGI_OUT_END);
  CHECK(gw_fcgi_decode(&d, (char *)e + used, 18 - used, &used) == GW_FCGI_NEED_MORE); /* its padding */
  CHECK(gw_fcgi_decode(&d, "x", 1, &used) == GW_FCGI_OUT_ERROR);
}

static void test_head(void)
{
  const char *h = "Status: 404 Not Found\r\nX-A:  1 \nContent-Type: text/plain\r\n\r\nbody";
  CHECK_EQ_INT((int)gw_cgi_head_end(h, strlen(h), 0), (int)(strlen(h) - 4));
  CHECK_EQ_INT((int)gw_cgi_head_end("A: b\n\nx", 7, 0), 6);
  CHECK_EQ_INT((int)gw_cgi_head_end("A: b\r\n", 6, 0), 0);
  CHECK_EQ_INT((int)gw_cgi_head_end("\r\nbody\n\n", 8, 0), 2);
  /* Arriving in two parts, scanned again from 3 bytes before the split (as
   * fcgi_client.c does): the same end wherever the split falls, the blank
   * line's LF, CR LF or LF CR LF included. */
  const char *heads[] = {h, "A: b\n\nx", "A: b\r\n\r\n", "A: b\nB: c\r\n\nx"};
  for (size_t k = 0; k < sizeof(heads) / sizeof(heads[0]); k++) {
    size_t n = strlen(heads[k]);
    long whole = gw_cgi_head_end(heads[k], n, 0);
    for (size_t cut = 1; cut < n; cut++) {
      long first = gw_cgi_head_end(heads[k], cut, 0);
      long end = first != 0 ? first : gw_cgi_head_end(heads[k], n, cut > 3 ? cut - 3 : 0);
      if (!CHECK_EQ_INT((int)end, (int)whole)) unit_note("head %zu split at %zu", k, cut);
    }
  }
  gw_headers_t hs;
  gw_headers_init(&hs);
  int st = 0;
  const char *err;
  CHECK(gw_cgi_head_parse(h, strlen(h) - 4, &st, &hs, &err) == 0);
  CHECK_EQ_INT(st, 404);
  CHECK_EQ_UINT(hs.count, 2);
  CHECK(hs.count == 2 && strcmp(hs.items[0].value, "1") == 0);
  gw_headers_clear(&hs);
  CHECK(gw_cgi_head_parse("Location: /x\n\n", 14, &st, &hs, &err) == 0);
  CHECK_EQ_INT(st, 302);
  gw_headers_clear(&hs);
  CHECK(gw_cgi_head_parse("Location: /x\nStatus: 301\n\n", 26, &st, &hs, &err) == 0);
  CHECK_EQ_INT(st, 301);
  gw_headers_clear(&hs);
  CHECK(gw_cgi_head_parse("\n", 1, &st, &hs, &err) == 0);
  CHECK_EQ_INT(st, 200);
  CHECK(gw_cgi_head_parse("garbage\n\n", 9, &st, &hs, &err) < 0);
  CHECK(gw_cgi_head_parse("Status: abc\n\n", 13, &st, &hs, &err) < 0);
  CHECK(gw_cgi_head_parse("Bad Name: x\n\n", 13, &st, &hs, &err) < 0);
  CHECK(gw_cgi_head_parse("A: x\rb\n\n", 8, &st, &hs, &err) < 0);
  gw_headers_dispose(&hs);
  char *big = malloc(GW_CGI_MAX_HEAD + 10);
  memset(big, 'a', GW_CGI_MAX_HEAD + 10);
  CHECK_EQ_INT((int)gw_cgi_head_end(big, GW_CGI_MAX_HEAD + 10, 0), -1);
  free(big);
}

static void test_target(void)
{
  gw_sockaddr_t a;
  CHECK(gw_fcgi_target_parse("unix:/run/php.sock", &a) > 0 && a.sa.sa_family == AF_UNIX);
  CHECK(gw_fcgi_target_parse("127.0.0.1:9000", &a) > 0 && a.sa.sa_family == AF_INET);
  CHECK(gw_fcgi_target_parse("[::1]:9000", &a) > 0 && a.sa.sa_family == AF_INET6);
  CHECK_EQ_INT(gw_fcgi_target_parse("php", &a), 0);
  CHECK_EQ_INT(gw_fcgi_target_parse("php.example:9000", &a), -1);
  CHECK_EQ_INT(gw_fcgi_target_parse("127.0.0.1", &a), -1);
  CHECK_EQ_INT(gw_fcgi_target_parse("", &a), -1);
  CHECK_EQ_INT(gw_fcgi_target_parse("unix:", &a), -1);
}

int main(void)
{
  test_encoding();
  test_decoder();
  test_head();
  test_target();
  return unit_done();
}
