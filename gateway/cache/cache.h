/* cache.h - the response cache's HTTP side (nginx's proxy_cache): a
 * location's `cache:` in front of its handler (proxy_pass, FastCGI, Ruby),
 * over the shared store of cache_store.h. request.c calls it through
 * gw_cache_hooks (request.h's gw_cache_hooks_t) and knows none of it.
 *
 * Before the handler (lookup): GET and HEAD only; the location's key:/bypass:
 * lambdas run first (an access-phase Ruby step). The key (default
 * "SCHEME://HOST/TARGET") is looked up; a Vary marker leads to the variant
 * of this request's listed header values. Then:
 *   - HIT: a fresh entry answers (Age, the client's own If-None-Match /
 *     If-Modified-Since -> 304, Range -> 206 from the stored body); the
 *     handler does not run;
 *   - MISS / EXPIRED: the handler runs with the client's conditional and
 *     Range fields removed and, for an expired entry with validators,
 *     If-None-Match / If-Modified-Since of its own; its response goes to the
 *     client and, if storable (cache_control.h), to a store writer at once,
 *     committed when the body is complete (aborted if it is cut short or
 *     the client leaves). A 304 refreshes the entry and the client gets the
 *     stored response (REVALIDATED). A 5xx (or a failed connection or
 *     timeout: 502/504) while a stale entry may serve (stale-if-error, or
 *     use_stale: :error / :timeout) gets the stale entry instead (STALE);
 *   - STALE at once, within an entry's stale-while-revalidate window: a
 *     request of our own (refresh_in_background) runs the handler and
 *     stores the new response, the fill lock handed over to it;
 *   - UPDATING: an expired entry another request is refreshing is served
 *     as it is when use_stale: :updating or its stale-while-revalidate
 *     window allows;
 *   - collapsed forwarding (lock: true): while one request fills a key, the
 *     others wait (woken at once in this worker, polling the store's lock
 *     from the others) up to lock_timeout, then look again;
 *   - BYPASS: the bypass: lambda said so: neither read nor stored.
 * X-Cache-Status (status_header:) and $cache_status say which. The body is
 * stored as the handler and the location's filters left it, before
 * compression (the stage after it), so every client gets its own coding. */
#ifndef GW_CACHE_H
#define GW_CACHE_H

#include "cache_control.h"
#include "cache_store.h"
#include "handler.h"
#include "request.h"

/* A location's cache: settings (owned by the location, gw_location_t.cache). */
typedef struct gw_cache_conf_s {
  char *zone;                 /* owned: the zone's name */
  gw_cache_store_t *store;    /* the zone (mapped by the master; outlives configs) */
  long long valid[GW_CC_VALID_SLOTS]; /* valid: seconds per status, -1: none (cache_control.h) */
  int lock;                   /* lock: collapsed forwarding */
  int lock_timeout_ms;
  int stale_error, stale_timeout, stale_updating; /* use_stale: */
  int status_header;          /* send X-Cache-Status */
  int store_set_cookie;       /* store responses with Set-Cookie, the field left out */
  gw_filter_t *prepare;       /* owned: the key:/bypass: lambdas' step, or NULL */
} gw_cache_conf_t;

/* The hooks config_load.c gives a location with cache: (gw_location_t.cache_hooks). */
extern const gw_cache_hooks_t gw_cache_hooks;

/* A conf for zone (found among the declared ones; NULL with err if none),
 * every valid: slot -1 and the defaults set. */
gw_cache_conf_t *gw_cache_conf_new(const char *zone, char *err, size_t errlen);
void gw_cache_conf_free(gw_cache_conf_t *c);

/* The worker stops: the refreshes in the background still running
 * (stale-while-revalidate) are cancelled and freed, their fill locks
 * released and their partial stores dropped. */
void gw_cache_close_all(void);

#endif
