/* router.c - location matching. Locations are sorted once at config time so
 * that a match is the first hit of one linear scan. */
#include <stdlib.h>
#include <string.h>

#include "router.h"

static int cmp_location(const void *a, const void *b)
{
  const gw_location_t *x = a, *y = b;
  if (x->exact != y->exact) return y->exact - x->exact;
  if (x->path_len != y->path_len) return x->path_len < y->path_len ? 1 : -1;
  return strcmp(x->path, y->path);
}

void gw_router_sort(gw_location_t *locs, size_t n)
{
  qsort(locs, n, sizeof(*locs), cmp_location);
}

const gw_location_t *gw_router_match(const gw_server_t *server, const char *path, size_t len)
{
  for (size_t i = 0; i < server->nlocations; i++) {
    const gw_location_t *l = &server->locations[i];
    if (l->exact) {
      if (l->path_len == len && memcmp(l->path, path, len) == 0) return l;
    } else if (l->path_len <= len && memcmp(l->path, path, l->path_len) == 0) {
      return l;
    }
  }
  return NULL;
}
