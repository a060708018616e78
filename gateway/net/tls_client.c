/* tls_client.c - client-side TLS glue over a non-blocking socket for HTTPS
 * upstreams (see tls_client.h).
 *
 * As in tls_server.c the SSL reads and writes the socket itself (SSL_set_fd).
 * Reads loop until the caller's room is full or the socket is empty; an end
 * or an error met after some bytes is kept and reported by the next read
 * (gw_tls_client_pending() says one is due, as no socket event would).
 *
 * Resumption: OpenSSL's client cache is off (it has no notion of "this
 * upstream server"); the new-session callback keeps the newest session per
 * session key in a small table of the gw_tls_client_t, and a new connection
 * to the same key offers it. TLS 1.3 sessions arrive as tickets after the
 * handshake, inside the first reads, which is where the callback runs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "addr.h"
#include "tls_client.h"
#include "tls_common.h"

/* Upstream servers remembered per settings; the oldest entry makes room. */
#define SESSION_SLOTS 64

typedef struct {
  char *key;             /* owned; NULL: free slot */
  SSL_SESSION *session;  /* one reference */
} session_slot_t;

struct gw_tls_client_s {
  SSL_CTX *ctx;
  char *server_name;     /* owned, or NULL */
  session_slot_t slots[SESSION_SLOTS];
  unsigned next_slot;    /* round robin replacement */
};

struct gw_tls_client_conn_s {
  SSL *ssl;
  gw_tls_client_t *t;
  char *session_key;     /* owned */
  int fd;
  unsigned char established, failed;
  unsigned char shut;    /* close_notify sent */
  unsigned char eof_due; /* close_notify/EOF met after data: the next read returns 0 */
  int err_due;           /* an errno met after data: the next read returns -1 with it */
};

static int conn_index = -1; /* SSL ex_data slot for the gw_tls_client_conn_t */

static session_slot_t *slot_of(gw_tls_client_t *t, const char *key)
{
  for (size_t i = 0; i < SESSION_SLOTS; i++)
    if (t->slots[i].key && strcmp(t->slots[i].key, key) == 0) return &t->slots[i];
  return NULL;
}

/* OpenSSL hands over a new session (a ticket): keep it as the key's newest. */
static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
  gw_tls_client_conn_t *c = SSL_get_ex_data(ssl, conn_index);
  if (c == NULL || c->session_key == NULL) return 0;
  gw_tls_client_t *t = c->t;
  session_slot_t *s = slot_of(t, c->session_key);
  if (s == NULL) {
    s = &t->slots[t->next_slot];
    t->next_slot = (t->next_slot + 1) % SESSION_SLOTS;
    char *key = strdup(c->session_key);
    if (key == NULL) return 0;
    free(s->key);
    if (s->session) SSL_SESSION_free(s->session);
    s->key = key;
    s->session = NULL;
  }
  if (s->session) SSL_SESSION_free(s->session);
  s->session = sess;
  return 1; /* the reference is ours */
}

static void forget_session(gw_tls_client_conn_t *c)
{
  session_slot_t *s = slot_of(c->t, c->session_key);
  if (s == NULL) return;
  SSL_SESSION_free(s->session);
  free(s->key);
  s->key = NULL;
  s->session = NULL;
}

static const unsigned char alpn_http11[] = "\x08http/1.1";

gw_tls_client_t *gw_tls_client_new(const gw_tls_client_config_t *cfg, char *err, size_t errlen)
{
  char reason[256];
  if (conn_index < 0) conn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
  gw_tls_client_t *t = calloc(1, sizeof(*t));
  if (t == NULL || (cfg->server_name && (t->server_name = strdup(cfg->server_name)) == NULL)) {
    free(t);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  SSL_CTX *ctx = t->ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) {
    gw_tls_error_reason(reason, sizeof(reason));
    snprintf(err, errlen, "cannot create a TLS context: %s", reason);
    goto fail;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  /* An EOF without close_notify reads as an end: the HTTP framing (length,
   * chunks) decides whether the response was complete, as for plain HTTP. */
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_alpn_protos(ctx, alpn_http11, sizeof(alpn_http11) - 1);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, on_new_session);
  SSL_CTX_set_verify(ctx, cfg->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
  if (cfg->ca) {
    if (SSL_CTX_load_verify_locations(ctx, cfg->ca, NULL) != 1) {
      gw_tls_error_reason(reason, sizeof(reason));
      snprintf(err, errlen, "tls_ca %s: %s", cfg->ca, reason);
      goto fail;
    }
  } else if (cfg->verify && SSL_CTX_set_default_verify_paths(ctx) != 1) {
    gw_tls_error_reason(reason, sizeof(reason));
    snprintf(err, errlen, "the system CA certificates: %s", reason);
    goto fail;
  }
  if (cfg->cert) {
    if (gw_tls_ctx_use_keypair(ctx, cfg->cert, cfg->key, "tls_cert", "tls_key", err, errlen) < 0) goto fail;
  }
  return t;
fail:
  ERR_clear_error();
  gw_tls_client_free(t);
  return NULL;
}

void gw_tls_client_free(gw_tls_client_t *t)
{
  if (t == NULL) return;
  for (size_t i = 0; i < SESSION_SLOTS; i++) {
    free(t->slots[i].key);
    if (t->slots[i].session) SSL_SESSION_free(t->slots[i].session);
  }
  SSL_CTX_free(t->ctx);
  free(t->server_name);
  free(t);
}

const char *gw_tls_client_server_name(const gw_tls_client_t *t) { return t->server_name; }

gw_tls_client_conn_t *gw_tls_client_conn_new(gw_tls_client_t *t, int fd, const char *host, const char *session_key)
{
  gw_tls_client_conn_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->t = t;
  c->fd = fd;
  c->session_key = strdup(session_key);
  c->ssl = SSL_new(t->ctx);
  if (c->session_key == NULL || c->ssl == NULL || SSL_set_fd(c->ssl, fd) != 1) goto fail;
  SSL_set_ex_data(c->ssl, conn_index, c);
  SSL_set_connect_state(c->ssl);
  if (gw_addr_is_ip(host)) {
    /* RFC 6066: no IP literal in SNI; the certificate must name the IP */
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host) != 1) goto fail;
  } else {
    if (SSL_set_tlsext_host_name(c->ssl, host) != 1 || SSL_set1_host(c->ssl, host) != 1) goto fail;
  }
  session_slot_t *s = slot_of(t, c->session_key);
  if (s && s->session) SSL_set_session(c->ssl, s->session); /* offered; a full handshake if refused */
  return c;
fail:
  ERR_clear_error();
  if (c->ssl) SSL_free(c->ssl);
  free(c->session_key);
  free(c);
  return NULL;
}

void gw_tls_client_conn_forget_fd(gw_tls_client_conn_t *c) { c->fd = -1; }

void gw_tls_client_shutdown(gw_tls_client_conn_t *c)
{
  if (c->established && !c->failed && c->fd >= 0 && !c->shut) {
    SSL_set_quiet_shutdown(c->ssl, 0);
    SSL_shutdown(c->ssl); /* one close_notify; the socket is non-blocking */
    c->shut = 1;
  }
  ERR_clear_error();
}

void gw_tls_client_conn_free(gw_tls_client_conn_t *c)
{
  if (c == NULL) return;
  gw_tls_client_shutdown(c);
  ERR_clear_error();
  SSL_set_ex_data(c->ssl, conn_index, NULL);
  SSL_free(c->ssl);
  free(c->session_key);
  free(c);
}

int gw_tls_client_handshake(gw_tls_client_conn_t *c, char *reason, size_t len)
{
  if (c->failed) {
    snprintf(reason, len, "failed before");
    return GW_TLS_FAILED;
  }
  ERR_clear_error();
  int r = SSL_do_handshake(c->ssl);
  if (r == 1) {
    c->established = 1;
    return GW_TLS_DONE;
  }
  int e = SSL_get_error(c->ssl, r);
  if (e == SSL_ERROR_WANT_READ) return GW_TLS_WANT_READ;
  if (e == SSL_ERROR_WANT_WRITE) return GW_TLS_WANT_WRITE;
  c->failed = 1;
  long v = SSL_get_verify_result(c->ssl);
  if (v != X509_V_OK) {
    snprintf(reason, len, "certificate verify failed: %s", X509_verify_cert_error_string(v));
  } else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    snprintf(reason, len, "%s", errno ? strerror(errno) : "the upstream closed the connection");
  } else {
    gw_tls_error_reason(reason, len);
  }
  ERR_clear_error();
  forget_session(c); /* a session the server chokes on is not offered again */
  return GW_TLS_FAILED;
}

ssize_t gw_tls_client_read(gw_tls_client_conn_t *c, void *buf, size_t n)
{
  if (c->eof_due) return 0;
  if (c->err_due) {
    errno = c->err_due;
    return -1;
  }
  if (c->failed) {
    errno = EPROTO;
    return -1;
  }
  size_t got = 0;
  while (got < n) {
    ERR_clear_error();
    int want = n - got > 0x40000000 ? 0x40000000 : (int)(n - got);
    int r = SSL_read(c->ssl, (char *)buf + got, want);
    if (r > 0) {
      got += (size_t)r;
      continue;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      if (got > 0) break;
      errno = EAGAIN;
      return -1;
    }
    int saved = errno;
    ERR_clear_error();
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && saved == 0)) {
      /* close_notify, or EOF without it (the HTTP framing decides) */
      if (got > 0) {
        c->eof_due = 1;
        break;
      }
      return 0;
    }
    c->failed = 1;
    int err = e == SSL_ERROR_SYSCALL ? saved : EPROTO;
    if (got > 0) {
      c->err_due = err;
      break;
    }
    errno = err;
    return -1;
  }
  return (ssize_t)got;
}

ssize_t gw_tls_client_write(gw_tls_client_conn_t *c, const void *buf, size_t n)
{
  if (c->failed || !c->established) {
    errno = EPIPE;
    return -1;
  }
  if (n == 0) return 0;
  ERR_clear_error();
  int r = SSL_write(c->ssl, buf, n > 0x40000000 ? 0x40000000 : (int)n);
  if (r > 0) return r;
  int e = SSL_get_error(c->ssl, r);
  if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
    errno = EAGAIN;
    return -1;
  }
  int saved = errno;
  ERR_clear_error();
  c->failed = 1;
  errno = e == SSL_ERROR_SYSCALL && saved ? saved : EPIPE;
  return -1;
}

int gw_tls_client_pending(const gw_tls_client_conn_t *c)
{
  return c->eof_due || c->err_due || (c->established && SSL_pending(c->ssl) > 0);
}

int gw_tls_client_idle_ok(gw_tls_client_conn_t *c)
{
  if (c->failed || c->eof_due || c->err_due) return 0;
  char b;
  ERR_clear_error();
  int r = SSL_read(c->ssl, &b, 1);
  if (r > 0) return 0; /* data nobody asked for */
  int e = SSL_get_error(c->ssl, r);
  ERR_clear_error();
  if (e == SSL_ERROR_WANT_READ) return 1; /* only TLS's own records (a ticket) */
  c->failed = e != SSL_ERROR_ZERO_RETURN;
  return 0;
}

int gw_tls_client_resumed(const gw_tls_client_conn_t *c) { return c->established && SSL_session_reused(c->ssl); }

/* -- as a byte end's layer (byte_end.h) -- */

static ssize_t read_fn(void *c, void *buf, size_t n) { return gw_tls_client_read(c, buf, n); }
static int io_read(void *c, struct evbuffer *into, size_t max) { return gw_byte_end_read_with(into, max, read_fn, c); }

/* One record's worth (16 KiB) per SSL_write, until the socket pushes back. */
static int io_write(void *c, struct evbuffer *out)
{
  int total = 0;
  size_t len;
  while ((len = evbuffer_get_length(out)) > 0) {
    if (len > 16384) len = 16384;
    unsigned char *p = evbuffer_pullup(out, (ev_ssize_t)len);
    if (p == NULL) {
      errno = ENOMEM;
      return -1;
    }
    ssize_t n = gw_tls_client_write(c, p, len);
    if (n <= 0) return total > 0 ? total : (int)n;
    evbuffer_drain(out, (size_t)n);
    total += (int)n;
  }
  return total;
}

static int io_pending(void *c) { return gw_tls_client_pending(c); }
static void io_shutdown(void *c) { gw_tls_client_shutdown(c); }
static void io_free(void *c) { gw_tls_client_conn_free(c); }

const gw_io_t gw_tls_client_io = {io_read, io_write, io_pending, io_shutdown, io_free, NULL};
int gw_tls_client_conn_offer_h2(gw_tls_client_conn_t *c)
{
  static const unsigned char alpn_h2[] = "\x02h2";
  return SSL_set_alpn_protos(c->ssl, alpn_h2, sizeof(alpn_h2) - 1) == 0 ? 0 : -1; /* 0 is success here */
}

void gw_tls_client_alpn(const gw_tls_client_conn_t *c, char *buf, size_t len)
{
  const unsigned char *p = NULL;
  unsigned int n = 0;
  if (c->established) SSL_get0_alpn_selected(c->ssl, &p, &n);
  snprintf(buf, len, "%.*s", (int)n, p ? (const char *)p : "");
}
