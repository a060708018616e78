/* shdict.c - the shared dictionary (shdict.h): a hash table, an LRU list and
 * a buddy allocator inside one region, and the master's named zones.
 *
 * Layout of a region, every link a 32-bit offset from its start (0: none):
 *   header (the lock, the allocator's free lists, the LRU ends)
 *   | buckets (uint32 each) | the buddy allocator's block map and arena
 *   (shm_alloc.c). An entry is one block: its header, the key, a string
 *   value.
 *
 * The lock and the LRU list are shm_region.c's: a worker killed while
 * holding the lock in the middle of a change makes the next locker empty
 * the dictionary (losing its data, never corrupting it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shdict.h"
#include "shm_alloc.h"
#include "shm_region.h"
#include "shm_zone.h"

#define MAGIC 0x47574443u /* "GWDC" */

struct gw_shdict_s {
  uint32_t magic;
  gw_shm_table_t t;
  uint64_t count, evictions, recoveries;
};

typedef struct {
  gw_shm_link_t lru;      /* first: its LRU neighbours */
  uint32_t hnext;         /* next entry in its bucket */
  uint32_t hash;
  uint32_t vlen;          /* string value's bytes */
  uint16_t klen;
  uint8_t type, order;
  int64_t expires_ms;     /* 0: never */
  union {
    int64_t i;
    double f;
  } num;
} entry_t;                /* then the key, then a string value */

#define AT(d, off) ((void *)((char *)(d) + (off)))
#define ENTRY(d, off) ((entry_t *)AT(d, off))

static uint32_t *buckets(gw_shdict_t *d)
{
  return gw_shm_table_buckets(&d->t, d);
}

/* -- the table ------------------------------------------------------------- */

static uint32_t hash_key(const char *k, size_t len)
{
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)k[i]) * 16777619u;
  return h;
}

static void entry_remove(gw_shdict_t *d, uint32_t off)
{
  entry_t *e = ENTRY(d, off);
  uint32_t *link = &buckets(d)[e->hash & (d->t.nbuckets - 1)];
  while (*link != off) link = &ENTRY(d, *link)->hnext;
  *link = e->hnext;
  gw_shm_list_unlink(d, &d->t.lru, off);
  d->count--;
  gw_shm_free(&d->t.alloc, d, off, e->order);
}

/* The live entry for k (an expired one is removed on the way), or 0. */
static uint32_t find(gw_shdict_t *d, const char *k, size_t klen, uint32_t h, int64_t now_ms)
{
  for (uint32_t off = buckets(d)[h & (d->t.nbuckets - 1)]; off; off = ENTRY(d, off)->hnext) {
    entry_t *e = ENTRY(d, off);
    if (e->hash != h || e->klen != klen || memcmp(e + 1, k, klen) != 0) continue;
    if (e->expires_ms && e->expires_ms <= now_ms) {
      entry_remove(d, off);
      return 0;
    }
    return off;
  }
  return 0;
}

static void reset(gw_shdict_t *d)
{
  gw_shm_table_reset(&d->t, d);
  d->count = 0;
}

gw_shdict_t *gw_shdict_format(void *mem, size_t size)
{
  if (size < GW_SHDICT_MIN_SIZE || size > ((size_t)1 << 31)) return NULL;
  gw_shdict_t *d = mem;
  memset(d, 0, sizeof(*d));
  if (gw_shm_table_init(&d->t, d, sizeof(*d), size, 512) != 0) return NULL;
  d->magic = MAGIC;
  return d;
}

/* Takes the lock; a holder that died mid-change leaves the table emptied. */
static void lock(gw_shdict_t *d)
{
  if (gw_shm_lock(&d->t.lock)) {
    reset(d);
    d->recoveries++;
  }
}

static void unlock(gw_shdict_t *d)
{
  gw_shm_unlock(&d->t.lock);
}

#ifdef GW_TEST_HOOKS
/* Only in build/gateway-test (tools/testhooks): never in the product. */
void gw_shdict_hold_lock(gw_shdict_t *d, int ms)
{
  lock(d);
  d->t.lock.dirty = 0; /* it changes nothing */
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
  unlock(d);
}
#endif

static size_t value_bytes(const gw_shval_t *v)
{
  return v->type == GW_SHV_STR ? v->len : 0;
}

/* A new entry for k = v (k absent): evicts from the LRU tail until it fits. */
static int insert(gw_shdict_t *d, const char *k, size_t klen, uint32_t h, const gw_shval_t *v, int64_t ttl_ms,
                  int64_t now_ms)
{
  size_t need = sizeof(entry_t) + klen + value_bytes(v);
  if (klen > GW_SHDICT_MAX_KEY || need > gw_shm_alloc_max(&d->t.alloc)) return GW_SHDICT_NOMEM;
  uint32_t order = gw_shm_order(need);
  uint32_t off;
  while ((off = gw_shm_alloc(&d->t.alloc, d, order)) == 0) {
    if (d->t.lru.tail == 0) return GW_SHDICT_NOMEM;
    entry_remove(d, d->t.lru.tail);
    d->evictions++;
  }
  entry_t *e = ENTRY(d, off);
  memset(e, 0, sizeof(*e));
  e->hash = h;
  e->klen = (uint16_t)klen;
  e->order = (uint8_t)order;
  e->type = (uint8_t)v->type;
  e->expires_ms = ttl_ms > 0 ? now_ms + ttl_ms : 0;
  if (v->type == GW_SHV_INT) e->num.i = v->i;
  if (v->type == GW_SHV_FLOAT) e->num.f = v->f;
  memcpy(e + 1, k, klen);
  if (v->type == GW_SHV_STR) {
    e->vlen = (uint32_t)v->len;
    memcpy((char *)(e + 1) + klen, v->s, v->len);
  }
  uint32_t *bucket = &buckets(d)[h & (d->t.nbuckets - 1)];
  e->hnext = *bucket;
  *bucket = off;
  gw_shm_list_push_head(d, &d->t.lru, off);
  d->count++;
  return 0;
}

int gw_shdict_get(gw_shdict_t *d, const char *k, size_t klen, int64_t now_ms, gw_shval_t *out)
{
  uint32_t h = hash_key(k, klen);
  int rc = 0;
  lock(d);
  uint32_t off = find(d, k, klen, h, now_ms);
  if (off) {
    entry_t *e = ENTRY(d, off);
    gw_shm_list_unlink(d, &d->t.lru, off);
    gw_shm_list_push_head(d, &d->t.lru, off);
    memset(out, 0, sizeof(*out));
    out->type = (gw_shval_type_t)e->type;
    out->i = e->num.i;
    out->f = e->num.f;
    rc = 1;
    if (e->type == GW_SHV_STR) {
      char *s = malloc(e->vlen + 1);
      if (s == NULL) {
        rc = GW_SHDICT_OOM;
      } else {
        memcpy(s, (char *)(e + 1) + e->klen, e->vlen);
        s[e->vlen] = '\0';
        out->s = s;
        out->len = e->vlen;
      }
    }
  }
  unlock(d);
  return rc;
}

int gw_shdict_set(gw_shdict_t *d, const char *k, size_t klen, const gw_shval_t *v, int64_t ttl_ms, int64_t now_ms)
{
  uint32_t h = hash_key(k, klen);
  lock(d);
  uint32_t off = find(d, k, klen, h, now_ms);
  if (off) entry_remove(d, off);
  int rc = insert(d, k, klen, h, v, ttl_ms, now_ms);
  unlock(d);
  return rc;
}

int gw_shdict_add(gw_shdict_t *d, const char *k, size_t klen, const gw_shval_t *v, int64_t ttl_ms, int64_t now_ms)
{
  uint32_t h = hash_key(k, klen);
  lock(d);
  int rc = 0; /* present */
  if (!find(d, k, klen, h, now_ms)) rc = insert(d, k, klen, h, v, ttl_ms, now_ms) == 0 ? 1 : GW_SHDICT_NOMEM;
  unlock(d);
  return rc;
}

static int is_num(gw_shval_type_t t)
{
  return t == GW_SHV_INT || t == GW_SHV_FLOAT;
}

static void add_num(gw_shval_t *acc, const gw_shval_t *by)
{
  if (acc->type == GW_SHV_INT && by->type == GW_SHV_INT) {
    acc->i = (int64_t)((uint64_t)acc->i + (uint64_t)by->i); /* wraps, never undefined */
    return;
  }
  double a = acc->type == GW_SHV_INT ? (double)acc->i : acc->f;
  acc->f = a + (by->type == GW_SHV_INT ? (double)by->i : by->f);
  acc->type = GW_SHV_FLOAT;
}

int gw_shdict_incr(gw_shdict_t *d, const char *k, size_t klen, const gw_shval_t *by, const gw_shval_t *init,
                   int64_t ttl_ms, int64_t now_ms, gw_shval_t *out)
{
  if (!is_num(by->type) || !is_num(init->type)) return GW_SHDICT_NOTNUM;
  uint32_t h = hash_key(k, klen);
  int rc = 0;
  lock(d);
  uint32_t off = find(d, k, klen, h, now_ms);
  memset(out, 0, sizeof(*out));
  if (off) {
    entry_t *e = ENTRY(d, off);
    if (!is_num((gw_shval_type_t)e->type)) {
      rc = GW_SHDICT_NOTNUM;
    } else {
      out->type = (gw_shval_type_t)e->type;
      out->i = e->num.i;
      out->f = e->num.f;
      add_num(out, by);
      e->type = (uint8_t)out->type;
      if (out->type == GW_SHV_INT) e->num.i = out->i;
      else e->num.f = out->f;
      gw_shm_list_unlink(d, &d->t.lru, off);
      gw_shm_list_push_head(d, &d->t.lru, off);
    }
  } else {
    *out = *init;
    add_num(out, by);
    rc = insert(d, k, klen, h, out, ttl_ms, now_ms);
  }
  unlock(d);
  return rc;
}

int gw_shdict_delete(gw_shdict_t *d, const char *k, size_t klen, int64_t now_ms)
{
  uint32_t h = hash_key(k, klen);
  lock(d);
  uint32_t off = find(d, k, klen, h, now_ms);
  if (off) entry_remove(d, off);
  unlock(d);
  return off ? 1 : 0;
}

int64_t gw_shdict_ttl(gw_shdict_t *d, const char *k, size_t klen, int64_t now_ms)
{
  uint32_t h = hash_key(k, klen);
  lock(d);
  uint32_t off = find(d, k, klen, h, now_ms);
  int64_t left = off == 0 ? -1 : ENTRY(d, off)->expires_ms == 0 ? 0 : ENTRY(d, off)->expires_ms - now_ms;
  unlock(d);
  return left;
}

long gw_shdict_keys(gw_shdict_t *d, long limit, int64_t now_ms, char ***keys, size_t **lens)
{
  lock(d);
  size_t n = 0, bytes = 0;
  for (uint32_t off = d->t.lru.head; off && (limit <= 0 || (long)n < limit); off = ENTRY(d, off)->lru.next) {
    entry_t *e = ENTRY(d, off);
    if (e->expires_ms && e->expires_ms <= now_ms) continue;
    n++;
    bytes += e->klen;
  }
  char **k = malloc((n + 1) * sizeof(char *) + bytes + 1);
  size_t *l = malloc((n + 1) * sizeof(size_t));
  if (k == NULL || l == NULL) {
    unlock(d);
    free(k);
    free(l);
    return GW_SHDICT_OOM;
  }
  char *p = (char *)(k + n + 1);
  size_t i = 0;
  for (uint32_t off = d->t.lru.head; off && i < n; off = ENTRY(d, off)->lru.next) {
    entry_t *e = ENTRY(d, off);
    if (e->expires_ms && e->expires_ms <= now_ms) continue;
    memcpy(p, e + 1, e->klen);
    k[i] = p;
    l[i++] = e->klen;
    p += e->klen;
  }
  unlock(d);
  *keys = k;
  *lens = l;
  return (long)n;
}

void gw_shdict_keys_free(char **keys, size_t *lens)
{
  free(keys);
  free(lens);
}

void gw_shdict_flush_all(gw_shdict_t *d)
{
  lock(d);
  reset(d);
  unlock(d);
}

size_t gw_shdict_capacity(gw_shdict_t *d)
{
  return gw_shm_alloc_capacity(&d->t.alloc);
}

size_t gw_shdict_free_space(gw_shdict_t *d)
{
  lock(d);
  size_t n = (size_t)d->t.alloc.free_bytes;
  unlock(d);
  return n;
}

size_t gw_shdict_count(gw_shdict_t *d)
{
  lock(d);
  size_t n = (size_t)d->count;
  unlock(d);
  return n;
}

uint64_t gw_shdict_evictions(gw_shdict_t *d)
{
  return __atomic_load_n(&d->evictions, __ATOMIC_RELAXED);
}

uint64_t gw_shdict_recoveries(gw_shdict_t *d)
{
  return __atomic_load_n(&d->recoveries, __ATOMIC_RELAXED);
}

/* -- zones (shm_zone.c) ------------------------------------------------------ */

int gw_shdict_declare(const char *name, size_t size, char *err, size_t errlen)
{
  if (size < GW_SHDICT_MIN_SIZE || size > ((size_t)1 << 31)) {
    snprintf(err, errlen, "shared_dict %s: size must be from 32k to 2g", name);
    return -1;
  }
  int fresh = 0;
  void *mem = gw_shm_zone_declare("shared_dict", name, size, NULL, &fresh, err, errlen);
  if (mem == NULL) return -1;
  if (fresh) gw_shdict_format(mem, size);
  return 0;
}

gw_shdict_t *gw_shdict_find(const char *name)
{
  return gw_shm_zone_find("shared_dict", name);
}
