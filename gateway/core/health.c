/* health.c - active health checks' shared state (health.h). Only the lock
 * holder writes a group's records; readers take `down` as a plain aligned
 * load (a round late at worst). */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include "health.h"

int gw_health_map(gw_health_conf_t *c, size_t nservers)
{
  size_t size = sizeof(gw_health_shared_t) + nservers * sizeof(gw_health_server_t);
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -1;
  c->shared = p;
  c->map_size = size;
  return 0;
}

void gw_health_unmap(gw_health_conf_t *c)
{
  if (c->shared) munmap(c->shared, c->map_size);
  c->shared = NULL;
}

static int alive(int32_t pid)
{
  return kill(pid, 0) == 0 || errno == EPERM;
}

int gw_health_claim(gw_health_shared_t *h, int32_t pid, int64_t now_ms, int64_t stale_ms)
{
  int32_t owner = __atomic_load_n(&h->owner, __ATOMIC_ACQUIRE);
  if (owner != pid) {
    int64_t seen = __atomic_load_n(&h->owner_seen_ms, __ATOMIC_ACQUIRE);
    if (owner != 0 && alive(owner) && now_ms - seen < stale_ms) return 0;
    if (!__atomic_compare_exchange_n(&h->owner, &owner, pid, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return 0;
  }
  __atomic_store_n(&h->owner_seen_ms, now_ms, __ATOMIC_RELEASE);
  return 1;
}

void gw_health_release(gw_health_shared_t *h, int32_t pid)
{
  int32_t expect = pid;
  __atomic_compare_exchange_n(&h->owner, &expect, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

int gw_health_record(gw_health_server_t *s, const gw_health_conf_t *c, int status, const char *why)
{
  s->checks++;
  s->last_status = status > 0 ? (uint32_t)status : 0;
  size_t n = why ? strlen(why) : 0;
  if (n >= sizeof(s->last_error)) n = sizeof(s->last_error) - 1;
  memcpy(s->last_error, why ? why : "", n);
  s->last_error[n] = '\0';
  if (why == NULL) {
    s->fails = 0;
    s->passes++;
    if (s->down && s->passes >= (uint32_t)c->passes) {
      __atomic_store_n(&s->down, 0, __ATOMIC_RELEASE);
      s->transitions++;
      return 1;
    }
    return 0;
  }
  s->passes = 0;
  s->fails++;
  if (!s->down && s->fails >= (uint32_t)c->fails) {
    __atomic_store_n(&s->down, 1, __ATOMIC_RELEASE);
    s->transitions++;
    return -1;
  }
  return 0;
}
