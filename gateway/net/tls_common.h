/* tls_common.h - what the server side (tls_server.c) and the upstream side
 * (tls_client.c) of TLS both need from OpenSSL: an error's reason for the
 * logs and config errors, and a certificate with its key loaded into a
 * context. No OpenSSL type shows here but the context's struct name. */
#ifndef GW_TLS_COMMON_H
#define GW_TLS_COMMON_H

#include <stddef.h>

struct ssl_ctx_st; /* OpenSSL's SSL_CTX */

/* The most specific reason on OpenSSL's error queue ("unknown error" when
 * it is empty); the queue is emptied. */
void gw_tls_error_reason(char *buf, size_t len);

/* Loads a PEM certificate chain and its key into ctx and checks that they
 * match; cert_label/key_label name them in err ("tls cert site.pem: no such
 * file"). 0, or -1 with err set. */
int gw_tls_ctx_use_keypair(struct ssl_ctx_st *ctx, const char *cert, const char *key, const char *cert_label,
                           const char *key_label, char *err, size_t errlen);

#endif
