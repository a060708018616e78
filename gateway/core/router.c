/* router.c - location matching, in nginx's order. Locations are sorted once
 * at config time: exact ones, then prefixes (longest first), then regex
 * locations in config order. A match is one scan: an exact hit wins at once;
 * the first (longest) prefix hit is remembered and, unless it is "^~" or
 * there are no regex locations, returned; else the regex locations are
 * tried in order and the first that matches wins, or the remembered prefix.
 * A pattern is tried on the path as received, then on its normalised form
 * (percent-decoded: nginx matches its $uri), so that an encoding cannot hide
 * a `\.php$` from its location and send the script to a static one. A path
 * that may differ from its $uri is matched as both; when they lead to
 * different locations the answer is gw_router_refused (400), so that no
 * spelling of a path walks around the location that guards it. */
#include <stdlib.h>
#include <string.h>

#include "regex.h"
#include "router.h"
#include "uri_path.h"

static int cmp_location(const void *a, const void *b)
{
  const gw_location_t *x = a, *y = b;
  if ((x->regex != NULL) != (y->regex != NULL)) return x->regex ? 1 : -1;
  if (x->regex) return x->seq < y->seq ? -1 : x->seq > y->seq;
  if (x->exact != y->exact) return y->exact - x->exact;
  if (x->path_len != y->path_len) return x->path_len < y->path_len ? 1 : -1;
  return strcmp(x->path, y->path);
}

void gw_router_sort(gw_location_t *locs, size_t n)
{
  qsort(locs, n, sizeof(*locs), cmp_location);
}

const gw_location_t gw_router_refused;

/* 1 when path's normalised form may differ from it: a '%', "//" or "/.". */
static int may_differ(const char *path, size_t len)
{
  if (memchr(path, '%', len) != NULL) return 1;
  for (size_t i = 0; i + 1 < len; i++)
    if (path[i] == '/' && (path[i + 1] == '/' || path[i + 1] == '.')) return 1;
  return 0;
}

ssize_t gw_router_normalised(const char *path, size_t len, char *out, size_t cap)
{
  return may_differ(path, len) ? gw_uri_path_decode(path, len, out, cap) : -1;
}

/* The regex step: the first regex location (from index i on) whose pattern
 * matches the path as received or, failing that, its normalised form. */
static const gw_location_t *match_regex(const gw_server_t *server, size_t i, const char *path, size_t len)
{
  char local[512];
  char *norm = len + 2 <= sizeof(local) ? local : malloc(len + 2);
  ssize_t nlen = -2; /* not made yet */
  const gw_location_t *hit = NULL;
  for (; i < server->nlocations && hit == NULL; i++) {
    const gw_location_t *l = &server->locations[i];
    if (l->regex == NULL) continue;
    /* a match that fails (match limit) counts as no match */
    if (gw_regex_test(l->regex, path, len) == 1) {
      hit = l;
      break;
    }
    if (nlen == -2) nlen = norm ? gw_router_normalised(path, len, norm, len + 2) : -1;
    if (nlen >= 0 && gw_regex_test(l->regex, norm, (size_t)nlen) == 1) hit = l;
  }
  if (norm != local) free(norm);
  return hit;
}

static const gw_location_t *match(const gw_server_t *server, const char *path, size_t len)
{
  const gw_location_t *prefix = NULL;
  size_t n = server->nlocations;
  for (size_t i = 0; i < n; i++) {
    const gw_location_t *l = &server->locations[i];
    if (l->regex) {
      const gw_location_t *hit = match_regex(server, i, path, len);
      return hit ? hit : prefix;
    } else if (prefix) {
      continue; /* a shorter prefix: only the regex locations are left to try */
    } else if (l->exact) {
      if (l->path_len == len && memcmp(l->path, path, len) == 0) return l;
    } else if (l->path_len <= len && memcmp(l->path, path, l->path_len) == 0) {
      if (l->no_regex || server->locations[n - 1].regex == NULL) return l;
      prefix = l;
    }
  }
  return prefix;
}

const gw_location_t *gw_router_match(const gw_server_t *server, const char *path, size_t len)
{
  const gw_location_t *hit = match(server, path, len);
  if (len == 0 || path[0] != '/' || !may_differ(path, len)) return hit; /* "*", an absolute-form URL: as they are */
  /* The path as nginx routes it ($uri) must lead to the same location, or
   * "/%61dmin", "//admin", "/x/../admin" would pass a location guarding
   * "/admin" to another that forwards them. */
  char local[512];
  char *norm = len + 2 <= sizeof(local) ? local : malloc(len + 2);
  ssize_t nlen = norm ? gw_uri_path_route(path, len, norm, len + 2) : -1;
  if (nlen < 0 || match(server, norm, (size_t)nlen) != hit) hit = &gw_router_refused;
  if (norm != local) free(norm);
  return hit;
}
