/* mime.h - file extension -> media type: the system's table (/etc/mime.types,
 * Debian's media-types package), loaded once into an open-addressing hash,
 * with a few built-in types for when it is missing. Pure after loading. */
#ifndef GW_MIME_H
#define GW_MIME_H

#include <stddef.h>

typedef struct gw_mime_s gw_mime_t;

/* Loads path (NULL: /etc/mime.types). Never NULL unless out of memory: a
 * missing file leaves the built-in types (html, css, js, json, txt, png,
 * jpg, gif, svg, wasm, ...). Lines are "type ext ext..."; '#' comments. */
gw_mime_t *gw_mime_load(const char *path);
void gw_mime_free(gw_mime_t *m);

/* Adds or replaces one mapping (types: overrides); ext without the dot,
 * any case. Returns 0, or -1 when out of memory. */
int gw_mime_set(gw_mime_t *m, const char *ext, size_t ext_len, const char *type);

/* The type of the file name's extension (after its last '.', in its last
 * segment; case-insensitive), or NULL. */
const char *gw_mime_lookup(const gw_mime_t *m, const char *name, size_t len);

/* Entries held (for tests). */
size_t gw_mime_count(const gw_mime_t *m);

#endif
