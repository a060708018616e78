/* buf.c - the growable byte buffer (buf.h). */
#include <stdint.h>
#include <stdlib.h>

#include "buf.h"

int gw_buf_reserve(gw_buf_t *b, size_t extra)
{
  if (extra <= b->cap - b->len) return 0;
  if (extra > SIZE_MAX - b->len) return -1;
  size_t need = b->len + extra;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) return -1;
    cap *= 2;
  }
  char *p = realloc(b->data, cap);
  if (p == NULL) return -1;
  b->data = p;
  b->cap = cap;
  return 0;
}

void gw_buf_dispose(gw_buf_t *b)
{
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}
