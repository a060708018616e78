/* health_check.c - active health checks (health_check.h).
 *
 * Every worker arms a timer per checked group at its interval; on each tick
 * it tries the group's lock (gw_health_claim) and, if it holds it, starts a
 * check on each server that has none in flight: a GET of the path on a
 * new connection ("Connection: close": it proves the server accepts
 * connections too), at most `timeout` to connect and as long again to
 * answer. A check still running at the next tick counts as failed and is
 * started again. The result goes into the shared record; a change of state
 * is logged once. A worker that dies or hangs loses the lock after three
 * intervals (plus a second) and the next worker's tick takes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "httpclient.h"
#include "health.h"
#include "health_check.h"
#include "log.h"
#include "timeutil.h"

typedef struct checked_group_s checked_group_t;

typedef struct {
  checked_group_t *cg;
  size_t index;             /* the server's */
  gw_httpclient_t *x;         /* the check in flight, or NULL */
} check_t;

struct checked_group_s {
  gw_context_t *ctx;
  gw_upstream_group_t *g;
  struct event *timer;
  gw_headers_t headers;
  check_t *checks;          /* one per server */
  checked_group_t *next;
};

static checked_group_t *groups; /* this worker's */

static void record(check_t *k, int status, const char *why)
{
  gw_upstream_group_t *g = k->cg->g;
  gw_upstream_server_t *s = &g->servers[k->index];
  gw_health_server_t *h = &g->health->shared->servers[k->index];
  int change = gw_health_record(h, g->health, status, why);
  if (change < 0)
    gw_log_warn("upstream %s: server %s is down: health check %s %s (%u failed in a row)", g->name, s->label,
                g->health->path, why, h->fails);
  else if (change > 0)
    gw_log_notice("upstream %s: server %s is up: health check %s passed %u times in a row", g->name, s->label,
                  g->health->path, h->passes);
}

static void on_check_done(gw_err_t err, gw_client_response_t *res, void *arg)
{
  check_t *k = arg;
  k->x = NULL;
  char why[64];
  if (err.kind != GW_OK) {
    record(k, 0, err.msg ? err.msg : "failed");
  } else if (res->status != k->cg->g->health->expect) {
    snprintf(why, sizeof(why), "answered %d, not %d", res->status, k->cg->g->health->expect);
    record(k, res->status, why);
  } else {
    record(k, res->status, NULL);
  }
}

static void start_check(check_t *k)
{
  gw_upstream_group_t *g = k->cg->g;
  const gw_upstream_server_t *s = &g->servers[k->index];
  gw_context_t *ctx = k->cg->ctx;
  gw_httpclient_params_t p = {.http = {
      .host = s->host,
      .port = s->port,
      .addr = s->addrlen ? (const struct sockaddr *)&s->addr : NULL,
      .addrlen = s->addrlen,
      .unix_path = s->unix_path,
      .tls = s->tls ? (g->tls_client ? g->tls_client : ctx->config->tls_client) : NULL,
      .method = "GET",
      .target = g->health->path,
      .headers = &k->cg->headers,
      .connect_timeout_ms = g->health->timeout_ms,
      .timeout_ms = g->health->timeout_ms,
      .max_response_body = 64 * 1024,
  }};
  k->x = gw_httpclient_start(ctx, &p, on_check_done, k);
  if (k->x == NULL) record(k, 0, "out of memory");
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
  checked_group_t *cg = arg;
  (void)fd;
  (void)what;
  gw_health_conf_t *c = cg->g->health;
  if (!gw_health_claim(c->shared, (int32_t)getpid(), gw_coarse_ms(), 3LL * c->interval_ms + 1000)) return;
  for (size_t i = 0; i < cg->g->nservers; i++) {
    check_t *k = &cg->checks[i];
    if (k->x) { /* the last one is still running: no answer within the interval */
      gw_httpclient_cancel(k->x);
      k->x = NULL;
      record(k, 0, "no answer within the interval");
    }
    start_check(k);
  }
}

void gw_health_check_start(gw_context_t *ctx)
{
  for (size_t i = 0; i < ctx->config->ngroups; i++) {
    gw_upstream_group_t *g = &ctx->config->groups[i];
    if (g->health == NULL || g->nservers == 0) continue;
    checked_group_t *cg = calloc(1, sizeof(*cg));
    check_t *checks = calloc(g->nservers, sizeof(*checks));
    struct event *timer = event_new(ctx->base, -1, EV_PERSIST, on_tick, cg);
    if (cg == NULL || checks == NULL || timer == NULL) {
      gw_log_error("upstream %s: out of memory for its health checks", g->name);
      free(cg);
      free(checks);
      if (timer) event_free(timer);
      continue;
    }
    cg->ctx = ctx;
    cg->g = g;
    cg->checks = checks;
    cg->timer = timer;
    gw_headers_init(&cg->headers);
    gw_headers_add(&cg->headers, "Host", 4, g->name, strlen(g->name));
    gw_headers_add(&cg->headers, "User-Agent", 10, "gateway-health-check", 20);
    gw_headers_add(&cg->headers, "Connection", 10, "close", 5);
    for (size_t j = 0; j < g->nservers; j++) {
      checks[j].cg = cg;
      checks[j].index = j;
    }
    struct timeval tv = gw_timeval_from_ms(g->health->interval_ms);
    event_add(timer, &tv);
    cg->next = groups;
    groups = cg;
  }
}

void gw_health_check_stop(void)
{
  while (groups) {
    checked_group_t *cg = groups;
    groups = cg->next;
    for (size_t j = 0; j < cg->g->nservers; j++)
      if (cg->checks[j].x) gw_httpclient_cancel(cg->checks[j].x);
    gw_health_release(cg->g->health->shared, (int32_t)getpid());
    event_free(cg->timer);
    gw_headers_dispose(&cg->headers);
    free(cg->checks);
    free(cg);
  }
}
