/* http2_client.h - the non-blocking HTTP/2 client (cleartext "h2c" with prior
 * knowledge, or over TLS "h2" by ALPN), for proxy_pass to h2c:// and h2://
 * upstreams and gRPC (grpc_pass, grpcs://).
 *
 * nghttp2 does the frames, HPACK and flow control (a client session per
 * connection). Per worker, a gw_h2_client_t keeps a few connections per
 * upstream address, each carrying many concurrent streams: a call goes on
 * the first live connection with room under the peer's
 * SETTINGS_MAX_CONCURRENT_STREAMS, else another connection is opened. A
 * connection that got GOAWAY takes no new streams; streams the peer did not
 * process (REFUSED_STREAM, above the GOAWAY's last stream id) are retried on
 * another connection when their request body can be sent again. Idle
 * connections close after idle_timeout_ms; busy ones are PINGed, and one
 * that leaves a PING unanswered for a whole interval fails its streams.
 *
 * The interface is http1_client.h's (gw_client_params_t, the done, head and
 * body callbacks, pause/resume, a streamed request body), plus response
 * trailers. Back-pressure: a paused call's DATA is not given back to the
 * upstream's flow-control window (nghttp2 manual window updates) until it
 * resumes, so a slow client of one stream holds at most one stream window
 * and does not stall the others on the same connection.
 *
 * "h2://" upstreams (params.http.tls set): the connection's I/O goes through
 * tls_client.c, offering ALPN "h2" only; a server that selects anything else
 * fails the connection (GW_ERR_TLS, logged), as a failed handshake or
 * verification does. The TLS settings and the server name are part of the
 * connection's pool key, and sessions are resumed per "h2 name@address". */
#ifndef GW_H2_CLIENT_H
#define GW_H2_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "headers.h"
#include "http1_client.h"

typedef struct gw_h2_client_s gw_h2_client_t;
typedef struct gw_h2_call_s gw_h2_call_t;

/* Per worker. idle_timeout_ms (> 0, else 60000): a connection without
 * streams this long closes; also the PING interval of a busy one. */
gw_h2_client_t *gw_h2_client_new(struct event_base *base, int idle_timeout_ms);
/* Closes every connection. Calls in flight must have been cancelled first. */
void gw_h2_client_free(gw_h2_client_t *cl);

typedef struct {
  /* As for gw_client_request() (http1_client.h): address (an IP literal or a
   * resolved one: the caller resolves, httpclient.c), method, target, headers (the Host field becomes
   * :authority; hop-by-hop fields are dropped; "te: trailers" is sent),
   * body or body_source, connect_timeout_ms, timeout_ms (the longest wait
   * for the next frame of the stream), on_head/on_body (streaming; else the
   * body is collected, up to max_response_body), tls (h2://; the handshake
   * counts against connect_timeout_ms). upgrade is not supported. */
  gw_client_params_t http;
  int deadline_ms;        /* > 0: the whole call fails with GW_ERR_TIMEOUT after this (gRPC's grpc-timeout) */
  /* Response trailer fields, just before the done callback of a complete
   * response (streaming or not). May be NULL. */
  void (*on_trailers)(const gw_headers_t *trailers, void *arg);
} gw_h2_params_t;

/* Starts a call; everything in params is copied. The done callback comes
 * exactly once unless cancelled, never from inside this function. NULL only
 * when out of memory. */
gw_h2_call_t *gw_h2_call_start(gw_h2_client_t *cl, const gw_h2_params_t *params,
                               gw_client_done_cb cb, void *arg);
/* No callback afterwards; the stream is reset, memory freed (later when
 * called from inside the call's own on_head/on_body). */
void gw_h2_call_cancel(gw_h2_call_t *call);
void gw_h2_call_pause(gw_h2_call_t *call);
void gw_h2_call_resume(gw_h2_call_t *call);
/* A streamed request body grew, or (complete) ended. */
void gw_h2_call_body_more(gw_h2_call_t *call, int complete);

/* Trailer fields to send after the streamed request body (copied), given
 * before gw_h2_call_body_more(call, 1). */
void gw_h2_call_body_trailers(gw_h2_call_t *call, const gw_headers_t *trailers);

/* Counters for tests and status. */
typedef struct {
  unsigned long connections; /* opened */
  unsigned long streams;     /* started */
  unsigned long retried;     /* refused by the peer (GOAWAY, REFUSED_STREAM) and sent again */
  unsigned long open;        /* connections open now */
  unsigned long tls_handshakes; /* h2:// handshakes completed (ALPN h2) */
  unsigned long tls_resumed;    /* ... of which resumed a session */
} gw_h2_client_stats_t;
void gw_h2_client_stats(const gw_h2_client_t *cl, gw_h2_client_stats_t *out);

#endif
