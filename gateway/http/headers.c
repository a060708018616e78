/* headers.c - the header-field list shared by the server side, the upstream
 * client and the Ruby bridge. */
#include <stdint.h>
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

/* memcpy, without a call for the short names and values most fields have
 * (two overlapping loads and stores of 8 or 4 bytes). */
static inline void copy(char *dst, const char *src, size_t n)
{
  if (n >= 8 && n <= 16) {
    uint64_t a, b;
    memcpy(&a, src, 8);
    memcpy(&b, src + n - 8, 8);
    memcpy(dst, &a, 8);
    memcpy(dst + n - 8, &b, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t a, b;
    memcpy(&a, src, 4);
    memcpy(&b, src + n - 4, 4);
    memcpy(dst, &a, 4);
    memcpy(dst + n - 4, &b, 4);
  } else {
    memcpy(dst, src, n);
  }
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
  copy(mem, name, name_len);
  mem[name_len] = '\0';
  copy(mem + name_len + 1, value, value_len);
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

gw_header_t *gw_headers_find_len(const gw_headers_t *h, const char *name, size_t len)
{
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

/* RFC 9110 tchar, as a table: a header name is checked a byte at a time. */
static const unsigned char tchar[256] = {
  ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1,
  ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
  ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
  ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1,
  ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1,
  ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
  ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1,
  ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1,
  ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

int gw_is_token(const char *s, size_t len)
{
  if (len == 0) return 0;
  for (size_t i = 0; i < len; i++)
    if (!tchar[(unsigned char)s[i]]) return 0;
  return 1;
}

int gw_header_field_is_safe(const char *name, size_t name_len, const char *value, size_t value_len)
{
  if (!gw_is_token(name, name_len)) return 0;
  for (size_t i = 0; i < value_len; i++) { /* nothing that ends the line (or the C string) early */
    unsigned char c = (unsigned char)value[i];
    if (c <= '\r' && (c == '\r' || c == '\n' || c == '\0')) return 0;
  }
  return 1;
}

/* 1 when the comma-separated list value[0..len) holds tok. */
static int list_has_token(const char *value, size_t len, const char *tok, size_t tl)
{
  size_t i = 0;
  while (i < len) {
    while (i < len && (value[i] == ' ' || value[i] == '\t' || value[i] == ',')) i++;
    size_t start = i;
    while (i < len && value[i] != ',') i++;
    size_t end = i;
    while (end > start && (value[end - 1] == ' ' || value[end - 1] == '\t')) end--;
    if (end - start == tl && strncasecmp(value + start, tok, tl) == 0) return 1;
  }
  return 0;
}

int gw_header_is_hop_by_hop(const char *n, size_t len)
{
  switch (len) {
  case 2: return strncasecmp(n, "te", 2) == 0;
  case 7: return strncasecmp(n, "trailer", 7) == 0 || strncasecmp(n, "upgrade", 7) == 0;
  case 10: return strncasecmp(n, "connection", 10) == 0 || strncasecmp(n, "keep-alive", 10) == 0;
  case 16: return strncasecmp(n, "proxy-connection", 16) == 0;
  case 17: return strncasecmp(n, "transfer-encoding", 17) == 0;
  case 18: return strncasecmp(n, "proxy-authenticate", 18) == 0;
  case 19: return strncasecmp(n, "proxy-authorization", 19) == 0;
  default: return 0;
  }
}

int gw_headers_have_token(const gw_headers_t *h, const char *name, const char *tok)
{
  size_t tl = strlen(tok);
  for (size_t i = 0; i < h->count; i++) {
    const gw_header_t *f = &h->items[i];
    if (strcasecmp(f->name, name) == 0 && list_has_token(f->value, f->value_len, tok, tl)) return 1;
  }
  return 0;
}
