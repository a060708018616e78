/* tls_client.h - TLS on the client side (OpenSSL 3) for HTTPS upstreams, as
 * non-blocking glue under the upstream client's own socket reads and writes
 * (the same approach as tls_server.c for the server side: the SSL reads and writes
 * the socket itself, no BIO pair, no bufferevent).
 *
 * A gw_tls_client_t is one set of client settings (verification, CA bundle,
 * client certificate, server name), built when the config is loaded (the
 * master, inherited by the workers at fork), plus the sessions kept for
 * resumption: the last one per upstream server, each worker its own (the
 * memory is the worker's after fork). A gw_tls_client_conn_t is one
 * connection's TLS state.
 *
 * Reads and writes mirror recv(2)/send(2): > 0 bytes, 0 for the end (read),
 * or -1 with errno EAGAIN (wait for the socket) or another errno (lost). No
 * OpenSSL type shows here. */
#ifndef GW_TLS_CLIENT_H
#define GW_TLS_CLIENT_H

#include <stddef.h>
#include <sys/types.h>

#include "byte_end.h"

typedef struct gw_tls_client_s gw_tls_client_t;
typedef struct gw_tls_client_conn_s gw_tls_client_conn_t;

typedef struct {
  int verify;              /* check the chain (and the name); 0: accept any certificate */
  const char *ca;          /* PEM bundle (absolute path); NULL: the system's CAs */
  const char *cert, *key;  /* a client certificate and its key (mTLS), or NULL */
  const char *server_name; /* sent as SNI and verified instead of the URL's host; NULL */
} gw_tls_client_config_t;

/* Builds the context (TLS 1.2/1.3, ALPN http/1.1). NULL with err set
 * ("tls_ca ca.pem: no such file") on failure. */
gw_tls_client_t *gw_tls_client_new(const gw_tls_client_config_t *cfg, char *err, size_t errlen);
/* Frees it and the sessions it keeps. No connection may use it any more. */
void gw_tls_client_free(gw_tls_client_t *t);
/* The configured server name, or NULL (then the URL's host is used). */
const char *gw_tls_client_server_name(const gw_tls_client_t *t);

/* A client TLS state on a connected socket. host: the name sent as SNI (not
 * for an IP literal) and verified against the certificate (an IP literal is
 * verified as an IP address); session_key names the upstream server for
 * resumption ("name@address"), its last session is offered. Both copied.
 * NULL when out of memory. */
gw_tls_client_conn_t *gw_tls_client_conn_new(gw_tls_client_t *t, int fd, const char *host, const char *session_key);
/* Sends close_notify (if established and the socket is still ours; never
 * blocks) and frees. */
void gw_tls_client_conn_free(gw_tls_client_conn_t *c);
/* Sends close_notify once (a half-close; never blocks). */
void gw_tls_client_shutdown(gw_tls_client_conn_t *c);
/* The socket was closed or taken: free without writing to it. */
void gw_tls_client_conn_forget_fd(gw_tls_client_conn_t *c);

enum { GW_TLS_DONE = 0, GW_TLS_WANT_READ = 1, GW_TLS_WANT_WRITE = 2, GW_TLS_FAILED = -1 };
/* Drives the handshake: GW_TLS_DONE, a want, or GW_TLS_FAILED with the
 * reason in reason ("certificate verify failed: self-signed certificate"). */
int gw_tls_client_handshake(gw_tls_client_conn_t *c, char *reason, size_t len);

ssize_t gw_tls_client_read(gw_tls_client_conn_t *c, void *buf, size_t n);
ssize_t gw_tls_client_write(gw_tls_client_conn_t *c, const void *buf, size_t n);
/* 1 when a read would return something without the socket becoming
 * readable (decrypted bytes inside OpenSSL, or an end noted after data). */
int gw_tls_client_pending(const gw_tls_client_conn_t *c);
/* An idle connection's socket is readable: takes in what TLS itself sent
 * (a session ticket, a key update) and says whether the connection is still
 * good (1), or was closed, failed or sent application data (0). */
int gw_tls_client_idle_ok(gw_tls_client_conn_t *c);
/* The handshake resumed a session. */
int gw_tls_client_resumed(const gw_tls_client_conn_t *c);

/* A connection's TLS as a byte end's layer (byte_end.h; ioc: the
 * gw_tls_client_conn_t): a wss:// upstream's side of a tunnel. */
extern const gw_io_t gw_tls_client_io;
/* ALPN: offer only "h2" on this connection (instead of the context's
 * http/1.1), before the handshake. 0, or -1 when out of memory. */
int gw_tls_client_conn_offer_h2(gw_tls_client_conn_t *c);
/* After the handshake: the protocol the server selected into buf ("h2",
 * "http/1.1"), or "" when it selected none. */
void gw_tls_client_alpn(const gw_tls_client_conn_t *c, char *buf, size_t len);

#endif
