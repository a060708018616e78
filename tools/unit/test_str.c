/* test_log.c - gw_format_uint (gateway/log.c), the printf-free decimal
 * writer of per-request paths. log.c reopens the access log on SIGUSR1, so
 * it links with access_log.c (and that with headers.c).
 * unit: log access_log headers */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "unit.h"

/* Formats v at the end of a 20-byte window with guard bytes around it and
 * checks the digits against printf and that nothing outside was touched. */
static int check_uint(unsigned long long v)
{
  char buf[4 + 20 + 4];
  memset(buf, '#', sizeof(buf));
  char *end = buf + 4 + 20;
  char *first = gw_format_uint(end, v);
  char want[32];
  int n = snprintf(want, sizeof(want), "%llu", v);
  int ok = CHECK(first >= buf + 4 && first < end);
  if (ok) ok = CHECK_MEM(first, (size_t)(end - first), want, (size_t)n);
  for (char *p = buf; p < first && p < end; p++)
    if (*p != '#') ok = CHECK(!"a byte before the first digit was written");
  if (memcmp(end, "####", 4) != 0) ok = CHECK(!"a byte at or after end was written");
  if (!ok) unit_note("v = %llu", v);
  return ok;
}

int main(void)
{
  check_uint(0);
  check_uint(1);
  check_uint(9);
  check_uint(ULLONG_MAX); /* 20 digits: the documented room */
  check_uint(ULLONG_MAX - 1);
  check_uint((unsigned long long)LLONG_MAX);
  check_uint(UINT_MAX);
  check_uint((unsigned long long)UINT_MAX + 1);
  /* every power of ten and its neighbours */
  unsigned long long p = 1;
  for (int i = 0; i < 20; i++) {
    check_uint(p - 1);
    check_uint(p);
    check_uint(p + 1);
    if (i < 19) p *= 10;
  }
  /* a pseudo-random spread of magnitudes */
  unsigned long long x = 0x9e3779b97f4a7c15ULL;
  int bad = 0;
  for (int i = 0; i < 100000 && bad < 5; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (!check_uint(x >> (i % 64))) bad++;
  }
  /* several numbers written back to back, right to left, as the access log does */
  char line[64];
  char *end = line + sizeof(line) - 1;
  *end = '\0';
  char *s = gw_format_uint(end, 200);
  *--s = ' ';
  s = gw_format_uint(s, 0);
  *--s = ' ';
  s = gw_format_uint(s, 1234567);
  CHECK_EQ_STR(s, "1234567 0 200");
  return unit_done();
}
