/* uri_path.h - a request path percent-decoded and normalised: what the
 * router matches locations by (nginx's $uri), what static files and
 * FastCGI's SCRIPT_NAME resolve. Pure; unit-tested
 * (spec/unit/http/test_uri_path.c) and fuzzed (spec/fuzz/fuzz_static.c). */
#ifndef GW_URI_PATH_H
#define GW_URI_PATH_H

#include <stddef.h>
#include <sys/types.h>

/* Decodes the percent-encoding of path[0, len) once and normalises it into
 * out (cap >= len + 2): out starts with '/', "//" is collapsed, "."
 * segments are dropped, ".." removes the segment before it; a trailing
 * slash is kept. Returns the length of out (NUL-terminated), or -1 for a
 * path that may not reach the file system: a malformed %XX, an encoded NUL
 * or '/' (%00, %2F: as nginx), a backslash (raw or encoded), a raw control
 * byte, or a ".." that would climb above the root. A path that does not
 * start with '/' is read as if it did (alias: the part after the prefix). */
ssize_t gw_uri_path_decode(const char *path, size_t len, char *out, size_t cap);
/* The same without the decoding (a file path given by a script: '%' is
 * just a byte). */
ssize_t gw_uri_path_clean(const char *path, size_t len, char *out, size_t cap);
/* The path a request is routed by (nginx's $uri): every %XX decoded once,
 * "%2F" as '/' too, then normalised as above, with any byte but NUL kept
 * (never a file name). -1 for a malformed %XX, %00, or a ".." above the
 * root. out as above (cap >= len + 2). */
ssize_t gw_uri_path_route(const char *path, size_t len, char *out, size_t cap);

#endif
