/* dashboard.h - the live view handler (`dashboard: true`): a page that
 * draws every worker's stats over the last minutes, and one request's
 * recorded timeline (dashboard.c). */
#ifndef GW_DASHBOARD_H
#define GW_DASHBOARD_H

#include <stddef.h>

#include "handler.h"

/* allow: the client addresses (as text, "127.0.0.1", "::1") let in; none:
 * the loopback addresses. Copied. NULL when out of memory. */
gw_handler_t *gw_dashboard_handler_new(const char *const *allow, size_t nallow);

#endif
