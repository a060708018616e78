/* request.h - one HTTP request and its response, from parse to last byte,
 * between two interfaces:
 *
 *  - the protocol side (gw_protocol_t), implemented by whoever received the
 *    request: an HTTP/1.1 connection (http1_server.c), an HTTP/2 stream
 *    (http2_server.c), a sub-request's parent (subrequest.c), or the worker
 *    itself for a script's task (mruby_handler.c) or WebSocket session
 *    (ws_handler.c), which take the response whole; it sends the response
 *    whole or streamed and feeds a request body that streams in;
 *  - the handler side (handler.h): the location's handler object answers it.
 *
 * request.c knows neither side's kinds. Everything a request waits on
 * (timer, sub-request, upstream exchange) is registered in its `pending`
 * list, so gw_request_abort() can cancel it all when the client goes away;
 * the state a handler keeps for it (handler.state) is released when it ends. */
#ifndef GW_REQUEST_H
#define GW_REQUEST_H

#include <netinet/in.h>
#include <stdint.h>
#include <event2/buffer.h>
#include <mruby.h>

#include "config.h"
#include "context.h"
#include "headers.h"
#include "http_status.h"

#include "byte_end.h"

typedef struct gw_request_s gw_request_t;

/* Something a request waits for. Embedded in the operation's own struct. */
typedef struct gw_pending_s {
  struct gw_pending_s *next, *prev;
  /* Stops the operation and frees the struct that embeds this; no callback
   * into the request happens afterwards. */
  void (*cancel)(struct gw_pending_s *p);
} gw_pending_t;

/* The protocol side of a request (see the top of this file). proto_ctx in
 * the request is its own (the connection, the sub-request). */
typedef struct {
  /* The response is complete (resp: status, headers, body as set): send it.
   * The protocol may reuse or free req afterwards. */
  void (*send)(gw_request_t *req);
  /* Streaming, NULL where the response cannot stream (a sub-request is
   * collected whole). stream_head sends the head announcing content_length
   * (-1: unknown); stream_body returns 0, 1 (over the high water mark:
   * pause until req->handler.on_drain) or -1 (the client is gone and the request
   * was aborted: touch nothing of it); stream_end ends the body, complete
   * or cut short. */
  void (*stream_head)(gw_request_t *req, long long content_length);
  int (*stream_body)(gw_request_t *req, const char *data, size_t len);
  void (*stream_end)(gw_request_t *req, int complete);
  /* Optional (NULL: trailers are dropped, the body ends as by stream_end(req,
   * 1)). Ends a streamed body, complete, with trailer fields (gRPC's
   * grpc-status): HTTP/2 sends them as a last HEADERS frame, HTTP/1.1 in
   * the last chunk when the client sent "TE: trailers". The fields are
   * copied before this returns. */
  void (*stream_trailers)(gw_request_t *req, const gw_headers_t *trailers);
  /* A streamed request body: its consumer took bytes out of req->in.body, so
   * more may be read (back-pressure). NULL: the body never streams. */
  void (*body_taken)(gw_request_t *req);
  /* Optional (NULL: not supported; the producer reads the file into
   * stream_body itself). After stream_head: the body is len bytes of the
   * file fd from offset, sent without copying (HTTP/1.1: sendfile(2), the
   * head in the same segment); the response then ends as by stream_end(req,
   * 1) before this returns, and req may be reused. The protocol owns fd
   * (closes it, also on failure). A file that turns out shorter ends the
   * response early: the connection closes. */
  void (*stream_file)(gw_request_t *req, int fd, long long offset, long long len);
  /* Optional (NULL: no protocol upgrades; can_upgrade may say no for one
   * request, e.g. HTTP/1.0). The handler sets the answer as for any
   * response (req->resp.status = 101; resp.headers: Upgrade, Sec-WebSocket-*,
   * the upstream's end-to-end fields) and the protocol writes it. upgrade
   * ends the request (logged with the status sent) and gives its byte
   * stream up as *end (byte_end.h), owned by the caller now:
   *  - HTTP/1.1: a "101 Switching Protocols" head with those fields and
   *    Connection: Upgrade (no Content-Length); the connection's socket
   *    with its TLS state as the layer (none over plain TCP); the bytes
   *    queued for the client, then the head, are moved to the front of
   *    `to_client` (what the handler put there follows them);
   *  - HTTP/2 (an RFC 8441 extended CONNECT): a 200 (or the handler's 2xx)
   *    HEADERS from resp.headers without the fields HTTP/2 forbids
   *    (Upgrade, Connection...) or RFC 8441 drops (Sec-WebSocket-Accept),
   *    and the stream becomes a socketless end; to_client is left as it
   *    is (the caller writes it to the end).
   * Bytes read past the request go to `from_client`. -1: it could not (the
   * connection or stream is closed). req must not be touched after. */
  int (*can_upgrade)(const gw_request_t *req);
  int (*upgrade)(gw_request_t *req, struct evbuffer *to_client, struct evbuffer *from_client, gw_byte_end_t *end);
} gw_protocol_t;

/* A stage between the handler and the protocol (h2o's ostream): every
 * response a location's handler produces passes it once, after the
 * location's filters, just before it goes to req->proto. A location names
 * its stage (gw_location_t.stage; compress.c's gw_compress_stage), so
 * request.c calls it through these pointers and knows none of it. */
typedef struct gw_stage_s {
  /* A whole response is about to go out (proto->send): may rewrite it. */
  void (*whole)(gw_request_t *req);
  /* A streamed head is about to go out announcing length (-1: unknown):
   * returns the length to announce instead; sets req->resp.stage_state when the
   * body is to pass through data() and end(). */
  long long (*begin)(gw_request_t *req, long long length);
  /* As proto->stream_body (0, 1: pause until on_drain, -1: aborted). */
  int (*data)(gw_request_t *req, const char *data, size_t len);
  /* The body is complete: the last bytes go out, the state is freed.
   * Returns 0, or -1 when it could not finish (the body ends cut short). */
  int (*end)(gw_request_t *req);
  /* Frees req->resp.stage_state (cut short, aborted, reset); sends nothing. */
  void (*free)(gw_request_t *req);
} gw_stage_t;

/* A response cache in front of a location's handler (cache.c's
 * gw_cache_hooks, as gw_location_t.cache_hooks, its settings in
 * gw_location_t.cache). request.c calls it through these pointers and knows
 * none of it; its per-request state is req->cache.state (NULL: none). The
 * response hooks run after the location's filters and before its stage
 * (so a cached body is the identity one and compression applies to hits). */
typedef struct gw_cache_hooks_s {
  /* Instead of calling the content handler: answers req from the cache (a
   * whole response: gw_request_finish) or calls handler(req) to run the
   * location's handler, now or later (a wait is registered as pending). */
  void (*lookup)(gw_request_t *req, void (*handler)(gw_request_t *req));
  /* The handler's response leaves whole (before stage->whole): may store it
   * or replace it (a 304 that refreshed an entry, an error a stale entry
   * answers). */
  void (*whole)(gw_request_t *req);
  /* ... or streamed: its head (returns the length to announce instead), */
  long long (*head)(gw_request_t *req, long long length);
  /* each piece of its body (0: pass it on; 1: dropped, the cache answers
   * with a stored body instead), */
  int (*data)(gw_request_t *req, const char *data, size_t len);
  /* and its end (complete or cut short): returns the completeness to pass
   * on, after sending a stored body it answers with through emit (as
   * stream_body); -1 when emit found the client gone (req was aborted:
   * touch nothing). */
  int (*end)(gw_request_t *req, int complete, int (*emit)(gw_request_t *req, const char *data, size_t len));
  /* Frees req->cache.state (the request ended, was aborted or reset). */
  void (*free)(gw_request_t *req);
} gw_cache_hooks_t;

/* State a handler keeps for one request (mruby: the fiber, the Ruby
 * object), released once when the request finishes or is aborted. */
typedef struct gw_req_state_s {
  void (*release)(struct gw_req_state_s *s);
} gw_req_state_t;

/* gw_request_t's fields come in groups, one per owner (docs/DESIGN.md,
 * "The request"): who sets a group also knows when it is stale, and
 * gw_request_reset() freshens each group in one step. What a group keeps
 * across a reset (its buffers, emptied; the handler's state) comes first,
 * the fields a reset zeroes follow (request.c sets the few whose fresh
 * value is not 0), a text buffer last (a reset empties it). */

/* The client connection, as its protocol (or a sub-request's parent) sets
 * it when the request gets the connection: the same for every request on
 * it, so a reset keeps it (but undoes real_ip). */
typedef struct {
  /* The client connection's TLS (tls_server.h: protocol, cipher, SNI
   * name); NULL over plain TCP. A sub-request has its parent's. */
  const struct gw_tls_info_s *tls;
  const char *remote_addr;  /* the client's address as text: its protocol's (or parent's) */
  int remote_port;          /* the client's port (0: unknown), for FastCGI's REMOTE_PORT */
  int fd;                   /* the client connection's socket (a sub-request: its parent's),
                               for getsockname/getpeername only; -1: none */
  /* Behind a balancer (docs/fleet.md): the address a PROXY protocol header
   * carried (NULL: none), and the socket peer's when remote_addr is not it
   * (NULL: remote_addr is the peer). */
  const char *proxy_protocol_addr;
  const char *balancer_addr;
  /* real_ip (gw_request_start): what remote_addr, remote_port and
   * balancer_addr were before it changed them (gw_request_reset puts them
   * back), and the address found in the header, which remote_addr then
   * points at. */
  int real_ip_set;
  int before_real_ip_port;
  const char *before_real_ip_addr, *before_real_ip_balancer;
  char real_ip_addr[64];
} gw_request_client_t;

/* The request as received: set by its protocol (http1_server.c,
 * http2_server.c) or a sub-request's parent (subrequest.c), read by
 * everyone. */
typedef struct {
  /* kept by a reset, emptied: */
  char *target;             /* owned, NUL-terminated request-target; buffer reused */
  size_t target_cap;
  gw_headers_t headers;     /* owned */
  struct evbuffer *body;    /* owned request body (streamed: what arrived and was not taken yet) */
  /* fresh for each request: */
  const char *method;       /* static name ("GET"), never freed */
  size_t target_len;
  size_t path_len;          /* target[0, path_len) is the path; then "?query" */
  int method_id;            /* llhttp_method_t */
  int http_minor;           /* 0 or 1 (HTTP/1.x) */
  int http_major;           /* 1, or 2 (an HTTP/2 stream: then http_minor is 0) */
  int32_t stream_id;        /* an HTTP/2 stream's id (access log, trace); 0 for HTTP/1.x */
  int websocket_connect;    /* HTTP/2: an extended CONNECT with :protocol websocket (RFC 8441) */
  int keepalive;            /* the client allows another request on this connection */
  int head;                 /* HEAD: no response body */
  /* A body streamed to proxy_pass: the request starts once its head is read
   * and the body keeps arriving into `body` while it runs. */
  int body_streaming;       /* more of the body is to come from the client */
  long long body_length;    /* its Content-Length, or -1: chunked */
  /* Trailer fields an HTTP/2 client sent after a streamed body (owned;
   * NULL: none, the usual case), set before the body's end is reported. */
  gw_headers_t *trailers;
  double start_ms;          /* CLOCK_MONOTONIC ms when the request head was complete */
} gw_request_in_t;

/* Routing and the running handler: set by request.c (location, running)
 * and by the location's handler (its state, its callbacks). */
typedef struct {
  /* kept by a reset: finish and abort end them (a log phase may still run
   * when its connection resets): */
  gw_req_state_t *state;    /* owned by its handler: released at finish/abort; or NULL */
  int running;              /* between start and finish */
  /* fresh for each request: */
  int reroutes;             /* times a rewrite changed the target and it was routed again */
  int target_changed;       /* gw_request_set_target() since routing */
  const gw_location_t *location;
  /* Set by the consumer of a streamed request body: `in.body` grew, or the
   * body ended (in.body_streaming 0). */
  void (*on_body_more)(gw_request_t *req);
  void *body_arg;
  /* Set by a streaming producer: called when the client's output drained
   * below the low water mark after gw_request_stream_data() returned 1. */
  void (*on_drain)(gw_request_t *req);
  void *drain_arg;
} gw_request_handler_t;

/* What proxy_pass did, for the access log (status 0: none). */
typedef struct {
  int status;
  int reused;               /* the upstream connection came from the pool */
  double ms;
  char addr[320];           /* last: a reset zeroes the fields before it and empties it */
} gw_request_upstream_t;

/* The response: set by the handler (or an error page), sent by request.c
 * through the stage and the protocol. */
typedef struct {
  /* kept by a reset, emptied: */
  gw_headers_t headers;     /* owned, validated when set */
  struct evbuffer *body;    /* owned */
  /* fresh for each request: */
  int status;               /* 0: not set yet */
  int default_status;       /* the status when a script handler sets none and writes
                               nothing (ngx_mruby: a failed sub-request's); 0: 200 */
  size_t headers_kept;      /* its first fields were set before the content (a phase, the
                               handler before proxy_pass): a head that replaces the
                               response keeps them (gw_request_head_replace) */
  const char *inline_body;  /* when set, the body instead of body: borrowed
                               from a handler's String result until proto->send returns */
  size_t inline_len;
  int has_output;           /* a script wrote output */
  int text_plain;           /* send Content-Type: text/plain; charset=utf-8 */
  long long head_length;    /* HEAD: Content-Length to announce (an upstream's); -1: the body's */
  int streaming;            /* its head is sent; the body follows in pieces */
  /* The response stage its location has (gw_location_t.stage; see
   * gw_stage_t), and its state for a streamed body it took (owned by the
   * stage, freed by stage->free), or NULL. */
  const struct gw_stage_s *stage;
  void *stage_state;
} gw_request_resp_t;

/* The location's header and body filters between handler and protocol
 * (request.c, "output filters"): every response passes them once. Owned
 * by request.c. */
typedef struct {
  int applied;              /* they ran (or run) on this response: not again */
  int collect;              /* a streamed body is collected whole for the body filter (2: too large) */
  int hold;                 /* the header filter runs on a streamed head: the body waits */
  long long length;         /* ... the length announced meanwhile */
  int ended;                /* ... the producer ended meanwhile: 1 complete, 2 cut short, 3 with trailers */
  gw_headers_t *trailers;   /* ... its trailer fields (owned), or NULL */
  int fd;                   /* ... or sent this file range (owned; -1: none) */
  long long off, len;
} gw_request_filter_t;

/* The response cache (gw_cache_hooks_t): set by its lookup (hooks, state:
 * owned by cache.c, freed by hooks->free; status) and, before it, by a
 * location's key:/bypass: lambdas through the Ruby bridge (key, bypass). */
typedef struct {
  char *key;                /* owned: a key: lambda's result, or NULL: the default key */
  size_t key_len;
  int bypass;               /* a bypass: lambda said so */
  const struct gw_cache_hooks_s *hooks;
  void *state;              /* cache.c's, or NULL */
  const char *status;       /* "HIT", "MISS"... (static) for X-Cache-Status and
                               $cache_status; NULL: not cached here */
} gw_request_cache_t;

/* Trace mode (--trace) and the timeline: set by request.c when the request
 * starts. */
typedef struct {
  unsigned long id;
  double start_ms;
  struct evbuffer *out;     /* recording its events (gw_trace_record): borrowed, or NULL */
  double t0;                /* ... since then (ms) */
  char waiting_for[96];     /* what the parked fiber waits for (last: as upstream.addr) */
} gw_request_trace_t;

struct gw_request_s {
  /* -- fixed by gw_request_init for the struct's life -- */
  gw_context_t *ctx;        /* the worker's loop, VM, pool... */
  const gw_server_t *server;
  const gw_protocol_t *proto; /* how the response leaves (http1_server.c, http2_server.c...) */
  void *proto_ctx;          /* ... and its own state (the connection, the sub-request) */
  gw_request_t *parent;     /* sub-request: who waits for it; else NULL */
  int depth;                /* sub-request nesting: 0 for a client request */
  gw_pending_t pending;     /* list head of what this request waits for */

  gw_request_client_t client;
  gw_request_in_t in;
  gw_request_handler_t handler;
  gw_request_upstream_t upstream;
  gw_request_resp_t resp;
  gw_request_filter_t filter;
  gw_request_cache_t cache;
  gw_request_trace_t trace;
};

void gw_request_init(gw_request_t *req, gw_context_t *ctx, const gw_server_t *server,
                     const gw_protocol_t *proto, void *proto_ctx);
/* Resets per-request state, keeping buffers for the next request: one step
 * per group (see the groups above); the client group stays. */
void gw_request_reset(gw_request_t *req);
/* Frees everything the request owns (not the struct itself). */
void gw_request_dispose(gw_request_t *req);
/* Ends the request (as gw_request_dispose) and makes it a fresh
 * gw_request_init one of the same context, server and protocol, keeping the
 * storage of its header lists, bodies and target (HTTP/2's spare streams). */
void gw_request_recycle(gw_request_t *req);

/* Routes the request (unless it was routed when its head was read) and
 * hands it to its location's handler; 404 when no location matches.
 * proto->send is called when the response is complete, possibly before this
 * returns. */
void gw_request_start(gw_request_t *req);

/* Completes the response with whatever status/headers/body are set, after
 * the location's header and body filters (nginx's output filters: every
 * response a location produces passes them once, error pages too; a filter
 * that raises turns it into an unfiltered 500). */
void gw_request_finish(gw_request_t *req);

/* Logs (info) why req is answered 400: its path is routed elsewhere once
 * decoded and normalised, or does not decode (gw_router_refused). */
void gw_request_log_refused(const gw_request_t *req);


/* Called by the protocol once the response was queued (client requests
 * only, before the request is reset): runs the location's log phase. */
void gw_request_logged(gw_request_t *req);

/* Replaces the request-target (rewrite: req.uri = "/x"); a request whose
 * rewrite phase changed it is routed again. Returns 0, or -1 when out of
 * memory. */
int gw_request_set_target(gw_request_t *req, const char *target, size_t len);

/* The response's head is about to be replaced (an upstream's, a file's, an
 * error page): the fields set before the content handler produced it stay,
 * as nginx keeps headers_out (both appear), except Content-Type, which the
 * new head gives; the others go. gw_request_head_keep marks what is there
 * now as set before (the content starts, a handler hands over). */
void gw_request_head_replace(gw_request_t *req);
static inline void gw_request_head_keep(gw_request_t *req)
{
  req->resp.headers_kept = req->resp.headers.count;
}

/* Sets a complete response in one go (error pages, 404, 502...); the
 * fields set before the content stay (gw_request_head_replace). */
void gw_request_simple_response(gw_request_t *req, int status, const char *body);

/* The client went away (or the worker stops): cancels every pending
 * operation; no fiber is resumed afterwards; proto->send is not called. */
void gw_request_abort(gw_request_t *req);

/* Streaming a response instead of finishing it whole, where the protocol
 * can (gw_request_can_stream()): see gw_protocol_t. end finishes the
 * request, complete or cut short. The filters apply here too: with a body
 * filter the body is collected and sent whole once it ended (a file range
 * read into it); while a header filter runs, stream_data keeps the pieces
 * and returns 1 (pause until req->handler.on_drain). */
int gw_request_can_stream(const gw_request_t *req);
void gw_request_stream_begin(gw_request_t *req, long long content_length);
int gw_request_stream_data(gw_request_t *req, const char *data, size_t len);
void gw_request_stream_end(gw_request_t *req, int complete);
/* Ends it complete, with trailer fields (see gw_protocol_t.stream_trailers). */
void gw_request_stream_end_trailers(gw_request_t *req, const gw_headers_t *trailers);
/* Appends len bytes of fd from off to req->resp.body (pread, 64 KiB at a
 * time): a file range read into a body (a body filter's, a multi-range
 * answer's). 0, or -1 if the file came up short or memory ran out. */
int gw_request_body_add_file(gw_request_t *req, int fd, long long off, long long len);
/* 1 when the protocol can send a file range itself (proto->stream_file);
 * after gw_request_stream_begin(): never for a body being compressed, which
 * must be read. */
int gw_request_can_stream_file(const gw_request_t *req);
/* After gw_request_stream_begin(): the rest of the body is len bytes of fd
 * from offset, then the request ends (see gw_protocol_t.stream_file; fd is
 * the protocol's from now on). */
void gw_request_stream_file(gw_request_t *req, int fd, long long offset, long long len);

/* Upgrades (a WebSocket): see gw_protocol_t.upgrade. */
int gw_request_can_upgrade(const gw_request_t *req);
int gw_request_upgrade(gw_request_t *req, struct evbuffer *to_client, struct evbuffer *from_client, gw_byte_end_t *end);

/* A streamed request body: the consumer took bytes out of req->in.body, so the
 * connection may read more (back-pressure). */
void gw_request_body_taken(gw_request_t *req);

void gw_request_pending_add(gw_request_t *req, gw_pending_t *p, void (*cancel)(gw_pending_t *));
void gw_request_pending_remove(gw_pending_t *p);

/* Response helpers used by the Ruby bridge. Return 0, or -1 for a field that
 * may not be sent (CR/LF/NUL, bad name). */
int gw_request_set_header(gw_request_t *req, const char *name, size_t nlen, const char *value, size_t vlen);

/* Sets path_len: target[0, path_len) is the path, before any '?'. */
void gw_request_split_target(gw_request_t *req);

/* 1 when the response status never has a body (1xx, 204, 304). */
static inline int gw_request_bodyless(const gw_request_t *r)
{
  return gw_http_bodyless(r->resp.status ? r->resp.status : 200);
}

/* "HTTP/1.0", "HTTP/1.1" or "HTTP/2.0" (8 bytes each). */
static inline const char *gw_request_protocol(const gw_request_t *r)
{
  return r->in.http_major == 2 ? "HTTP/2.0" : r->in.http_minor ? "HTTP/1.1" : "HTTP/1.0";
}

/* Path and query views. */
static inline size_t gw_request_query_len(const gw_request_t *r)
{
  return r->in.target_len > r->in.path_len ? r->in.target_len - r->in.path_len - 1 : 0;
}

#endif
