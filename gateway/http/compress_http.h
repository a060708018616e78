/* compress_http.h - the pure HTTP parts of compression on the fly: a
 * location's settings, Accept-Encoding negotiation and the media-type test.
 * No I/O; unit-tested (spec/unit/http/test_compress_http.c) and fuzzed
 * (spec/fuzz/fuzz_compress.c). compress.c applies them to responses. */
#ifndef GW_COMPRESS_HTTP_H
#define GW_COMPRESS_HTTP_H

#include <stddef.h>

#include "encoder.h"

/* A location's `compress:` (config_load.c fills it; owned by the location). */
typedef struct gw_compress_conf_s {
  gw_coding_t encodings[GW_CODING_COUNT]; /* the server's preference order */
  size_t nencodings;
  int level[GW_CODING_COUNT];             /* per coding */
  long long min_length;                   /* a known length below this: not compressed */
  char **types;                           /* owned media-type patterns (fnmatch globs, no case) */
  size_t ntypes;
} gw_compress_conf_t;

/* The media types compressed when `types:` is not given (as nginx's and
 * Caddy's lists: text, JSON, JavaScript, XML, SVG, wasm), NULL-terminated. */
extern const char *const gw_compress_default_types[];

/* The coding to use for a client whose Accept-Encoding is ae[0, len) (NULL:
 * none sent): among the codings it accepts (q > 0, named or through "*";
 * "x-gzip" is gzip), the first in prefs; GW_CODING_NONE when it accepts none
 * of them, or names "identity" with a higher q than that one. */
gw_coding_t gw_compress_negotiate(const char *ae, size_t len, const gw_coding_t *prefs, size_t nprefs);

/* 1 when the Content-Type value ct[0, len) (parameters ignored) matches one
 * of the patterns: fnmatch(3) globs without case, "text/" + "*" matches
 * every text type, "application/json" just that one. */
int gw_compress_type_matches(const char *ct, size_t len, char *const *patterns, size_t npatterns);

/* Frees what conf owns, then conf itself. NULL is fine. */
void gw_compress_conf_free(gw_compress_conf_t *conf);

#endif
