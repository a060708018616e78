/* static_http.h - the pure parts of serving files: Range and conditional
 * headers, ETag and HTTP dates, Accept-Encoding (the request path's
 * decoding is uri_path.h's). No I/O; unit-tested
 * (spec/unit/handler/static/test_static_http.c) and fuzzed
 * (spec/fuzz/fuzz_static.c). static.c builds the handler on them. */
#ifndef GW_STATIC_HTTP_H
#define GW_STATIC_HTTP_H

#include <stddef.h>
#include <time.h>

/* How a Range field applies to a file of `size` bytes. */
typedef enum {
  GW_RANGE_NONE,          /* absent, not "bytes=", malformed, or too many ranges: the whole file (200) */
  GW_RANGE_SINGLE,        /* one satisfiable range (206) */
  GW_RANGE_MULTI,         /* several: 206 multipart/byteranges */
  GW_RANGE_UNSATISFIABLE  /* 416 with Content-Range: bytes *\/size */
} gw_range_kind_t;

typedef struct {
  long long start, len;   /* len > 0 */
} gw_range_t;

/* value: the Range field (NULL: absent). The satisfiable ranges go to
 * out[0, *n) (unsatisfiable ones are dropped, as nginx does); more than cap
 * of them is GW_RANGE_NONE (cap 0: ranges are off). Ranges that overlap or
 * touch are coalesced (then all come in ascending order); ranges apart keep
 * the client's order. So the parts never add up to more than the file. */
gw_range_kind_t gw_static_range_parse(const char *value, size_t len, long long size, gw_range_t *out, size_t cap,
                                      size_t *n);

/* A multipart/byteranges boundary as nginx writes it: 20 digits, leading
 * zeros, counting up per process from a random start (out needs 21 bytes). */
void gw_range_boundary(char *out, size_t cap);
/* The text before part r of a multipart/byteranges body of a resource of
 * size bytes whose type is ctype (CRLF, --boundary, Content-Type,
 * Content-Range, a blank line), or with r NULL the closing boundary, into
 * out as snprintf does: returns the whole length (out NULL, cap 0: only
 * measured). */
size_t gw_range_part_head(char *out, size_t cap, const char *boundary, const char *ctype, const gw_range_t *r,
                          long long size);

/* The nginx-style ETag of a file, quotes included: "<mtime hex>-<size hex>".
 * Returns its length (out needs 40 bytes). */
size_t gw_static_etag(char *out, size_t cap, time_t mtime, long long size);

/* An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"; out needs 30 bytes).
 * Returns its length. */
size_t gw_static_http_date(char *out, size_t cap, time_t t);
/* Parses an IMF-fixdate (also RFC 850 and asctime forms); -1 if malformed. */
time_t gw_static_http_date_parse(const char *s, size_t len);

/* 1 when the If-None-Match value lists etag (weak comparison) or is "*". */
int gw_static_etag_match(const char *inm, size_t inm_len, const char *etag, size_t etag_len);

/* 1 when Accept-Encoding accepts the coding (its token present with q > 0). */
int gw_static_accepts(const char *ae, size_t ae_len, const char *coding);

#endif
