/* shdict.h - a dictionary in memory shared by a server's workers
 * (`shared_dict :name, size: "10m"`, OpenResty's lua_shared_dict).
 *
 * Two parts. The dictionary itself works on any memory region it is given
 * (gw_shdict_format / the operations): a header with a process-shared robust
 * mutex, a hash table of 32-bit offsets, an LRU list and a buddy allocator,
 * all addressed by offsets so nothing in it is a pointer (the buddy
 * allocator is shm_alloc.c's). And the zones (shm_zone.c): the master maps
 * each declared dictionary while it evaluates the config, before it forks,
 * so every worker (and every replacement worker) sees the same pages.
 * Reload: a zone declared again with the same size is kept with its data,
 * one whose size changed is made anew (empty); the old workers keep their
 * own mapping until they exit.
 *
 * Values are copied in and out under the lock; nothing here calls back
 * into the caller while holding it. */
#ifndef GW_SHDICT_H
#define GW_SHDICT_H

#include <stddef.h>
#include <stdint.h>

typedef struct gw_shdict_s gw_shdict_t;

typedef enum { GW_SHV_NIL, GW_SHV_FALSE, GW_SHV_TRUE, GW_SHV_INT, GW_SHV_FLOAT, GW_SHV_STR } gw_shval_type_t;

typedef struct {
  gw_shval_type_t type;
  int64_t i;        /* GW_SHV_INT */
  double f;         /* GW_SHV_FLOAT */
  const char *s;    /* GW_SHV_STR: borrowed when passed in; malloc'd (caller frees) when returned */
  size_t len;
} gw_shval_t;

/* Smallest region a dictionary can use. */
#define GW_SHDICT_MIN_SIZE ((size_t)32 << 10)
/* Longest key. */
#define GW_SHDICT_MAX_KEY 65535

/* Results of the operations (besides 0 / 1). */
#define GW_SHDICT_NOMEM (-1)   /* the entry cannot fit, even after evicting everything */
#define GW_SHDICT_NOTNUM (-2)  /* incr on a value that is not a number */
#define GW_SHDICT_OOM (-3)     /* malloc failed copying a value out */

/* Lays a new empty dictionary over mem[0, size) (size >= GW_SHDICT_MIN_SIZE,
 * mem aligned to 64). Its mutex is process-shared and robust. */
gw_shdict_t *gw_shdict_format(void *mem, size_t size);

/* now_ms: the caller's CLOCK_MONOTONIC in ms (the same clock for every
 * process of one machine); ttl_ms 0: never expires. */

/* 1 and *out (a string malloc'd into out->s) if k is present; 0 if not. */
int gw_shdict_get(gw_shdict_t *d, const char *k, size_t klen, int64_t now_ms, gw_shval_t *out);
/* Stores v (replacing any value): 0, or GW_SHDICT_NOMEM. Least recently
 * used entries are evicted to make room. */
int gw_shdict_set(gw_shdict_t *d, const char *k, size_t klen, const gw_shval_t *v, int64_t ttl_ms, int64_t now_ms);
/* Stores v only if k is absent: 1 stored, 0 present, or GW_SHDICT_NOMEM. */
int gw_shdict_add(gw_shdict_t *d, const char *k, size_t klen, const gw_shval_t *v, int64_t ttl_ms, int64_t now_ms);
/* Atomically adds by to k's number (an absent k starts at init and gets
 * ttl_ms; a present one keeps its expiry). Integer + integer stays Integer,
 * else Float. 0 with the new value in *out, GW_SHDICT_NOTNUM or GW_SHDICT_NOMEM. */
int gw_shdict_incr(gw_shdict_t *d, const char *k, size_t klen, const gw_shval_t *by, const gw_shval_t *init,
                   int64_t ttl_ms, int64_t now_ms, gw_shval_t *out);
/* 1 deleted, 0 absent. */
int gw_shdict_delete(gw_shdict_t *d, const char *k, size_t klen, int64_t now_ms);
/* Milliseconds left before k expires: 0 never, -1 absent. */
int64_t gw_shdict_ttl(gw_shdict_t *d, const char *k, size_t klen, int64_t now_ms);
/* Up to limit live keys (0: all), most recently used first, as one malloc'd
 * block: *keys[i] points into it, (*lens)[i] the length. Returns the count
 * (or GW_SHDICT_OOM); the caller frees *keys[0]'s block via gw_shdict_keys_free. */
long gw_shdict_keys(gw_shdict_t *d, long limit, int64_t now_ms, char ***keys, size_t **lens);
void gw_shdict_keys_free(char **keys, size_t *lens);
/* Empties it. */
void gw_shdict_flush_all(gw_shdict_t *d);
/* Bytes for entries in all, and free now; entries stored; entries evicted
 * to make room so far; times a dead lock holder left it half-changed and it
 * was emptied. */
size_t gw_shdict_capacity(gw_shdict_t *d);
size_t gw_shdict_free_space(gw_shdict_t *d);
size_t gw_shdict_count(gw_shdict_t *d);
uint64_t gw_shdict_evictions(gw_shdict_t *d);
uint64_t gw_shdict_recoveries(gw_shdict_t *d);

#ifdef GW_TEST_HOOKS
/* Fault injection, compiled only into the test binary build/gateway-test
 * (tools/testhooks): takes the lock and keeps it for ms milliseconds
 * (blocking the caller), as a process that dies or stalls holding it would. */
void gw_shdict_hold_lock(gw_shdict_t *d, int ms);
#endif

/* -- zones: named dictionaries mapped by the master ---------------------- */

/* Called while a config is evaluated: declares name with size bytes. The
 * zone of the running config is kept when the size is the same; otherwise a
 * new one is mapped (pending until gw_shm_zone_commit, which gw_config_load
 * calls). -1 with err on failure. */
int gw_shdict_declare(const char *name, size_t size, char *err, size_t errlen);
/* The zone named name (declared by the current config, or the one being
 * evaluated), or NULL. */
gw_shdict_t *gw_shdict_find(const char *name);

#endif
