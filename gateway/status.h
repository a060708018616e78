/* status.h - the status page: every worker's stats as JSON or Prometheus text. */
#ifndef GW_STATUS_H
#define GW_STATUS_H

#include "request.h"

/* Answers req (a location with status: true) and finishes it. */
void gw_status_respond(gw_request_t *req);

#endif
