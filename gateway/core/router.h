/* router.h - picks the location for a request path. */
#ifndef GW_ROUTER_H
#define GW_ROUTER_H

#include <sys/types.h>

#include "config.h"

/* Orders locations for matching: exact ones first, then prefixes, longest
 * first, then regex locations in config order (their seq). */
void gw_router_sort(gw_location_t *locs, size_t n);

/* As nginx: the exact location for path; else, unless the longest prefix
 * location is "^~", the first regex location (in config order) whose pattern
 * matches path; else the longest prefix location; else NULL. Plain byte
 * prefixes, as nginx does: "/api" matches "/api/x" and "/apix". Patterns see
 * the path as received (not percent-decoded, no query) and, when that does
 * not match, its normalised form (gw_router_normalised): "/a%2Ephp" is taken
 * by `\.php$` as nginx would, not left to a static location. A path whose
 * normalised form would be routed elsewhere: &gw_router_refused (below). */
const gw_location_t *gw_router_match(const gw_server_t *server, const char *path, size_t len);

/* What gw_router_match returns for a path that is routed elsewhere once
 * percent-decoded and normalised (nginx's $uri: "/%61dmin", "//admin" and
 * "/x/../admin" are "/admin"), or that does not decode (a malformed %XX,
 * %00, a ".." above the root): answered 400, never served. Not a config's
 * location; its fields are all zero. */
extern const gw_location_t gw_router_refused;

/* path percent-decoded once and normalised (nginx's $uri; uri_path.h)
 * into out (cap >= len + 2), when it may differ from path (it holds a '%',
 * "//" or "/."): its length. -1 when it cannot differ or does not decode
 * (a bad %XX, %00, %2F, ".." above the root). */
ssize_t gw_router_normalised(const char *path, size_t len, char *out, size_t cap);

#endif
