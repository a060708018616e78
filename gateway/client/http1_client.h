/* http1_client.h - the non-blocking HTTP/1.1 client.
 *
 * Knows nothing of server-side requests or mruby: it sends one request to
 * host:port (or a unix socket) on a worker's event_base and calls back once
 * with the whole response (or an error kind, error.h), or, in streaming mode,
 * hands over the head and then the body piece by piece with back-pressure
 * (pause and resume). A request body may stream too, from an evbuffer the
 * caller fills (body_source). Connections come from, and go back to, the
 * keep-alive pool (pool.c: idle ones kept per address and reused); a
 * gw_pool_t is the per-worker client state around it.
 * Used by proxy_pass and by URL sub-requests. */
#ifndef GW_UPSTREAM_H
#define GW_UPSTREAM_H

#include <stddef.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "error.h"
#include "headers.h"

/* Idle keep-alive connections kept per upstream server unless configured:
 * above a typical client concurrency, so that 100 clients do not reopen
 * connections every round (nginx's `keepalive 32` does, at -c100). */
#define GW_DEFAULT_KEEPALIVE 128

typedef struct gw_pool_s gw_pool_t;
struct gw_tls_client_s;
struct gw_tls_client_conn_s;
typedef struct gw_client_req_s gw_client_req_t;

typedef struct {
  int status;             /* e.g. 200 */
  int http_minor;         /* 0 for HTTP/1.0 */
  int reused;             /* sent on a pooled keep-alive connection */
  gw_headers_t headers;   /* owned by the client request; valid during the callback
                             (streaming: from on_head until done returns) */
  struct evbuffer *body;  /* owned by the client request; the callback may move its
                             contents out (evbuffer_remove_buffer). Always empty in
                             streaming mode */
} gw_client_response_t;

/* Streaming mode (params.on_head set): the response body is not collected.
 * on_head(res, arg): once, when the status line and headers are complete
 *   (res->body is empty). For HEAD/204/304 the done callback follows.
 * on_body(data, len, arg): each piece of the de-chunked body as it is parsed
 *   (len > 0; data is only valid during the call). May be NULL: body dropped.
 * Then the done callback: err NULL = the body is complete; err set = the
 *   upstream failed before or in the middle of the body (err as usual).
 *   After on_head, an error means the response is truncated: abort the client
 *   side rather than complete it. max_response_body does not apply.
 * arg is the one given to gw_client_request(). Both may call gw_client_pause(),
 * gw_client_resume() and gw_client_cancel() on their own request (cancel:
 * no further callback at all, the connection is closed, memory is freed once
 * the callback has returned), and may start other requests. */
typedef void (*gw_client_head_cb)(gw_client_response_t *res, void *arg);
typedef void (*gw_client_body_cb)(const char *data, size_t len, void *arg);

/* One pool per worker. keepalive_max: idle connections kept per (host, port);
 * idle_timeout_ms: an idle pooled connection is closed after this long. */
gw_pool_t *gw_upstream_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms);
/* Closes every idle connection and frees the pool. Requests still in flight
 * must have been cancelled or completed first. */
void gw_upstream_pool_free(gw_pool_t *pool);

typedef struct {
  const char *host;       /* IPv4/IPv6 literal (DNS is the caller's job), or NULL with unix_path */
  int port;
  const struct sockaddr *addr; /* non-NULL: host:port already parsed (or resolved) into this
                                  address, which is used instead; host is then only named in logs */
  socklen_t addrlen;
  const char *unix_path;  /* non-NULL: connect to this unix socket instead of host:port */
  /* HTTPS: TLS with these settings (tls_client.h; they outlive the request),
   * for host as the server name (SNI and the certificate check) unless the
   * settings name a server_name themselves. NULL: plain HTTP. Connections
   * are pooled apart per settings and name. */
  struct gw_tls_client_s *tls;
  /* send_proxy_protocol: the PROXY protocol header each new connection
   * starts with (before TLS), copied; connections are pooled apart per
   * header. NULL: none. */
  const unsigned char *proxy_header;
  size_t proxy_header_len;
  const char *method;     /* "GET", ... */
  const char *target;     /* request-target, e.g. "/mruby?x=1" */
  const gw_headers_t *headers; /* sent as given (the caller sets Host; the client adds
                                  Content-Length when body_len > 0 or the method has a body) */
  const char *body;       /* may be NULL */
  size_t body_len;
  /* A streamed request body instead (body/body_len unused): read from
   * body_source, an evbuffer the caller owns and fills as the body arrives
   * (it must live until the done callback or gw_client_cancel), framed with
   * Content-Length: body_length when >= 0, else chunked. body_complete: all
   * of it is in body_source already; otherwise the caller reports more (and
   * the end) with gw_client_body_more(). on_body_sent(arg), when set, is
   * called from the loop after bytes were taken out of body_source, so the
   * caller may read more. A request whose body was partly taken is never
   * retried. */
  struct evbuffer *body_source;
  long long body_length;
  int body_complete;
  void (*on_body_sent)(void *arg);
  int connect_timeout_ms; /* 0 -> 5000 */
  int timeout_ms;         /* 0 -> 60000. Buffered: the whole exchange after connect.
                             Streaming: the longest wait for the next bytes (restarted
                             by every read); it does not run while paused. Sending a
                             streamed request body restarts it too */
  size_t max_response_body; /* buffered only: larger responses fail with GW_ERR_TOO_LARGE
                               "upstream response too large"; 0 -> 64 MiB */
  gw_client_head_cb on_head; /* non-NULL: streaming mode (see above) */
  gw_client_body_cb on_body;
  /* An upgrade (WebSocket) handshake, streaming mode only: sent on a fresh
   * connection (never a pooled one, never retried), and a 101 answer is
   * handed to on_head (any other status is a normal response), where the
   * caller takes the socket with gw_client_detach(). */
  int upgrade;
} gw_client_params_t;

/* Called exactly once per gw_client_request() unless cancelled first.
 * err.kind == GW_OK: res is the complete response.
 * Otherwise res is NULL and err says what failed (error.h): its kind decides
 *   (gw_err_is_connect_failure: nothing was sent, another server may be tried;
 *   gw_err_status: 504 for timeouts, else 502), err.msg is the static log
 *   text ("connection refused", "upstream timed out", ...).
 * The client request is freed right after the callback returns; do not call
 * gw_client_cancel() on it from inside the callback. */
typedef void (*gw_client_done_cb)(gw_err_t err, gw_client_response_t *res, void *arg);

/* Starts a request; everything in params is copied, so the caller's strings
 * may be freed after this returns. Returns NULL only when out of memory. The
 * callback is never called from inside this function (it is deferred to the
 * loop even for immediate failures). */
gw_client_req_t *gw_client_request(gw_pool_t *pool, const gw_client_params_t *params,
                                   gw_client_done_cb cb, void *arg);

/* Abandons a request in flight: no callback will be made, its connection is
 * closed (never returned to the pool half-used), all memory is freed (after
 * the callback returns when called from inside on_head or on_body). */
void gw_client_cancel(gw_client_req_t *req);

/* Back-pressure for streaming mode: pause stops reading from the upstream
 * (no more on_body, no read timeout) until resume; either may be called from
 * inside on_head/on_body or from anywhere else, repeatedly (no nesting count).
 * Bytes already read are kept and delivered after resume, from the loop (never
 * inside gw_client_resume). While paused the done callback can still come
 * for a response without a body (HEAD/204/304, when paused in its on_head),
 * or with an error if connecting or sending the request fails. Meant for
 * streaming mode; in buffered mode resume restarts the whole-exchange timer. */
void gw_client_pause(gw_client_req_t *req);
void gw_client_resume(gw_client_req_t *req);

/* Streamed request body: more bytes are in params.body_source, or (complete)
 * that was the last of them. May send right away; never calls back from
 * inside (a failure is reported from the loop). */
void gw_client_body_more(gw_client_req_t *req, int complete);

/* Only inside on_head of a 101 to an upgrade request: takes the connection's
 * socket out of the client (it is never pooled) and appends the bytes read
 * past the response head to `rest`. The request is then over: no further
 * callback, memory freed once on_head returns. *tls receives the
 * connection's TLS state (an https:// upstream; NULL when plain), owned by
 * the caller from now on; tls NULL refuses a TLS connection. Returns the
 * socket, or -1 (not a 101 upgrade, or out of memory: then it is as
 * gw_client_cancel). */
int gw_client_detach(gw_client_req_t *req, struct evbuffer *rest, struct gw_tls_client_conn_s **tls);

/* Pool counters for scripts and status. */
typedef struct {
  unsigned long opened;   /* connections opened */
  unsigned long reused;   /* requests sent on a pooled connection */
  unsigned long idle;     /* idle connections right now */
  unsigned long retried;  /* requests retried once after a stale pooled connection */
  unsigned long tls_handshakes; /* TLS handshakes completed (HTTPS upstreams) */
  unsigned long tls_resumed;    /* ... of which resumed a session */
} gw_upstream_stats_t;
void gw_upstream_pool_stats(const gw_pool_t *pool, gw_upstream_stats_t *out);

#endif
