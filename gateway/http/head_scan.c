/* head_scan.c - the CRLF-only line-ending check of a message head (see
 * head_scan.h). */
#include <string.h>

#include "head_scan.h"

void gw_head_scan_init(gw_head_scan_t *s)
{
  s->state = GW_HEAD_SCAN_LINE;
}

ssize_t gw_head_scan(gw_head_scan_t *s, const char *p, size_t len)
{
  if (s->state == GW_HEAD_SCAN_BAD) return -1;
  if (len == 0) return 0;
  const char *start = p, *end = p + len;
  while (p < end && s->state != GW_HEAD_SCAN_DONE) {
    if (s->state == GW_HEAD_SCAN_LINE) {
      /* The rest of a line holds no CR or LF but its final CRLF: find them
       * with memchr rather than byte by byte. */
      const char *lf = memchr(p, '\n', (size_t)(end - p));
      const char *stop = lf ? lf : end;
      const char *cr = memchr(p, '\r', (size_t)(stop - p));
      if (lf == NULL) { /* the line goes on in the next piece; a CR may only be its last byte */
        if (cr != NULL && cr != end - 1) goto bad;
        s->state = cr ? GW_HEAD_SCAN_CR : GW_HEAD_SCAN_LINE;
        return 0;
      }
      if (cr != lf - 1) goto bad; /* a bare LF, or a CR inside the line */
      s->state = GW_HEAD_SCAN_CRLF;
      p = lf + 1;
      continue;
    }
    char b = *p++;
    switch (s->state) {
    case GW_HEAD_SCAN_CR:
      if (b != '\n') goto bad;
      s->state = GW_HEAD_SCAN_CRLF;
      break;
    case GW_HEAD_SCAN_CRLF:
      if (b == '\n') goto bad;
      s->state = b == '\r' ? GW_HEAD_SCAN_CRLFCR : GW_HEAD_SCAN_LINE;
      break;
    case GW_HEAD_SCAN_CRLFCR:
      if (b != '\n') goto bad;
      s->state = GW_HEAD_SCAN_DONE;
      return p - start;
    default:
      break;
    }
  }
  return 0;

bad:
  s->state = GW_HEAD_SCAN_BAD;
  return -1;
}
