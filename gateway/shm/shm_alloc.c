/* shm_alloc.c - the buddy allocator of the shared regions (shm_alloc.h). */
#include <string.h>

#include "shm_alloc.h"

#define UNIT ((uint32_t)1 << GW_SHM_UNIT_SHIFT)
#define TOP_MAX ((uint32_t)1 << 20) /* largest block: 1 MiB */
#define MAP_FREE 0x80             /* block map: a free block starts here (low bits: its order) */
#define MAP_USED 0x40             /* a used block starts here */

typedef struct {
  uint32_t next, prev;
} free_blk_t;

#define AT(base, off) ((void *)((char *)(base) + (off)))

static uint8_t *blockmap(gw_shm_alloc_t *a, void *base)
{
  return AT(base, a->map_off);
}

static uint32_t unit_of(gw_shm_alloc_t *a, uint32_t off)
{
  return (off - a->arena_off) >> GW_SHM_UNIT_SHIFT;
}

static void list_push(gw_shm_alloc_t *a, void *base, uint32_t off, uint32_t order)
{
  free_blk_t *b = AT(base, off);
  b->prev = 0;
  b->next = a->free_heads[order];
  if (b->next) ((free_blk_t *)AT(base, b->next))->prev = off;
  a->free_heads[order] = off;
  blockmap(a, base)[unit_of(a, off)] = (uint8_t)(MAP_FREE | order);
}

static void list_remove(gw_shm_alloc_t *a, void *base, uint32_t off, uint32_t order)
{
  free_blk_t *b = AT(base, off);
  if (b->prev) ((free_blk_t *)AT(base, b->prev))->next = b->next;
  else a->free_heads[order] = b->next;
  if (b->next) ((free_blk_t *)AT(base, b->next))->prev = b->prev;
  blockmap(a, base)[unit_of(a, off)] = 0;
}

uint32_t gw_shm_order(size_t bytes)
{
  uint32_t order = 0;
  while (((size_t)UNIT << order) < bytes) order++;
  return order;
}

void gw_shm_alloc_init(gw_shm_alloc_t *a, void *base, size_t start, size_t end)
{
  size_t avail = end - start;
  size_t map_bytes = ((avail / UNIT) + 63) & ~(size_t)63; /* an upper bound */
  size_t arena = (avail - map_bytes) & ~(size_t)(UNIT - 1);
  /* Top blocks of at most an eighth of the arena: less than that is lost
   * at its end. */
  uint32_t top = UNIT;
  while (top * 2 <= arena / 8 && top * 2 <= TOP_MAX) top *= 2;
  a->map_off = (uint32_t)start;
  a->arena_off = (uint32_t)(start + map_bytes);
  a->top_order = gw_shm_order(top);
  a->ntop = (uint32_t)(arena / top);
  gw_shm_alloc_reset(a, base);
}

void gw_shm_alloc_reset(gw_shm_alloc_t *a, void *base)
{
  memset(blockmap(a, base), 0, (size_t)a->ntop << a->top_order);
  memset(a->free_heads, 0, sizeof(a->free_heads));
  a->free_bytes = 0;
  for (uint32_t i = 0; i < a->ntop; i++) {
    list_push(a, base, a->arena_off + ((i << a->top_order) << GW_SHM_UNIT_SHIFT), a->top_order);
    a->free_bytes += (uint64_t)UNIT << a->top_order;
  }
}

uint32_t gw_shm_alloc(gw_shm_alloc_t *a, void *base, uint32_t order)
{
  if (order > a->top_order) return 0;
  uint32_t o = order;
  while (o <= a->top_order && a->free_heads[o] == 0) o++;
  if (o > a->top_order) return 0;
  uint32_t off = a->free_heads[o];
  list_remove(a, base, off, o);
  while (o > order) { /* split: the upper half goes back */
    o--;
    list_push(a, base, off + (UNIT << o), o);
  }
  blockmap(a, base)[unit_of(a, off)] = (uint8_t)(MAP_USED | order);
  a->free_bytes -= (uint64_t)UNIT << order;
  return off;
}

void gw_shm_free(gw_shm_alloc_t *a, void *base, uint32_t off, uint32_t order)
{
  a->free_bytes += (uint64_t)UNIT << order;
  uint32_t unit = unit_of(a, off);
  while (order < a->top_order) {
    uint32_t buddy = unit ^ ((uint32_t)1 << order);
    if (blockmap(a, base)[buddy] != (uint8_t)(MAP_FREE | order)) break;
    list_remove(a, base, a->arena_off + (buddy << GW_SHM_UNIT_SHIFT), order);
    unit &= ~((uint32_t)1 << order);
    order++;
  }
  list_push(a, base, a->arena_off + (unit << GW_SHM_UNIT_SHIFT), order);
}

size_t gw_shm_alloc_max(const gw_shm_alloc_t *a)
{
  return (size_t)UNIT << a->top_order;
}

size_t gw_shm_alloc_capacity(const gw_shm_alloc_t *a)
{
  return (size_t)a->ntop << (a->top_order + GW_SHM_UNIT_SHIFT);
}
