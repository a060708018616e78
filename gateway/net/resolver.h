/* resolver.h - asynchronous host name resolution on a worker's event loop (c-ares).
 *
 * One resolver per worker, on the worker's event_base. Names are looked up
 * with c-ares (/etc/hosts first, then DNS), answers are cached per name for
 * their TTL and re-resolved when it expires; IP literals never reach c-ares.
 * Nothing here ever blocks or calls getaddrinfo(3). */
#ifndef GW_RESOLVER_H
#define GW_RESOLVER_H

#include <stddef.h>
#include <sys/socket.h>

#include "error.h"

struct event_base;

typedef struct gw_resolver_s gw_resolver_t;
typedef struct gw_resolve_s gw_resolve_t;   /* one lookup in flight, cancellable */

typedef struct {
  const char *servers;   /* "127.0.0.1:5353,10.0.0.1,[::1]:53" or NULL: system resolv.conf */
  int timeout_ms;        /* first try; 0 -> 2000 (c-ares doubles it on each further round) */
  int tries;             /* 0 -> 2 */
  int min_ttl_s, max_ttl_s; /* clamp cached TTLs; 0 -> 1 and 3600 */
  int negative_ttl_s;    /* cache failures (not found, timeouts, server errors) this long; 0 -> 1 */
} gw_resolver_config_t;

/* cfg may be NULL (all defaults). Returns NULL with a message in err on failure
 * (bad servers string, c-ares initialisation). */
gw_resolver_t *gw_resolver_new(struct event_base *base, const gw_resolver_config_t *cfg, char *err, size_t errlen);

/* Cancels outstanding lookups without callbacks (every gw_resolve_t handle of
 * this resolver becomes invalid) and frees everything. May be called from
 * inside a gw_resolve_cb of this resolver. */
void gw_resolver_free(gw_resolver_t *r);

/* Result: addr of family AF_INET or AF_INET6 with port set when err.kind is GW_OK;
 * else addr is NULL and err is GW_ERR_DNS_NOT_FOUND "host not found", GW_ERR_DNS_TIMEOUT
 * "DNS server did not answer", GW_ERR_DNS_FAILURE "DNS server failure" or "DNS lookup
 * failed", GW_ERR_BAD_NAME "invalid host name" or "invalid port" (messages static).
 * addr is valid only during the callback. The gw_resolve_t is freed by the resolver right
 * after the callback returns. */
typedef void (*gw_resolve_cb)(gw_err_t err, const struct sockaddr *addr, socklen_t addrlen, void *arg);

/* Resolves host (a name, an IPv4/IPv6 literal, or "[v6]") for port. IP literals and fresh cache
 * hits complete WITHOUT touching the network, but the callback is still deferred to the loop
 * (never called inside gw_resolve). Concurrent lookups of the same name share one query.
 * IPv4 is preferred: AAAA is asked only when the name has no A record. Returns NULL only on
 * out of memory. The callback is called exactly once unless the lookup is cancelled first. */
gw_resolve_t *gw_resolve(gw_resolver_t *r, const char *host, int port, gw_resolve_cb cb, void *arg);

/* No callback afterwards; q is freed. Harmless no-op when called on q from inside q's own
 * callback. Never call it after the callback has returned or after gw_resolver_free(). */
void gw_resolve_cancel(gw_resolve_t *q);

typedef struct {
  unsigned long lookups;       /* gw_resolve() calls, literals included */
  unsigned long cache_hits;    /* ... answered from a fresh cache entry (positive or negative) */
  unsigned long cache_entries; /* names cached now (including ones being resolved) */
  unsigned long failures;      /* c-ares queries that ended in an error (timeouts included) */
  unsigned long timeouts;      /* ... of which the DNS server did not answer */
} gw_resolver_stats_t;

void gw_resolver_stats(const gw_resolver_t *r, gw_resolver_stats_t *out);

#endif
