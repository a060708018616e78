/* static_http.c - see static_http.h. */
#include <ctype.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "static_http.h"

static int hexval(int c)
{
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* decode: 1 as gw_static_path_decode, 0 as gw_static_path_clean, -1 the
 * same as 0 with any byte but NUL allowed (gw_static_path_route's second
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

ssize_t gw_static_path_decode(const char *path, size_t len, char *out, size_t cap)
{
  return normalise(path, len, out, cap, 1);
}

ssize_t gw_static_path_clean(const char *path, size_t len, char *out, size_t cap)
{
  return normalise(path, len, out, cap, 0);
}

ssize_t gw_static_path_route(const char *path, size_t len, char *out, size_t cap)
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

/* Digits of a byte position: -1 when none, -2 when it overflows. */
static long long parse_pos(const char **p, const char *end)
{
  const char *s = *p;
  long long v = 0;
  if (s == end || !isdigit((unsigned char)*s)) return -1;
  int overflow = 0;
  while (s < end && isdigit((unsigned char)*s)) {
    if (v > (0x7fffffffffffffffLL - 9) / 10) overflow = 1;
    else v = v * 10 + (*s - '0');
    s++;
  }
  *p = s;
  return overflow ? -2 : v;
}

static const char *skip_ows(const char *p, const char *end)
{
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  return p;
}

static int by_start(const void *a, const void *b)
{
  const gw_range_t *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Ranges that overlap or touch become one; then they are in ascending
 * order. Ranges that are apart keep the client's order. Returns the new
 * count, or 0 when out of memory. */
static size_t coalesce(gw_range_t *r, size_t n)
{
  gw_range_t *s = malloc(n * sizeof(*s));
  if (s == NULL) return 0;
  memcpy(s, r, n * sizeof(*s));
  qsort(s, n, sizeof(*s), by_start);
  int touching = 0;
  for (size_t i = 1; i < n && !touching; i++) touching = s[i].start <= s[i - 1].start + s[i - 1].len;
  if (touching) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
      if (m > 0 && s[i].start <= r[m - 1].start + r[m - 1].len) {
        long long end = s[i].start + s[i].len;
        if (end > r[m - 1].start + r[m - 1].len) r[m - 1].len = end - r[m - 1].start;
      } else {
        r[m++] = s[i];
      }
    }
    n = m;
  }
  free(s);
  return n;
}

gw_range_kind_t gw_static_range_parse(const char *value, size_t len, long long size, gw_range_t *out, size_t cap,
                                      size_t *nout)
{
  *nout = 0;
  if (value == NULL || cap == 0) return GW_RANGE_NONE;
  const char *p = value, *end = value + len;
  p = skip_ows(p, end);
  if ((size_t)(end - p) < 6 || strncasecmp(p, "bytes=", 6) != 0) return GW_RANGE_NONE;
  p += 6;
  size_t count = 0, n = 0;
  for (;;) {
    p = skip_ows(p, end);
    if (p < end && *p == ',') { /* empty list elements are allowed (RFC 9110 §5.6.1) */
      p++;
      continue;
    }
    if (p == end) break;
    long long first = -1, last = -1;
    if (*p == '-') { /* suffix: the last N bytes */
      p++;
      long long k = parse_pos(&p, end);
      if (k < 0) return GW_RANGE_NONE;
      if (k > 0 && size > 0) {
        first = k >= size ? 0 : size - k;
        last = size - 1;
      }
    } else {
      first = parse_pos(&p, end);
      if (first < 0 || p == end || *p != '-') return GW_RANGE_NONE;
      p++;
      if (p < end && isdigit((unsigned char)*p)) {
        last = parse_pos(&p, end);
        if (last == -2) last = 0x7fffffffffffffffLL;
        if (last < first) return GW_RANGE_NONE; /* invalid: the field is ignored */
      } else {
        last = size - 1;
      }
      if (first >= size) first = -1; /* not satisfiable */
      else if (last >= size) last = size - 1;
    }
    p = skip_ows(p, end);
    if (p < end && *p != ',') return GW_RANGE_NONE;
    count++;
    if (first >= 0 && last >= first) { /* satisfiable: kept (more than cap: the whole file, as nginx) */
      if (n == cap) return GW_RANGE_NONE;
      out[n].start = first;
      out[n].len = last - first + 1;
      n++;
    }
  }
  if (count == 0) return GW_RANGE_NONE;
  if (n == 0) return GW_RANGE_UNSATISFIABLE;
  if (n > 1 && (n = coalesce(out, n)) == 0) return GW_RANGE_NONE;
  *nout = n;
  return n == 1 ? GW_RANGE_SINGLE : GW_RANGE_MULTI;
}

size_t gw_static_etag(char *out, size_t cap, time_t mtime, long long size)
{
  int n = snprintf(out, cap, "\"%llx-%llx\"", (unsigned long long)mtime, (unsigned long long)size);
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

static const char wdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

size_t gw_static_http_date(char *out, size_t cap, time_t t)
{
  struct tm tm;
  gmtime_r(&t, &tm);
  int n = snprintf(out, cap, "%s, %02d %s %04d %02d:%02d:%02d GMT", wdays[tm.tm_wday], tm.tm_mday,
                   months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

static int month_of(const char *m)
{
  for (int i = 0; i < 12; i++)
    if (strncmp(m, months[i], 3) == 0) return i;
  return -1;
}

time_t gw_static_http_date_parse(const char *s, size_t len)
{
  char buf[64];
  if (len == 0 || len >= sizeof(buf)) return -1;
  memcpy(buf, s, len);
  buf[len] = '\0';
  int d, y, hh, mm, ss, n = 0;
  char mon[4], wd[16];
  struct tm tm;
  memset(&tm, 0, sizeof(tm));
  if (sscanf(buf, "%3s, %2d %3s %4d %2d:%2d:%2d GMT%n", wd, &d, mon, &y, &hh, &mm, &ss, &n) == 7 && n == (int)len) {
    /* IMF-fixdate */
  } else if (n = 0, sscanf(buf, "%15[A-Za-z], %2d-%3s-%2d %2d:%2d:%2d GMT%n", wd, &d, mon, &y, &hh, &mm, &ss, &n) == 7 &&
                        n == (int)len) {
    y += y < 70 ? 2000 : 1900; /* RFC 850 */
  } else if (n = 0, sscanf(buf, "%3s %3s %2d %2d:%2d:%2d %4d%n", wd, mon, &d, &hh, &mm, &ss, &y, &n) == 7 &&
                        n == (int)len) {
    /* asctime */
  } else {
    return -1;
  }
  int m = month_of(mon);
  if (m < 0 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60 || y < 1970 || y > 9999 || hh < 0 || mm < 0 ||
      ss < 0)
    return -1;
  tm.tm_year = y - 1900;
  tm.tm_mon = m;
  tm.tm_mday = d;
  tm.tm_hour = hh;
  tm.tm_min = mm;
  tm.tm_sec = ss;
  return timegm(&tm);
}

int gw_static_etag_match(const char *inm, size_t inm_len, const char *etag, size_t etag_len)
{
  const char *p = inm, *end = inm + inm_len;
  /* the opaque part of ours, W/ stripped */
  if (etag_len > 2 && etag[0] == 'W' && etag[1] == '/') {
    etag += 2;
    etag_len -= 2;
  }
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) p++;
    if (p == end) break;
    if (*p == '*') return 1;
    if (end - p > 2 && p[0] == 'W' && p[1] == '/') p += 2;
    const char *t = p;
    if (p < end && *p == '"') {
      p++;
      while (p < end && *p != '"') p++;
      if (p < end) p++;
    } else {
      while (p < end && *p != ',') p++;
    }
    if ((size_t)(p - t) == etag_len && memcmp(t, etag, etag_len) == 0) return 1;
  }
  return 0;
}

int gw_static_accepts(const char *ae, size_t ae_len, const char *coding)
{
  size_t clen = strlen(coding);
  const char *p = ae, *end = ae + ae_len;
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) p++;
    const char *t = p;
    while (p < end && *p != ',' && *p != ';' && *p != ' ' && *p != '\t') p++;
    size_t tlen = (size_t)(p - t);
    int match = (tlen == clen && strncasecmp(t, coding, clen) == 0) || (tlen == 1 && *t == '*');
    /* parameters: only q matters */
    double q = 1.0;
    while (p < end && *p != ',') {
      if (*p == ';') {
        p++;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
          p += 2;
          q = 0;
          int seen_dot = 0;
          double scale = 1;
          while (p < end && (isdigit((unsigned char)*p) || (*p == '.' && !seen_dot))) {
            if (*p == '.') seen_dot = 1;
            else if (!seen_dot) q = q * 10 + (*p - '0');
            else q += (*p - '0') * (scale /= 10);
            p++;
          }
          continue;
        }
      }
      p++;
    }
    if (match && tlen > 1) return q > 0;
    if (match) { /* "*": applies unless the coding is named elsewhere; good enough */
      if (q > 0) return 1;
    }
  }
  return 0;
}
