/* httpclient.h - the one way out: an HTTP exchange with an upstream (h2o's
 * h2o_httpclient_t is the model).
 *
 * A caller (proxy_pass, grpc_pass, a WebSocket handshake, a URL sub-request,
 * an active health check) describes the request once and asks for an
 * exchange either to one place (a URL: gw_httpclient_url fills it in) or to
 * an upstream group, starting at the server the caller's balancer picked.
 * The client then, per attempt:
 *   - resolves a host name once (resolver.c; IP literals and unix sockets
 *     skip that),
 *   - picks the protocol from the URL's scheme or the group's servers:
 *     HTTP/1.1 (http://, https://: http1_client.c) or HTTP/2 (h2c://, h2:// with
 *     TLS: http2_client.c),
 *   - takes a pooled connection (the protocol's pool, keyed by address, TLS
 *     settings and server name, and the PROXY protocol header),
 *   - streams both ways with back-pressure (pause/resume, body_more,
 *     on_body_sent),
 *   - and, for a group, retries by error kind on the group's next live
 *     server: a connect failure (refused, timed out, TLS, host not found:
 *     nothing was sent), or a reset / premature close before any response
 *     head on an idempotent request whose body is not streamed. The
 *     balancer's bookkeeping (active requests, passive health) is done here.
 * The protocol halves own their connections; this file owns the choice and
 * the retries, and nothing protocol-specific. */
#ifndef GW_HTTPCLIENT_H
#define GW_HTTPCLIENT_H

#include <stdint.h>

#include "balancer.h"
#include "context.h"
#include "error.h"
#include "headers.h"
#include "http1_client.h"
#include "url.h"

typedef struct gw_httpclient_s gw_httpclient_t;

typedef struct {
  /* Where (host/port/addr/unix_path/tls, unused with a group), what
   * (method, target, headers, body or body_source), timeouts and the
   * streaming callbacks, as for gw_client_request() (http1_client.h). Without a
   * group the client copies what it needs; with one, method, target,
   * headers and a whole body are borrowed until the done callback (a retry
   * sends them again). */
  gw_client_params_t http;
  int h2;                 /* speak HTTP/2: h2c, or h2 when http.tls (from the URL's scheme) */
  int deadline_ms;        /* HTTP/2: > 0, the whole exchange fails with GW_ERR_TIMEOUT after this */
  /* Response trailer fields (HTTP/2), just before the done callback of a
   * complete response. May be NULL. */
  void (*on_trailers)(const gw_headers_t *trailers, void *arg);
  /* An upstream group instead of http's address (walk.group NULL: none):
   * the walk started at the server the caller picked
   * (gw_balancer_walk_first). The servers' protocol is the group's (h2c);
   * https servers (or every one with tls_all) use group_tls. on_server,
   * when set, is told of each server before the exchange is sent to it: why
   * GW_OK for the first, else the error of the one before (the caller logs,
   * names the server). */
  gw_balancer_walk_t walk;
  struct gw_tls_client_s *group_tls;
  int tls_all;
  void (*on_server)(const gw_upstream_server_t *s, gw_err_t why, void *arg);
} gw_httpclient_params_t;

/* Fills http's address fields, TLS (tls: the settings for https:// and
 * h2://, else unused) and h2 from a parsed URL (which must outlive the
 * start call). */
void gw_httpclient_url(gw_httpclient_params_t *p, const gw_url_t *u, struct gw_tls_client_s *tls);

/* Starts an exchange on ctx's loop with its pools and resolver. The done
 * callback comes exactly once unless cancelled first, never from inside
 * this function (http1_client.h's gw_client_done_cb: a resolve failure gives
 * the resolver's error, the host name logged). NULL when out of memory, or
 * when a group's server could not even be tried. */
gw_httpclient_t *gw_httpclient_start(gw_context_t *ctx, const gw_httpclient_params_t *p, gw_client_done_cb cb,
                                     void *arg);

/* Back-pressure for a streamed response: no more on_body until resume. */
void gw_httpclient_pause(gw_httpclient_t *x);
void gw_httpclient_resume(gw_httpclient_t *x);

/* A streamed request body grew, or (complete) ended. */
void gw_httpclient_body_more(gw_httpclient_t *x, int complete);
/* Trailer fields to send after the streamed or whole request body
 * (HTTP/2; HTTP/1.1 sends none), borrowed until done; before the body ends. */
void gw_httpclient_body_trailers(gw_httpclient_t *x, const gw_headers_t *trailers);

/* Inside on_head of a 101 to an upgrade request (HTTP/1.1): the socket, or
 * -1, as gw_client_detach(); the server counts as a success. Cancel the
 * exchange afterwards (from inside on_head too). */
int gw_httpclient_detach(gw_httpclient_t *x, struct evbuffer *rest, struct gw_tls_client_conn_s **tls);

/* Abandons it: no callback afterwards. reject: the server's answer was
 * unusable (the group's passive health counts a failure). */
void gw_httpclient_cancel(gw_httpclient_t *x);
void gw_httpclient_reject(gw_httpclient_t *x);

#endif
