/* shm_region.c - the robust lock and the LRU list of shared regions
 * (shm_region.h). */
#include <errno.h>
#include <string.h>

#include "shm_region.h"

#define LINK(base, off) ((gw_shm_link_t *)((char *)(base) + (off)))

int gw_shm_lock_init(gw_shm_lock_t *l)
{
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  int rc = pthread_mutex_init(&l->mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  l->dirty = 0;
  return rc == 0 ? 0 : -1;
}

int gw_shm_lock(gw_shm_lock_t *l)
{
  int died = 0;
  if (pthread_mutex_lock(&l->mutex) == EOWNERDEAD) {
    pthread_mutex_consistent(&l->mutex);
    died = l->dirty;
  }
  l->dirty = 1;
  return died;
}

void gw_shm_unlock(gw_shm_lock_t *l)
{
  l->dirty = 0;
  pthread_mutex_unlock(&l->mutex);
}

void gw_shm_list_unlink(void *base, gw_shm_list_t *l, uint32_t off)
{
  gw_shm_link_t *e = LINK(base, off);
  if (e->prev) LINK(base, e->prev)->next = e->next;
  else l->head = e->next;
  if (e->next) LINK(base, e->next)->prev = e->prev;
  else l->tail = e->prev;
}

void gw_shm_list_push_head(void *base, gw_shm_list_t *l, uint32_t off)
{
  gw_shm_link_t *e = LINK(base, off);
  e->prev = 0;
  e->next = l->head;
  if (l->head) LINK(base, l->head)->prev = off;
  l->head = off;
  if (l->tail == 0) l->tail = off;
}

int gw_shm_table_init(gw_shm_table_t *t, void *base, size_t header_size, size_t size, size_t bytes_per_bucket)
{
  size_t hdr = (header_size + 63) & ~(size_t)63;
  uint32_t nb = 16;
  while ((size_t)nb * 2 <= (size - hdr) / bytes_per_bucket) nb *= 2;
  t->nbuckets = nb;
  t->buckets_off = (uint32_t)hdr;
  t->size = size;
  if (gw_shm_lock_init(&t->lock) != 0) return -1;
  memset(gw_shm_table_buckets(t, base), 0, (size_t)nb * sizeof(uint32_t));
  gw_shm_alloc_init(&t->alloc, base, hdr + (size_t)nb * sizeof(uint32_t), size);
  t->lru.head = t->lru.tail = 0;
  return 0;
}

void gw_shm_table_reset(gw_shm_table_t *t, void *base)
{
  memset(gw_shm_table_buckets(t, base), 0, (size_t)t->nbuckets * sizeof(uint32_t));
  gw_shm_alloc_reset(&t->alloc, base);
  t->lru.head = t->lru.tail = 0;
}
