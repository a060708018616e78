/* http2_server.h - one HTTP/2 client connection (server side, nghttp2): each stream
 * is a request whose protocol side (request.h's gw_protocol_t) is the
 * stream. http1_server.c hands a connection over once it knows it speaks h2 (ALPN
 * "h2" over TLS, or the prior-knowledge preface on an `http2: true`
 * listener, or an HTTP/1.1 request's `Upgrade: h2c` there). */
#ifndef GW_H2_H
#define GW_H2_H

#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "tls_server.h"

typedef struct gw_h2_conn_s gw_h2_conn_t;

/* The client connection preface (RFC 9113 §3.4). */
#define GW_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define GW_H2_PREFACE_LEN 24

/* Takes over fd and tls (may be NULL; owned from now on) with the bytes
 * already read from it (the preface and maybe more). remote_addr is copied.
 * NULL when out of memory (the caller still owns and closes fd and tls). */
gw_h2_conn_t *gw_h2_conn_new(gw_context_t *ctx, int fd, gw_tls_conn_t *tls, const char *remote_addr, const char *balancer_addr,
                             const char *data, size_t len);

/* An HTTP/1.1 request upgraded to h2c (RFC 7540 §3.2) on fd (owned from now
 * on): settings is its HTTP2-Settings payload (decoded), req the request
 * (copied: it becomes stream 1, answered over HTTP/2), head the HTTP/1.1
 * server's 101 (moved out: it goes first), data the bytes read past it (the
 * client preface...). NULL when nghttp2 refuses the settings or out of
 * memory: nothing was sent, the caller still owns fd and head's bytes and
 * may serve the request as HTTP/1.1. */
struct gw_request_s;
struct evbuffer;
gw_h2_conn_t *gw_h2_conn_upgrade(gw_context_t *ctx, int fd, const char *remote_addr, const char *balancer_addr,
                                 const unsigned char *settings, size_t settings_len, const struct gw_request_s *req,
                                 struct evbuffer *head, const char *data, size_t len);

/* Worker stop: close now, or (graceful) send GOAWAY, let the open streams
 * finish, then close. */
void gw_h2_conn_shutdown(gw_h2_conn_t *h, int graceful);
/* The same for every HTTP/2 connection of this worker. */
void gw_h2_shutdown_all(int graceful);

/* This worker's open HTTP/2 connections and their open streams (the gauges). */
void gw_h2_count(uint32_t *conns, uint32_t *streams);

#endif
