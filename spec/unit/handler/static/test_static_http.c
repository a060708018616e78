/* test_static_http.c - the pure parts of static files: Range parsing, ETag
 * and HTTP dates, If-None-Match, Accept-Encoding, and the MIME table (the
 * path decoder: test_uri_path.c).
 * unit: static_http mime */
#include <stdio.h>
#include <string.h>

#include "mime.h"
#include "static_http.h"
#include "unit.h"

static void range(const char *v, long long size, gw_range_kind_t kind, long long start, long long len)
{
  gw_range_t rs[8];
  size_t n = 0;
  gw_range_kind_t k = gw_static_range_parse(v, v ? strlen(v) : 0, size, rs, 8, &n);
  if (!CHECK_EQ_INT(k, kind)) unit_note("Range %s on %lld bytes", v ? v : "(none)", size);
  if (kind == GW_RANGE_SINGLE && !(CHECK_EQ_INT(n, 1) && CHECK_EQ_INT(rs[0].start, start) && CHECK_EQ_INT(rs[0].len, len)))
    unit_note("Range %s on %lld bytes", v, size);
}

/* Several ranges: the parts, as "start+len start+len ...", and the cap. */
static void ranges(const char *v, long long size, size_t cap, gw_range_kind_t kind, const char *parts)
{
  gw_range_t rs[16];
  size_t n = 0;
  gw_range_kind_t k = gw_static_range_parse(v, strlen(v), size, rs, cap, &n);
  char got[256] = "";
  for (size_t i = 0; i < n; i++)
    snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%lld+%lld", i ? " " : "", rs[i].start, rs[i].len);
  if (!(CHECK_EQ_INT(k, kind) && CHECK_EQ_STR(got, parts))) unit_note("Range %s on %lld bytes, cap %zu", v, size, cap);
}

static void test_ranges(void)
{
  range(NULL, 10, GW_RANGE_NONE, 0, 0);
  range("bytes=0-0", 10, GW_RANGE_SINGLE, 0, 1);
  range("bytes=2-5", 10, GW_RANGE_SINGLE, 2, 4);
  range("bytes=2-", 10, GW_RANGE_SINGLE, 2, 8);
  range("bytes=2-100", 10, GW_RANGE_SINGLE, 2, 8);
  range("bytes=-3", 10, GW_RANGE_SINGLE, 7, 3);
  range("bytes=-30", 10, GW_RANGE_SINGLE, 0, 10);
  range("BYTES=1-1", 10, GW_RANGE_SINGLE, 1, 1);
  range("bytes= 1-2 ", 10, GW_RANGE_SINGLE, 1, 2);
  range("bytes=10-", 10, GW_RANGE_UNSATISFIABLE, 0, 0);
  range("bytes=10-20", 10, GW_RANGE_UNSATISFIABLE, 0, 0);
  range("bytes=-0", 10, GW_RANGE_UNSATISFIABLE, 0, 0);
  range("bytes=0-", 0, GW_RANGE_UNSATISFIABLE, 0, 0);
  range("bytes=0-1,4-5", 10, GW_RANGE_MULTI, 0, 0);
  range("bytes=0-1,40-50", 10, GW_RANGE_SINGLE, 0, 2); /* the unsatisfiable one is dropped, as nginx */
  range("bytes=0-1,", 10, GW_RANGE_SINGLE, 0, 2);
  range("bytes=5-2", 10, GW_RANGE_NONE, 0, 0); /* invalid: ignored */
  range("bytes=a-b", 10, GW_RANGE_NONE, 0, 0);
  range("bytes=", 10, GW_RANGE_NONE, 0, 0);
  range("bytes=1", 10, GW_RANGE_NONE, 0, 0);
  range("items=1-2", 10, GW_RANGE_NONE, 0, 0);
  range("bytes=1-2x", 10, GW_RANGE_NONE, 0, 0);
  range("bytes=99999999999999999999-", 10, GW_RANGE_NONE, 0, 0);
  range("bytes=0-99999999999999999999", 10, GW_RANGE_SINGLE, 0, 10);
  range("bytes=5000000000-", 10000000000LL, GW_RANGE_SINGLE, 5000000000LL, 5000000000LL);

  /* several: the client's order while they are apart */
  ranges("bytes=0-4,10-14", 100, 8, GW_RANGE_MULTI, "0+5 10+5");
  ranges("bytes=10-14,0-4", 100, 8, GW_RANGE_MULTI, "10+5 0+5");
  ranges("bytes=-5,0-2", 100, 8, GW_RANGE_MULTI, "95+5 0+3");
  ranges("bytes=0-4, 200-300, 50-", 100, 8, GW_RANGE_MULTI, "0+5 50+50");
  /* overlapping or touching: coalesced, ascending */
  ranges("bytes=0-4,3-8", 100, 8, GW_RANGE_SINGLE, "0+9");
  ranges("bytes=0-4,5-9", 100, 8, GW_RANGE_SINGLE, "0+10");
  ranges("bytes=20-29,0-4,25-40,60-69", 100, 8, GW_RANGE_MULTI, "0+5 20+21 60+10");
  ranges("bytes=0-99,10-19,30-39", 100, 8, GW_RANGE_SINGLE, "0+100");
  ranges("bytes=0-0,0-0,0-0", 100, 8, GW_RANGE_SINGLE, "0+1");
  ranges("bytes=50-,-10,0-1", 100, 8, GW_RANGE_MULTI, "0+2 50+50");
  /* the cap (max_ranges): beyond it the whole file; 0: no ranges */
  ranges("bytes=0-0,2-2,4-4", 100, 3, GW_RANGE_MULTI, "0+1 2+1 4+1");
  ranges("bytes=0-0,2-2,4-4", 100, 2, GW_RANGE_NONE, "");
  ranges("bytes=0-0,2-2,400-", 100, 2, GW_RANGE_MULTI, "0+1 2+1"); /* unsatisfiable ones do not count */
  ranges("bytes=0-0", 100, 0, GW_RANGE_NONE, "");
  ranges("bytes=0-0,2-2", 100, 1, GW_RANGE_NONE, "");
  /* never more than the file */
  ranges("bytes=0-,0-,0-,-100", 100, 8, GW_RANGE_SINGLE, "0+100");
}

static void test_etag_dates(void)
{
  char buf[64];
  CHECK_EQ_INT(gw_static_etag(buf, sizeof(buf), 0x5f5e1000, 0x1234), 15);
  CHECK_EQ_STR(buf, "\"5f5e1000-1234\"");
  CHECK_EQ_INT(gw_static_http_date(buf, sizeof(buf), 784111777), 29);
  CHECK_EQ_STR(buf, "Sun, 06 Nov 1994 08:49:37 GMT");
  const char *d = "Sun, 06 Nov 1994 08:49:37 GMT";
  CHECK_EQ_INT(gw_static_http_date_parse(d, strlen(d)), 784111777);
  d = "Sunday, 06-Nov-94 08:49:37 GMT";
  CHECK_EQ_INT(gw_static_http_date_parse(d, strlen(d)), 784111777);
  d = "Sun Nov  6 08:49:37 1994";
  CHECK_EQ_INT(gw_static_http_date_parse(d, strlen(d)), 784111777);
  d = "yesterday";
  CHECK_EQ_INT(gw_static_http_date_parse(d, strlen(d)), -1);
  d = "Sun, 06 Xyz 1994 08:49:37 GMT";
  CHECK_EQ_INT(gw_static_http_date_parse(d, strlen(d)), -1);
  d = "Sun, 06 Nov 1994 08:49:37 GMTx";
  CHECK_EQ_INT(gw_static_http_date_parse(d, strlen(d)), -1);
  for (time_t t = 0; t < 4102444800; t += 86400 * 37 + 3607) { /* round trips to 2100 */
    gw_static_http_date(buf, sizeof(buf), t);
    if (!CHECK_EQ_INT(gw_static_http_date_parse(buf, strlen(buf)), t)) break;
  }
  const char *e = "\"5f-12\"";
  CHECK(gw_static_etag_match("\"5f-12\"", 7, e, 7));
  CHECK(gw_static_etag_match("W/\"5f-12\"", 9, e, 7));
  CHECK(gw_static_etag_match("\"a\", \"5f-12\"", 12, e, 7));
  CHECK(gw_static_etag_match("*", 1, e, 7));
  CHECK(!gw_static_etag_match("\"5f-13\"", 7, e, 7));
  CHECK(!gw_static_etag_match("", 0, e, 7));
  CHECK(!gw_static_etag_match("\"5f-12", 6, e, 7));
}

static int accepts(const char *ae, const char *c)
{
  return gw_static_accepts(ae, strlen(ae), c);
}

static void test_accept_encoding(void)
{
  CHECK(accepts("gzip", "gzip"));
  CHECK(accepts("deflate, gzip;q=0.5", "gzip"));
  CHECK(accepts("GZIP", "gzip"));
  CHECK(!accepts("gzip;q=0", "gzip"));
  CHECK(!accepts("gzip; q=0.000", "gzip"));
  CHECK(accepts("gzip;q=0.001", "gzip"));
  CHECK(!accepts("deflate", "gzip"));
  CHECK(!accepts("xgzip", "gzip"));
  CHECK(accepts("br, gzip", "br"));
  CHECK(accepts("*", "br"));
  CHECK(!accepts("", "gzip"));
}

static void test_mime(void)
{
  gw_mime_t *m = gw_mime_load("/etc/mime.types");
  CHECK(m != NULL);
  CHECK(gw_mime_count(m) > 500);
  CHECK_EQ_STR(gw_mime_lookup(m, "/a/b.css", 8), "text/css");
  CHECK_EQ_STR(gw_mime_lookup(m, "/a/b.HTML", 9), "text/html");
  CHECK_EQ_STR(gw_mime_lookup(m, "x.png", 5), "image/png");
  CHECK_EQ_STR(gw_mime_lookup(m, "x.wasm", 6), "application/wasm");
  CHECK(gw_mime_lookup(m, "/a.d/noext", 10) == NULL);
  CHECK(gw_mime_lookup(m, "/a.", 3) == NULL);
  CHECK(gw_mime_lookup(m, "/a.nosuchext", 12) == NULL);
  CHECK_EQ_INT(gw_mime_set(m, "css", 3, "text/x-custom"), 0);
  CHECK_EQ_STR(gw_mime_lookup(m, "b.css", 5), "text/x-custom");
  gw_mime_free(m);
  m = gw_mime_load("/nonexistent/mime.types"); /* built-ins only */
  CHECK(m != NULL);
  CHECK_EQ_STR(gw_mime_lookup(m, "a.js", 4), "text/javascript");
  for (int i = 0; i < 2000; i++) { /* growth */
    char ext[16];
    snprintf(ext, sizeof(ext), "e%d", i);
    gw_mime_set(m, ext, strlen(ext), "a/b");
  }
  CHECK_EQ_STR(gw_mime_lookup(m, "x.e1999", 7), "a/b");
  CHECK_EQ_STR(gw_mime_lookup(m, "a.json", 6), "application/json");
  gw_mime_free(m);
}

int main(void)
{
  test_ranges();
  test_etag_dates();
  test_accept_encoding();
  test_mime();
  return unit_done();
}
