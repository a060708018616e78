/* health.h - active health checks' shared state: one record per server of
 * an upstream group with `health_check:`, in memory the master maps before
 * forking (so every worker of every server sees it), written only by the
 * worker that holds the group's lock and read by every balancer
 * (balancer.c skips a server that is down). The checks themselves run in
 * health_check.c. Pure but for the mapping. */
#ifndef GW_HEALTH_H
#define GW_HEALTH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t down;            /* 1: failed `fails` checks in a row and not passed
                               `passes` since: no user request goes there */
  uint32_t fails, passes;   /* consecutive failed / passed checks */
  uint32_t last_status;     /* the last check's HTTP status, 0: no response */
  uint64_t checks;          /* checks run */
  uint64_t transitions;     /* up -> down and down -> up */
  char last_error[64];      /* why the last check failed ("" when it passed) */
} gw_health_server_t;

typedef struct {
  int32_t owner;            /* pid of the worker running the checks, 0: none */
  int32_t pad;
  int64_t owner_seen_ms;    /* CLOCK_MONOTONIC ms of its last round */
  gw_health_server_t servers[]; /* one per server of the group, in order */
} gw_health_shared_t;

typedef struct {
  char *path;               /* owned: the request-target checked ("/health") */
  int interval_ms, timeout_ms;
  int fails, passes;        /* consecutive results that change the state */
  int expect;               /* the status a healthy server answers */
  gw_health_shared_t *shared; /* mapped (gw_health_map), map_size bytes */
  size_t map_size;
} gw_health_conf_t;

/* Maps zeroed shared memory for nservers (every server starts up). 0, or -1. */
int gw_health_map(gw_health_conf_t *c, size_t nservers);
void gw_health_unmap(gw_health_conf_t *c);

/* The group's lock: 1 if pid holds it now (it had it, or took it because it
 * was free, its holder is gone or has not run a round for stale_ms). The
 * holder's rounds refresh owner_seen_ms. */
int gw_health_claim(gw_health_shared_t *h, int32_t pid, int64_t now_ms, int64_t stale_ms);

/* pid lets the lock go (a stopping worker), if it holds it. */
void gw_health_release(gw_health_shared_t *h, int32_t pid);

/* Records one check's result on s (why: NULL when it passed). Returns -1
 * when s just went down, +1 when it just came back up, else 0. */
int gw_health_record(gw_health_server_t *s, const gw_health_conf_t *c, int status, const char *why);

#endif
