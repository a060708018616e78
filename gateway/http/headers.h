/* headers.h - a list of HTTP header fields, as parsed or to be sent.
 * Names and values are NUL-terminated copies owned by the list, packed into
 * a few blocks of memory that a cleared list keeps for its next use (a
 * keep-alive connection's request headers cost no allocation after the
 * first request). A field's pointers stay valid until the list is cleared. */
#ifndef GW_HEADERS_H
#define GW_HEADERS_H

#include <stddef.h>
#include <string.h>

typedef struct {
  char *name;
  size_t name_len;
  char *value;
  size_t value_len;
} gw_header_t;

typedef struct gw_header_block_s gw_header_block_t;

typedef struct {
  gw_header_t *items; /* owned; grows by doubling */
  size_t count;
  size_t cap;
  gw_header_block_t *blocks; /* owned: where names and values live, newest first */
} gw_headers_t;

void gw_headers_init(gw_headers_t *h);
/* Frees every name/value and the array; the list is empty and reusable after. */
void gw_headers_dispose(gw_headers_t *h);
/* Forgets the fields but keeps the array and the newest (largest) block for reuse. */
void gw_headers_clear(gw_headers_t *h);
/* Appends a copy of name/value. Returns 0, or -1 when out of memory. */
int gw_headers_add(gw_headers_t *h, const char *name, size_t name_len, const char *value, size_t value_len);
/* Appends a copy of every field of src (NULL: none). Returns 0, or -1 when
 * out of memory. */
int gw_headers_copy(gw_headers_t *dst, const gw_headers_t *src);
/* First field whose name (len bytes) matches case-insensitively, or NULL. */
gw_header_t *gw_headers_find_len(const gw_headers_t *h, const char *name, size_t len);
/* The same for a NUL-terminated name (a constant's length is known when
 * this is compiled). */
static inline gw_header_t *gw_headers_find(const gw_headers_t *h, const char *name)
{
  return gw_headers_find_len(h, name, strlen(name));
}
/* Removes every field whose name matches case-insensitively. */
void gw_headers_remove(gw_headers_t *h, const char *name);
/* 1 if s is a non-empty RFC 9110 token (a method or a field name). */
int gw_is_token(const char *s, size_t len);
/* 1 when the fields named name (repeated ones are one list, RFC 9110 §5.3)
 * hold the token tok in their comma-separated values, both compared without
 * case: "Connection: keep-alive, Upgrade" has "upgrade". */
int gw_headers_have_token(const gw_headers_t *h, const char *name, const char *tok);
/* 1 for a hop-by-hop field (RFC 9110 §7.6.1, and the older Keep-Alive,
 * Proxy-Connection, Proxy-Authenticate, Proxy-Authorization), which never
 * crosses a proxy; fields the Connection header names are the caller's. */
int gw_header_is_hop_by_hop(const char *name, size_t len);
/* 1 if name/value may be written to the wire: a token name, and no CR, LF or NUL in the value. */
int gw_header_field_is_safe(const char *name, size_t name_len, const char *value, size_t value_len);

#endif
