/* test_shdict.c - shdict.c's pure part: the table, TTLs, LRU eviction, the
 * buddy allocator giving every byte back, incr, keys, and the zones.
 * unit: shdict shm_alloc shm_region shm_zone */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shdict.h"
#include "shm_zone.h"
#include "unit.h"

static gw_shval_t str(const char *s)
{
  return (gw_shval_t){.type = GW_SHV_STR, .s = s, .len = strlen(s)};
}

static gw_shval_t num(int64_t i)
{
  return (gw_shval_t){.type = GW_SHV_INT, .i = i};
}

int main(void)
{
  size_t size = (size_t)256 << 10;
  void *mem = aligned_alloc(64, size);
  gw_shdict_t *d = gw_shdict_format(mem, size);
  CHECK(d != NULL);
  CHECK(gw_shdict_format(mem, 1000) == NULL); /* too small */
  d = gw_shdict_format(mem, size);
  size_t cap = gw_shdict_capacity(d);
  CHECK(cap > size * 3 / 4 && cap <= size);
  CHECK_EQ_UINT(gw_shdict_free_space(d), cap);

  /* get / set / types */
  gw_shval_t v, out;
  CHECK_EQ_INT(gw_shdict_get(d, "a", 1, 0, &out), 0);
  v = str("hello");
  CHECK_EQ_INT(gw_shdict_set(d, "a", 1, &v, 0, 0), 0);
  CHECK_EQ_INT(gw_shdict_get(d, "a", 1, 0, &out), 1);
  CHECK(out.type == GW_SHV_STR);
  CHECK_MEM(out.s, out.len, "hello", 5);
  free((void *)out.s);
  v = (gw_shval_t){.type = GW_SHV_FLOAT, .f = 2.5};
  CHECK_EQ_INT(gw_shdict_set(d, "a", 1, &v, 0, 0), 0); /* replaces */
  CHECK_EQ_INT(gw_shdict_get(d, "a", 1, 0, &out), 1);
  CHECK(out.type == GW_SHV_FLOAT && out.f == 2.5);
  v = (gw_shval_t){.type = GW_SHV_TRUE};
  CHECK_EQ_INT(gw_shdict_set(d, "t", 1, &v, 0, 0), 0);
  CHECK_EQ_INT(gw_shdict_get(d, "t", 1, 0, &out), 1);
  CHECK(out.type == GW_SHV_TRUE);
  CHECK_EQ_UINT(gw_shdict_count(d), 2);

  /* add */
  v = str("x");
  CHECK_EQ_INT(gw_shdict_add(d, "a", 1, &v, 0, 0), 0);
  CHECK_EQ_INT(gw_shdict_add(d, "b", 1, &v, 0, 0), 1);

  /* incr: integer, float, not a number, init and ttl */
  gw_shval_t one = num(1), zero = num(0), ten = num(10);
  CHECK_EQ_INT(gw_shdict_incr(d, "n", 1, &one, &ten, 1000, 0, &out), 0);
  CHECK(out.type == GW_SHV_INT && out.i == 11);
  CHECK_EQ_INT(gw_shdict_incr(d, "n", 1, &one, &zero, 0, 500, &out), 0);
  CHECK(out.type == GW_SHV_INT && out.i == 12);
  CHECK_EQ_INT(gw_shdict_ttl(d, "n", 1, 500), 500); /* kept from the creation */
  CHECK_EQ_INT(gw_shdict_incr(d, "n", 1, &one, &zero, 0, 1000, &out), 0);
  CHECK(out.i == 1); /* expired at 1000: starts again */
  CHECK_EQ_INT(gw_shdict_incr(d, "b", 1, &one, &zero, 0, 0, &out), GW_SHDICT_NOTNUM);
  v = (gw_shval_t){.type = GW_SHV_FLOAT, .f = 0.5};
  CHECK_EQ_INT(gw_shdict_incr(d, "n", 1, &v, &zero, 0, 1000, &out), 0);
  CHECK(out.type == GW_SHV_FLOAT && out.f == 1.5);
  gw_shval_t big = num(INT64_MAX);
  CHECK_EQ_INT(gw_shdict_incr(d, "w", 1, &big, &one, 0, 0, &out), 0); /* wraps, no UB */
  CHECK(out.i == INT64_MIN);

  /* TTL */
  v = str("soon");
  CHECK_EQ_INT(gw_shdict_set(d, "e", 1, &v, 100, 0), 0);
  CHECK_EQ_INT(gw_shdict_ttl(d, "e", 1, 40), 60);
  CHECK_EQ_INT(gw_shdict_ttl(d, "a", 1, 40), 0);  /* never */
  CHECK_EQ_INT(gw_shdict_ttl(d, "zz", 2, 40), -1); /* absent */
  CHECK_EQ_INT(gw_shdict_get(d, "e", 1, 99, &out), 1);
  free((void *)out.s);
  CHECK_EQ_INT(gw_shdict_get(d, "e", 1, 100, &out), 0);

  /* delete, keys (most recent first) */
  CHECK_EQ_INT(gw_shdict_delete(d, "b", 1, 0), 1);
  CHECK_EQ_INT(gw_shdict_delete(d, "b", 1, 0), 0);
  char **keys;
  size_t *lens;
  long nk = gw_shdict_keys(d, 0, 2000, &keys, &lens);
  CHECK_EQ_INT(nk, 4); /* a t n w */
  CHECK_MEM(keys[0], lens[0], "w", 1);
  gw_shdict_keys_free(keys, lens);
  CHECK_EQ_INT(gw_shdict_keys(d, 2, 2000, &keys, &lens), 2);
  gw_shdict_keys_free(keys, lens);

  /* flush gives every byte back */
  gw_shdict_flush_all(d);
  CHECK_EQ_UINT(gw_shdict_count(d), 0);
  CHECK_EQ_UINT(gw_shdict_free_space(d), cap);

  /* LRU eviction: fill past capacity; the oldest go, the recent stay, and a
   * key touched early survives */
  char key[32], val[200];
  memset(val, 'v', sizeof(val) - 1);
  val[sizeof(val) - 1] = '\0';
  v = str(val);
  int n = 5000;
  for (int i = 0; i < n; i++) {
    snprintf(key, sizeof(key), "k%d", i);
    CHECK_EQ_INT(gw_shdict_set(d, key, strlen(key), &v, 0, 0), 0);
    if (i % 100 == 0) { /* keep k0 hot */
      CHECK_EQ_INT(gw_shdict_get(d, "k0", 2, 0, &out), 1);
      free((void *)out.s);
    }
  }
  CHECK(gw_shdict_evictions(d) > 0);
  CHECK(gw_shdict_count(d) < (size_t)n);
  CHECK_EQ_INT(gw_shdict_get(d, "k1", 2, 0, &out), 0);
  CHECK_EQ_INT(gw_shdict_get(d, "k0", 2, 0, &out), 1);
  free((void *)out.s);
  snprintf(key, sizeof(key), "k%d", n - 1);
  CHECK_EQ_INT(gw_shdict_get(d, key, strlen(key), 0, &out), 1);
  free((void *)out.s);

  /* a value larger than the largest block cannot be stored; a mid-size one
   * evicts what it needs */
  char *huge = malloc(cap + 1);
  memset(huge, 'h', cap);
  gw_shval_t hv = {.type = GW_SHV_STR, .s = huge, .len = cap};
  CHECK_EQ_INT(gw_shdict_set(d, "h", 1, &hv, 0, 0), GW_SHDICT_NOMEM);
  hv.len = cap / 16;
  CHECK_EQ_INT(gw_shdict_set(d, "h", 1, &hv, 0, 0), 0);
  CHECK_EQ_INT(gw_shdict_get(d, "h", 1, 0, &out), 1);
  CHECK(out.len == cap / 16 && out.s[0] == 'h');
  free((void *)out.s);
  free(huge);

  /* deleting everything merges the buddies back into whole blocks */
  nk = gw_shdict_keys(d, 0, 0, &keys, &lens);
  for (long i = 0; i < nk; i++) CHECK_EQ_INT(gw_shdict_delete(d, keys[i], lens[i], 0), 1);
  gw_shdict_keys_free(keys, lens);
  CHECK_EQ_UINT(gw_shdict_free_space(d), cap);
  hv = (gw_shval_t){.type = GW_SHV_STR, .s = val, .len = 10};
  CHECK_EQ_INT(gw_shdict_set(d, "again", 5, &hv, 0, 0), 0);
  free(mem);

  /* zones: kept when the size is the same, new when it changed, pending
   * ones dropped on abort */
  char err[128];
  CHECK_EQ_INT(gw_shdict_declare("z", 64 << 10, err, sizeof(err)), 0);
  CHECK_EQ_INT(gw_shdict_declare("z", 64 << 10, err, sizeof(err)), -1); /* twice */
  CHECK_EQ_INT(gw_shdict_declare("tiny", 100, err, sizeof(err)), -1);
  gw_shm_zone_commit();
  gw_shdict_t *z = gw_shdict_find("z");
  CHECK(z != NULL);
  v = str("kept");
  CHECK_EQ_INT(gw_shdict_set(z, "k", 1, &v, 0, 0), 0);
  CHECK_EQ_INT(gw_shdict_declare("z", 64 << 10, err, sizeof(err)), 0); /* reload, same size */
  gw_shm_zone_commit();
  CHECK(gw_shdict_find("z") == z);
  CHECK_EQ_INT(gw_shdict_get(z, "k", 1, 0, &out), 1);
  free((void *)out.s);
  CHECK_EQ_INT(gw_shdict_declare("z", 128 << 10, err, sizeof(err)), 0); /* a failed reload */
  gw_shm_zone_abort();
  CHECK(gw_shdict_find("z") == z);
  CHECK_EQ_INT(gw_shdict_declare("z", 128 << 10, err, sizeof(err)), 0); /* size changed */
  gw_shm_zone_commit();
  z = gw_shdict_find("z");
  CHECK(z != NULL && gw_shdict_capacity(z) > (64 << 10));
  CHECK_EQ_INT(gw_shdict_get(z, "k", 1, 0, &out), 0);
  gw_shm_zone_commit(); /* not declared: gone */
  CHECK(gw_shdict_find("z") == NULL);
  return UNIT_DONE();
}
