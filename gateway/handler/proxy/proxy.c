/* proxy.c - proxy_pass: rewrites a request for an upstream, picks the first
 * server of an upstream group (balancer.c), sends it with the upstream client
 * (httpclient.c) and turns the answer into the response.
 *
 * URL mapping follows nginx: with a path in the URL, the matched location
 * prefix is replaced by it ("/sub" + proxy_pass "http://h:1/mruby": "/sub/x"
 * -> "/mruby/x"); without one, the request-target is passed unchanged.
 *
 * The client retries on the group's next live server when that is safe
 * (httpclient.h); a failure it reports is answered: 504 for timeouts, 502
 * otherwise.
 *
 * h2c:// and h2:// upstreams (and grpc_pass) speak HTTP/2: the client picks
 * that from the URL or the group; their response trailers end the
 * streamed body (gw_request_stream_end_trailers). A gRPC request
 * (content-type application/grpc...) is answered the gRPC way when the
 * upstream fails: status 200 with grpc-status 14 (UNAVAILABLE) or 4
 * (DEADLINE_EXCEEDED) and grpc-message, never an HTML 502/504. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/socket.h>

#include "balancer.h"
#include "error.h"
#include "httpclient.h"
#include "log.h"
#include "proxy.h"
#include "proxy_proto.h"
#include "stats.h"
#include "str.h"
#include "tls_server.h"
#include "tls_client.h"
#include "trace.h"
#include "ws_frame.h"
#include "tunnel.h"

typedef struct {
  gw_pending_t pending;   /* registered with req: an abort cancels us */
  gw_request_t *req;
  gw_httpclient_t *client; /* the exchange in flight */
  int h2c;                 /* the upstream speaks HTTP/2 */
  int grpc;                /* a gRPC request: failures answered with grpc-status */
  int deadline_ms;         /* its grpc-timeout, or 0 */
  gw_headers_t *trailers;  /* owned: the upstream's response trailers, or NULL */
  double sent_ms;
  gw_upstream_group_t *group; /* NULL for a literal address */
  gw_httpclient_params_t params; /* target and headers owned below */
  int streaming;          /* the response head went to the client; the body follows */
  int upgrade;            /* a WebSocket handshake: a 101 turns into a tunnel */
  char ws_key[25];        /* HTTP/2's extended CONNECT: the key we sent the upstream ("": HTTP/1.1's own) */
  int https;              /* an https:// URL: TLS to every server (a group's too, as nginx) */
  unsigned char proxy_hdr[GW_PROXY_V1_MAX]; /* send_proxy_protocol: the header (params.proxy_header) */
  char *target;
  gw_headers_t headers;
  char host[256];
} proxy_op_t;

/* Also hop-by-hop: any field the Connection header names. */
static int named_in_connection(const gw_header_t *conn, const gw_header_t *h)
{
  if (conn == NULL) return 0;
  const char *p = conn->value;
  while (*p) {
    while (*p == ' ' || *p == ',' || *p == '\t') p++;
    const char *e = p;
    while (*e && *e != ',' && *e != ' ' && *e != '\t') e++;
    if ((size_t)(e - p) == h->name_len && strncasecmp(p, h->name, h->name_len) == 0) return 1;
    p = e;
  }
  return 0;
}

/* Adds `name` to dst: the values of every such field of src joined with
 * ", ", then `last` (X-Forwarded-For: the client's address; Via: ours).
 * Nothing when there is neither. */
static void add_joined(gw_headers_t *dst, const char *name, const gw_headers_t *src, const char *last)
{
  size_t len = strlen(last);
  for (size_t i = 0; i < src->count; i++)
    if (strcasecmp(src->items[i].name, name) == 0) len += src->items[i].value_len + 2;
  if (len == 0) return;
  char small[256];
  char *v = len <= sizeof(small) ? small : malloc(len);
  if (v == NULL) return;
  size_t n = 0;
  for (size_t i = 0; i < src->count; i++) {
    const gw_header_t *h = &src->items[i];
    if (strcasecmp(h->name, name) != 0) continue;
    memcpy(v + n, h->value, h->value_len);
    n += h->value_len;
    memcpy(v + n, ", ", 2);
    n += 2;
  }
  if (*last) {
    memcpy(v + n, last, strlen(last));
    n += strlen(last);
  } else {
    n -= 2; /* nothing to add: drop the last ", " */
  }
  gw_headers_add(dst, name, strlen(name), v, n);
  if (v != small) free(v);
}

/* -- the exchange ---------------------------------------------------------------- */

static void op_free(proxy_op_t *op)
{
  if (op->req->handler.body_arg == op) { /* a streamed request body: nobody takes it any more */
    op->req->handler.on_body_more = NULL;
    op->req->handler.body_arg = NULL;
  }
  free(op->target);
  gw_headers_dispose(&op->headers);
  if (op->trailers) {
    gw_headers_dispose(op->trailers);
    free(op->trailers);
  }
  free(op);
}

static void cancel_op(gw_pending_t *p)
{
  proxy_op_t *op = (proxy_op_t *)p;
  gw_httpclient_cancel(op->client);
  op_free(op);
}

static void on_upstream_done(gw_err_t err, gw_client_response_t *res, void *arg);

/* HTTPS settings: the group's tls_* options, else the location's, else the
 * defaults (the system's CAs). */
static struct gw_tls_client_s *tls_settings(const gw_request_t *req, const gw_upstream_group_t *group)
{
  if (group && group->tls_client) return group->tls_client;
  if (req->handler.location && req->handler.location->tls_client) return req->handler.location->tls_client;
  return req->ctx->config->tls_client;
}

/* The upstream's status and headers become the response's, minus hop-by-hop. */
static void take_head(gw_request_t *req, gw_client_response_t *res)
{
  req->upstream.status = res->status;
  req->upstream.reused = res->reused;
  req->resp.status = res->status;
  gw_request_head_replace(req);
  int kept_server = gw_headers_find(&req->resp.headers, "server") != NULL;
  const char *via = req->handler.location ? req->handler.location->via : NULL;
  const gw_header_t *conn = gw_headers_find(&res->headers, "connection");
  for (size_t i = 0; i < res->headers.count; i++) {
    const gw_header_t *h = &res->headers.items[i];
    if (gw_header_is_hop_by_hop(h->name, h->name_len) || named_in_connection(conn, h)) continue;
    if (!gw_header_field_is_safe(h->name, h->name_len, h->value, h->value_len)) continue; /* never relay what we would not send */
    if (via && strcasecmp(h->name, "via") == 0) continue; /* joined below */
    /* A Server set before (a phase, the handler) wins, as nginx hides the upstream's. */
    if (kept_server && h->name_len == 6 && strcasecmp(h->name, "server") == 0) continue;
    gw_headers_add(&req->resp.headers, h->name, h->name_len, h->value, h->value_len);
  }
  if (via) add_joined(&req->resp.headers, "Via", &res->headers, via);
  req->resp.inline_body = NULL;
  req->resp.text_plain = 0;
}

/* Streaming: the client's output drained; read from the upstream again. */
static void on_client_drain(gw_request_t *req)
{
  proxy_op_t *op = req->handler.drain_arg;
  gw_httpclient_resume(op->client);
}

/* The head goes out (through the location's filters: request.c). */
static void begin_stream(proxy_op_t *op, long long length)
{
  gw_request_t *req = op->req;
  req->handler.on_drain = on_client_drain;
  req->handler.drain_arg = op;
  op->streaming = 1;
  gw_request_stream_begin(req, length);
}

/* -- WebSocket (an HTTP/1.1 upgrade): the handshake passes, a 101 makes both
 * connections a byte tunnel (tunnel.c) -- */

/* GET with Connection: upgrade and Upgrade: websocket, on a connection that
 * can hand its socket over (HTTP/1.1, plain or TLS). */
static int is_websocket_upgrade(const gw_request_t *req)
{
  const gw_location_t *l = req->handler.location;
  if (l && (l->header_filter || l->body_filter)) return 0; /* filters apply to every response: no tunnel */
  if (req->in.websocket_connect) return gw_request_can_upgrade(req); /* HTTP/2: RFC 8441 */
  return req->in.http_minor == 1 && req->in.method && strcmp(req->in.method, "GET") == 0 &&
         gw_headers_have_token(&req->in.headers, "connection", "upgrade") &&
         gw_headers_have_token(&req->in.headers, "upgrade", "websocket") &&
         gw_request_can_upgrade(req);
}

/* The upstream switched protocols: relay its 101 (end-to-end fields and
 * Upgrade; the client's protocol writes the head) and tunnel both sockets.
 * Inside on_head. */
static void start_tunnel(proxy_op_t *op, gw_client_response_t *res)
{
  gw_request_t *req = op->req;
  struct evbuffer *to_client = evbuffer_new(), *to_upstream = evbuffer_new(), *rest = evbuffer_new();
  gw_tls_client_conn_t *utls = NULL; /* a wss:// upstream's TLS: goes into the tunnel with its socket */
  int ufd = to_client && to_upstream && rest ? gw_httpclient_detach(op->client, rest, &utls) : -1;
  gw_httpclient_cancel(op->client);
  op->client = NULL;
  gw_request_pending_remove(&op->pending);
  op_free(op);
  if (ufd < 0) {
    gw_log_error("proxy_pass %s %.*s: out of memory for a WebSocket tunnel", req->in.method, (int)req->in.path_len, req->in.target);
    gw_request_simple_response(req, 502, NULL);
    gw_request_finish(req);
  } else {
    take_head(req, res); /* the 101 and its end-to-end fields: the protocol writes them */
    const gw_header_t *up = gw_headers_find(&res->headers, "upgrade");
    if (up) gw_request_set_header(req, "Upgrade", 7, up->value, up->value_len);
    evbuffer_add_buffer(to_client, rest); /* what the upstream sent right after: behind the head */
    int timeout = req->handler.location ? req->handler.location->tunnel_timeout_ms : 0;
    struct event_base *base = req->ctx->base;
    char peer[64];
    snprintf(peer, sizeof(peer), "%s", req->client.remote_addr ? req->client.remote_addr : "-");
    gw_byte_end_t client;
    int rc = gw_request_upgrade(req, to_client, to_upstream, &client); /* req is gone */
    gw_byte_end_t upstream = {ufd, utls ? &gw_tls_client_io : NULL, utls};
    if (rc < 0) gw_byte_end_drop(&upstream);
    else gw_tunnel_new_ends(base, &client, to_client, peer, &upstream, to_upstream, timeout); /* owns both ends */
  }
  if (to_client) evbuffer_free(to_client);
  if (to_upstream) evbuffer_free(to_upstream);
  if (rest) evbuffer_free(rest);
}

/* The upstream's Sec-WebSocket-Accept answers our key (RFC 6455 §4.1). */
static int accept_matches(const char *key, gw_client_response_t *res)
{
  char want[29];
  gw_ws_accept(key, strlen(key), want);
  const gw_header_t *got = gw_headers_find(&res->headers, "sec-websocket-accept");
  return got && got->value_len == 28 && memcmp(got->value, want, 28) == 0;
}

static void on_upstream_head(gw_client_response_t *res, void *arg)
{
  proxy_op_t *op = arg;
  gw_request_t *req = op->req;
  if (op->upgrade && res->status == 101) {
    if (op->ws_key[0] && !accept_matches(op->ws_key, res)) { /* we made the handshake: we check it */
      gw_log_error("proxy_pass %s %.*s: the upstream's 101 has no valid Sec-WebSocket-Accept", req->in.method,
                   (int)req->in.path_len, req->in.target);
      gw_httpclient_reject(op->client);
      op->client = NULL;
      gw_request_pending_remove(&op->pending);
      op_free(op);
      gw_request_simple_response(req, 502, NULL);
      gw_request_finish(req);
      return;
    }
    start_tunnel(op, res);
    return;
  }
  take_head(req, res);
  const gw_header_t *cl = gw_headers_find(&res->headers, "content-length");
  long long length = cl && !gw_headers_find(&res->headers, "transfer-encoding") ? strtoll(cl->value, NULL, 10) : -1;
  if (req->in.head) req->resp.head_length = length;
  begin_stream(op, length);
}

static void on_upstream_body(const char *data, size_t len, void *arg)
{
  proxy_op_t *op = arg;
  int full = gw_request_stream_data(op->req, data, len);
  if (full < 0) return; /* the client left: the request was aborted and op freed */
  if (full) gw_httpclient_pause(op->client); /* back-pressure: resumed by on_client_drain */
}

/* A streamed request body: more arrived from the client, or its end. */
static void on_client_body_more(gw_request_t *req)
{
  proxy_op_t *op = req->handler.body_arg;
  if (!req->in.body_streaming && req->in.trailers) gw_httpclient_body_trailers(op->client, req->in.trailers);
  gw_httpclient_body_more(op->client, !req->in.body_streaming);
}

/* ... and the upstream client took some: the connection may read more. */
static void on_upstream_body_sent(void *arg)
{
  proxy_op_t *op = arg;
  gw_request_body_taken(op->req);
}

/* The upstream's response trailers (HTTP/2): kept for the end of the body. */
static void on_upstream_trailers(const gw_headers_t *trailers, void *arg)
{
  proxy_op_t *op = arg;
  if (op->trailers == NULL && (op->trailers = malloc(sizeof(*op->trailers))) == NULL) return;
  gw_headers_init(op->trailers);
  for (size_t i = 0; i < trailers->count; i++) {
    const gw_header_t *h = &trailers->items[i];
    if (gw_header_field_is_safe(h->name, h->name_len, h->value, h->value_len))
      gw_headers_add(op->trailers, h->name, h->name_len, h->value, h->value_len);
  }
}

/* A gRPC call the upstream failed: grpc-status 4 (DEADLINE_EXCEEDED) for
 * timeouts, else 14 (UNAVAILABLE), with the log text as grpc-message (plain
 * ASCII: nothing to percent-encode). */
static void grpc_status_fields(gw_headers_t *hs, gw_err_kind_t kind, const char *msg)
{
  const char *code = gw_err_is_timeout(kind) ? "4" : "14";
  gw_headers_add(hs, "grpc-status", 11, code, strlen(code));
  gw_headers_add(hs, "grpc-message", 12, msg, strlen(msg));
}

/* ... before any response went out: a Trailers-Only gRPC response. */
static void grpc_fail(gw_request_t *req, gw_err_t err)
{
  req->resp.status = 200;
  gw_headers_clear(&req->resp.headers);
  gw_headers_add(&req->resp.headers, "content-type", 12, "application/grpc", 16);
  grpc_status_fields(&req->resp.headers, err.kind, err.msg);
  req->resp.inline_body = NULL;
  req->resp.text_plain = 0;
  evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
}

/* 1 for a gRPC request: its content-type is application/grpc or application/grpc+proto... */
static int is_grpc(const gw_request_t *req)
{
  const gw_header_t *ct = gw_headers_find(&req->in.headers, "content-type");
  return ct && strncasecmp(ct->value, "application/grpc", 16) == 0 &&
         (ct->value[16] == '\0' || ct->value[16] == '+' || ct->value[16] == ';');
}

/* gRPC's grpc-timeout ("1*8DIGIT unit", unit H M S m u n) in ms (at least
 * 1), or 0 when absent or malformed. */
static int grpc_timeout_ms(const gw_request_t *req)
{
  const gw_header_t *t = gw_headers_find(&req->in.headers, "grpc-timeout");
  if (t == NULL || t->value_len < 2 || t->value_len > 9) return 0;
  double v = 0;
  for (size_t i = 0; i + 1 < t->value_len; i++) {
    if (t->value[i] < '0' || t->value[i] > '9') return 0;
    v = v * 10 + (t->value[i] - '0');
  }
  switch (t->value[t->value_len - 1]) {
  case 'H': v *= 3600e3; break;
  case 'M': v *= 60e3; break;
  case 'S': v *= 1e3; break;
  case 'm': break;
  case 'u': v /= 1e3; break;
  case 'n': v /= 1e6; break;
  default: return 0;
  }
  if (v > 86400e3) v = 86400e3;
  return v < 1 ? 1 : (int)v;
}

/* The client goes to a group's server (the first, or the next after why). */
static void on_server(const gw_upstream_server_t *s, gw_err_t why, void *arg)
{
  proxy_op_t *op = arg;
  gw_request_t *req = op->req;
  if (why.kind != GW_OK)
    gw_log_warn("proxy_pass %s %.*s: %s: %s, trying %s", req->in.method, (int)req->in.path_len, req->in.target, req->upstream.addr,
                why.msg, s->label);
  gw_copy_cstr(req->upstream.addr, sizeof(req->upstream.addr), s->label);
  op->sent_ms = gw_now_ms();
}

static void on_upstream_done(gw_err_t err, gw_client_response_t *res, void *arg)
{
  proxy_op_t *op = arg;
  gw_request_t *req = op->req;
  op->client = NULL; /* freed once we return */
  req->upstream.ms = gw_now_ms() - op->sent_ms;
  gw_request_pending_remove(&op->pending);
  if (op->streaming) { /* the head is out: end the body, whole or cut short */
    gw_headers_t *trailers = op->trailers;
    op->trailers = NULL;
    int grpc = op->grpc;
    op_free(op);
    if (err.kind) {
      gw_stats_self->upstream_failures++;
      gw_log_error("proxy_pass %s %.*s to %s: %s after the response began; %s", req->in.method, (int)req->in.path_len,
                   req->in.target, req->upstream.addr, err.msg, grpc ? "ending the gRPC call" : "closing the client connection");
    }
    if (err.kind && grpc) { /* the client gets a status, not a broken stream */
      gw_headers_t t;
      gw_headers_init(&t);
      grpc_status_fields(&t, err.kind, err.msg);
      gw_request_stream_end_trailers(req, &t);
      gw_headers_dispose(&t);
    } else if (trailers && err.kind == GW_OK) {
      gw_request_stream_end_trailers(req, trailers);
    } else {
      gw_request_stream_end(req, err.kind == GW_OK);
    }
    if (trailers) {
      gw_headers_dispose(trailers);
      free(trailers);
    }
    return;
  }
  if (gw_trace) {
    char ev[128];
    if (err.kind)
      snprintf(ev, sizeof(ev), "upstream failed: %s", err.msg);
    else
      snprintf(ev, sizeof(ev), "upstream answered with status %d", res->status);
    gw_trace_event(req, ev);
  }
  int grpc = op->grpc;
  op_free(op);
  if (err.kind) {
    gw_stats_self->upstream_failures++;
    gw_log_error("proxy_pass %s %.*s to %s: %s", req->in.method, (int)req->in.path_len, req->in.target, req->upstream.addr, err.msg);
    if (grpc) grpc_fail(req, err);
    else gw_request_simple_response(req, gw_err_status(err.kind), NULL);
  } else {
    take_head(req, res);
    evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
    evbuffer_add_buffer(req->resp.body, res->body);
    const gw_header_t *cl = req->in.head ? gw_headers_find(&res->headers, "content-length") : NULL;
    if (cl) req->resp.head_length = strtoll(cl->value, NULL, 10); /* HEAD: the length a GET would have */
    gw_request_finish(req);
    return;
  }
  gw_request_finish(req);
}

static void fail_now(gw_request_t *req, int status)
{
  gw_request_simple_response(req, status, NULL);
  gw_request_finish(req);
}

/* The request-target upstream: the location prefix replaced by the URL's path. */
static char *upstream_target(const gw_request_t *req, const char *path)
{
  size_t prefix = (req->handler.location && *path) ? req->handler.location->path_len : 0;
  if (prefix > req->in.path_len) prefix = req->in.path_len;
  size_t plen = strlen(path);
  size_t tlen = plen + req->in.target_len - prefix;
  char *target = malloc(tlen + 2);
  if (target == NULL) return NULL;
  memcpy(target, path, plen);
  memcpy(target + plen, req->in.target + prefix, req->in.target_len - prefix);
  target[tlen] = '\0';
  if (tlen == 0 || target[0] != '/') { /* "?q" alone, or nothing: root */
    memmove(target + 1, target, tlen + 1);
    target[0] = '/';
  }
  return target;
}

/* Request headers minus hop-by-hop ones, plus Host and X-Forwarded-*. */
static void upstream_headers(const gw_request_t *req, gw_headers_t *hs, const char *host, int pass_host, int upgrade,
                             const char *ws_key)
{
  const char *via = req->handler.location ? req->handler.location->via : NULL;
  const gw_header_t *client_host = gw_headers_find(&req->in.headers, "host");
  if (pass_host && client_host)
    gw_headers_add(hs, "Host", 4, client_host->value, client_host->value_len);
  else
    gw_headers_add(hs, "Host", 4, host, strlen(host));
  const gw_header_t *conn = gw_headers_find(&req->in.headers, "connection");
  for (size_t i = 0; i < req->in.headers.count; i++) {
    const gw_header_t *h = &req->in.headers.items[i];
    if (upgrade && strcasecmp(h->name, "upgrade") == 0) { /* a WebSocket handshake keeps these two */
      gw_headers_add(hs, h->name, h->name_len, h->value, h->value_len);
      continue;
    }
    if (gw_header_is_hop_by_hop(h->name, h->name_len) || named_in_connection(conn, h)) continue;
    if (ws_key && strcasecmp(h->name, "sec-websocket-key") == 0) continue; /* ours replaces it */
    if (strcasecmp(h->name, "host") == 0 || strcasecmp(h->name, "content-length") == 0 ||
        strcasecmp(h->name, "x-forwarded-proto") == 0 || strcasecmp(h->name, "x-forwarded-host") == 0)
      continue;
    if (strcasecmp(h->name, "x-forwarded-for") == 0) continue; /* joined below */
    if (via && strcasecmp(h->name, "via") == 0) continue;
    gw_headers_add(hs, h->name, h->name_len, h->value, h->value_len);
  }
  if (upgrade) gw_headers_add(hs, "Connection", 10, "Upgrade", 7);
  if (upgrade && ws_key) { /* HTTP/2's extended CONNECT: the HTTP/1.1 handshake is ours to make */
    gw_headers_add(hs, "Upgrade", 7, "websocket", 9);
    gw_headers_add(hs, "Sec-WebSocket-Key", 17, ws_key, strlen(ws_key));
  }
  add_joined(hs, "X-Forwarded-For", &req->in.headers, req->client.remote_addr);
  if (via) add_joined(hs, "Via", &req->in.headers, via);
  if (req->client.tls) gw_headers_add(hs, "X-Forwarded-Proto", 17, "https", 5);
  else gw_headers_add(hs, "X-Forwarded-Proto", 17, "http", 4);
  if (client_host) gw_headers_add(hs, "X-Forwarded-Host", 16, client_host->value, client_host->value_len);
}


/* send_proxy_protocol: the header announcing the client (its address and
 * port, and the address it connected to) to every new upstream connection.
 * pool.c keys connections by these bytes: a kept-alive one is reused only
 * for the same client connection. A client address that is no IP literal
 * announces nothing (v1 UNKNOWN, v2 LOCAL). */
static void proxy_header(proxy_op_t *op)
{
  const gw_request_t *req = op->req;
  gw_sockaddr_t src, dst;
  socklen_t slen, dlen = sizeof(dst);
  int have = req->client.remote_addr &&
             gw_addr_parse_literal(req->client.remote_addr, strlen(req->client.remote_addr), &src, &slen) == 1 &&
             req->client.fd >= 0 && getsockname(req->client.fd, &dst.sa, &dlen) == 0;
  if (have) gw_addr_set_port(&src, req->client.remote_port);
  int n = gw_proxy_write(op->group->send_proxy_protocol, have ? &src.sa : NULL, have ? &dst.sa : NULL,
                         op->proxy_hdr, sizeof(op->proxy_hdr));
  if (n <= 0) return;
  op->params.http.proxy_header = op->proxy_hdr;
  op->params.http.proxy_header_len = (size_t)n;
}

/* The upstream group called name, or NULL. */
static gw_upstream_group_t *find_group(const gw_config_t *cfg, const char *name)
{
  for (size_t i = 0; i < cfg->ngroups; i++)
    if (strcmp(cfg->groups[i].name, name) == 0) return &cfg->groups[i];
  return NULL;
}

static void start_url(gw_request_t *req, const char *url, const gw_url_t *u, const char *key)
{
  proxy_op_t *op = calloc(1, sizeof(*op));
  if (op == NULL) {
    fail_now(req, 500);
    return;
  }
  op->req = req;
  op->https = u->tls;
  gw_headers_init(&op->headers);
  op->h2c = u->h2c;
  if (u->unix_path) {
    snprintf(req->upstream.addr, sizeof(req->upstream.addr), "unix:%s", u->unix_path);
  } else if (u->addrlen == 0 && (op->group = find_group(req->ctx->config, u->host)) != NULL) {
    if (gw_balancer_walk_first(&op->params.walk, op->group, key) == NULL) {
      gw_log_error("proxy_pass %s: no live upstreams in \"%s\"", url, u->host);
      op_free(op);
      fail_now(req, 502);
      return;
    }
    op->h2c = op->group->h2c;
  } else { /* an IP literal, or a host name resolved on the loop (httpclient.c) */
    gw_copy_cstr(req->upstream.addr, sizeof(req->upstream.addr), u->hostport);
  }
  gw_copy_cstr(op->host, sizeof(op->host), u->host);
  op->target = upstream_target(req, u->path);
  op->upgrade = !op->h2c && is_websocket_upgrade(req);
  if (op->h2c) {
    op->grpc = is_grpc(req);
    op->deadline_ms = op->grpc ? grpc_timeout_ms(req) : 0;
  }
  if (op->h2c && req->in.websocket_connect) { /* RFC 8441 upstream: not spoken here */
    gw_log_error("proxy_pass %s: a WebSocket (HTTP/2 extended CONNECT) to an h2c:// upstream is not supported", url);
    op_free(op);
    fail_now(req, 502);
    return;
  }
  if (op->upgrade && req->in.websocket_connect && gw_ws_key_new(op->ws_key) < 0) {
    gw_log_error("proxy_pass %s: no randomness for a Sec-WebSocket-Key", url);
    op_free(op);
    fail_now(req, 502);
    return;
  }
  upstream_headers(req, &op->headers, op->group ? op->group->name : u->hostport,
                   req->handler.location && req->handler.location->pass_host, op->upgrade, op->ws_key[0] ? op->ws_key : NULL);
  size_t body_len = req->in.body_streaming ? 0 : evbuffer_get_length(req->in.body);
  gw_client_params_t *hp = &op->params.http;
  *hp = (gw_client_params_t){
    .method = req->in.websocket_connect ? "GET" : req->in.method, /* RFC 8441's CONNECT is HTTP/1.1's GET */
    .target = op->target,
    .headers = &op->headers,
    .body = body_len ? (const char *)evbuffer_pullup(req->in.body, -1) : NULL,
    .body_len = body_len,
    .connect_timeout_ms = op->group ? op->group->connect_timeout_ms : 0,
    .timeout_ms = op->group ? op->group->timeout_ms : 0,
  };
  if (op->group) {
    op->params.group_tls = tls_settings(req, op->group);
    op->params.tls_all = op->https;
    op->params.on_server = on_server;
  } else {
    gw_httpclient_url(&op->params, u, u->tls ? tls_settings(req, NULL) : NULL);
    hp->host = u->unix_path ? NULL : op->host;
  }
  op->params.deadline_ms = op->deadline_ms;
  op->params.on_trailers = on_upstream_trailers;
  /* Stream the body to the client as it comes, with back-pressure, unless
   * there is no client (a sub-request); a body filter collects it (request.c). */
  if (gw_request_can_stream(req)) {
    hp->on_head = on_upstream_head;
    hp->on_body = on_upstream_body;
  }
  if (op->upgrade) { /* a fresh connection; any answer but 101 closes the client's after it */
    hp->on_head = on_upstream_head;
    hp->on_body = on_upstream_body;
    hp->upgrade = 1;
    req->in.keepalive = 0;
  }
  /* A request body still arriving goes upstream as it comes (http1_server.c). */
  if (req->in.body_streaming) {
    hp->body_source = req->in.body;
    hp->body_length = req->in.body_length;
    hp->body_complete = 0;
    hp->on_body_sent = on_upstream_body_sent;
    req->handler.on_body_more = on_client_body_more;
    req->handler.body_arg = op;
  }
  if (op->group && op->group->send_proxy_protocol) proxy_header(op);
  if (op->target == NULL) {
    op_free(op);
    fail_now(req, 500);
    return;
  }
  op->sent_ms = gw_now_ms();
  op->client = gw_httpclient_start(req->ctx, &op->params, on_upstream_done, op);
  if (op->client == NULL) {
    op_free(op);
    fail_now(req, 500);
    return;
  }
  if (req->in.trailers && !req->in.body_streaming) gw_httpclient_body_trailers(op->client, req->in.trailers);
  gw_request_pending_add(req, &op->pending, cancel_op);
  if (gw_trace) {
    char ev[400];
    snprintf(ev, sizeof(ev), "request sent to upstream %s", req->upstream.addr);
    gw_trace_event(req, ev);
  }
}

void gw_proxy_start(gw_request_t *req, const char *url, const char *key)
{
  gw_url_t u;
  if (gw_url_parse(url, &u) < 0) {
    gw_log_error("proxy_pass %s: not a valid http:// or https:// URL", url);
    fail_now(req, 502);
    return;
  }
  start_url(req, url, &u, key);
}

/* -- the proxy_pass handler -------------------------------------------------- */

typedef struct {
  gw_handler_t super;
  char *url;              /* owned */
  gw_url_t parsed;  /* split once, at load (points into url) */
} proxy_handler_t;

static void on_req(gw_handler_t *self, gw_request_t *req)
{
  proxy_handler_t *h = (proxy_handler_t *)self;
  start_url(req, h->url, &h->parsed, NULL);
}

static void dispose(gw_handler_t *self)
{
  proxy_handler_t *h = (proxy_handler_t *)self;
  free(h->url);
  free(h);
}

gw_handler_t *gw_proxy_handler_new(const char *url)
{
  proxy_handler_t *h = calloc(1, sizeof(*h));
  if (h == NULL) return NULL;
  h->super = (gw_handler_t){.name = "proxy_pass", .on_req = on_req, .dispose = dispose};
  h->url = strdup(url);
  if (h->url == NULL || gw_url_parse(h->url, &h->parsed) < 0) {
    dispose(&h->super);
    return NULL;
  }
  return &h->super;
}
