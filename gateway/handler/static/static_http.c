/* static_http.c - see static_http.h. */
#include <ctype.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "static_http.h"

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

void gw_range_boundary(char *out, size_t cap)
{
  static unsigned long long next;
  if (next == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    next = ((unsigned long long)getpid() * 2654435761ULL ^ (unsigned long long)ts.tv_nsec) % 10000000000ULL + 1;
  }
  snprintf(out, cap, "%020llu", next++);
}

size_t gw_range_part_head(char *out, size_t cap, const char *boundary, const char *ctype, const gw_range_t *r,
                          long long size)
{
  int n = r ? snprintf(out, cap, "\r\n--%s\r\nContent-Type: %s\r\nContent-Range: bytes %lld-%lld/%lld\r\n\r\n", boundary,
                       ctype, r->start, r->start + r->len - 1, size)
            : snprintf(out, cap, "\r\n--%s--\r\n", boundary);
  return n > 0 ? (size_t)n : 0;
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
