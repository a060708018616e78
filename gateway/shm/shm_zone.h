/* shm_zone.h - named regions of shared memory (MAP_SHARED | MAP_ANONYMOUS)
 * mapped by the master while it evaluates the config, before it forks, so
 * every worker (and every replacement worker) sees the same pages: the
 * shared dictionaries (shdict.c) and the response caches (cache_store.c).
 *
 * Reload: a zone declared again with the same kind, name, size and ident is
 * kept with its contents; otherwise a new one is mapped (the caller formats
 * it). The zones the new config did not declare again are unmapped in the
 * master only: the old workers keep their mapping until they exit. */
#ifndef GW_SHM_ZONE_H
#define GW_SHM_ZONE_H

#include <stddef.h>

/* Declares kind's zone name (kind: "shared_dict", "cache": its namespace
 * and the first word of its error messages) of size bytes; ident: what
 * else must match for a running zone to be kept (NULL: nothing). Returns
 * the region (64-aligned) with *fresh = 1 if it is new (pending until
 * gw_shm_zone_commit; the caller formats it), 0 if kept; NULL with err on
 * failure (name too long, declared twice, too many zones, mmap). */
void *gw_shm_zone_declare(const char *kind, const char *name, size_t size, const char *ident, int *fresh,
                          char *err, size_t errlen);
/* The config loaded: pending zones become current, zones it did not declare
 * again are unmapped. */
void gw_shm_zone_commit(void);
/* The config failed: its pending zones are unmapped, the current ones stay. */
void gw_shm_zone_abort(void);
/* kind's zone name (the one being evaluated, else the current one), or NULL. */
void *gw_shm_zone_find(const char *kind, const char *name);
/* kind's i-th current zone and its name, or NULL past the last. */
void *gw_shm_zone_at(const char *kind, size_t i, const char **name);

#endif
