/* tls_server.c - server-side TLS glue over a non-blocking socket (tls_server.h).
 *
 * One SSL_CTX per certificate; the first is the default, and SNI switches an
 * SSL to another (SSL_set_SSL_CTX) during the ClientHello. Every context of
 * a server gets the same settings and the same session ticket keys, made
 * here (in the master, at config load: the workers inherit them, a reload
 * makes new ones). The session cache is each worker's own (OpenSSL's
 * internal one); tickets are what resumption across workers relies on.
 *
 * The SSL reads and writes the socket itself (SSL_set_fd): no memory BIO and
 * no second copy. Reads loop until the caller's room is full or the socket
 * is empty, so a 16 KiB record is taken whole; OpenSSL reads ahead (whole
 * socket buffers, not a record header then its body), and bytes left inside
 * it are reported by gw_tls_pending() for the caller to schedule another read.
 * Writes take up to 16 KiB of the output at a time (one record, one
 * write(2)), with partial writes and a moving write buffer allowed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include "log.h"
#include "tls_server.h"
#include "tls_common.h"

#define TLS_WRITE_CHUNK 16384
#define TICKET_KEY_LEN 80
#define SESSION_CACHE_SIZE 20480

/* Mozilla's "intermediate" TLS 1.2 list: forward secrecy, AEAD only. */
#define DEFAULT_CIPHERS                                                                            \
  "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"      \
  "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

typedef struct {
  char *server_name; /* owned; NULL for the default */
  SSL_CTX *ctx;
  unsigned char *ocsp; /* owned DER OCSP response to staple, or NULL */
  size_t ocsp_len;
} tls_site_t;

/* A certificate chain or a key file the on_handshake hook named, loaded
 * once per worker (the context, and so the cache, is rebuilt on reload). */
typedef struct tls_loaded_s {
  char *path;             /* owned */
  X509 *cert;             /* a chain file: its first certificate... */
  STACK_OF(X509) *chain;  /* ... and the rest (may be empty) */
  EVP_PKEY *key;          /* a key file */
  struct tls_loaded_s *next;
} tls_loaded_t;

struct gw_tls_ctx_s {
  tls_site_t *sites; /* owned; sites[0] is the default */
  size_t nsites;
  int alpn_h2;
  gw_tls_hook_fn hook;
  void *hook_arg;
  void (*hook_drop)(void *arg, int data);
  tls_loaded_t *loaded; /* owned: the hook's files, newest first */
};

struct gw_tls_conn_s {
  SSL *ssl;
  int fd;
  const char *peer;
  unsigned char established, checked_plain, failed;
  unsigned char starved; /* the last SSL_read wanted the socket: what OpenSSL holds is incomplete */
  unsigned char hook_cert; /* the hook chose the certificate: no site's OCSP staple */
  gw_tls_info_t info;
  gw_tls_ctx_t *t;         /* its context (the hook's drop for info.hook_data) */
};

struct gw_tls_hello_s {
  SSL *ssl;
  gw_tls_ctx_t *t;
  X509 *cert;             /* chosen by the hook; owned when from PEM text */
  STACK_OF(X509) *chain;
  EVP_PKEY *key;
  int own_cert, own_key;
};

/* SNI: exact names first, then "*.example.com" for one more label. */
static void choose_site(gw_tls_ctx_t *t, SSL *ssl, const char *name)
{
  if (name == NULL) return;
  for (size_t i = 0; i < t->nsites; i++) {
    const char *n = t->sites[i].server_name;
    if (n && strcasecmp(n, name) == 0) {
      if (i > 0) SSL_set_SSL_CTX(ssl, t->sites[i].ctx);
      return;
    }
  }
  const char *dot = strchr(name, '.');
  for (size_t i = 0; dot && i < t->nsites; i++) {
    const char *n = t->sites[i].server_name;
    if (n && n[0] == '*' && n[1] == '.' && strcasecmp(n + 1, dot) == 0) {
      if (i > 0) SSL_set_SSL_CTX(ssl, t->sites[i].ctx);
      return;
    }
  }
  /* else the default certificate */
}

static void hello_release(gw_tls_hello_t *h)
{
  if (h->own_cert) {
    X509_free(h->cert);
    sk_X509_pop_free(h->chain, X509_free);
  }
  if (h->own_key) EVP_PKEY_free(h->key);
  h->cert = NULL;
  h->chain = NULL;
  h->key = NULL;
  h->own_cert = h->own_key = 0;
}

/* Runs the on_handshake hook; what it chose replaces the certificate. */
static int run_hook(gw_tls_ctx_t *t, SSL *ssl)
{
  gw_tls_conn_t *c = SSL_get_app_data(ssl);
  const char *peer = c && c->peer ? c->peer : "-";
  gw_tls_hello_t h = {.ssl = ssl, .t = t};
  char err[512] = "";
  int ok = t->hook(t->hook_arg, &h, err, sizeof(err)) == 0;
  if (ok && (h.cert == NULL) != (h.key == NULL)) {
    snprintf(err, sizeof(err), "%s", h.cert ? "a certificate without certificate_key" : "a certificate_key without certificate");
    ok = 0;
  }
  if (ok && h.cert) {
    ERR_clear_error();
    SSL_certs_clear(ssl); /* the configured one must not be offered beside it */
    if (SSL_use_cert_and_key(ssl, h.cert, h.key, h.chain, 1) != 1) {
      char reason[256];
      gw_tls_error_reason(reason, sizeof(reason));
      snprintf(err, sizeof(err), "the certificate and key chosen cannot be used: %s", reason);
      ok = 0;
    } else if (c) {
      c->hook_cert = 1;
    }
  }
  hello_release(&h);
  if (!ok) gw_log_error("%s: TLS on_handshake: %s; failing the handshake", peer, err);
  return ok ? 0 : -1;
}

static int on_servername(SSL *ssl, int *alert, void *arg)
{
  gw_tls_ctx_t *t = arg;
  choose_site(t, ssl, SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name));
  if (t->hook && run_hook(t, ssl) < 0) {
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  return SSL_TLSEXT_ERR_OK;
}

/* -- what the hook may do (tls_server.h) -- */

int gw_tls_hello_local_port(const gw_tls_hello_t *h)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getsockname(SSL_get_fd(h->ssl), (struct sockaddr *)&ss, &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  return 0;
}

const char *gw_tls_hello_version(const gw_tls_hello_t *h)
{
  return SSL_get_version(h->ssl);
}

const char *gw_tls_hello_peer(const gw_tls_hello_t *h)
{
  const gw_tls_conn_t *c = SSL_get_app_data(h->ssl);
  return c && c->peer ? c->peer : "-";
}

void gw_tls_hello_keep(gw_tls_hello_t *h, int data)
{
  gw_tls_conn_t *c = SSL_get_app_data(h->ssl);
  if (c) c->info.hook_data = data;
}

int gw_tls_hello_kept(const gw_tls_hello_t *h)
{
  const gw_tls_conn_t *c = SSL_get_app_data(h->ssl);
  return c ? c->info.hook_data : 0;
}

const char *gw_tls_hello_server_name(const gw_tls_hello_t *h)
{
  return SSL_get_servername(h->ssl, TLSEXT_NAMETYPE_host_name);
}

/* A chain (first certificate, then the rest) from PEM in bio. */
static int read_chain(BIO *in, X509 **cert, STACK_OF(X509) **chain)
{
  *cert = PEM_read_bio_X509(in, NULL, NULL, NULL);
  if (*cert == NULL) return -1;
  *chain = sk_X509_new_null();
  if (*chain == NULL) {
    X509_free(*cert);
    return -1;
  }
  X509 *x;
  while ((x = PEM_read_bio_X509(in, NULL, NULL, NULL)) != NULL) {
    if (!sk_X509_push(*chain, x)) {
      X509_free(x);
      break;
    }
  }
  ERR_clear_error(); /* the end of the PEM data is an "error" */
  return 0;
}

static tls_loaded_t *find_loaded(gw_tls_ctx_t *t, const char *path, int want_key)
{
  for (tls_loaded_t *l = t->loaded; l; l = l->next)
    if ((l->key != NULL) == want_key && strcmp(l->path, path) == 0) return l;
  return NULL;
}

static int hello_set(gw_tls_hello_t *h, const char *s, size_t len, int is_data, int is_key, char *err,
                     size_t errlen)
{
  const char *what = is_key ? "certificate_key" : "certificate";
  char path[4096];
  if (!is_data) {
    if (len == 0 || len >= sizeof(path) || memchr(s, '\0', len)) {
      snprintf(err, errlen, "%s: not a file path", what);
      return -1;
    }
    memcpy(path, s, len);
    path[len] = '\0';
    tls_loaded_t *l = find_loaded(h->t, path, is_key);
    if (l) {
      if (is_key) {
        if (h->own_key) EVP_PKEY_free(h->key);
        h->key = l->key;
        h->own_key = 0;
      } else {
        if (h->own_cert) {
          X509_free(h->cert);
          sk_X509_pop_free(h->chain, X509_free);
        }
        h->cert = l->cert;
        h->chain = l->chain;
        h->own_cert = 0;
      }
      return 0;
    }
  }
  ERR_clear_error();
  BIO *in = is_data ? BIO_new_mem_buf(s, (int)len) : BIO_new_file(path, "r");
  if (in == NULL) {
    if (is_data) snprintf(err, errlen, "%s: out of memory", what);
    else snprintf(err, errlen, "%s %s: %s", what, path, errno ? strerror(errno) : "cannot open");
    ERR_clear_error();
    return -1;
  }
  X509 *cert = NULL;
  STACK_OF(X509) *chain = NULL;
  EVP_PKEY *key = NULL;
  int rc = is_key ? ((key = PEM_read_bio_PrivateKey(in, NULL, NULL, NULL)) ? 0 : -1) : read_chain(in, &cert, &chain);
  BIO_free(in);
  if (rc < 0) {
    ERR_clear_error();
    snprintf(err, errlen, "%s %s: no PEM %s in it", what, is_data ? "data" : path, is_key ? "private key" : "certificate");
    return -1;
  }
  int own = 1;
  if (!is_data) { /* keep it for the next handshakes */
    tls_loaded_t *l = calloc(1, sizeof(*l));
    if (l && (l->path = strdup(path)) != NULL) {
      l->cert = cert;
      l->chain = chain;
      l->key = key;
      l->next = h->t->loaded;
      h->t->loaded = l;
      own = 0;
    } else {
      free(l);
    }
  }
  if (is_key) {
    if (h->own_key) EVP_PKEY_free(h->key);
    h->key = key;
    h->own_key = own;
  } else {
    if (h->own_cert) {
      X509_free(h->cert);
      sk_X509_pop_free(h->chain, X509_free);
    }
    h->cert = cert;
    h->chain = chain;
    h->own_cert = own;
  }
  return 0;
}

int gw_tls_hello_set_cert(gw_tls_hello_t *h, const char *s, size_t len, int is_data, char *err, size_t errlen)
{
  return hello_set(h, s, len, is_data, 0, err, errlen);
}

int gw_tls_hello_set_key(gw_tls_hello_t *h, const char *s, size_t len, int is_data, char *err, size_t errlen)
{
  return hello_set(h, s, len, is_data, 1, err, errlen);
}

static const unsigned char alpn_h2_http11[] = "\x02h2\x08http/1.1";
static const unsigned char alpn_http11[] = "\x08http/1.1";

static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                   unsigned int inlen, void *arg)
{
  gw_tls_ctx_t *t = arg;
  (void)ssl;
  const unsigned char *ours = t->alpn_h2 ? alpn_h2_http11 : alpn_http11;
  unsigned int ourlen = t->alpn_h2 ? sizeof(alpn_h2_http11) - 1 : sizeof(alpn_http11) - 1;
  /* Our preference order: h2 first when the client offers it. */
  if (SSL_select_next_proto((unsigned char **)out, outlen, ours, ourlen, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK; /* none in common: go on without ALPN (HTTP/1.1) */
  return SSL_TLSEXT_ERR_OK;
}

/* OCSP stapling: the client sent status_request; the site's response (a
 * copy: OpenSSL frees what it is given) goes into the handshake. */
static int on_status_request(SSL *ssl, void *arg)
{
  const tls_site_t *site = arg;
  const gw_tls_conn_t *c = SSL_get_app_data(ssl);
  if (site->ocsp == NULL || (c && c->hook_cert)) return SSL_TLSEXT_ERR_NOACK; /* not this certificate's */
  unsigned char *copy = OPENSSL_malloc(site->ocsp_len);
  if (copy == NULL) return SSL_TLSEXT_ERR_NOACK;
  memcpy(copy, site->ocsp, site->ocsp_len);
  if (SSL_set_tlsext_status_ocsp_resp(ssl, copy, (long)site->ocsp_len) != 1) {
    OPENSSL_free(copy);
    return SSL_TLSEXT_ERR_NOACK;
  }
  return SSL_TLSEXT_ERR_OK;
}

/* Reads path as a DER OCSP response into the site: it must parse and say
 * "successful" (a stapled "unauthorized" would only make clients fail). */
static int load_ocsp(tls_site_t *site, const char *path, char *err, size_t errlen)
{
  BIO *in = BIO_new_file(path, "rb");
  if (in == NULL) {
    ERR_clear_error();
    snprintf(err, errlen, "tls ocsp %s: %s", path, strerror(errno));
    return -1;
  }
  OCSP_RESPONSE *resp = d2i_OCSP_RESPONSE_bio(in, NULL);
  BIO_free(in);
  if (resp == NULL) {
    ERR_clear_error();
    snprintf(err, errlen, "tls ocsp %s: not a DER OCSP response", path);
    return -1;
  }
  int status = OCSP_response_status(resp);
  unsigned char *der = NULL;
  int len = status == OCSP_RESPONSE_STATUS_SUCCESSFUL ? i2d_OCSP_RESPONSE(resp, &der) : -1;
  OCSP_RESPONSE_free(resp);
  if (status != OCSP_RESPONSE_STATUS_SUCCESSFUL) {
    snprintf(err, errlen, "tls ocsp %s: the response status is %s, not successful", path,
             OCSP_response_status_str(status));
    return -1;
  }
  if (len <= 0) {
    ERR_clear_error();
    snprintf(err, errlen, "tls ocsp %s: cannot encode the response", path);
    return -1;
  }
  site->ocsp = malloc((size_t)len);
  if (site->ocsp == NULL) {
    OPENSSL_free(der);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  memcpy(site->ocsp, der, (size_t)len);
  site->ocsp_len = (size_t)len;
  OPENSSL_free(der);
  return 0;
}

static int version_of(int v) { return v == 13 ? TLS1_3_VERSION : TLS1_2_VERSION; }

static SSL_CTX *site_ctx(gw_tls_ctx_t *t, const gw_tls_config_t *cfg, const gw_tls_cert_t *c,
                         const unsigned char *ticket_keys, char *err, size_t errlen)
{
  char reason[256];
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == NULL) {
    gw_tls_error_reason(reason, sizeof(reason));
    snprintf(err, errlen, "cannot create a TLS context: %s", reason);
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, version_of(cfg->min_version));
  SSL_CTX_set_max_proto_version(ctx, version_of(cfg->max_version));
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  /* Read as much as the socket has, not a record header then its body: a
   * handshake takes 5 read(2)s instead of 13 (what is read ahead is seen by
   * gw_tls_pending()). */
  SSL_CTX_set_read_ahead(ctx, 1);
  if (SSL_CTX_set_cipher_list(ctx, cfg->ciphers ? cfg->ciphers : DEFAULT_CIPHERS) != 1) {
    snprintf(err, errlen, "ciphers %s: no usable cipher in the list", cfg->ciphers ? cfg->ciphers : "(default)");
    goto fail;
  }
  if (cfg->ciphersuites && SSL_CTX_set_ciphersuites(ctx, cfg->ciphersuites) != 1) {
    snprintf(err, errlen, "ciphersuites %s: no usable TLS 1.3 suite in the list", cfg->ciphersuites);
    goto fail;
  }
  if (gw_tls_ctx_use_keypair(ctx, c->cert, c->key, "tls cert", "tls key", err, errlen) < 0) goto fail;
  SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"gateway", 7);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
  SSL_CTX_sess_set_cache_size(ctx, SESSION_CACHE_SIZE);
  SSL_CTX_set_tlsext_ticket_keys(ctx, (void *)ticket_keys, TICKET_KEY_LEN);
  SSL_CTX_set_tlsext_servername_callback(ctx, on_servername);
  SSL_CTX_set_tlsext_servername_arg(ctx, t);
  SSL_CTX_set_alpn_select_cb(ctx, on_alpn, t);
  return ctx;
fail:
  ERR_clear_error();
  SSL_CTX_free(ctx);
  return NULL;
}

gw_tls_ctx_t *gw_tls_ctx_new(const gw_tls_config_t *cfg, char *err, size_t errlen)
{
  unsigned char keys[TICKET_KEY_LEN];
  if (RAND_bytes(keys, sizeof(keys)) != 1) {
    snprintf(err, errlen, "cannot make a session ticket key");
    return NULL;
  }
  gw_tls_ctx_t *t = calloc(1, sizeof(*t));
  if (t == NULL || (t->sites = calloc(cfg->ncerts, sizeof(tls_site_t))) == NULL) {
    free(t);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  t->alpn_h2 = cfg->alpn_h2;
  t->hook = cfg->on_handshake;
  t->hook_arg = cfg->on_handshake_arg;
  t->hook_drop = cfg->on_handshake_drop;
  for (size_t i = 0; i < cfg->ncerts; i++) {
    tls_site_t *s = &t->sites[t->nsites];
    s->ctx = site_ctx(t, cfg, &cfg->certs[i], keys, err, errlen);
    if (s->ctx == NULL) {
      gw_tls_ctx_free(t);
      t = NULL;
      break;
    }
    t->nsites++;
    if (cfg->certs[i].server_name) s->server_name = strdup(cfg->certs[i].server_name);
    if (cfg->certs[i].ocsp) {
      if (load_ocsp(s, cfg->certs[i].ocsp, err, errlen) < 0) {
        gw_tls_ctx_free(t);
        t = NULL;
        break;
      }
      SSL_CTX_set_tlsext_status_cb(s->ctx, on_status_request);
      SSL_CTX_set_tlsext_status_arg(s->ctx, s);
    }
  }
  memset(keys, 0, sizeof(keys));
  return t;
}

void gw_tls_ctx_free(gw_tls_ctx_t *t)
{
  if (t == NULL) return;
  for (size_t i = 0; i < t->nsites; i++) {
    SSL_CTX_free(t->sites[i].ctx);
    free(t->sites[i].server_name);
    free(t->sites[i].ocsp);
  }
  free(t->sites);
  while (t->loaded) {
    tls_loaded_t *l = t->loaded;
    t->loaded = l->next;
    X509_free(l->cert);
    sk_X509_pop_free(l->chain, X509_free);
    EVP_PKEY_free(l->key);
    free(l->path);
    free(l);
  }
  free(t);
}

gw_tls_conn_t *gw_tls_conn_new(gw_tls_ctx_t *t, int fd, const char *peer)
{
  gw_tls_conn_t *c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->ssl = SSL_new(t->sites[0].ctx);
  if (c->ssl == NULL || SSL_set_fd(c->ssl, fd) != 1) {
    ERR_clear_error();
    if (c->ssl) SSL_free(c->ssl);
    free(c);
    return NULL;
  }
  SSL_set_accept_state(c->ssl);
  SSL_set_app_data(c->ssl, c); /* for the handshake callbacks */
  c->fd = fd;
  c->peer = peer;
  c->t = t;
  return c;
}

void gw_tls_conn_set_peer(gw_tls_conn_t *c, const char *peer) { c->peer = peer; }

void gw_tls_conn_free(gw_tls_conn_t *c)
{
  if (c == NULL) return;
  /* One close_notify (the socket is non-blocking), unless gw_tls_shutdown
   * sent it: a second SSL_shutdown only reads, for the client's. */
  if (c->established && !c->failed && c->fd >= 0 && !(SSL_get_shutdown(c->ssl) & SSL_SENT_SHUTDOWN)) {
    SSL_set_quiet_shutdown(c->ssl, 0);
    SSL_shutdown(c->ssl);
  }
  ERR_clear_error();
  SSL_free(c->ssl);
  if (c->info.hook_data && c->t->hook_drop) c->t->hook_drop(c->t->hook_arg, c->info.hook_data);
  free(c);
}

void gw_tls_shutdown(gw_tls_conn_t *c)
{
  if (c->established && !c->failed) SSL_shutdown(c->ssl);
  ERR_clear_error();
}

/* Decrypted bytes, or (read ahead) whole records not decrypted yet: no
 * socket event will come for them. A partial record left when SSL_read last
 * wanted the socket does not count: the rest of it brings the event. */
int gw_tls_pending(const gw_tls_conn_t *c)
{
  return c->established && (SSL_pending(c->ssl) > 0 || (!c->starved && SSL_has_pending(c->ssl)));
}

const gw_tls_info_t *gw_tls_info(const gw_tls_conn_t *c) { return c->established ? &c->info : NULL; }

int gw_tls_alpn_h2(const gw_tls_conn_t *c)
{
  const unsigned char *p;
  unsigned int len;
  SSL_get0_alpn_selected(c->ssl, &p, &len);
  return len == 2 && p[0] == 'h' && p[1] == '2';
}

/* nginx answers plain HTTP on a TLS port with its 497 (a 400 on the wire). */
static void answer_plain_http(gw_tls_conn_t *c)
{
  static const char resp[] = "HTTP/1.1 400 Bad Request\r\n"
                             "Server: gateway\r\n"
                             "Content-Type: text/plain\r\n"
                             "Content-Length: 48\r\n"
                             "Connection: close\r\n\r\n"
                             "The plain HTTP request was sent to HTTPS port.\r\n";
  ssize_t n = write(c->fd, resp, sizeof(resp) - 1);
  (void)n;
  gw_log_info("%s: plain HTTP request on a TLS port: answered 400", c->peer);
}

/* The first bytes of a TLS connection are a handshake record (0x16). */
static int check_plain(gw_tls_conn_t *c)
{
  unsigned char b;
  ssize_t n = recv(c->fd, &b, 1, MSG_PEEK);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 1 : -1;
  if (n == 0) return 0; /* EOF: SSL reports it */
  c->checked_plain = 1;
  if (b != 0x16 && b >= 'A' && b <= 'Z') {
    answer_plain_http(c);
    return -1;
  }
  return 0;
}

static int handshake(gw_tls_conn_t *c)
{
  if (!c->checked_plain) {
    int r = check_plain(c);
    if (r > 0) {
      errno = EAGAIN;
      return -1;
    }
    if (r < 0) {
      c->failed = 1;
      errno = EPROTO;
      return -1;
    }
  }
  ERR_clear_error();
  int r = SSL_do_handshake(c->ssl);
  if (r == 1) {
    c->established = 1;
    c->info.protocol = SSL_get_version(c->ssl);
    c->info.cipher = SSL_get_cipher_name(c->ssl);
    c->info.server_name = SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name);
    return 0;
  }
  int e = SSL_get_error(c->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    errno = EAGAIN;
    return -1;
  }
  c->failed = 1;
  char reason[256];
  if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
    snprintf(reason, sizeof(reason), "%s", errno ? strerror(errno) : "the client closed the connection");
  else
    gw_tls_error_reason(reason, sizeof(reason));
  gw_log_info("%s: TLS handshake failed: %s", c->peer, reason);
  ERR_clear_error();
  errno = EPROTO;
  return -1;
}

/* The error queue emptied before an SSL_read/SSL_write (SSL_get_error needs
 * it so): looked at first, as clearing it walks all its slots, per call. */
static void clear_errors(void)
{
  if (ERR_peek_error() != 0) ERR_clear_error();
}

ssize_t gw_tls_read(gw_tls_conn_t *c, void *buf, size_t n)
{
  if (c->failed) {
    errno = EPROTO;
    return -1;
  }
  if (!c->established && handshake(c) < 0) return -1;
  size_t got = 0;
  while (got < n) {
    clear_errors();
    int want = n - got > 0x40000000 ? 0x40000000 : (int)(n - got);
    int r = SSL_read(c->ssl, (char *)buf + got, want);
    if (r > 0) {
      got += (size_t)r;
      c->starved = 0;
      continue;
    }
    int e = SSL_get_error(c->ssl, r);
    c->starved = e == SSL_ERROR_WANT_READ;
    if (got > 0) break; /* report what we have; the error comes again next time */
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      errno = EAGAIN;
      return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0))
      return 0; /* close_notify, or EOF */
    c->failed = 1;
    ERR_clear_error();
    if (e != SSL_ERROR_SYSCALL) errno = EPROTO;
    return -1;
  }
  return (ssize_t)got;
}

int gw_tls_write(gw_tls_conn_t *c, struct evbuffer *out)
{
  if (c->failed || !c->established) {
    errno = c->failed ? EPIPE : EAGAIN;
    return -1;
  }
  int total = 0;
  size_t len;
  while ((len = evbuffer_get_length(out)) > 0) {
    size_t chunk = len < TLS_WRITE_CHUNK ? len : TLS_WRITE_CHUNK;
    unsigned char *p = evbuffer_pullup(out, (ssize_t)chunk);
    if (p == NULL) {
      errno = ENOMEM;
      return -1;
    }
    clear_errors();
    int r = SSL_write(c->ssl, p, (int)chunk);
    if (r > 0) {
      evbuffer_drain(out, (size_t)r);
      total += r;
      continue;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
      if (total > 0) return total;
      errno = EAGAIN;
      return -1;
    }
    c->failed = 1;
    ERR_clear_error();
    errno = EPIPE;
    return -1;
  }
  return total;
}

/* -- as a byte end's layer (byte_end.h) -- */

static ssize_t read_fn(void *c, void *buf, size_t n) { return gw_tls_read(c, buf, n); }
static int io_read(void *c, struct evbuffer *into, size_t max) { return gw_byte_end_read_with(into, max, read_fn, c); }

static int io_write(void *c, struct evbuffer *out) { return gw_tls_write(c, out); }
static int io_pending(void *c) { return gw_tls_pending(c); }
static void io_shutdown(void *c) { gw_tls_shutdown(c); }
static void io_free(void *c) { gw_tls_conn_free(c); }

const gw_io_t gw_tls_io = {io_read, io_write, io_pending, io_shutdown, io_free, NULL};
