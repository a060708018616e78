/* h2c_upgrade.c - recognising an `Upgrade: h2c` request (h2c_upgrade.h). */
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "h2c_upgrade.h"

/* base64url without padding (RFC 7540 §3.2.1) through OpenSSL's base64. */
static int decode_base64url(const char *in, size_t len, unsigned char *out)
{
  /* At most GW_H2C_SETTINGS_MAX / 3 groups of 4: their bytes fit out. */
  char std[GW_H2C_SETTINGS_MAX / 3 * 4];
  if (len % 4 == 1 || len > sizeof(std)) return -1;
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = in[i];
    if (ch == '-') ch = '+';
    else if (ch == '_') ch = '/';
    else if (ch == '=' || ch == '+' || ch == '/') return -1; /* not the url alphabet, or padded */
    std[n++] = ch;
  }
  size_t pad = (4 - len % 4) % 4;
  for (size_t i = 0; i < pad; i++) std[n++] = '=';
  if (n == 0) return 0;
  int got = EVP_DecodeBlock(out, (const unsigned char *)std, (int)n);
  if (got < 0) return -1;
  return got - (int)pad; /* EVP_DecodeBlock counts the padding as zero bytes */
}

int gw_h2c_upgrade_settings(const gw_headers_t *headers, unsigned char *out)
{
  if (!gw_headers_have_token(headers, "upgrade", "h2c")) return -1;
  if (!gw_headers_have_token(headers, "connection", "upgrade") || !gw_headers_have_token(headers, "connection", "http2-settings"))
    return -1;
  const gw_header_t *settings = NULL;
  for (size_t i = 0; i < headers->count; i++)
    if (strcasecmp(headers->items[i].name, "http2-settings") == 0) {
      if (settings) return -1; /* exactly one */
      settings = &headers->items[i];
    }
  if (settings == NULL) return -1;
  int n = decode_base64url(settings->value, settings->value_len, out);
  if (n < 0 || n % 6 != 0) return -1;
  return n;
}
