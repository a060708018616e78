/* redis_sentinel.h - a Redis client behind Redis Sentinel (redis_sentinel.c):
 * a gw_redis_t (redis.h) whose server is the master the Sentinels name. */
#ifndef GW_REDIS_SENTINEL_H
#define GW_REDIS_SENTINEL_H

#include "redis.h"

/* A client of the master p->addr names ("sentinel:NAME@host:port,host:port,...":
 * the master those Sentinels name NAME), with p's db, password and pool.
 * NULL with err on a bad address. */
gw_redis_t *gw_redis_sentinel_new(struct event_base *base, const gw_redis_params_t *p, char *err, size_t errlen);

#endif
