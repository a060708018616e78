/* balancer.h - upstream groups and the choice of a server: smooth weighted
 * round robin (as nginx), least connections, or a hash of a key; passive
 * health (max_fails failures in a row mark a server down for fail_timeout).
 * Pure: no loop, no request, no clock of its own (callers pass now_ms), so
 * every decision is unit-testable. The group and server types live here;
 * config.c fills them at load, each worker then changes the run-time fields. */
#ifndef GW_BALANCER_H
#define GW_BALANCER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "health.h"

typedef struct {
  char *host;           /* owned IP literal or host name, or NULL for a unix socket */
  int port;
  struct sockaddr_storage addr; /* host:port, parsed at load (addrlen 0: a name) */
  socklen_t addrlen;
  char *unix_path;      /* owned, or NULL */
  char *label;          /* owned "host:port", "https://host:port" or "unix:/path", for logs */
  int tls;              /* "https://host:port": HTTPS (the group's tls_client settings) */
  int weight;           /* >= 1 */
  /* per worker, changed at run time (passive health, least_conn) */
  int fails;            /* consecutive failures */
  double down_until_ms; /* skipped until then (CLOCK_MONOTONIC ms) */
  int active;           /* requests in flight (the caller counts them up; gw_balancer_done down) */
  int current_weight;   /* smooth weighted round robin */
  const gw_health_server_t *health; /* active checks' shared record (health.h): skipped
                                       while down; NULL: the group has no health_check */
} gw_upstream_server_t;

typedef enum { GW_BALANCE_ROUND_ROBIN, GW_BALANCE_LEAST_CONN, GW_BALANCE_HASH } gw_balance_t;

/* upstream :name, servers: [...], keepalive: N */
typedef struct {
  char *name;           /* owned */
  gw_upstream_server_t *servers; /* owned array */
  size_t nservers;
  int keepalive;        /* idle connections kept per server */
  gw_balance_t balance;
  int max_fails;        /* 0: never mark a server down */
  int fail_timeout_ms;
  int connect_timeout_ms;
  int timeout_ms;
  int fastcgi;           /* protocol: :fastcgi (fastcgi.c), else HTTP */
  struct gw_tls_client_s *tls_client; /* owned (tls_client.h): its https servers' settings;
                                         NULL: the location's, else the defaults */
  int h2c;               /* "h2c://" servers: HTTP/2 cleartext (http2_client.c) */
  gw_health_conf_t *health; /* owned: health_check: (health.h, health_check.c), or NULL */
  int send_proxy_protocol; /* 1 or 2: each new connection starts with a PROXY
                              protocol header of that version (proxy.c); 0: none */
} gw_upstream_group_t;

/* Bit of server i in a tried mask (servers past the 32nd share bits). */
static inline uint32_t gw_balancer_bit(const gw_upstream_group_t *g, const gw_upstream_server_t *s)
{
  return (uint32_t)1 << ((size_t)(s - g->servers) % 32);
}

/* A live server of g (down_until_ms <= now_ms) whose bit is not in
 * tried_mask, by the group's method; NULL when there is none. :hash uses
 * key (the key's server, else the next live one after it); without a key it
 * falls back to round robin. Round robin updates current_weight. The caller
 * adds the result's bit to its mask and counts s->active up while using it. */
gw_upstream_server_t *gw_balancer_pick(gw_upstream_group_t *g, uint32_t tried_mask, const char *key, double now_ms);

/* A request on s (picked from g) ended: active goes down; a success clears
 * the failure count; a failure counts, and max_fails of them in a row mark
 * s down until now_ms + fail_timeout_ms (never the group's only server,
 * never with max_fails 0). Returns 1 when s was just marked down (the
 * caller logs it), else 0. */
int gw_balancer_done(gw_upstream_group_t *g, gw_upstream_server_t *s, int failed, double now_ms);

/* One request's way through a group (proxy_pass through httpclient.c,
 * fastcgi.c): the server in use and those tried, with the bookkeeping
 * above done once per server. */
typedef struct {
  gw_upstream_group_t *group;
  gw_upstream_server_t *server; /* in use, or the last one used */
  uint32_t tried;               /* gw_balancer_bit of each server tried */
  int held;                     /* server counts this request in active */
} gw_balancer_walk_t;

/* Starts a walk of g at the server picked with key (gw_balancer_pick);
 * NULL when none is live. */
gw_upstream_server_t *gw_balancer_walk_first(gw_balancer_walk_t *w, gw_upstream_group_t *g, const char *key);
/* The request goes to w->server now: counted in its active. */
void gw_balancer_walk_use(gw_balancer_walk_t *w);
/* It ended there (gw_balancer_done; a mark-down is logged). Nothing when
 * the server does not hold the request (done already, or dropped). */
void gw_balancer_walk_done(gw_balancer_walk_t *w, int failed);
/* It left without a verdict (cancelled, or never sent): active goes down. */
void gw_balancer_walk_drop(gw_balancer_walk_t *w);
/* The next live server not tried yet, now w->server; NULL when none. */
gw_upstream_server_t *gw_balancer_walk_next(gw_balancer_walk_t *w);

#endif
