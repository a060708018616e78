/* headers.c - the header-field list shared by the server side, the upstream
 * client and the Ruby bridge. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "headers.h"

/* A block of field bytes: "name\0value\0" back to back. */
struct gw_header_block_s {
  gw_header_block_t *next;
  size_t used, cap;
  char data[];
};

#define GW_HEADER_BLOCK_MIN 256

void gw_headers_init(gw_headers_t *h)
{
  h->items = NULL;
  h->count = h->cap = 0;
  h->blocks = NULL;
}

/* Frees every block but the newest (the largest), and empties that one. */
static void keep_newest_block(gw_headers_t *h)
{
  gw_header_block_t *b = h->blocks;
  if (b == NULL) return;
  gw_header_block_t *rest = b->next;
  while (rest) {
    gw_header_block_t *next = rest->next;
    free(rest);
    rest = next;
  }
  b->next = NULL;
  b->used = 0;
}

void gw_headers_clear(gw_headers_t *h)
{
  keep_newest_block(h);
  h->count = 0;
}

void gw_headers_dispose(gw_headers_t *h)
{
  keep_newest_block(h);
  free(h->blocks);
  free(h->items);
  gw_headers_init(h);
}

/* n bytes that live until the list is cleared, or NULL. */
static char *reserve(gw_headers_t *h, size_t n)
{
  gw_header_block_t *b = h->blocks;
  if (b == NULL || b->cap - b->used < n) {
    size_t cap = b ? b->cap * 2 : GW_HEADER_BLOCK_MIN;
    if (cap < n) cap = n;
    gw_header_block_t *nb = malloc(sizeof(*nb) + cap);
    if (nb == NULL) return NULL;
    nb->next = b;
    nb->used = 0;
    nb->cap = cap;
    h->blocks = b = nb;
  }
  char *p = b->data + b->used;
  b->used += n;
  return p;
}

int gw_headers_add(gw_headers_t *h, const char *name, size_t name_len, const char *value, size_t value_len)
{
  if (h->count == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 16;
    gw_header_t *items = realloc(h->items, cap * sizeof(*items));
    if (items == NULL) return -1;
    h->items = items;
    h->cap = cap;
  }
  char *mem = reserve(h, name_len + value_len + 2);
  if (mem == NULL) return -1;
  memcpy(mem, name, name_len);
  mem[name_len] = '\0';
  memcpy(mem + name_len + 1, value, value_len);
  mem[name_len + 1 + value_len] = '\0';
  gw_header_t *f = &h->items[h->count++];
  f->name = mem;
  f->name_len = name_len;
  f->value = mem + name_len + 1;
  f->value_len = value_len;
  return 0;
}

int gw_headers_copy(gw_headers_t *dst, const gw_headers_t *src)
{
  for (size_t i = 0; src && i < src->count; i++) {
    const gw_header_t *h = &src->items[i];
    if (gw_headers_add(dst, h->name, h->name_len, h->value, h->value_len)) return -1;
  }
  return 0;
}

gw_header_t *gw_headers_find(const gw_headers_t *h, const char *name)
{
  size_t len = strlen(name);
  for (size_t i = 0; i < h->count; i++)
    if (h->items[i].name_len == len && strncasecmp(h->items[i].name, name, len) == 0) return &h->items[i];
  return NULL;
}

void gw_headers_remove(gw_headers_t *h, const char *name)
{
  size_t len = strlen(name), j = 0;
  for (size_t i = 0; i < h->count; i++) {
    if (h->items[i].name_len != len || strncasecmp(h->items[i].name, name, len) != 0)
      h->items[j++] = h->items[i]; /* a removed field's bytes stay in its block until cleared */
  }
  h->count = j;
}

/* RFC 9110 tchar; letters, digits and '-' first (nearly every name byte). */
static inline int is_tchar(unsigned char c)
{
  unsigned char lower = c | 0x20;
  if ((lower >= 'a' && lower <= 'z') || (c >= '0' && c <= '9') || c == '-') return 1;
  return c != 0 && strchr("!#$%&'*+.^_`|~", c) != NULL;
}

int gw_header_field_is_safe(const char *name, size_t name_len, const char *value, size_t value_len)
{
  if (name_len == 0) return 0;
  for (size_t i = 0; i < name_len; i++)
    if (!is_tchar((unsigned char)name[i])) return 0;
  for (size_t i = 0; i < value_len; i++) {
    unsigned char c = (unsigned char)value[i];
    if (c <= '\r' && (c == '\r' || c == '\n' || c == '\0')) return 0;
  }
  return 1;
}
