/* str.h - the two string steps per-request paths need, without printf's
 * cost (snprintf "%s" or "%d" costs ten times as much): a bounded copy and
 * an unsigned decimal. Knows nothing else of the gateway. */
#ifndef GW_STR_H
#define GW_STR_H

#include <stddef.h>
#include <string.h>

/* strlcpy: src into dst[size] (size > 0), cut to fit, always terminated. */
static inline void gw_copy_cstr(char *dst, size_t size, const char *src)
{
  size_t n = strlen(src);
  if (n >= size) n = size - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* Writes v in decimal so that it ends just before `end`; returns its first
 * digit. 20 bytes before `end` are enough. */
static inline char *gw_format_uint(char *end, unsigned long long v)
{
  do {
    *--end = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  return end;
}

/* v in decimal into buf[size >= 21], terminated. */
static inline const char *gw_uint_cstr(char *buf, size_t size, unsigned long long v)
{
  buf[size - 1] = '\0';
  return gw_format_uint(buf + size - 1, v);
}

#endif
