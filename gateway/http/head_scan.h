/* head_scan.h - checks the line endings of an HTTP/1.1 message head.
 *
 * llhttp 8.1 accepts "\r\n\n" as the end of a head: a bare LF that a front
 * proxy may read differently (request smuggling). This scanner is run over
 * each new piece of a head before the parser sees it: every line must end in
 * CRLF, a CR may only appear as the first half of a CRLF and an LF only as
 * the second, and it stops at the blank line (what follows is body, which it
 * does not look at). Its state persists across pieces, so a head may be split
 * at any byte, between CR and LF included. Pure: no allocation, no I/O. */
#ifndef GW_HEAD_SCAN_H
#define GW_HEAD_SCAN_H

#include <stddef.h>
#include <sys/types.h>

/* Scanner states: inside a line; after a CR that ended a piece; after a
 * line's CRLF; after CRLF CR (a blank line's CR); past the blank line;
 * rejected. */
enum {
  GW_HEAD_SCAN_LINE,
  GW_HEAD_SCAN_CR,
  GW_HEAD_SCAN_CRLF,
  GW_HEAD_SCAN_CRLFCR,
  GW_HEAD_SCAN_DONE,
  GW_HEAD_SCAN_BAD
};

typedef struct {
  int state; /* GW_HEAD_SCAN_* */
} gw_head_scan_t;

/* Ready for a new head (also between keep-alive requests). */
void gw_head_scan_init(gw_head_scan_t *s);

/* Scans the next len bytes of the head (p may be NULL when len is 0).
 * Returns
 *   -1  the head is malformed (a bare LF, a CR not followed by LF); every
 *       later call returns -1 too, until gw_head_scan_init;
 *    0  no blank line in these bytes: more head is needed (or the head had
 *       already ended in an earlier call, see gw_head_scan_done; then p is
 *       not looked at);
 *    n  (1..len) the head ends after p[n - 1], the LF of its blank line; the
 *       n bytes are the last of the head, p[n..len) is body or the next
 *       message, not scanned. */
ssize_t gw_head_scan(gw_head_scan_t *s, const char *p, size_t len);

/* 1 once the blank line has been seen. */
static inline int gw_head_scan_done(const gw_head_scan_t *s)
{
  return s->state == GW_HEAD_SCAN_DONE;
}

#endif
