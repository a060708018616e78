/* uri_path.c - see uri_path.h. */
#include <stdlib.h>

#include "uri_path.h"

static int hexval(int c)
{
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* decode: 1 as gw_uri_path_decode, 0 as gw_uri_path_clean, -1 the
 * same as 0 with any byte but NUL allowed (gw_uri_path_route's second
 * step: a route, never a file name). */
static ssize_t normalise(const char *path, size_t len, char *out, size_t cap, int decode)
{
  if (cap < len + 2) return -1;
  size_t o = 0;
  out[o++] = '/';
  size_t i = 0;
  while (i < len) {
    /* One segment: decode into out after the '/' just written. */
    size_t seg = o;
    while (i < len && path[i] != '/') {
      unsigned char c = (unsigned char)path[i];
      if (c == '%' && decode == 1) {
        int h = i + 2 < len ? hexval((unsigned char)path[i + 1]) : -1;
        int l = h >= 0 ? hexval((unsigned char)path[i + 2]) : -1;
        if (l < 0) return -1;
        c = (unsigned char)(h * 16 + l);
        if (c == 0 || c == '/') return -1; /* an encoded NUL or a slash inside a segment */
        i += 3;
      } else {
        i++;
      }
      if (decode >= 0 ? c < 0x20 || c == 0x7f || c == '\\' : c == 0) return -1;
      out[o++] = (char)c;
    }
    size_t n = o - seg;
    if (n == 0) {
      /* "//": collapsed; nothing written */
    } else if (n == 1 && out[seg] == '.') {
      o = seg; /* "." */
    } else if (n == 2 && out[seg] == '.' && out[seg + 1] == '.') {
      if (seg == 1) return -1; /* above the root */
      o = seg - 1;             /* drop "/.." and the segment before it */
      while (out[o - 1] != '/') o--;
    } else if (i < len) {
      out[o++] = '/';
    }
    if (i < len) i++; /* the '/' */
  }
  /* A path whose last segment vanished ("/a/." "/a/..") names a directory:
   * out ends with '/' then; keep a trailing slash the request had. */
  if (len > 0 && path[len - 1] == '/' && out[o - 1] != '/') out[o++] = '/';
  out[o] = '\0';
  return (ssize_t)o;
}

ssize_t gw_uri_path_decode(const char *path, size_t len, char *out, size_t cap)
{
  return normalise(path, len, out, cap, 1);
}

ssize_t gw_uri_path_clean(const char *path, size_t len, char *out, size_t cap)
{
  return normalise(path, len, out, cap, 0);
}

ssize_t gw_uri_path_route(const char *path, size_t len, char *out, size_t cap)
{
  if (cap < len + 2) return -1;
  char small[1024];
  char *dec = len <= sizeof(small) ? small : malloc(len);
  if (dec == NULL) return -1;
  size_t m = 0;
  ssize_t r = 0;
  for (size_t i = 0; i < len && r == 0; i++) {
    if (path[i] != '%') {
      dec[m++] = path[i];
      continue;
    }
    int h = i + 2 < len ? hexval((unsigned char)path[i + 1]) : -1;
    int l = h >= 0 ? hexval((unsigned char)path[i + 2]) : -1;
    if (l < 0 || h + l == 0) r = -1; /* malformed, or %00 */
    dec[m++] = (char)(h * 16 + l);
    i += 2;
  }
  if (r == 0) r = normalise(dec, m, out, cap, -1);
  if (dec != small) free(dec);
  return r;
}
