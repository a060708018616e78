/* tls_server.h - TLS on the server side (OpenSSL 3), as non-blocking glue under a
 * connection's own read(2)/write(2): a server's certificates and settings
 * (gw_tls_ctx_t, built by the master when the config is loaded, inherited by
 * the workers at fork) and one connection's TLS state (gw_tls_conn_t,
 * allocated at accept apart from the connection, so plain connections pay
 * nothing for it).
 *
 * The reads and writes mirror read(2) and evbuffer_write(): >= 0 bytes, or
 * -1 with errno EAGAIN (wait for the socket) or another errno (the
 * connection is lost). The handshake runs inside the first reads. No
 * OpenSSL type shows here: the gems include this for req.tls_* and for
 * Nginx::SSL (gw_tls_hello_*, during an on_handshake hook). */
#ifndef GW_TLS_H
#define GW_TLS_H

#include <stddef.h>
#include <sys/types.h>

#include "byte_end.h"

struct evbuffer;

typedef struct gw_tls_ctx_s gw_tls_ctx_t;
typedef struct gw_tls_conn_s gw_tls_conn_t;

/* What scripts and logs see of an established TLS connection; the strings
 * are OpenSSL's (static, or owned by the connection's SSL). */
typedef struct gw_tls_info_s {
  const char *protocol;    /* "TLSv1.3" */
  const char *cipher;      /* "TLS_AES_128_GCM_SHA256" */
  const char *server_name; /* SNI, or NULL */
  int hook_data;           /* what the on_handshake hook kept for this connection
                              (gw_tls_hello_keep), or 0 */
} gw_tls_info_t;

typedef struct {
  const char *server_name; /* NULL: the default certificate (the first) */
  const char *cert, *key;  /* PEM files (absolute paths) */
  const char *ocsp;        /* a DER OCSP response for cert, stapled when asked; or NULL */
} gw_tls_cert_t;

/* One ClientHello being answered, as the on_handshake hook sees it: it may
 * read the SNI name and choose the certificate and key (ngx_mruby's
 * Nginx::SSL). Valid only during the hook's call. */
typedef struct gw_tls_hello_s gw_tls_hello_t;

/* The hook, run synchronously in the worker from OpenSSL's servername
 * callback (after SNI chose a configured certificate): 0 to go on, -1 with
 * err set to fail this handshake (logged with the client's address). */
typedef int (*gw_tls_hook_fn)(void *arg, gw_tls_hello_t *hello, char *err, size_t errlen);

/* The SNI name the client sent, or NULL. */
const char *gw_tls_hello_server_name(const gw_tls_hello_t *h);
/* The local port the client connected to (0: unknown). */
int gw_tls_hello_local_port(const gw_tls_hello_t *h);
/* The protocol version being negotiated ("TLSv1.2", "TLSv1.3"). */
const char *gw_tls_hello_version(const gw_tls_hello_t *h);
/* The client's address as text ("-": unknown). */
const char *gw_tls_hello_peer(const gw_tls_hello_t *h);
/* A non-zero value the hook keeps for this connection (its requests see it
 * as gw_tls_info_t.hook_data), and the one kept so far (0: none). When the
 * connection ends, the config's on_handshake_drop(arg, data) lets it go. */
void gw_tls_hello_keep(gw_tls_hello_t *h, int data);
int gw_tls_hello_kept(const gw_tls_hello_t *h);
/* The certificate chain (cert first) or the private key for this handshake,
 * from a PEM file (is_data 0: loaded once per path by each worker and kept
 * until the config is reloaded) or PEM text (is_data 1: parsed each time).
 * Both must be given; the configured certificate is then not offered. 0, or
 * -1 with err set ("certificate /x.pem: no such file"). */
int gw_tls_hello_set_cert(gw_tls_hello_t *h, const char *s, size_t len, int is_data, char *err, size_t errlen);
int gw_tls_hello_set_key(gw_tls_hello_t *h, const char *s, size_t len, int is_data, char *err, size_t errlen);

typedef struct {
  const gw_tls_cert_t *certs; /* the first is the default */
  size_t ncerts;
  int min_version, max_version; /* 12 or 13 (TLS 1.2 / 1.3) */
  const char *ciphers;     /* TLS 1.2 cipher list, NULL: a modern default */
  const char *ciphersuites;/* TLS 1.3 suites, NULL: OpenSSL's */
  int alpn_h2;             /* offer h2 in ALPN (else http/1.1 only) */
  gw_tls_hook_fn on_handshake; /* or NULL */
  void *on_handshake_arg;  /* borrowed: outlives the context */
  void (*on_handshake_drop)(void *arg, int data); /* a connection with hook_data ends; or NULL */
} gw_tls_config_t;

/* Loads the certificates and keys and builds the contexts; a fresh ticket
 * key is made here (so a server's workers share it, and a reload rotates
 * it). NULL with err set ("cert site.pem: no such file") on failure. */
gw_tls_ctx_t *gw_tls_ctx_new(const gw_tls_config_t *cfg, char *err, size_t errlen);
void gw_tls_ctx_free(gw_tls_ctx_t *t);

/* A server-side TLS state on an accepted socket; peer is the client's
 * address as text for the logs (borrowed: gw_tls_conn_set_peer moves it). */
gw_tls_conn_t *gw_tls_conn_new(gw_tls_ctx_t *t, int fd, const char *peer);
void gw_tls_conn_set_peer(gw_tls_conn_t *c, const char *peer);
/* Sends close_notify (if established; never blocks) and frees. */
void gw_tls_conn_free(gw_tls_conn_t *c);

/* Handshake then application data, as read(2). A client that sends plain
 * HTTP is answered with a 400 and gets -1 (errno EPROTO); a failed handshake
 * is logged at info with OpenSSL's reason and gets -1 (EPROTO). */
ssize_t gw_tls_read(gw_tls_conn_t *c, void *buf, size_t n);
/* Writes from out (draining what was sent), as evbuffer_write(). */
int gw_tls_write(gw_tls_conn_t *c, struct evbuffer *out);
/* Decrypted bytes buffered inside OpenSSL (no socket event will say so). */
int gw_tls_pending(const gw_tls_conn_t *c);
/* close_notify before a half-close (lingering close). */
void gw_tls_shutdown(gw_tls_conn_t *c);

/* A connection's TLS as a byte end's layer (byte_end.h; ioc: the
 * gw_tls_conn_t): how a tunnel or a WebSocket reads and writes it. */
extern const gw_io_t gw_tls_io;

/* After the handshake: the connection's info; NULL before. */
const gw_tls_info_t *gw_tls_info(const gw_tls_conn_t *c);
/* ALPN chose h2. */
int gw_tls_alpn_h2(const gw_tls_conn_t *c);

#endif
