/* h2c_upgrade.h - whether an HTTP/1.1 request asks to continue as cleartext
 * HTTP/2 (RFC 7540 §3.2: `Upgrade: h2c`, `Connection: Upgrade,
 * HTTP2-Settings` and one `HTTP2-Settings` header), and that header's
 * SETTINGS payload, decoded from base64url. Pure: http1_server.c decides whether to
 * act on it, http2_server.c hands the payload to nghttp2. */
#ifndef GW_H2C_UPGRADE_H
#define GW_H2C_UPGRADE_H

#include <stddef.h>

#include "headers.h"

/* Room for the decoded payload: nghttp2 knows 6 settings of 6 bytes; a
 * client sending many more is not worth upgrading. */
#define GW_H2C_SETTINGS_MAX 256

/* The decoded SETTINGS payload's length (>= 0, a multiple of 6) into out
 * (GW_H2C_SETTINGS_MAX bytes), or -1 when the request is not a valid h2c
 * upgrade (then it is served as HTTP/1.1). */
int gw_h2c_upgrade_settings(const gw_headers_t *headers, unsigned char *out);

#endif
