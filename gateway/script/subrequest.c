/* subrequest.c - sub-requests on behalf of a parent request.
 *
 * A target starting with "/" is dispatched in-process through the parent's
 * server router (no socket): a child request runs that location's handler or
 * proxy. An absolute URL (http://, https://, h2c://, h2://, unix:) goes
 * through the upstream client (httpclient.c) and its keep-alive pools. Either way the result arrives in one callback, from its own
 * loop event, after the child has been freed. The caller registers its own
 * pending operation on the parent and cancels the sub-request from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event_struct.h>

#include "log.h"
#include "httpclient.h"
#include "stats.h"
#include "subrequest.h"
#include "timeutil.h"
#include "url.h"

/* Internal sub-requests nest at most this deep (nginx allows 50). */
#define GW_MAX_SUBREQUEST_DEPTH 16

/* Finished sub-requests and child requests kept for the next ones, as a
 * keep-alive connection keeps its request: their buffers, header storage
 * and target are reused instead of allocated and freed each time. */
#define SPARE_MAX 64

struct gw_subreq_s {
  gw_request_t *parent;
  gw_request_t *child;        /* internal target: the child request; else NULL */
  gw_httpclient_t *client;    /* URL target: the upstream exchange; else NULL */
  struct event step_ev;       /* starts the child / delivers the result */
  struct event timeout_ev;
  int has_timeout;
  gw_subreq_done_cb cb;
  void *arg;
  /* the result, kept until delivered */
  int status;
  gw_headers_t headers;
  struct evbuffer *body;
  gw_err_t err;               /* GW_OK, or why it failed */
  gw_subreq_t *next_spare;
};

static const gw_protocol_t child_protocol;

static gw_subreq_t *spare_subreqs;
static int nspare_subreqs;
static gw_request_t *spare_children[SPARE_MAX]; /* recycled (gw_request_recycle) */
static int nspare_children;

/* A child request for s, spare or new, its target and fields still to set. */
static gw_request_t *take_child(gw_subreq_t *s)
{
  gw_request_t *parent = s->parent;
  if (nspare_children > 0) {
    gw_request_t *c = spare_children[--nspare_children];
    c->ctx = parent->ctx;
    c->server = parent->server;
    c->proto_ctx = s;
    return c;
  }
  gw_request_t *c = malloc(sizeof(*c));
  if (c != NULL) gw_request_init(c, parent->ctx, parent->server, &child_protocol, s);
  return c;
}

/* A child that completed: kept for the next sub-request, or freed. */
static void give_child(gw_request_t *c)
{
  if (nspare_children < SPARE_MAX && !c->handler.running) {
    gw_request_recycle(c);
    spare_children[nspare_children++] = c;
    return;
  }
  gw_request_dispose(c);
  free(c);
}

static void subreq_free(gw_subreq_t *s)
{
  gw_stats_self->subrequests_in_flight--;
  event_del(&s->step_ev);
  event_del(&s->timeout_ev);
  if (s->client) gw_httpclient_cancel(s->client);
  if (s->child) { /* cancelled before it completed */
    if (s->child->handler.running) gw_request_abort(s->child);
    gw_request_dispose(s->child);
    free(s->child);
  }
  if (nspare_subreqs < SPARE_MAX && s->body) { /* kept, emptied */
    gw_headers_clear(&s->headers);
    evbuffer_drain(s->body, evbuffer_get_length(s->body));
    s->next_spare = spare_subreqs;
    spare_subreqs = s;
    nspare_subreqs++;
    return;
  }
  gw_headers_dispose(&s->headers);
  if (s->body) evbuffer_free(s->body);
  free(s);
}

void gw_subrequest_cancel(gw_subreq_t *s)
{
  subreq_free(s);
}

/* Hands the result to the caller from a fresh loop event. */
static void on_deliver(evutil_socket_t fd, short what, void *arg)
{
  gw_subreq_t *s = arg;
  (void)fd;
  (void)what;
  if (s->child) { /* its response was moved into s; nothing of it is needed */
    give_child(s->child);
    s->child = NULL;
  }
  s->cb(s->status, &s->headers, s->body, s->err, s->arg);
  subreq_free(s);
}

static void deliver_later(gw_subreq_t *s)
{
  event_del(&s->timeout_ev);
  event_del(&s->step_ev);
  event_assign(&s->step_ev, s->parent->ctx->base, -1, 0, on_deliver, s);
  event_active(&s->step_ev, EV_TIMEOUT, 0);
}

/* The child's protocol side: its response is collected whole for the parent. */
static void on_child_finish(gw_request_t *child)
{
  gw_subreq_t *s = child->proto_ctx;
  s->status = child->resp.status ? child->resp.status : 200;
  /* The fields move, not copied: s's empty list (its storage kept for reuse)
   * goes to the child, which is emptied before it is used again. */
  gw_headers_t empty = s->headers;
  s->headers = child->resp.headers;
  child->resp.headers = empty;
  if (child->resp.text_plain) gw_headers_add(&s->headers, "Content-Type", 12, "text/plain; charset=utf-8", 25);
  if (child->resp.inline_body)
    evbuffer_add(s->body, child->resp.inline_body, child->resp.inline_len);
  else
    evbuffer_add_buffer(s->body, child->resp.body);
  deliver_later(s);
}

static const gw_protocol_t child_protocol = {.send = on_child_finish};

static void on_start_child(evutil_socket_t fd, short what, void *arg)
{
  gw_subreq_t *s = arg;
  (void)fd;
  (void)what;
  gw_request_start(s->child);
}

static void on_client_done(gw_err_t err, gw_client_response_t *res, void *arg)
{
  gw_subreq_t *s = arg;
  s->client = NULL; /* freed once we return */
  if (err.kind != GW_OK) {
    s->err = err;
  } else {
    s->status = res->status;
    gw_headers_copy(&s->headers, &res->headers);
    evbuffer_add_buffer(s->body, res->body);
  }
  deliver_later(s);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
  gw_subreq_t *s = arg;
  (void)fd;
  (void)what;
  if (s->client) {
    gw_httpclient_cancel(s->client);
    s->client = NULL;
  }
  if (s->child && s->child->handler.running) gw_request_abort(s->child);
  s->err = gw_err(GW_ERR_TIMEOUT, "sub-request timed out");
  deliver_later(s);
}

static gw_request_t *new_child(gw_subreq_t *s, const gw_subreq_params_t *p)
{
  gw_request_t *parent = s->parent;
  gw_request_t *c = take_child(s);
  if (c == NULL) return NULL;
  c->parent = parent;
  c->depth = parent->depth + 1;
  c->in.method = p->method;
  c->in.method_id = -1;
  c->in.head = strcmp(p->method, "HEAD") == 0;
  c->in.http_minor = 1;
  if (gw_request_set_target(c, p->target, strlen(p->target)) != 0) {
    gw_request_dispose(c);
    free(c);
    return NULL;
  }
  c->handler.target_changed = 0; /* its first target, not a rewrite */
  c->client.remote_addr = parent->client.remote_addr; /* the parent outlives its sub-requests */
  c->client.remote_port = parent->client.remote_port;
  c->client.proxy_protocol_addr = parent->client.proxy_protocol_addr;
  c->client.balancer_addr = parent->client.balancer_addr;
  c->client.tls = parent->client.tls;
  c->client.fd = parent->client.fd;
  gw_headers_copy(&c->in.headers, p->headers);
  if (gw_headers_find(&c->in.headers, "host") == NULL) {
    const gw_header_t *host = gw_headers_find(&parent->in.headers, "host");
    if (host) gw_headers_add(&c->in.headers, "Host", 4, host->value, host->value_len);
  }
  if (p->body_len) evbuffer_add(c->in.body, p->body, p->body_len);
  return c;
}

gw_subreq_t *gw_subrequest_start(gw_request_t *parent, const gw_subreq_params_t *p, gw_subreq_done_cb cb, void *arg)
{
  gw_context_t *w = parent->ctx;
  gw_subreq_t *s = spare_subreqs;
  if (s != NULL) { /* its header storage and body buffer kept */
    spare_subreqs = s->next_spare;
    nspare_subreqs--;
    gw_headers_t headers = s->headers;
    struct evbuffer *body = s->body;
    memset(s, 0, sizeof(*s));
    s->headers = headers;
    s->body = body;
  } else {
    s = calloc(1, sizeof(*s));
    if (s == NULL) return NULL;
    gw_headers_init(&s->headers);
    s->body = evbuffer_new();
  }
  gw_stats_self->subrequests++;
  gw_stats_self->subrequests_in_flight++;
  s->parent = parent;
  s->cb = cb;
  s->arg = arg;
  evtimer_assign(&s->timeout_ev, w->base, on_timeout, s);
  event_assign(&s->step_ev, w->base, -1, 0, on_start_child, s);

  if (p->target[0] == '/') {
    if (parent->depth >= GW_MAX_SUBREQUEST_DEPTH) {
      gw_log_error("sub-request to %s: nested %d deep (does a location sub-request itself?)", p->target, parent->depth);
      subreq_free(s);
      return NULL;
    }
    s->child = new_child(s, p);
    if (s->child == NULL) {
      subreq_free(s);
      return NULL;
    }
    event_active(&s->step_ev, EV_TIMEOUT, 0); /* start from the loop, not from inside a fiber */
  } else {
    gw_url_t u;
    if (gw_url_parse(p->target, &u) < 0) {
      subreq_free(s);
      return NULL;
    }
    gw_headers_t hs;
    gw_headers_init(&hs);
    gw_headers_copy(&hs, p->headers);
    if (gw_headers_find(&hs, "host") == NULL) gw_headers_add(&hs, "Host", 4, u.hostport, strlen(u.hostport));
    /* https, h2: the parent location's tls_* settings, else the defaults */
    const gw_location_t *loc = parent->handler.location;
    gw_httpclient_params_t cp = {.http = {
      .method = p->method,
      .target = *u.path ? u.path : "/",
      .headers = &hs,
      .body = p->body,
      .body_len = p->body_len,
      .timeout_ms = p->timeout_ms,
    }};
    gw_httpclient_url(&cp, &u, loc && loc->tls_client ? loc->tls_client : parent->ctx->config->tls_client);
    s->client = gw_httpclient_start(w, &cp, on_client_done, s);
    gw_headers_dispose(&hs);
    if (s->client == NULL) {
      subreq_free(s);
      return NULL;
    }
  }
  if (p->timeout_ms > 0) {
    struct timeval tv = gw_timeval_from_ms(p->timeout_ms);
    event_add(&s->timeout_ev, &tv);
  }
  return s;
}
