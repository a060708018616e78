/* exchange.c - resolve, then send: the glue between resolver.c and http1_client.c
 * for proxy_pass and URL sub-requests. While the name is being resolved the
 * exchange keeps its own copy of what gw_client_request() needs; after that
 * the upstream client owns the request and this struct only forwards the
 * completion. */
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "exchange.h"
#include "log.h"

struct gw_exchange_s {
  gw_upstream_pool_t *pool;
  gw_client_req_t *client;  /* the HTTP exchange, once started */
  gw_resolve_t *lookup;     /* the DNS lookup in flight, or NULL */
  gw_client_done_cb cb;
  gw_client_head_cb on_head; /* the caller's streaming callbacks (NULL: buffered) */
  gw_client_body_cb on_body;
  void (*on_body_sent)(void *arg); /* the caller's, for a streamed request body */
  void *arg;
  int paused;               /* paused before the exchange started (while resolving) */
  /* copies kept while resolving */
  gw_client_params_t params;
  char *host, *method, *target, *body;
  gw_headers_t headers;
};

static void exchange_free(gw_exchange_t *x)
{
  free(x->host);
  free(x->method);
  free(x->target);
  free(x->body);
  gw_headers_dispose(&x->headers);
  free(x);
}

/* The client calls these with our struct; the caller wants its own arg. */
static void on_client_head(gw_client_response_t *res, void *arg)
{
  gw_exchange_t *x = arg;
  x->on_head(res, x->arg);
}

static void on_client_body(const char *data, size_t len, void *arg)
{
  gw_exchange_t *x = arg;
  if (x->on_body) x->on_body(data, len, x->arg);
}

static void on_client_body_sent(void *arg)
{
  gw_exchange_t *x = arg;
  x->on_body_sent(x->arg);
}

static void on_client_done(gw_err_t err, gw_client_response_t *res, void *arg)
{
  gw_exchange_t *x = arg;
  gw_client_done_cb cb = x->cb;
  void *cb_arg = x->arg;
  exchange_free(x); /* the client frees its own request after we return */
  cb(err, res, cb_arg);
}

static void on_resolved(gw_err_t err, const struct sockaddr *addr, socklen_t addrlen, void *arg)
{
  gw_exchange_t *x = arg;
  x->lookup = NULL;
  if (err.kind != GW_OK) {
    gw_log_error("cannot resolve upstream host \"%s\": %s", x->host, err.msg);
    gw_client_done_cb cb = x->cb;
    void *cb_arg = x->arg;
    exchange_free(x);
    cb(err, NULL, cb_arg);
    return;
  }
  x->params.addr = addr; /* the port is in it already */
  x->params.addrlen = addrlen;
  x->client = gw_client_request(x->pool, &x->params, on_client_done, x);
  if (x->client && x->paused) gw_client_pause(x->client);
  if (x->client == NULL) {
    gw_client_done_cb cb = x->cb;
    void *cb_arg = x->arg;
    exchange_free(x);
    cb(gw_err(GW_ERR_CONNECT, "cannot connect to upstream"), NULL, cb_arg);
  }
}

gw_exchange_t *gw_exchange_start(gw_upstream_pool_t *pool, gw_resolver_t *resolver, const gw_client_params_t *p,
                                 gw_client_done_cb cb, void *arg)
{
  gw_exchange_t *x = calloc(1, sizeof(*x));
  if (x == NULL) return NULL;
  x->pool = pool;
  x->cb = cb;
  x->arg = arg;
  x->on_head = p->on_head;
  x->on_body = p->on_body;
  x->on_body_sent = p->on_body_sent;
  gw_headers_init(&x->headers);
  gw_client_params_t direct = *p;
  if (p->on_head) { /* route the streaming callbacks through us, like done */
    direct.on_head = on_client_head;
    direct.on_body = on_client_body;
  }
  if (p->on_body_sent) direct.on_body_sent = on_client_body_sent;
  if (p->unix_path || p->addr || gw_addr_is_ip(p->host) || resolver == NULL) {
    x->client = gw_client_request(pool, &direct, on_client_done, x);
    if (x->client == NULL) {
      exchange_free(x);
      return NULL;
    }
    return x;
  }
  /* Keep copies until the name is resolved. */
  x->params = direct;
  x->host = strdup(p->host);
  x->method = strdup(p->method);
  x->target = strdup(p->target);
  x->body = p->body_len ? malloc(p->body_len) : NULL;
  int oom = !x->host || !x->method || !x->target || (p->body_len && !x->body);
  if (!oom && p->body_len) memcpy(x->body, p->body, p->body_len);
  if (!oom) oom = gw_headers_copy(&x->headers, p->headers) != 0;
  x->params.host = x->host; /* the name: in logs, and the TLS server name of https */
  x->params.method = x->method;
  x->params.target = x->target;
  x->params.body = x->body;
  x->params.headers = &x->headers;
  if (!oom) x->lookup = gw_resolve(resolver, x->host, p->port, on_resolved, x);
  if (oom || x->lookup == NULL) {
    exchange_free(x);
    return NULL;
  }
  return x;
}

void gw_exchange_pause(gw_exchange_t *x)
{
  x->paused = 1;
  if (x->client) gw_client_pause(x->client);
}

void gw_exchange_resume(gw_exchange_t *x)
{
  x->paused = 0;
  if (x->client) gw_client_resume(x->client);
}

void gw_exchange_body_more(gw_exchange_t *x, int complete)
{
  if (x->client) gw_client_body_more(x->client, complete);
  else if (complete) x->params.body_complete = 1; /* resolving: the client starts with it */
}

int gw_exchange_detach(gw_exchange_t *x, struct evbuffer *rest, struct gw_tls_client_conn_s **tls)
{
  return x->client ? gw_client_detach(x->client, rest, tls) : -1;
}

void gw_exchange_cancel(gw_exchange_t *x)
{
  if (x == NULL) return;
  if (x->lookup) gw_resolve_cancel(x->lookup);
  if (x->client) gw_client_cancel(x->client);
  exchange_free(x);
}
