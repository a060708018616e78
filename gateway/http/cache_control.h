/* cache_control.h - what HTTP says about storing a response in a shared
 * cache (RFC 9111), as the response cache (cache.c) asks it: the
 * Cache-Control directives of a response, whether it may be stored, how long
 * it stays fresh, how long it may be served stale, and its validators.
 * Pure: no I/O, no clock (the caller passes "now").
 *
 * The request's own Cache-Control and Pragma are not consulted (nginx's
 * proxy_cache ignores them too: a client cannot force a refill of a shared
 * cache); a location's bypass: lambda decides that instead. */
#ifndef GW_CACHE_CONTROL_H
#define GW_CACHE_CONTROL_H

#include <stddef.h>
#include <time.h>

#include "headers.h"

/* Delta-seconds are capped here (RFC 9111 §1.2.2: 2^31). */
#define GW_CC_MAX_SECONDS 2147483648LL

/* The directives of a Cache-Control field (all its lines together). */
typedef struct {
  int no_store, no_cache, is_private, is_public, must_revalidate, proxy_revalidate, no_transform;
  long long max_age;   /* seconds; -1: absent */
  long long s_maxage;  /* seconds; -1: absent */
  long long stale_while_revalidate; /* seconds; -1: absent */
  long long stale_if_error;         /* seconds; -1: absent */
} gw_cc_t;

/* Empties cc (every number absent). */
void gw_cc_init(gw_cc_t *cc);
/* Adds the directives of one Cache-Control field value to cc. Unknown
 * directives are ignored; a malformed number counts as 0 (stale at once,
 * RFC 9111 §4.2.1), a quoted one is read as if unquoted; no-cache and
 * private with a field list count as the plain directive (stricter). */
void gw_cc_parse(gw_cc_t *cc, const char *v, size_t len);

/* The verdict on one response. */
typedef struct {
  int storable;            /* 1: it may be stored */
  const char *why;         /* not storable: why (a static string, for the log) */
  long long fresh_s;       /* freshness lifetime from when it was received (0: revalidate each time) */
  long long stale_while_revalidate_s; /* 0: none */
  long long stale_if_error_s;         /* 0: none */
  int must_revalidate;     /* must-revalidate / proxy-revalidate / s-maxage: never served stale */
  long long age_s;         /* the response's Age field (0: none): already this old when received */
} gw_cache_verdict_t;

/* What a location allows (its cache: options). */
typedef struct {
  /* valid: seconds of freshness for a status when the response gives none
   * (-1: that status is not stored without explicit freshness); index by
   * gw_cc_valid_slot(). */
  const long long *valid;
  int store_set_cookie;    /* store responses with Set-Cookie (default 0) */
} gw_cache_rules_t;

/* valid[] has one slot per status 100..599 (GW_CC_VALID_SLOTS) plus the
 * `any` slot (GW_CC_VALID_ANY) for statuses not named. */
#define GW_CC_VALID_SLOTS 501
#define GW_CC_VALID_ANY 500
static inline int gw_cc_valid_slot(int status)
{
  return status >= 100 && status <= 599 ? status - 100 : GW_CC_VALID_ANY;
}

/* Decides for a response of status with headers resp, received at now
 * (seconds, wall clock), to a request whose headers are req (Authorization:
 * stored only if the response allows it, RFC 9111 §3.5). Freshness: s-maxage,
 * then max-age, then Expires - Date (Date missing: now), then rules->valid
 * for the status; none of them: not stored. Never stored: status 206 and
 * 304 and 1xx, no-store, private, Vary: *, Set-Cookie (unless allowed). */
void gw_cache_decide(int status, const gw_headers_t *resp, const gw_headers_t *req, time_t now,
                     const gw_cache_rules_t *rules, gw_cache_verdict_t *out);

/* Reads a delta-seconds value (digits only, capped at GW_CC_MAX_SECONDS);
 * -1 when it is not one. */
long long gw_cc_seconds(const char *s, size_t len);

#endif
