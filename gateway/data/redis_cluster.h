/* redis_cluster.h - a Redis Cluster client (redis_cluster.c): a gw_redis_t
 * (redis.h: exec, cancel, subscribe, free as any client's) that sends each
 * call to the node serving the hash slot of its keys. */
#ifndef GW_REDIS_CLUSTER_H
#define GW_REDIS_CLUSTER_H

#include "redis.h"

/* A client of the cluster p->addr names ("cluster:host:port,host:port,...":
 * any of its nodes, asked in turn for the slot map); each node's client
 * gets p->password and p->pool. NULL with err on a bad address. */
gw_redis_t *gw_redis_cluster_new(struct event_base *base, const gw_redis_params_t *p, char *err, size_t errlen);

#endif
