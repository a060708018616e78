/* shm_alloc.h - a buddy allocator inside a region of shared memory, every
 * link a 32-bit offset from the region's start so nothing in it is a
 * pointer (each process may map the region at another address). Its state
 * is embedded in the region's own header (shdict.c, cache_store.c); the
 * caller serialises the calls (its lock).
 *
 * Layout of [start, end) of a region: a block map (one byte per 64-byte
 * unit of the arena) then the arena, `ntop` top blocks of 2^top_order
 * units (at most 1 MiB and an eighth of the arena each). A block is split
 * down to 64 bytes and freed buddies are merged back, never past a top
 * block. */
#ifndef GW_SHM_ALLOC_H
#define GW_SHM_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#define GW_SHM_UNIT_SHIFT 6 /* 64-byte units */
#define GW_SHM_MAX_ORDERS 32

typedef struct {
  uint32_t map_off, arena_off;              /* from the region's start */
  uint32_t ntop, top_order;
  uint32_t free_heads[GW_SHM_MAX_ORDERS];
  uint64_t free_bytes;
} gw_shm_alloc_t;

/* Lays the allocator over base's [start, end) (start a multiple of 64,
 * end - start at most 2^31) and frees it all. */
void gw_shm_alloc_init(gw_shm_alloc_t *a, void *base, size_t start, size_t end);
/* Frees every block. */
void gw_shm_alloc_reset(gw_shm_alloc_t *a, void *base);
/* The order of the smallest block holding bytes. */
uint32_t gw_shm_order(size_t bytes);
/* A block of 2^order units (its offset from base, 64-aligned), or 0 if none
 * is free. */
uint32_t gw_shm_alloc(gw_shm_alloc_t *a, void *base, uint32_t order);
/* Gives back the block at off, of that order. */
void gw_shm_free(gw_shm_alloc_t *a, void *base, uint32_t off, uint32_t order);
/* Bytes of the largest block; of all the arena. */
size_t gw_shm_alloc_max(const gw_shm_alloc_t *a);
size_t gw_shm_alloc_capacity(const gw_shm_alloc_t *a);

#endif
