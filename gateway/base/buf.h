/* buf.h - a growable byte buffer: one malloc'd block that doubles as it
 * fills. Plain malloc/realloc (running out returns -1, never longjmps), so it
 * suits C code called from mruby too. Knows nothing else of the gateway. */
#ifndef GW_BUF_H
#define GW_BUF_H

#include <stddef.h>
#include <string.h>

typedef struct {
  char *data;   /* owned; NULL until the first append */
  size_t len;   /* bytes in use */
  size_t cap;   /* bytes allocated */
} gw_buf_t;

#define GW_BUF_INIT {NULL, 0, 0}

/* Makes room for `extra` more bytes after len (the first block is at least
 * 256 bytes, then the capacity doubles). Returns 0, or -1 when out of memory
 * or on overflow (b unchanged). */
int gw_buf_reserve(gw_buf_t *b, size_t extra);

/* Appends len bytes (len may be 0). Returns 0, or -1 with b unchanged.
 * Inline: header blocks are built from many short appends. */
static inline int gw_buf_append(gw_buf_t *b, const void *data, size_t len)
{
  if (len == 0) return 0;
  if (len > b->cap - b->len && gw_buf_reserve(b, len) < 0) return -1;
  memcpy(b->data + b->len, data, len);
  b->len += len;
  return 0;
}

/* Frees the block; b is empty (and reusable) afterwards. */
void gw_buf_dispose(gw_buf_t *b);

#endif
