/* response.h - serialises a finished request's response onto the wire. */
#ifndef GW_RESPONSE_H
#define GW_RESPONSE_H

#include <event2/buffer.h>

#include "request.h"

/* Appends status line, headers (Server, Date, Content-Length, Connection as
 * needed) and body to out. Moves the body out of req->resp_body. */
void gw_response_write(gw_request_t *req, struct evbuffer *out, gw_worker_t *w, int keepalive);

/* "Not Found" for 404, ...; "Unknown" for codes we do not name. */
const char *gw_response_reason(int status);

#endif
