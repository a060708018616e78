/* tls_common.c - OpenSSL helpers shared by tls_server.c and tls_client.c (tls_common.h). */
#include <stdio.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tls_common.h"

void gw_tls_error_reason(char *buf, size_t len)
{
  unsigned long e = ERR_get_error();
  if (e == 0) {
    snprintf(buf, len, "unknown error");
    return;
  }
  /* The last error on the queue is the most specific. */
  unsigned long next;
  while ((next = ERR_get_error()) != 0) e = next;
  const char *r = ERR_reason_error_string(e);
  snprintf(buf, len, "%s", r ? r : "unknown error");
}

int gw_tls_ctx_use_keypair(SSL_CTX *ctx, const char *cert, const char *key, const char *cert_label,
                           const char *key_label, char *err, size_t errlen)
{
  char reason[256];
  if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
    gw_tls_error_reason(reason, sizeof(reason));
    snprintf(err, errlen, "%s %s: %s", cert_label, cert, reason);
    return -1;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
    gw_tls_error_reason(reason, sizeof(reason));
    snprintf(err, errlen, "%s %s: %s", key_label, key, reason);
    return -1;
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    gw_tls_error_reason(reason, sizeof(reason));
    snprintf(err, errlen, "%s %s does not match %s %s: %s", key_label, key, cert_label, cert, reason);
    return -1;
  }
  return 0;
}
