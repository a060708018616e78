/* request.c - a request's life: routing, dispatch to the location's handler,
 * the pending-operation registry that makes aborts safe, and the finish,
 * stream and abort paths, which go to the protocol through req->proto; and
 * trace mode, which logs that life (trace.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "handler.h"
#include "json_out.h"
#include "log.h"
#include "request.h"
#include "router.h"
#include "timeline.h"
#include "trace.h"

/* -- each group's fresh fields (request.h): those after what it keeps are
 * zeroed (a constant size: a few stores), then the few not 0 are set -- */

#define ZERO_FROM(g, type, first) \
  memset((char *)(g) + offsetof(type, first), 0, sizeof(type) - offsetof(type, first))

static void fresh_client(gw_request_client_t *c)
{
  memset(c, 0, offsetof(gw_request_client_t, real_ip_addr));
  c->real_ip_addr[0] = '\0';
  c->fd = -1;
}

static void fresh_in(gw_request_in_t *in)
{
  ZERO_FROM(in, gw_request_in_t, method);
  in->method = "GET";
  in->http_major = 1;
}

static void fresh_handler(gw_request_handler_t *h)
{
  ZERO_FROM(h, gw_request_handler_t, reroutes);
}

static void fresh_upstream(gw_request_upstream_t *u)
{
  memset(u, 0, offsetof(gw_request_upstream_t, addr));
  u->addr[0] = '\0';
}

static void fresh_resp(gw_request_resp_t *resp)
{
  ZERO_FROM(resp, gw_request_resp_t, status);
  resp->head_length = -1;
}

static void fresh_filter(gw_request_filter_t *f)
{
  memset(f, 0, sizeof(*f));
  f->fd = -1;
}

static void fresh_trace(gw_request_trace_t *t)
{
  memset(t, 0, offsetof(gw_request_trace_t, waiting_for));
  t->waiting_for[0] = '\0';
}

/* A fresh request's fields, its header lists empty, no buffers yet. */
static void init_fields(gw_request_t *req, gw_context_t *ctx, const gw_server_t *server,
                        const gw_protocol_t *proto, void *proto_ctx)
{
  memset(req, 0, sizeof(*req));
  req->ctx = ctx;
  req->server = server;
  req->proto = proto;
  req->proto_ctx = proto_ctx;
  req->pending.next = req->pending.prev = &req->pending;
  fresh_client(&req->client);
  fresh_in(&req->in);
  fresh_resp(&req->resp);
  fresh_filter(&req->filter);
}

void gw_request_init(gw_request_t *req, gw_context_t *ctx, const gw_server_t *server,
                     const gw_protocol_t *proto, void *proto_ctx)
{
  init_fields(req, ctx, server, proto, proto_ctx);
  req->in.body = evbuffer_new();
  req->resp.body = evbuffer_new();
}

/* The response stage's state for a streamed body goes (see gw_stage_t). */
static void stage_free(gw_request_t *req)
{
  if (req->resp.stage_state) req->resp.stage->free(req);
}

static void drop_out(gw_request_t *req);

/* The response cache's state and key for this request go (see
 * gw_cache_hooks_t): the group is fresh. */
static void reset_cache(gw_request_t *req)
{
  if (req->cache.state) req->cache.hooks->free(req);
  free(req->cache.key);
  memset(&req->cache, 0, sizeof(req->cache));
}

static void drop_trailers(gw_request_t *req)
{
  if (req->in.trailers == NULL) return;
  gw_headers_dispose(req->in.trailers);
  free(req->in.trailers);
  req->in.trailers = NULL;
}

static void drain(struct evbuffer *b)
{
  size_t n = evbuffer_get_length(b);
  if (n > 0) evbuffer_drain(b, n);
}

/* -- gw_request_reset, one step per group: each empties the buffers its
 * group owns and keeps them, and freshens every other field -- */

/* The connection stays; only what real_ip changed is put back, so the next
 * request on it is checked afresh. */
static void reset_client(gw_request_client_t *c)
{
  if (!c->real_ip_set) return;
  c->remote_addr = c->before_real_ip_addr;
  c->remote_port = c->before_real_ip_port;
  c->balancer_addr = c->before_real_ip_balancer;
  c->real_ip_set = 0;
}

static void reset_in(gw_request_t *req)
{
  gw_headers_clear(&req->in.headers);
  drop_trailers(req);
  drain(req->in.body);
  fresh_in(&req->in);
}

static void reset_resp(gw_request_t *req)
{
  stage_free(req);
  gw_headers_clear(&req->resp.headers);
  drain(req->resp.body);
  fresh_resp(&req->resp);
}

static void reset_filter(gw_request_t *req)
{
  drop_out(req);
  fresh_filter(&req->filter);
}

void gw_request_reset(gw_request_t *req)
{
  reset_client(&req->client);
  reset_in(req);
  fresh_handler(&req->handler);
  fresh_upstream(&req->upstream);
  reset_resp(req);
  reset_filter(req);
  reset_cache(req);
  fresh_trace(&req->trace);
}

/* The handler's state for this request goes (the request ended). */
static void release_state(gw_request_t *req)
{
  gw_req_state_t *s = req->handler.state;
  if (s != NULL) {
    req->handler.state = NULL;
    s->release(s);
  }
}

void gw_request_dispose(gw_request_t *req)
{
  if (req->handler.running) gw_request_abort(req);
  release_state(req);
  stage_free(req);
  reset_cache(req);
  gw_headers_dispose(&req->in.headers);
  gw_headers_dispose(&req->resp.headers);
  drop_trailers(req);
  evbuffer_free(req->in.body);
  evbuffer_free(req->resp.body);
  free(req->in.target);
  req->in.target = NULL;
}

void gw_request_recycle(gw_request_t *req)
{
  if (req->handler.running) gw_request_abort(req);
  release_state(req);
  gw_request_reset(req); /* every group as gw_request_init leaves it but the connection's */
  fresh_client(&req->client);
  req->handler.running = 0;
  req->pending.next = req->pending.prev = &req->pending;
}

void gw_request_pending_add(gw_request_t *req, gw_pending_t *p, void (*cancel)(gw_pending_t *))
{
  p->cancel = cancel;
  p->next = req->pending.next;
  p->prev = &req->pending;
  req->pending.next->prev = p;
  req->pending.next = p;
}

void gw_request_pending_remove(gw_pending_t *p)
{
  p->prev->next = p->next;
  p->next->prev = p->prev;
  p->next = p->prev = p;
}

void gw_request_head_replace(gw_request_t *req)
{
  if (req->resp.headers_kept < req->resp.headers.count) req->resp.headers.count = req->resp.headers_kept;
  if (req->resp.headers.count == 0) gw_headers_clear(&req->resp.headers);
  else gw_headers_remove(&req->resp.headers, "content-type");
  req->resp.headers_kept = req->resp.headers.count;
}

void gw_request_simple_response(gw_request_t *req, int status, const char *body)
{
  gw_request_head_replace(req);
  evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
  req->resp.status = status;
  req->resp.inline_body = NULL;
  if (status == 204 || status == 304) return;
  req->resp.text_plain = 1;
  if (body)
    evbuffer_add(req->resp.body, body, strlen(body));
  else
    evbuffer_add_printf(req->resp.body, "%d %s\n", status, gw_http_reason(status));
}

void gw_request_split_target(gw_request_t *req)
{
  const char *q = memchr(req->in.target, '?', req->in.target_len);
  req->in.path_len = q ? (size_t)(q - req->in.target) : req->in.target_len;
}

/* nginx stops an internal redirection cycle after 10 rounds. */
#define MAX_REROUTES 10

static void run_phases(gw_request_t *req, int from);
static void run_handler(gw_request_t *req);

/* A rewrite or access phase is done: answer, fail, or go on with the next. */
static void on_phase_done(gw_request_t *req, int verdict, void *arg)
{
  int next = (int)(intptr_t)arg;
  if (verdict == GW_STEP_FAILED) gw_request_simple_response(req, 500, NULL);
  if (verdict != GW_STEP_NEXT) {
    gw_request_finish(req);
    return;
  }
  if (req->handler.target_changed) { /* the rewrite phase changed the URI: route it again */
    req->handler.target_changed = 0;
    if (++req->handler.reroutes > MAX_REROUTES) {
      gw_log_error("%s %.*s: rewritten more than %d times (a rewrite cycle?)", req->in.method, (int)req->in.path_len,
                   req->in.target, MAX_REROUTES);
      gw_request_simple_response(req, 500, NULL);
      gw_request_finish(req);
      return;
    }
    req->handler.location = gw_router_match(req->server, req->in.target, req->in.path_len);
    if (gw_trace) gw_trace_event(req, "rewritten, routed again");
    next = 0;
  }
  run_phases(req, next);
}

/* The location's phases from `from` on: 0 rewrite, 1 access, 2 content. */
static void run_phases(gw_request_t *req, int from)
{
  const gw_location_t *l = req->handler.location;
  if (l == NULL) {
    gw_request_simple_response(req, 404, NULL);
    gw_request_finish(req);
  } else if (l == &gw_router_refused) {
    gw_request_log_refused(req);
    req->in.keepalive = 0; /* as every 400: nothing more is read from a client that sent it */
    gw_request_simple_response(req, 400, NULL);
    gw_request_finish(req);
  } else if (from <= 0 && l->rewrite) {
    l->rewrite->run(l->rewrite, req, on_phase_done, (void *)(intptr_t)1);
  } else if (from <= 1 && l->access) {
    l->access->run(l->access, req, on_phase_done, (void *)(intptr_t)2);
  } else {
    gw_request_head_keep(req); /* what the phases set stays on the response */
    if (l->cache_hooks) l->cache_hooks->lookup(req, run_handler); /* a hit answers; else it runs the handler */
    else l->handler->on_req(l->handler, req);
  }
}

/* The content phase: the location's handler answers. */
static void run_handler(gw_request_t *req)
{
  const gw_location_t *l = req->handler.location;
  l->handler->on_req(l->handler, req);
}

void gw_request_log_refused(const gw_request_t *req)
{
  gw_log_info("%s %.*s: refused: decoded and normalised, the path is routed to another location (or does not "
              "decode)",
              req->in.method, (int)req->in.path_len, req->in.target);
}

/* real_ip: a trusted proxy's header names the client (real_ip.h). */
static void apply_real_ip(gw_request_t *req)
{
  if (!gw_real_ip_find(&req->server->real_ip, req->client.remote_addr, &req->in.headers, req->client.real_ip_addr,
                       sizeof(req->client.real_ip_addr)))
    return;
  req->client.before_real_ip_addr = req->client.remote_addr;
  req->client.before_real_ip_port = req->client.remote_port;
  req->client.before_real_ip_balancer = req->client.balancer_addr;
  req->client.real_ip_set = 1;
  if (req->client.balancer_addr == NULL) req->client.balancer_addr = req->client.remote_addr;
  req->client.remote_addr = req->client.real_ip_addr;
  req->client.remote_port = 0; /* unknown */
}

static unsigned long next_id; /* requests numbered (trace, timeline) */

void gw_request_start(gw_request_t *req)
{
  req->handler.running = 1;
  if (req->depth == 0 && req->server->real_ip.nfrom > 0 && !req->client.real_ip_set) apply_real_ip(req);
  if (req->handler.location == NULL) /* a request with a body was routed when its head was read */
    req->handler.location = gw_router_match(req->server, req->in.target, req->in.path_len);
  if (gw_trace) {
    gw_trace_start(req);
  } else {
    req->trace.id = gw_timeline_on ? ++next_id : 0; /* a reused request's old id would name the wrong one */
  }
  if (gw_timeline_on) gw_timeline_name(req->trace.id, req->in.method, req->in.target, req->in.path_len); /* the timeline's names */
  run_phases(req, 0);
}

int gw_request_set_target(gw_request_t *req, const char *target, size_t len)
{
  if (len + 1 > req->in.target_cap) {
    char *t = realloc(req->in.target, len + 1);
    if (t == NULL) return -1;
    req->in.target = t;
    req->in.target_cap = len + 1;
  }
  memmove(req->in.target, target, len);
  req->in.target[len] = '\0';
  req->in.target_len = len;
  gw_request_split_target(req);
  req->handler.target_changed = 1;
  return 0;
}

/* The log phase is over (it cannot change anything): drop what it held. */
static void after_log(gw_request_t *req, int verdict, void *arg)
{
  (void)verdict;
  (void)arg;
  gw_request_abort(req); /* a wait it started, if any, is cancelled */
}

void gw_request_logged(gw_request_t *req)
{
  const gw_location_t *l = req->handler.location;
  if (l && l->log) l->log->run(l->log, req, after_log, NULL);
}

/* -- the response stage ------------------------------------------------------
 *
 * What reaches the protocol goes through these out_* steps, which pass the
 * location's response stage (gw_stage_t: compression) if it has one: the
 * last step before the wire, after the handler and the location's filters.
 * Everything else here calls them instead of req->proto's send/stream_*. */

static const gw_stage_t *stage_of(gw_request_t *req)
{
  return req->handler.location && req->parent == NULL ? (req->resp.stage = req->handler.location->stage) : NULL;
}

/* A whole response (proto->send). */
static void out_send(gw_request_t *req)
{
  if (req->cache.state) req->cache.hooks->whole(req);
  const gw_stage_t *st = stage_of(req);
  if (st) st->whole(req);
  req->proto->send(req);
}

/* A streamed head (proto->stream_head). */
static void out_head(gw_request_t *req, long long content_length)
{
  if (req->cache.state) content_length = req->cache.hooks->head(req, content_length);
  const gw_stage_t *st = stage_of(req);
  req->proto->stream_head(req, st ? st->begin(req, content_length) : content_length);
}

/* A piece of a streamed body past the cache (stage->data, proto->stream_body). */
static int out_staged(gw_request_t *req, const char *data, size_t len)
{
  if (req->resp.stage_state) return req->resp.stage->data(req, data, len);
  return req->proto->stream_body(req, data, len);
}

/* A piece of a streamed body (the cache may store it or drop it). */
static int out_body(gw_request_t *req, const char *data, size_t len)
{
  if (req->cache.state && req->cache.hooks->data(req, data, len)) return 0;
  return out_staged(req, data, len);
}

/* A staged body's last bytes; 0 when they could not go (cut short). */
static int stage_end(gw_request_t *req, int complete)
{
  if (complete) return req->resp.stage->end(req) == 0;
  stage_free(req);
  return 0;
}

/* The end of a streamed body (proto->stream_end). */
static void out_end(gw_request_t *req, int complete)
{
  if (req->cache.state && (complete = req->cache.hooks->end(req, complete, out_staged)) < 0) return;
  if (req->resp.stage_state) complete = stage_end(req, complete);
  req->proto->stream_end(req, complete);
}

/* ... with trailer fields (proto->stream_trailers). */
static void out_trailers(gw_request_t *req, const gw_headers_t *trailers)
{
  int complete = req->cache.state ? req->cache.hooks->end(req, 1, out_staged) : 1;
  if (complete < 0) return; /* the client left: aborted */
  if (!complete) req->proto->stream_end(req, 0);
  else if (req->resp.stage_state && !stage_end(req, 1)) req->proto->stream_end(req, 0);
  else if (req->proto->stream_trailers) req->proto->stream_trailers(req, trailers);
  else req->proto->stream_end(req, 1);
}

/* proto->stream_file, unless the stage takes the body (it must be read),
 * or may take it once the header filter that runs now is done. */
static int out_can_file(const gw_request_t *req)
{
  return req->proto->stream_file != NULL && req->resp.stage_state == NULL && req->cache.state == NULL &&
         !(req->filter.hold && req->handler.location->stage);
}

int gw_request_can_upgrade(const gw_request_t *req)
{
  return req->proto->upgrade != NULL && req->proto->can_upgrade(req);
}

int gw_request_upgrade(gw_request_t *req, struct evbuffer *to_client, struct evbuffer *from_client, gw_byte_end_t *end)
{
  req->handler.running = 0;
  release_state(req);
  return req->proto->upgrade(req, to_client, from_client, end);
}

int gw_request_can_stream(const gw_request_t *req)
{
  return req->proto->stream_head != NULL;
}

/* -- output filters ------------------------------------------------------------
 *
 * Every response a location produces passes here on its way from the handler
 * to the protocol (h2o's ostream): whole (gw_request_finish) or streamed
 * (gw_request_stream_*), from Ruby, an upstream, FastCGI, a file or an error
 * page. The location's header filter runs on its head and its body filter on
 * its whole body, once per response, in nginx's order; the handler kinds know
 * nothing of them. A streamed body is collected when there is a body filter
 * (a file range read into it) and goes out whole; with only a header filter
 * it streams, its pieces kept meanwhile (the producer is told to pause). */

/* The largest body collected for a body filter: past it the response is a
 * 502 (the rest is read and dropped). */
#define FILTER_BODY_MAX (64LL << 20)

/* Drops what a held stream kept (abort, reset). */
static void drop_out(gw_request_t *req)
{
  if (req->filter.fd >= 0) close(req->filter.fd);
  req->filter.fd = -1;
  if (req->filter.trailers) {
    gw_headers_dispose(req->filter.trailers);
    free(req->filter.trailers);
    req->filter.trailers = NULL;
  }
  req->filter.hold = req->filter.collect = req->filter.ended = 0;
}

static int wants_filters(const gw_request_t *req)
{
  const gw_location_t *l = req->handler.location;
  return !req->filter.applied && l != NULL && (l->header_filter || l->body_filter);
}

/* The response leaves, whole. */
static void deliver(gw_request_t *req)
{
  req->handler.running = 0;
  release_state(req);
  out_send(req);
}

/* The body filter is done: send, or 500 if it raised. */
static void after_body_filter(gw_request_t *req, int verdict, void *arg)
{
  (void)arg;
  if (verdict == GW_STEP_FAILED) gw_request_simple_response(req, 500, NULL);
  deliver(req);
}

/* The header filter is done: the body filter, if any, unless it raised. */
static void after_header_filter(gw_request_t *req, int verdict, void *arg)
{
  gw_filter_t *f = req->handler.location->body_filter;
  if (verdict == GW_STEP_FAILED || f == NULL) {
    after_body_filter(req, verdict, arg);
    return;
  }
  f->run(f, req, after_body_filter, arg);
}

void gw_request_finish(gw_request_t *req)
{
  if (!wants_filters(req)) {
    deliver(req);
    return;
  }
  req->filter.applied = 1;
  const gw_location_t *l = req->handler.location;
  if (req->resp.inline_body) { /* borrowed (a Ruby String, a cached file): filters run Ruby (GC) */
    evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
    evbuffer_add(req->resp.body, req->resp.inline_body, req->resp.inline_len);
    req->resp.inline_body = NULL;
  }
  if (l->header_filter)
    l->header_filter->run(l->header_filter, req, after_header_filter, NULL);
  else
    after_header_filter(req, GW_STEP_NEXT, NULL);
}

/* A collected body ended: it goes out whole through the filters (a body cut
 * short is a 502, an error page like any other). */
static void collected(gw_request_t *req, int complete)
{
  int over = req->filter.collect == 2;
  req->filter.collect = 0;
  if (over)
    gw_log_error("%s %.*s: body_filter: the body is over %lld bytes; answering 502", req->in.method, (int)req->in.path_len,
                 req->in.target, FILTER_BODY_MAX);
  if (!complete || over) gw_request_simple_response(req, 502, NULL);
  gw_request_finish(req);
}

static void end_stream(gw_request_t *req, int complete)
{
  req->handler.running = 0;
  release_state(req);
  out_end(req, complete);
}

static void end_stream_trailers(gw_request_t *req, const gw_headers_t *trailers)
{
  req->handler.running = 0;
  release_state(req);
  out_trailers(req, trailers);
}

static void send_file(gw_request_t *req, int fd, long long offset, long long len)
{
  req->handler.running = 0;
  release_state(req);
  req->proto->stream_file(req, fd, offset, len);
}

/* The header filter on a streamed head is done: the head goes out as it left
 * it, then what the producer sent meanwhile, and the producer goes on (or
 * its end, if it ended meanwhile). It raised, or the producer failed
 * meanwhile: what is pending is cancelled and the client gets 500 or 502. */
static void after_stream_header_filter(gw_request_t *req, int verdict, void *arg)
{
  (void)arg;
  int ended = req->filter.ended;
  req->filter.hold = 0;
  if (verdict == GW_STEP_FAILED || ended == 2) {
    while (req->pending.next != &req->pending) { /* the producer, if still there */
      gw_pending_t *p = req->pending.next;
      gw_request_pending_remove(p);
      p->cancel(p);
    }
    drop_out(req);
    gw_request_simple_response(req, verdict == GW_STEP_FAILED ? 500 : 502, NULL);
    deliver(req);
    return;
  }
  out_head(req, req->filter.length);
  size_t n = evbuffer_get_length(req->resp.body);
  int full = 0;
  if (n > 0) {
    full = out_body(req, (const char *)evbuffer_pullup(req->resp.body, -1), n);
    if (full < 0) return; /* the client left: aborted */
    evbuffer_drain(req->resp.body, n);
  }
  req->filter.ended = 0;
  if (ended == 1) {
    end_stream(req, 1);
  } else if (ended == 3) {
    gw_headers_t *t = req->filter.trailers;
    req->filter.trailers = NULL;
    end_stream_trailers(req, t);
    gw_headers_dispose(t);
    free(t);
  } else if (ended == 4) {
    int fd = req->filter.fd;
    req->filter.fd = -1;
    send_file(req, fd, req->filter.off, req->filter.len);
  } else if (!full && req->handler.on_drain) {
    req->handler.on_drain(req); /* it paused on our 1; the protocol has room */
  }
}

void gw_request_stream_begin(gw_request_t *req, long long content_length)
{
  if (!wants_filters(req)) {
    out_head(req, content_length);
    return;
  }
  if (req->handler.location->body_filter) { /* the body whole: gw_request_finish once it ended */
    req->filter.collect = 1;
    if (req->in.head) req->resp.head_length = content_length;
    evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
    return;
  }
  req->filter.applied = 1;
  req->filter.hold = 1;
  req->filter.length = content_length;
  req->filter.ended = 0;
  evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
  gw_filter_t *f = req->handler.location->header_filter;
  f->run(f, req, after_stream_header_filter, NULL);
}

int gw_request_stream_data(gw_request_t *req, const char *data, size_t len)
{
  if (req->filter.collect || req->filter.hold) {
    if (req->filter.collect && (long long)(evbuffer_get_length(req->resp.body) + len) > FILTER_BODY_MAX) {
      req->filter.collect = 2; /* over: dropped (collected() answers 502) */
      evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
    }
    if (req->filter.collect != 2) evbuffer_add(req->resp.body, data, len);
    return req->filter.hold; /* held: pause until on_drain */
  }
  return out_body(req, data, len);
}

void gw_request_stream_end(gw_request_t *req, int complete)
{
  if (req->filter.collect) collected(req, complete);
  else if (req->filter.hold) req->filter.ended = complete ? 1 : 2;
  else end_stream(req, complete);
}

void gw_request_stream_end_trailers(gw_request_t *req, const gw_headers_t *trailers)
{
  if (req->filter.collect) { /* the body filter makes it a whole response: no trailers */
    collected(req, 1);
  } else if (req->filter.hold) {
    gw_headers_t *t = malloc(sizeof(*t));
    if (t != NULL) {
      gw_headers_init(t);
      for (size_t i = 0; i < trailers->count; i++)
        gw_headers_add(t, trailers->items[i].name, trailers->items[i].name_len, trailers->items[i].value,
                       trailers->items[i].value_len);
    }
    req->filter.trailers = t;
    req->filter.ended = t ? 3 : 1;
  } else {
    end_stream_trailers(req, trailers);
  }
}

int gw_request_can_stream_file(const gw_request_t *req)
{
  return out_can_file(req);
}

int gw_request_body_add_file(gw_request_t *req, int fd, long long off, long long len)
{
  while (len > 0) {
    struct evbuffer_iovec v;
    size_t want = len < 65536 ? (size_t)len : 65536;
    if (evbuffer_reserve_space(req->resp.body, (ev_ssize_t)want, &v, 1) < 1) return -1;
    ssize_t n = pread(fd, v.iov_base, want, (off_t)off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    v.iov_len = (size_t)n;
    evbuffer_commit_space(req->resp.body, &v, 1);
    off += n;
    len -= n;
  }
  return 0;
}

void gw_request_stream_file(gw_request_t *req, int fd, long long offset, long long len)
{
  if (req->filter.collect) {
    if (len > FILTER_BODY_MAX) req->filter.collect = 2;
    int ok = req->in.head || req->filter.collect == 2 || gw_request_body_add_file(req, fd, offset, len) == 0;
    close(fd);
    if (!ok) gw_log_warn("%.*s: the file ended early (truncated while read?)", (int)req->in.path_len, req->in.target);
    collected(req, ok);
  } else if (req->filter.hold) {
    req->filter.fd = fd;
    req->filter.off = offset;
    req->filter.len = len;
    req->filter.ended = 4;
  } else {
    send_file(req, fd, offset, len);
  }
}

void gw_request_body_taken(gw_request_t *req)
{
  if (req->proto->body_taken) req->proto->body_taken(req);
}

void gw_request_abort(gw_request_t *req)
{
  while (req->pending.next != &req->pending) {
    gw_pending_t *p = req->pending.next;
    gw_request_pending_remove(p);
    p->cancel(p);
  }
  req->handler.running = 0;
  drop_out(req);
  release_state(req);
  stage_free(req);
  if (req->cache.state) req->cache.hooks->free(req);
}

int gw_request_set_header(gw_request_t *req, const char *name, size_t nlen, const char *value, size_t vlen)
{
  if (!gw_header_field_is_safe(name, nlen, value, vlen)) return -1;
  return gw_headers_add(&req->resp.headers, name, nlen, value, vlen);
}

/* -- trace mode -------------------------------------------------------------- */

int gw_trace;
static int recordings; /* running gw_trace_record()s */

void gw_trace_wait(gw_request_t *req, const char *fmt, ...)
{
  if (!gw_trace) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(req->trace.waiting_for, sizeof(req->trace.waiting_for), fmt, ap);
  va_end(ap);
}

void gw_trace_event(gw_request_t *req, const char *event)
{
  double now = gw_now_ms();
  if (gw_trace & GW_TRACE_LOG)
    gw_log_notice("trace #%lu %s %.*s%s +%.3f ms: %s", req->trace.id, req->in.method, (int)req->in.path_len, req->in.target,
                  req->parent ? " (sub-request)" : "", now - req->trace.start_ms, event);
  if (req->trace.out) {
    struct evbuffer *out = req->trace.out;
    evbuffer_add_printf(out, "%s{\"t\":%.0f,\"req\":%lu,\"depth\":%d,\"method\":\"%s\",\"path\":",
                        evbuffer_get_length(out) ? "," : "", (now - req->trace.t0) * 1000.0, req->trace.id, req->depth,
                        req->in.method);
    gw_json_string(out, req->in.target, req->in.path_len);
    evbuffer_add(out, ",\"event\":", 9);
    gw_json_string(out, event, strlen(event));
    evbuffer_add(out, "}", 1);
  }
}

void gw_trace_start(gw_request_t *req)
{
  req->trace.id = ++next_id;
  req->trace.start_ms = gw_now_ms();
  req->trace.waiting_for[0] = '\0';
  if (req->parent && req->parent->trace.out) { /* a sub-request of a recorded request */
    req->trace.out = req->parent->trace.out;
    req->trace.t0 = req->parent->trace.t0;
  }
  char ev[128], via[48] = "";
  if (req->in.stream_id > 0) /* which stream of which connection kind */
    snprintf(via, sizeof(via), " (HTTP/2.0 stream %d, %s)", (int)req->in.stream_id, req->client.tls ? "h2" : "h2c");
  if (req->handler.location == &gw_router_refused)
    snprintf(ev, sizeof(ev), "refused: routed elsewhere once decoded and normalised%s", via);
  else if (req->handler.location)
    snprintf(ev, sizeof(ev), "routed to a %s location%s", req->handler.location->handler->name, via);
  else
    snprintf(ev, sizeof(ev), "no location matches%s", via);
  gw_trace_event(req, ev);
}

void gw_trace_record(gw_request_t *req, struct evbuffer *out)
{
  req->trace.out = out;
  req->trace.t0 = gw_now_ms();
  recordings++;
  gw_trace |= GW_TRACE_RECORD;
}

void gw_trace_record_end(void)
{
  if (--recordings == 0) gw_trace &= ~GW_TRACE_RECORD;
}
