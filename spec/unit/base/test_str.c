/* test_str.c - gateway/base/str.h, the printf-free string steps of per-request
 * paths: gw_format_uint, gw_uint_cstr, gw_copy_cstr (header-only).
 * unit: */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "str.h"
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

  char num[21];
  CHECK_EQ_STR(gw_uint_cstr(num, sizeof(num), 0), "0");
  CHECK_EQ_STR(gw_uint_cstr(num, sizeof(num), 65535), "65535");
  CHECK_EQ_STR(gw_uint_cstr(num, sizeof(num), ULLONG_MAX), "18446744073709551615");

  /* gw_copy_cstr: whole when it fits, cut to size - 1 and terminated when not */
  char dst[8];
  memset(dst, '#', sizeof(dst));
  gw_copy_cstr(dst, sizeof(dst), "abc");
  CHECK_EQ_STR(dst, "abc");
  gw_copy_cstr(dst, sizeof(dst), "1234567");
  CHECK_EQ_STR(dst, "1234567");
  char small[4 + 4];
  memset(small, '#', sizeof(small));
  gw_copy_cstr(small, 4, "127.0.0.1:80");
  CHECK_EQ_STR(small, "127");
  CHECK(memcmp(small + 4, "####", 4) == 0);
  gw_copy_cstr(dst, 1, "x");
  CHECK_EQ_STR(dst, "");
  return unit_done();
}
