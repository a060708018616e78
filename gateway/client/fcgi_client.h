/* fcgi_client.h - the non-blocking FastCGI client (responder role).
 *
 * Knows nothing of server-side requests: it sends one request (params
 * already encoded as name-value pairs by the caller, a body whole or
 * streamed) to an address (TCP or unix socket) on a worker's event_base,
 * hands back the CGI response head and then the body piece by piece with
 * back-pressure (pause/resume), logs FCGI_STDERR lines, and calls back once
 * at the end with an error kind (error.h). Connections are opened with
 * FCGI_KEEP_CONN and come from, and go back to, a keep-alive pool keyed by
 * address (pool.c); one is parked only after an FCGI_END_REQUEST that ended
 * exactly at the end of what was read, with all of the request sent. */
#ifndef GW_FCGI_CLIENT_H
#define GW_FCGI_CLIENT_H

#include <stddef.h>
#include <sys/socket.h>
#include <event2/buffer.h>

#include "error.h"
#include "headers.h"

typedef struct gw_pool_s gw_pool_t;
typedef struct gw_fcgi_req_s gw_fcgi_req_t;

typedef struct {
  int status;            /* from Status: (200 by default, 302 for a bare Location) */
  int reused;            /* sent on a pooled keep-alive connection */
  gw_headers_t headers;  /* owned by the client request; valid from on_head until done returns */
} gw_fcgi_response_t;

typedef struct {
  const struct sockaddr *addr; /* where to connect (AF_INET, AF_INET6, AF_UNIX) */
  socklen_t addrlen;
  const char *label;     /* for logs ("unix:/run/php.sock", "127.0.0.1:9000"); copied */
  const unsigned char *params; /* name-value pairs (gw_fcgi_put_pair), copied */
  size_t params_len;
  const char *body;      /* a whole request body (may be NULL), copied */
  size_t body_len;
  /* A streamed request body instead: body_source is the caller's evbuffer
   * (it must live until done or cancel), filled as the body arrives;
   * body_complete: all of it is there already, otherwise the caller reports
   * more with gw_fcgi_body_more(). on_body_sent(arg), when set, is called
   * from the loop after bytes were taken out of it. */
  struct evbuffer *body_source;
  int body_complete;
  void (*on_body_sent)(void *arg);
  int idempotent;        /* may be resent once when a pooled connection turns out dead */
  int connect_timeout_ms;/* 0 -> 5000 */
  int timeout_ms;        /* 0 -> 60000: the longest wait for the next bytes; not while paused */
  /* on_head: once, when the CGI head is complete. on_body: each piece of the
   * body (len > 0; data valid during the call). Both may pause, resume and
   * cancel the request. */
  void (*on_head)(gw_fcgi_response_t *res, void *arg);
  void (*on_body)(const char *data, size_t len, void *arg);
} gw_fcgi_params_t;

/* Called exactly once per request unless cancelled first, never from inside
 * gw_fcgi_request(). err GW_OK: the response ended (FCGI_END_REQUEST).
 * Otherwise: connect failures (nothing sent: another server may be tried),
 * GW_ERR_TIMEOUT, GW_ERR_CLOSED, GW_ERR_RESET, or GW_ERR_BAD_RESPONSE for
 * anything malformed. After on_head an error means the body is cut short.
 * The request is freed right after the callback returns. */
typedef void (*gw_fcgi_done_cb)(gw_err_t err, void *arg);

/* One per worker: keepalive_max idle connections kept per address. */
gw_pool_t *gw_fcgi_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms);
/* Frees it and its idle connections; requests must be over. NULL is fine. */
void gw_fcgi_pool_free(gw_pool_t *pool);

/* Starts a request (params copied). NULL only when out of memory. */
gw_fcgi_req_t *gw_fcgi_request(gw_pool_t *pool, const gw_fcgi_params_t *params, gw_fcgi_done_cb cb, void *arg);

/* Abandons it: no callback, its connection closed (never pooled half-used),
 * memory freed (after the callback returns when called from on_head/on_body). */
void gw_fcgi_cancel(gw_fcgi_req_t *r);

/* Back-pressure: stop reading the response until resume (resume delivers
 * what was read already from the loop, never inside the call). */
void gw_fcgi_pause(gw_fcgi_req_t *r);
void gw_fcgi_resume(gw_fcgi_req_t *r);

/* A streamed body grew, or (complete) ended. Never calls back from inside. */
void gw_fcgi_body_more(gw_fcgi_req_t *r, int complete);

#endif
