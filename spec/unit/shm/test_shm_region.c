/* test_shm_region.c - shm_region.c: the robust lock tells a locker whether
 * the previous holder died in the middle of a change, and the LRU list of
 * offsets links, unlinks and reorders.
 * unit: shm_region shm_alloc */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm_region.h"
#include "unit.h"

/* A child takes the lock and exits holding it: mid-change or not. */
static void die_holding(gw_shm_lock_t *l, int mid_change)
{
  pid_t pid = fork();
  if (pid == 0) {
    gw_shm_lock(l);
    if (!mid_change) l->dirty = 0;
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
}

int main(void)
{
  char *region = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  gw_shm_lock_t *l = (gw_shm_lock_t *)region;
  CHECK_EQ_INT(gw_shm_lock_init(l), 0);
  CHECK_EQ_INT(gw_shm_lock(l), 0);
  gw_shm_unlock(l);
  die_holding(l, 1);
  CHECK_EQ_INT(gw_shm_lock(l), 1); /* the structure may be half-changed */
  gw_shm_unlock(l);
  CHECK_EQ_INT(gw_shm_lock(l), 0); /* and consistent again after */
  gw_shm_unlock(l);
  die_holding(l, 0);
  CHECK_EQ_INT(gw_shm_lock(l), 0); /* it died between changes: nothing to reset */
  gw_shm_unlock(l);

  /* entries at offsets 256, 512, 768 of the region */
  gw_shm_list_t list = {0, 0};
  gw_shm_list_push_head(region, &list, 256);
  gw_shm_list_push_head(region, &list, 512);
  gw_shm_list_push_head(region, &list, 768);
  CHECK_EQ_UINT(list.head, 768);
  CHECK_EQ_UINT(list.tail, 256);
  gw_shm_list_unlink(region, &list, 256); /* the cold end, then it goes to the head */
  gw_shm_list_push_head(region, &list, 256);
  CHECK_EQ_UINT(list.head, 256);
  CHECK_EQ_UINT(list.tail, 512);
  gw_shm_link_t *mid = (gw_shm_link_t *)(region + 768);
  CHECK_EQ_UINT(mid->prev, 256);
  CHECK_EQ_UINT(mid->next, 512);
  gw_shm_list_unlink(region, &list, 768); /* the middle */
  CHECK_EQ_UINT(((gw_shm_link_t *)(region + 256))->next, 512);
  CHECK_EQ_UINT(((gw_shm_link_t *)(region + 512))->prev, 256);
  gw_shm_list_unlink(region, &list, 256);
  gw_shm_list_unlink(region, &list, 512);
  CHECK_EQ_UINT(list.head, 0);
  CHECK_EQ_UINT(list.tail, 0);
  munmap(region, 4096);
  return unit_done();
}
