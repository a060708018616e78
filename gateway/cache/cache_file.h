/* cache_file.h - the response cache's file format (cache_store.c's files
 * under `path:`): a header, then the body.
 *
 * The header: a fixed part (magic "GWCH", version, the header's length, a
 * CRC-32 of the whole header taken with its own field zero, the meta's
 * times, status and flags, the body's length, the lengths of what follows)
 * then the key, the ETag, the Last-Modified, the Vary names and the stored
 * head. Integers are in the machine's byte order: the files are this
 * machine's cache, not an interchange format. */
#ifndef GW_CACHE_FILE_H
#define GW_CACHE_FILE_H

#include <stddef.h>
#include <stdint.h>

#define GW_CACHE_FILE_VERSION 1

/* Longest key, longest stored head, longest validator or vary string. */
#define GW_CACHE_KEY_MAX 4096
#define GW_CACHE_HEAD_MAX 65536
#define GW_CACHE_STR_MAX 1024
/* meta.flags */
#define GW_CACHE_VARIANTS 0x1u /* a Vary marker: no body, meta.vary names the headers */

/* An entry's metadata. Passed in: the strings are borrowed (copied into the
 * entry). From a handle: they point into the handle, valid until it is
 * released. A NULL string with length 0 is "none". */
typedef struct {
  int status;                        /* the response's status code */
  uint32_t flags;                    /* GW_CACHE_VARIANTS */
  int64_t stored_ms;                 /* when the response was received (wall clock, ms) */
  int64_t fresh_until_ms;            /* fresh before this */
  int64_t stale_while_revalidate_ms; /* may be served stale up to fresh_until_ms + this while refreshed */
  int64_t stale_if_error_ms;         /* ... up to fresh_until_ms + this when the upstream fails */
  const char *etag;                  /* the ETag value, as received */
  size_t etag_len;
  const char *last_modified;         /* the Last-Modified value, as received */
  size_t last_modified_len;
  const char *vary;                  /* the Vary header names (e.g. "accept-encoding,accept-language") */
  size_t vary_len;
} gw_cache_meta_t;

typedef struct {
  gw_cache_meta_t meta;  /* its strings point into the parsed bytes */
  const char *key;
  size_t klen;
  const char *head;
  size_t head_len;
  uint64_t body_len;
  size_t header_len;     /* the body starts at this offset */
} gw_cache_file_header_t;

/* The header's bytes for these lengths, or 0 if one is over its limit
 * (GW_CACHE_KEY_MAX, GW_CACHE_HEAD_MAX, GW_CACHE_STR_MAX). */
size_t gw_cache_file_header_size(size_t klen, const gw_cache_meta_t *meta, size_t head_len);
/* Longest possible header: a file's first read need not be longer. */
size_t gw_cache_file_header_max(void);
/* Writes the header (gw_cache_file_header_size bytes) into buf. */
void gw_cache_file_header_write(void *buf, const char *key, size_t klen, const gw_cache_meta_t *meta,
                                const char *head, size_t head_len, uint64_t body_len);
/* Parses a header from buf[0, len) (len may exceed it: the body follows).
 * 0 with *out pointing into buf, or -1: a wrong magic or version, a length
 * over its limit or past len, a status outside 100-999, a bad checksum. */
int gw_cache_file_parse(const void *buf, size_t len, gw_cache_file_header_t *out);

#endif
