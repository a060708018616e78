/* shm_region.c - the robust lock and the LRU list of shared regions
 * (shm_region.h). */
#include <errno.h>

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
