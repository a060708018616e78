/* chunked.c - the chunked transfer coding's writer (see chunked.h). */
#include <limits.h>
#include <stdint.h>

#include "chunked.h"

/* "SIZE\r\n" for n into buf (at least 19 bytes: 16 hex digits and CRLF);
 * returns its length. No printf: this runs once per body piece. */
static size_t chunk_size_line(char *buf, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  char tmp[16];
  size_t len = 0;
  do {
    tmp[len++] = hex[n & 0xf];
    n >>= 4;
  } while (n);
  for (size_t i = 0; i < len; i++) buf[i] = tmp[len - 1 - i];
  buf[len] = '\r';
  buf[len + 1] = '\n';
  return len + 2;
}

size_t gw_chunked_add(struct evbuffer *out, const char *data, size_t len)
{
  if (len == 0) return 0;
  char line[24];
  size_t n = chunk_size_line(line, len);
  if (len > SIZE_MAX - n - 2) return 0;
  /* Room for all of it first, so that the three appends cannot fail halfway. */
  if (evbuffer_expand(out, n + len + 2) != 0) return 0;
  evbuffer_add(out, line, n);
  evbuffer_add(out, data, len);
  evbuffer_add(out, "\r\n", 2);
  return n + len + 2;
}

size_t gw_chunked_add_buffer(struct evbuffer *out, struct evbuffer *src, size_t len)
{
  size_t avail = evbuffer_get_length(src);
  if (len > avail) len = avail;
  if (len > INT_MAX) len = INT_MAX; /* evbuffer_remove_buffer counts in int */
  if (len == 0) return 0;
  char line[24];
  size_t n = chunk_size_line(line, len);
  if (evbuffer_add(out, line, n) != 0) return 0;
  if (evbuffer_remove_buffer(src, out, len) != (int)len) return 0;
  if (evbuffer_add(out, "\r\n", 2) != 0) return 0;
  return n + len + 2;
}

size_t gw_chunked_end(struct evbuffer *out)
{
  return evbuffer_add(out, "0\r\n\r\n", 5) == 0 ? 5 : 0;
}
