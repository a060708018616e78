/* access_log.h - one line per answered client request. */
#ifndef GW_ACCESS_LOG_H
#define GW_ACCESS_LOG_H

#include <stddef.h>

#include "request.h"

/* Called once per client request, right after its response was queued:
 * status as sent, bytes_sent the bytes of head and body queued. */
void gw_access_log_write(const gw_request_t *req, int status, size_t bytes_sent);

#endif
