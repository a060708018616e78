/* json_out.h - writing JSON text into an evbuffer (the status page, the
 * trace recorder). */
#ifndef GW_JSON_OUT_H
#define GW_JSON_OUT_H

#include <stddef.h>

struct evbuffer;

/* s[0, len) as a JSON string: quotes, backslashes and control bytes escaped. */
void gw_json_string(struct evbuffer *out, const char *s, size_t len);

#endif
