/* upstream.h - the non-blocking HTTP/1.1 client and its keep-alive pool.
 *
 * Knows nothing of server-side requests or mruby: it sends one request to
 * host:port (or a unix socket) on a worker's event_base and calls back once
 * with the whole response (or an error). Idle keep-alive connections are kept
 * per (host, port) and reused. Used by proxy_pass and by URL sub-requests. */
#ifndef GW_UPSTREAM_H
#define GW_UPSTREAM_H

#include <stddef.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "headers.h"

/* Idle keep-alive connections kept per upstream server unless configured:
 * above a typical client concurrency, so that 100 clients do not reopen
 * connections every round (nginx's `keepalive 32` does, at -c100). */
#define GW_DEFAULT_KEEPALIVE 128

typedef struct gw_upstream_pool_s gw_upstream_pool_t;
typedef struct gw_client_req_s gw_client_req_t;

/* One pool per worker. keepalive_max: idle connections kept per (host, port);
 * idle_timeout_ms: an idle pooled connection is closed after this long. */
gw_upstream_pool_t *gw_upstream_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms);
/* Closes every idle connection and frees the pool. Requests still in flight
 * must have been cancelled or completed first. */
void gw_upstream_pool_free(gw_upstream_pool_t *pool);

typedef struct {
  const char *host;       /* IPv4/IPv6 literal (DNS is the caller's job), or NULL with unix_path */
  int port;
  const char *unix_path;  /* non-NULL: connect to this unix socket instead of host:port */
  const char *method;     /* "GET", ... */
  const char *target;     /* request-target, e.g. "/mruby?x=1" */
  const gw_headers_t *headers; /* sent as given (the caller sets Host; the client adds
                                  Content-Length when body_len > 0 or the method has a body) */
  const char *body;       /* may be NULL */
  size_t body_len;
  int connect_timeout_ms; /* 0 -> 5000 */
  int timeout_ms;         /* whole exchange after connect; 0 -> 60000 */
  size_t max_response_body; /* larger responses fail with err "upstream response too large"; 0 -> 64 MiB */
} gw_client_params_t;

typedef struct {
  int status;             /* e.g. 200 */
  int http_minor;         /* 0 for HTTP/1.0 */
  int reused;             /* sent on a pooled keep-alive connection */
  gw_headers_t headers;   /* owned by the client request; valid during the callback */
  struct evbuffer *body;  /* owned by the client request; the callback may move its
                             contents out (evbuffer_remove_buffer) */
} gw_client_response_t;

/* Called exactly once per gw_client_request() unless cancelled first.
 * err == NULL: res is the complete response.
 * err != NULL: a static message ("connection refused", "upstream timed out", ...),
 *   timed_out is 1 for timeouts (the caller answers 504) and 0 otherwise (502).
 * The client request is freed right after the callback returns; do not call
 * gw_client_cancel() on it from inside the callback. */
typedef void (*gw_client_done_cb)(const char *err, int timed_out, gw_client_response_t *res, void *arg);

/* Starts a request; everything in params is copied, so the caller's strings
 * may be freed after this returns. Returns NULL only when out of memory. The
 * callback is never called from inside this function (it is deferred to the
 * loop even for immediate failures). */
gw_client_req_t *gw_client_request(gw_upstream_pool_t *pool, const gw_client_params_t *params,
                                   gw_client_done_cb cb, void *arg);

/* Abandons a request in flight: no callback will be made, its connection is
 * closed (never returned to the pool half-used), all memory is freed. */
void gw_client_cancel(gw_client_req_t *req);

/* Pool counters for scripts and status. */
typedef struct {
  unsigned long opened;   /* connections opened */
  unsigned long reused;   /* requests sent on a pooled connection */
  unsigned long idle;     /* idle connections right now */
  unsigned long retried;  /* requests retried once after a stale pooled connection */
} gw_upstream_stats_t;
void gw_upstream_pool_stats(const gw_upstream_pool_t *pool, gw_upstream_stats_t *out);

#endif
