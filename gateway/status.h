/* status.h - the status page handler (`status: true`): every worker's stats
 * as JSON or Prometheus text. */
#ifndef GW_STATUS_H
#define GW_STATUS_H

#include "handler.h"

/* A new status page handler; NULL when out of memory. */
gw_handler_t *gw_status_handler_new(void);

#endif
