/* httpclient.c - one exchange with an upstream: resolve, pick the protocol,
 * send on a pooled connection, retry on a group's next server (see
 * httpclient.h).
 *
 * The protocol halves (http1_client.c for HTTP/1.1, http2_client.c for HTTP/2) call
 * back into this struct, which forwards to the caller: that is where the
 * client learns whether a response head came (a retry is only safe before)
 * and where a failed attempt turns into the next one. */
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "http2_client.h"
#include "httpclient.h"
#include "log.h"
#include "resolver.h"

struct gw_httpclient_s {
  gw_context_t *ctx;
  gw_httpclient_params_t p;      /* the caller's; http's address is the attempt's, its
                                    callbacks ours (forwarding to those below) */
  gw_client_done_cb cb;
  gw_client_head_cb on_head;     /* the caller's streaming callbacks */
  gw_client_body_cb on_body;
  void (*on_body_sent)(void *arg);
  void *arg;
  gw_client_req_t *h1;           /* the attempt in flight: HTTP/1.1 ... */
  gw_h2_call_t *h2;              /* ... or HTTP/2 ... */
  gw_resolve_t *lookup;          /* ... or the lookup before it */
  const gw_headers_t *body_trailers; /* borrowed (gw_httpclient_body_trailers) */
  unsigned paused : 1;
  unsigned got_head : 1;         /* a response head reached the caller: no retry */
  /* copies of the request, made only while a name is resolved (no group) */
  char *host, *method, *target, *body;
  gw_headers_t headers;
};

static int attempt(gw_httpclient_t *x, gw_err_t why);

static void client_free(gw_httpclient_t *x)
{
  free(x->host);
  free(x->method);
  free(x->target);
  free(x->body);
  gw_headers_dispose(&x->headers);
  free(x);
}

static int idempotent(const char *method)
{
  static const char *const safe[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"};
  for (size_t i = 0; i < sizeof(safe) / sizeof(safe[0]); i++)
    if (strcmp(method, safe[i]) == 0) return 1;
  return 0;
}

/* Another server may take it: nothing was sent (a connect failure), or the
 * connection broke before any answer and sending it twice is harmless. */
static int may_retry(const gw_httpclient_t *x, gw_err_kind_t kind)
{
  if (gw_err_is_connect_failure(kind)) return 1;
  return (kind == GW_ERR_RESET || kind == GW_ERR_CLOSED) && !x->got_head && !x->p.http.body_source &&
         !x->p.http.upgrade && idempotent(x->p.http.method);
}

/* -- the protocol's callbacks, forwarded -- */

static void on_head(gw_client_response_t *res, void *arg)
{
  gw_httpclient_t *x = arg;
  x->got_head = 1;
  x->on_head(res, x->arg);
}

static void on_body(const char *data, size_t len, void *arg)
{
  gw_httpclient_t *x = arg;
  if (x->on_body) x->on_body(data, len, x->arg);
}

static void on_body_sent(void *arg)
{
  gw_httpclient_t *x = arg;
  x->on_body_sent(x->arg);
}

static void on_trailers(const gw_headers_t *trailers, void *arg)
{
  gw_httpclient_t *x = arg;
  if (x->p.on_trailers) x->p.on_trailers(trailers, x->arg);
}

static void finish(gw_httpclient_t *x, gw_err_t err, gw_client_response_t *res)
{
  gw_client_done_cb cb = x->cb;
  void *arg = x->arg;
  client_free(x); /* the protocol frees its own request (and res) after we return */
  cb(err, res, arg);
}

static void on_done(gw_err_t err, gw_client_response_t *res, void *arg)
{
  gw_httpclient_t *x = arg;
  x->h1 = NULL;
  x->h2 = NULL;
  gw_balancer_walk_t *w = &x->p.walk;
  if (w->held) {
    gw_balancer_walk_done(w, gw_err_is_connect_failure(err.kind) || gw_err_is_timeout(err.kind));
    if (err.kind != GW_OK && may_retry(x, err.kind) && gw_balancer_walk_next(w)) {
      x->got_head = 0;
      if (attempt(x, err) == 0) return;
      err = gw_err(GW_ERR_CONNECT, "cannot connect to upstream");
    }
  }
  finish(x, err, res);
}

/* -- one attempt: the protocol's request on an address -- */

static int send_now(gw_httpclient_t *x)
{
  if (x->p.h2 || (x->p.walk.group && x->p.walk.group->h2c)) {
    gw_context_t *ctx = x->ctx;
    if (ctx->h2_client == NULL) ctx->h2_client = gw_h2_client_new(ctx->base, 60000);
    gw_h2_params_t h2p = {.http = x->p.http, .deadline_ms = x->p.deadline_ms, .on_trailers = on_trailers};
    x->h2 = ctx->h2_client ? gw_h2_call_start(ctx->h2_client, &h2p, on_done, x) : NULL;
    if (x->h2 == NULL) return -1;
    if (x->body_trailers) gw_h2_call_body_trailers(x->h2, x->body_trailers);
    if (x->paused) gw_h2_call_pause(x->h2);
    return 0;
  }
  x->h1 = gw_client_request(x->ctx->pool, &x->p.http, on_done, x);
  if (x->h1 == NULL) return -1;
  if (x->paused) gw_client_pause(x->h1);
  return 0;
}

static void on_resolved(gw_err_t err, const struct sockaddr *addr, socklen_t addrlen, void *arg)
{
  gw_httpclient_t *x = arg;
  x->lookup = NULL;
  if (err.kind != GW_OK) {
    gw_log_error("cannot resolve upstream host \"%s\": %s", x->p.http.host, err.msg);
    on_done(err, NULL, x);
    return;
  }
  x->p.http.addr = addr; /* the port is in it already; valid during the start call */
  x->p.http.addrlen = addrlen;
  int rc = send_now(x);
  x->p.http.addr = NULL;
  if (rc < 0) on_done(gw_err(GW_ERR_CONNECT, "cannot connect to upstream"), NULL, x);
}

/* Keeps copies of what the protocol needs once the name is resolved (a
 * group's request is the caller's until done). -1 out of memory. */
static int keep_request(gw_httpclient_t *x)
{
  gw_client_params_t *h = &x->p.http;
  x->host = strdup(h->host);
  x->method = strdup(h->method);
  x->target = strdup(h->target);
  x->body = h->body_len ? malloc(h->body_len) : NULL;
  if (!x->host || !x->method || !x->target || (h->body_len && !x->body)) return -1;
  if (h->body_len) memcpy(x->body, h->body, h->body_len);
  if (h->headers && gw_headers_copy(&x->headers, h->headers) != 0) return -1;
  h->host = x->host; /* the name: in logs, and the TLS server name of https */
  h->method = x->method;
  h->target = x->target;
  h->body = x->body;
  if (h->headers) h->headers = &x->headers;
  return 0;
}

/* Sends x to its group's current server, or its address. 0 started (a
 * failure comes to on_done), -1 not. */
static int attempt(gw_httpclient_t *x, gw_err_t why)
{
  gw_client_params_t *h = &x->p.http;
  gw_upstream_server_t *s = x->p.walk.server;
  if (x->p.walk.group) {
    h->unix_path = s->unix_path;
    h->host = s->host;
    h->port = s->port;
    h->addr = s->addrlen ? (const struct sockaddr *)&s->addr : NULL;
    h->addrlen = s->addrlen;
    h->tls = s->tls || x->p.tls_all ? x->p.group_tls : NULL;
    gw_balancer_walk_use(&x->p.walk);
    if (x->p.on_server) x->p.on_server(s, why, x->arg);
  }
  int rc;
  if (h->unix_path || h->addr || x->ctx->resolver == NULL || h->host == NULL || gw_addr_is_ip(h->host)) {
    rc = send_now(x);
  } else {
    if (x->p.walk.group == NULL && x->host == NULL && keep_request(x) < 0) rc = -1;
    else rc = (x->lookup = gw_resolve(x->ctx->resolver, h->host, h->port, on_resolved, x)) ? 0 : -1;
  }
  if (rc < 0) gw_balancer_walk_drop(&x->p.walk); /* never tried: not a failure of the server */
  return rc;
}

/* -- the interface -- */

void gw_httpclient_url(gw_httpclient_params_t *p, const gw_url_t *u, struct gw_tls_client_s *tls)
{
  gw_client_params_t *h = &p->http;
  h->unix_path = u->unix_path;
  h->host = u->unix_path ? NULL : u->host;
  h->port = u->port;
  h->addr = u->addrlen ? (const struct sockaddr *)&u->addr : NULL;
  h->addrlen = u->addrlen;
  h->tls = u->tls ? tls : NULL;
  p->h2 = u->h2c;
}

gw_httpclient_t *gw_httpclient_start(gw_context_t *ctx, const gw_httpclient_params_t *p, gw_client_done_cb cb,
                                     void *arg)
{
  gw_httpclient_t *x = calloc(1, sizeof(*x));
  if (x == NULL) return NULL;
  x->ctx = ctx;
  x->p = *p;
  x->cb = cb;
  x->arg = arg;
  x->on_head = p->http.on_head;
  x->on_body = p->http.on_body;
  x->on_body_sent = p->http.on_body_sent;
  if (p->http.on_head) { /* route them through us */
    x->p.http.on_head = on_head;
    x->p.http.on_body = on_body;
  }
  if (p->http.on_body_sent) x->p.http.on_body_sent = on_body_sent;
  gw_headers_init(&x->headers);
  if (attempt(x, gw_err_none()) < 0) {
    client_free(x);
    return NULL;
  }
  return x;
}

void gw_httpclient_pause(gw_httpclient_t *x)
{
  x->paused = 1;
  if (x->h2) gw_h2_call_pause(x->h2);
  else if (x->h1) gw_client_pause(x->h1);
}

void gw_httpclient_resume(gw_httpclient_t *x)
{
  x->paused = 0;
  if (x->h2) gw_h2_call_resume(x->h2);
  else if (x->h1) gw_client_resume(x->h1);
}

void gw_httpclient_body_more(gw_httpclient_t *x, int complete)
{
  if (complete) x->p.http.body_complete = 1; /* a later attempt starts with it */
  if (x->h2) gw_h2_call_body_more(x->h2, complete);
  else if (x->h1) gw_client_body_more(x->h1, complete);
}

void gw_httpclient_body_trailers(gw_httpclient_t *x, const gw_headers_t *trailers)
{
  x->body_trailers = trailers;
  if (x->h2) gw_h2_call_body_trailers(x->h2, trailers);
}

int gw_httpclient_detach(gw_httpclient_t *x, struct evbuffer *rest, struct gw_tls_client_conn_s **tls)
{
  gw_balancer_walk_done(&x->p.walk, 0);
  return x->h1 ? gw_client_detach(x->h1, rest, tls) : -1;
}

void gw_httpclient_cancel(gw_httpclient_t *x)
{
  if (x == NULL) return;
  if (x->lookup) gw_resolve_cancel(x->lookup);
  if (x->h2) gw_h2_call_cancel(x->h2);
  else if (x->h1) gw_client_cancel(x->h1);
  gw_balancer_walk_drop(&x->p.walk);
  client_free(x);
}

void gw_httpclient_reject(gw_httpclient_t *x)
{
  gw_balancer_walk_done(&x->p.walk, 1);
  gw_httpclient_cancel(x);
}
