/* http1_response.h - serialises a request's response onto the wire as HTTP/1.1. */
#ifndef GW_RESPONSE_H
#define GW_RESPONSE_H

#include <event2/buffer.h>

#include "request.h"

/* Appends status line, headers (Server, Date, Content-Length, Connection as
 * needed) and body to out. Moves the body out of req->resp.body. With fd >=
 * 0 (a plain socket) and out empty, a response that is one piece (a body up
 * to a few KiB) is written to fd at once, and only what the socket did not
 * take is queued in out. *total: the response's size, head and body. Both
 * writers return the size of the head. */
size_t gw_response_write(gw_request_t *req, struct evbuffer *out, gw_context_t *w, int keepalive, int fd,
                         size_t *total);

/* Framing of a streamed response (gw_response_write_head). */
#define GW_LENGTH_CHUNKED (-1LL) /* Transfer-Encoding: chunked */
#define GW_LENGTH_CLOSE (-2LL)   /* no length: the body ends when the connection closes */

/* Only the head, for a body that follows in pieces: `length` is the
 * Content-Length, or GW_LENGTH_CHUNKED / GW_LENGTH_CLOSE. */
size_t gw_response_write_head(gw_request_t *req, struct evbuffer *out, gw_context_t *w, int keepalive, long long length);

/* A 101 Switching Protocols head (a protocol upgrade, request.h): Connection:
 * Upgrade, then `fields` as given (the Upgrade token and the rest of the
 * handler's; the core's own fields such as Content-Length are skipped).
 * Returns its size. */
size_t gw_response_write_switching(const gw_headers_t *fields, struct evbuffer *out);

/* "Date: ...\r\n" for now, cached per second in w (HTTP/2 uses it too). */
const char *gw_response_date_line(gw_context_t *w);

#endif
