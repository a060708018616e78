/* shm_region.h - what a structure inside a region of shared memory is built
 * from: a lock that survives the death of its holder, an LRU list of entries
 * linked by offsets from the region's start, and the hash table that joins
 * them to its allocator (shm_alloc.c). Used by shdict.c and cache_store.c. */
#ifndef GW_SHM_REGION_H
#define GW_SHM_REGION_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "shm_alloc.h"

/* A pthread mutex, PTHREAD_PROCESS_SHARED and ROBUST: a process killed while
 * holding it makes the next locker get EOWNERDEAD instead of waiting
 * forever. `dirty` is set while a change is under way, so that locker knows
 * whether the dead holder left the structure half-changed. */
typedef struct {
  pthread_mutex_t mutex;
  int dirty;
} gw_shm_lock_t;

/* 0, or -1 if the mutex cannot be made. */
int gw_shm_lock_init(gw_shm_lock_t *l);
/* Takes the lock and marks a change under way: 1 if the previous holder
 * died in the middle of one (the caller resets what the lock guards), 0
 * else. */
int gw_shm_lock(gw_shm_lock_t *l);
/* The change is complete: releases it. */
void gw_shm_unlock(gw_shm_lock_t *l);

/* Each entry of a list starts with its link. */
typedef struct {
  uint32_t prev, next; /* offsets (0: none); prev is towards the head */
} gw_shm_link_t;

typedef struct {
  uint32_t head, tail; /* head: most recently used */
} gw_shm_list_t;

void gw_shm_list_unlink(void *base, gw_shm_list_t *l, uint32_t off);
void gw_shm_list_push_head(void *base, gw_shm_list_t *l, uint32_t off);

/* A hash table of entries in a region: part of the structure at the
 * region's start (base), its buckets right after that structure, the rest
 * of the region its allocator's. */
typedef struct {
  gw_shm_lock_t lock;
  uint64_t size;        /* of the whole region */
  uint32_t nbuckets;    /* a power of two */
  uint32_t buckets_off; /* from base */
  gw_shm_alloc_t alloc;
  gw_shm_list_t lru;
} gw_shm_table_t;

/* Lays out a region of size bytes whose structure (base, header_size bytes
 * long, holding t) is followed by a bucket per bytes_per_bucket of the rest:
 * 0, or -1 if the lock cannot be made. */
int gw_shm_table_init(gw_shm_table_t *t, void *base, size_t header_size, size_t size, size_t bytes_per_bucket);
/* Empties the table: no bucket, no entry, everything free. */
void gw_shm_table_reset(gw_shm_table_t *t, void *base);

static inline uint32_t *gw_shm_table_buckets(const gw_shm_table_t *t, void *base)
{
  return (uint32_t *)((char *)base + t->buckets_off);
}

#endif
