/* status.h - the status page handler (`status: true`): every worker's stats
 * as JSON or Prometheus text. */
#ifndef GW_STATUS_H
#define GW_STATUS_H

#include "config.h"
#include "handler.h"

struct evbuffer;

/* Every live worker's stats as the status page's JSON into out; with
 * latency_buckets, each worker's response-time histogram too (the
 * dashboard's). */
void gw_status_render_json(struct evbuffer *out, const gw_config_t *config, int latency_buckets);

/* A new status page handler; NULL when out of memory. */
gw_handler_t *gw_status_handler_new(void);

#endif
