/* health_check.h - running an upstream group's active health checks
 * (`health_check:`) from a worker: each round, the one worker holding the
 * group's lock (health.h) sends GET path to every server with the upstream
 * HTTP client and records the results in the shared records every worker's
 * balancer reads. */
#ifndef GW_HEALTH_CHECK_H
#define GW_HEALTH_CHECK_H

#include "context.h"

/* Worker start: a timer for every group of the config with health_check:. */
void gw_health_check_start(gw_context_t *ctx);

/* Worker stop: checks in flight cancelled, timers gone, locks let go (so
 * another worker takes the groups over at once). */
void gw_health_check_stop(void);

#endif
