/* fuzz_static.c - libFuzzer target for the pure parsers of static files:
 * the request-path decoder and normaliser (uri_path.c), the Range parser,
 * If-None-Match, Accept-Encoding and HTTP dates (static_http.c).
 *
 * Input: byte 0 picks a size for the Range parse (its low bits scale a
 * 64-bit size), the rest is the text given to every parser. Checked:
 *   - a decoded path starts with '/', has no "//" and no "." or ".."
 *     segment, no NUL, no backslash, no control byte, and fits its buffer;
 *     decoding it again with gw_uri_path_clean is the identity;
 *   - the cleaned (not decoded) path obeys the same shape rules;
 *   - the routing form (gw_uri_path_route) starts with '/', has no "//",
 *     "." or ".." segment and no NUL, fits, and routing it again gives
 *     itself when it holds no '%' (it is decoded once only);
 *   - every range (one, or several after coalescing) lies inside the file
 *     and is not empty, several never overlap nor touch once coalesced
 *     (ascending then), and they add up to at most the file;
 *   - a parsed date formats back to the same instant when it is a fixdate;
 *   - no memory error or undefined behaviour (ASan/UBSan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "static_http.h"
#include "uri_path.h"

/* The shape rules every normalised path obeys; strict: also no control
 * byte and no backslash (a file path, not only a route). */
static void check_shape(const char *out, ssize_t n, int strict)
{
  if (n < 1 || out[0] != '/') abort();
  if ((size_t)n != strlen(out)) abort();
  for (ssize_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)out[i];
    if (c == 0 || (strict && (c < 0x20 || c == 0x7f || c == '\\'))) abort();
    if (c == '/' && i + 1 < n && out[i + 1] == '/') abort();
    if (c == '/') { /* the segment after it */
      const char *s = out + i + 1;
      size_t sl = strcspn(s, "/");
      if ((sl == 1 && s[0] == '.') || (sl == 2 && s[0] == '.' && s[1] == '.')) abort();
    }
  }
}

static void check_path(const char *out, ssize_t n) { check_shape(out, n, 1); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  long long fsize = (long long)(data[0] & 0x3f) << (data[0] >> 6) * 12; /* 0 .. ~2^42 */
  const char *text = (const char *)data + 1;
  size_t len = size - 1;

  char *out = malloc(len + 2);
  ssize_t n = gw_uri_path_decode(text, len, out, len + 2);
  if (n >= 0) {
    check_path(out, n);
    char *again = malloc((size_t)n + 2);
    ssize_t m = gw_uri_path_clean(out, (size_t)n, again, (size_t)n + 2);
    if (m != n || memcmp(out, again, (size_t)n) != 0) abort();
    free(again);
  }
  n = gw_uri_path_clean(text, len, out, len + 2);
  if (n >= 0) check_path(out, n);
  n = gw_uri_path_route(text, len, out, len + 2);
  if (n >= 0) {
    check_shape(out, n, 0);
    if (memchr(out, '%', (size_t)n) == NULL) {
      char *again = malloc((size_t)n + 2);
      ssize_t m = gw_uri_path_route(out, (size_t)n, again, (size_t)n + 2);
      if (m != n || memcmp(out, again, (size_t)n) != 0) abort();
      free(again);
    }
  }
  free(out);

  gw_range_t rs[32];
  size_t nr = 0;
  gw_range_kind_t k = gw_static_range_parse(text, len, fsize, rs, 32, &nr);
  if ((k == GW_RANGE_SINGLE) != (nr == 1) || (k == GW_RANGE_MULTI) != (nr > 1)) abort();
  long long total = 0;
  int touching = 0;
  for (size_t i = 0; i < nr; i++) {
    if (rs[i].start < 0 || rs[i].len <= 0 || rs[i].start + rs[i].len > fsize) abort();
    total += rs[i].len;
    for (size_t j = 0; j < i; j++)
      if (rs[i].start <= rs[j].start + rs[j].len && rs[j].start <= rs[i].start + rs[i].len) touching = 1;
  }
  if (touching || total > fsize) abort(); /* coalesced: apart, within the file */

  gw_static_etag_match(text, len, "\"5f-12\"", 7);
  gw_static_accepts(text, len, "gzip");
  time_t t = gw_static_http_date_parse(text, len);
  if (t >= 0 && len == 29) {
    char buf[40];
    gw_static_http_date(buf, sizeof(buf), t);
    if (gw_static_http_date_parse(buf, strlen(buf)) != t) abort();
  }
  return 0;
}
