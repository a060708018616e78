/* shdict.c - the shared dictionary (shdict.h): a hash table, an LRU list and
 * a buddy allocator inside one region, and the master's named zones.
 *
 * Layout of a region, every link a 32-bit offset from its start (0: none):
 *   header (the lock, the free lists, the LRU ends) | buckets (uint32 each)
 *   | block map (one byte per 64-byte unit of the arena) | arena.
 * The arena is `ntop` top blocks of 2^top_order units; the buddy allocator
 * splits them down to 64 bytes and merges freed buddies back, never past a
 * top block. An entry is one block: its header, the key, a string value.
 *
 * The lock is a pthread mutex, PTHREAD_PROCESS_SHARED and ROBUST: a worker
 * killed while holding it makes the next locker get EOWNERDEAD instead of
 * waiting forever. Every change sets `dirty` first and clears it last, so
 * that locker knows whether the dead holder left the structure half-changed;
 * if so it empties the dictionary (losing its data, never corrupting it). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "shdict.h"

#define MAGIC 0x47574443u /* "GWDC" */
#define UNIT_SHIFT 6      /* 64-byte units */
#define UNIT ((uint32_t)1 << UNIT_SHIFT)
#define MAX_ORDERS 32
#define TOP_MAX ((uint32_t)1 << 20) /* largest block: 1 MiB */
#define MAP_FREE 0x80             /* block map: a free block starts here (low bits: its order) */
#define MAP_USED 0x40             /* an entry's block starts here */

struct gw_shdict_s {
  uint32_t magic;
  pthread_mutex_t lock;
  uint64_t size;          /* of the whole region */
  uint32_t nbuckets;      /* a power of two */
  uint32_t buckets_off, map_off, arena_off;
  uint32_t ntop, top_order;
  uint32_t free_heads[MAX_ORDERS];
  uint32_t lru_head, lru_tail; /* head: most recently used */
  uint64_t free_bytes;
  uint64_t count, evictions, recoveries;
  int dirty;
};

typedef struct {
  uint32_t hnext;         /* next entry in its bucket */
  uint32_t lprev, lnext;  /* LRU neighbours (lprev towards the head) */
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

typedef struct {
  uint32_t next, prev;
} free_blk_t;

#define AT(d, off) ((void *)((char *)(d) + (off)))
#define ENTRY(d, off) ((entry_t *)AT(d, off))

static uint32_t *buckets(gw_shdict_t *d)
{
  return AT(d, d->buckets_off);
}

static uint8_t *blockmap(gw_shdict_t *d)
{
  return AT(d, d->map_off);
}

static uint32_t unit_of(gw_shdict_t *d, uint32_t off)
{
  return (off - d->arena_off) >> UNIT_SHIFT;
}

/* -- the buddy allocator ------------------------------------------------- */

static void list_push(gw_shdict_t *d, uint32_t off, uint32_t order)
{
  free_blk_t *b = AT(d, off);
  b->prev = 0;
  b->next = d->free_heads[order];
  if (b->next) ((free_blk_t *)AT(d, b->next))->prev = off;
  d->free_heads[order] = off;
  blockmap(d)[unit_of(d, off)] = (uint8_t)(MAP_FREE | order);
}

static void list_remove(gw_shdict_t *d, uint32_t off, uint32_t order)
{
  free_blk_t *b = AT(d, off);
  if (b->prev) ((free_blk_t *)AT(d, b->prev))->next = b->next;
  else d->free_heads[order] = b->next;
  if (b->next) ((free_blk_t *)AT(d, b->next))->prev = b->prev;
  blockmap(d)[unit_of(d, off)] = 0;
}

static uint32_t order_for(size_t bytes)
{
  uint32_t order = 0;
  while (((size_t)UNIT << order) < bytes) order++;
  return order;
}

/* A block of 2^order units, or 0. */
static uint32_t blk_alloc(gw_shdict_t *d, uint32_t order)
{
  if (order > d->top_order) return 0;
  uint32_t o = order;
  while (o <= d->top_order && d->free_heads[o] == 0) o++;
  if (o > d->top_order) return 0;
  uint32_t off = d->free_heads[o];
  list_remove(d, off, o);
  while (o > order) { /* split: the upper half goes back */
    o--;
    list_push(d, off + (UNIT << o), o);
  }
  blockmap(d)[unit_of(d, off)] = (uint8_t)(MAP_USED | order);
  d->free_bytes -= (uint64_t)UNIT << order;
  return off;
}

static void blk_free(gw_shdict_t *d, uint32_t off, uint32_t order)
{
  d->free_bytes += (uint64_t)UNIT << order;
  uint32_t unit = unit_of(d, off);
  while (order < d->top_order) {
    uint32_t buddy = unit ^ ((uint32_t)1 << order);
    if (blockmap(d)[buddy] != (uint8_t)(MAP_FREE | order)) break;
    list_remove(d, d->arena_off + (buddy << UNIT_SHIFT), order);
    unit &= ~((uint32_t)1 << order);
    order++;
  }
  list_push(d, d->arena_off + (unit << UNIT_SHIFT), order);
}

/* -- the table ------------------------------------------------------------- */

static uint32_t hash_key(const char *k, size_t len)
{
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)k[i]) * 16777619u;
  return h;
}

static void lru_unlink(gw_shdict_t *d, uint32_t off)
{
  entry_t *e = ENTRY(d, off);
  if (e->lprev) ENTRY(d, e->lprev)->lnext = e->lnext;
  else d->lru_head = e->lnext;
  if (e->lnext) ENTRY(d, e->lnext)->lprev = e->lprev;
  else d->lru_tail = e->lprev;
}

static void lru_push_head(gw_shdict_t *d, uint32_t off)
{
  entry_t *e = ENTRY(d, off);
  e->lprev = 0;
  e->lnext = d->lru_head;
  if (d->lru_head) ENTRY(d, d->lru_head)->lprev = off;
  d->lru_head = off;
  if (d->lru_tail == 0) d->lru_tail = off;
}

static void entry_remove(gw_shdict_t *d, uint32_t off)
{
  entry_t *e = ENTRY(d, off);
  uint32_t *link = &buckets(d)[e->hash & (d->nbuckets - 1)];
  while (*link != off) link = &ENTRY(d, *link)->hnext;
  *link = e->hnext;
  lru_unlink(d, off);
  d->count--;
  blk_free(d, off, e->order);
}

/* The live entry for k (an expired one is removed on the way), or 0. */
static uint32_t find(gw_shdict_t *d, const char *k, size_t klen, uint32_t h, int64_t now_ms)
{
  for (uint32_t off = buckets(d)[h & (d->nbuckets - 1)]; off; off = ENTRY(d, off)->hnext) {
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
  memset(buckets(d), 0, (size_t)d->nbuckets * sizeof(uint32_t));
  memset(blockmap(d), 0, (size_t)d->ntop << d->top_order);
  memset(d->free_heads, 0, sizeof(d->free_heads));
  d->lru_head = d->lru_tail = 0;
  d->count = 0;
  d->free_bytes = 0;
  for (uint32_t i = 0; i < d->ntop; i++) {
    list_push(d, d->arena_off + ((i << d->top_order) << UNIT_SHIFT), d->top_order);
    d->free_bytes += (uint64_t)UNIT << d->top_order;
  }
}

gw_shdict_t *gw_shdict_format(void *mem, size_t size)
{
  if (size < GW_SHDICT_MIN_SIZE || size > ((size_t)1 << 31)) return NULL;
  gw_shdict_t *d = mem;
  memset(d, 0, sizeof(*d));
  size_t hdr = (sizeof(*d) + 63) & ~(size_t)63;
  size_t avail = size - hdr;
  uint32_t nb = 16;
  while ((size_t)nb * 2 <= avail / 512) nb *= 2;
  size_t after_buckets = avail - (size_t)nb * 4;
  size_t map_bytes = ((after_buckets / UNIT) + 63) & ~(size_t)63; /* an upper bound */
  size_t arena = (after_buckets - map_bytes) & ~(size_t)(UNIT - 1);
  /* Top blocks of at most an eighth of the arena: less than that is lost
   * at its end. */
  uint32_t top = UNIT;
  while (top * 2 <= arena / 8 && top * 2 <= TOP_MAX) top *= 2;
  d->nbuckets = nb;
  d->buckets_off = (uint32_t)hdr;
  d->map_off = (uint32_t)(hdr + (size_t)nb * 4);
  d->arena_off = (uint32_t)(d->map_off + map_bytes);
  d->top_order = order_for(top);
  d->ntop = (uint32_t)(arena / top);
  d->size = size;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  int rc = pthread_mutex_init(&d->lock, &attr);
  pthread_mutexattr_destroy(&attr);
  if (rc != 0) return NULL;
  reset(d);
  d->magic = MAGIC;
  return d;
}

/* Takes the lock; a holder that died leaves it to us (EOWNERDEAD), with the
 * table emptied if it died mid-change. Sets dirty for the caller's change. */
static void lock(gw_shdict_t *d)
{
  if (pthread_mutex_lock(&d->lock) == EOWNERDEAD) {
    pthread_mutex_consistent(&d->lock);
    if (d->dirty) {
      reset(d);
      d->recoveries++;
    }
  }
  d->dirty = 1;
}

static void unlock(gw_shdict_t *d)
{
  d->dirty = 0;
  pthread_mutex_unlock(&d->lock);
}

#ifdef GW_TEST_HOOKS
/* Only in build/gateway-test (tools/testhooks): never in the product. */
void gw_shdict_hold_lock(gw_shdict_t *d, int ms)
{
  lock(d);
  d->dirty = 0; /* it changes nothing */
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
  if (klen > GW_SHDICT_MAX_KEY || need > ((size_t)UNIT << d->top_order)) return GW_SHDICT_NOMEM;
  uint32_t order = order_for(need);
  uint32_t off;
  while ((off = blk_alloc(d, order)) == 0) {
    if (d->lru_tail == 0) return GW_SHDICT_NOMEM;
    entry_remove(d, d->lru_tail);
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
  uint32_t *bucket = &buckets(d)[h & (d->nbuckets - 1)];
  e->hnext = *bucket;
  *bucket = off;
  lru_push_head(d, off);
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
    lru_unlink(d, off);
    lru_push_head(d, off);
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
      lru_unlink(d, off);
      lru_push_head(d, off);
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
  for (uint32_t off = d->lru_head; off && (limit <= 0 || (long)n < limit); off = ENTRY(d, off)->lnext) {
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
  for (uint32_t off = d->lru_head; off && i < n; off = ENTRY(d, off)->lnext) {
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
  return (size_t)d->ntop << (d->top_order + UNIT_SHIFT);
}

size_t gw_shdict_free_space(gw_shdict_t *d)
{
  lock(d);
  size_t n = (size_t)d->free_bytes;
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

/* -- zones ------------------------------------------------------------------ */

#define MAX_ZONES 64

typedef struct {
  char name[64];
  size_t size;
  gw_shdict_t *dict;  /* the mapping */
  int pending;        /* declared by the config being evaluated; not current yet */
  int declared;       /* current, and declared again by the config being evaluated */
} zone_t;

static zone_t zones[MAX_ZONES];
static int nzones;

static void zone_unmap(int i)
{
  munmap(zones[i].dict, zones[i].size);
  zones[i] = zones[--nzones];
}

int gw_shdict_declare(const char *name, size_t size, char *err, size_t errlen)
{
  if (strlen(name) >= sizeof(zones[0].name)) {
    snprintf(err, errlen, "shared_dict %s: the name is too long", name);
    return -1;
  }
  if (size < GW_SHDICT_MIN_SIZE || size > ((size_t)1 << 31)) {
    snprintf(err, errlen, "shared_dict %s: size must be from 32k to 2g", name);
    return -1;
  }
  for (int i = 0; i < nzones; i++) {
    if (strcmp(zones[i].name, name) != 0) continue;
    if (zones[i].pending || zones[i].declared) {
      snprintf(err, errlen, "shared_dict %s is declared twice", name);
      return -1;
    }
    if (zones[i].size == size) {
      zones[i].declared = 1;
      return 0;
    }
  }
  if (nzones == MAX_ZONES) {
    snprintf(err, errlen, "shared_dict %s: more than %d dictionaries", name, MAX_ZONES / 2);
    return -1;
  }
  void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    snprintf(err, errlen, "shared_dict %s: cannot map %zu bytes: %s", name, size, strerror(errno));
    return -1;
  }
  zone_t *z = &zones[nzones++];
  memset(z, 0, sizeof(*z));
  snprintf(z->name, sizeof(z->name), "%s", name);
  z->size = size;
  z->dict = gw_shdict_format(mem, size);
  z->pending = 1;
  return 0;
}

void gw_shdict_commit(void)
{
  for (int i = nzones - 1; i >= 0; i--) {
    if (zones[i].pending || zones[i].declared) {
      zones[i].pending = zones[i].declared = 0;
    } else {
      zone_unmap(i);
    }
  }
}

void gw_shdict_abort(void)
{
  for (int i = nzones - 1; i >= 0; i--) {
    if (zones[i].pending) zone_unmap(i);
    else zones[i].declared = 0;
  }
}

gw_shdict_t *gw_shdict_find(const char *name)
{
  gw_shdict_t *current = NULL;
  for (int i = 0; i < nzones; i++) {
    if (strcmp(zones[i].name, name) != 0) continue;
    if (zones[i].pending) return zones[i].dict;
    current = zones[i].dict;
  }
  return current;
}
