/* re.c - the gem's shared core: Regexp and MatchData objects, the per-VM
 * cache of compiled patterns (a literal runs Regexp.compile each time it is
 * evaluated), one search, and $~ / $1..$9. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "re.h"

static void re_free(mrb_state *mrb, void *p)
{
  gw_re_t *r = p;
  if (r == NULL) return;
  gw_regex_unref(r->re);
  mrb_free(mrb, r->src);
  mrb_free(mrb, r);
}

static const struct mrb_data_type re_type = {"Regexp", re_free};
static const struct mrb_data_type md_type = {"MatchData", mrb_free};

struct RClass *gw_re_class(mrb_state *mrb)
{
  return mrb_class_get(mrb, "Regexp");
}

struct RClass *gw_md_class(mrb_state *mrb)
{
  return mrb_class_get(mrb, "MatchData");
}

struct RClass *gw_re_error_class(mrb_state *mrb)
{
  return mrb_class_get(mrb, "RegexpError");
}

gw_re_t *gw_re_ptr(mrb_state *mrb, mrb_value v)
{
  (void)mrb;
  if (!mrb_data_p(v) || DATA_TYPE(v) != &re_type) return NULL;
  return DATA_PTR(v);
}

gw_re_t *gw_re_get(mrb_state *mrb, mrb_value v)
{
  gw_re_t *r = gw_re_ptr(mrb, v);
  if (r == NULL) mrb_raisef(mrb, E_TYPE_ERROR, "wrong argument type %T (expected Regexp)", v);
  return r;
}

gw_md_t *gw_md_get(mrb_state *mrb, mrb_value v)
{
  gw_md_t *m = mrb_data_check_get_ptr(mrb, v, &md_type);
  if (m == NULL) mrb_raisef(mrb, E_TYPE_ERROR, "wrong argument type %T (expected MatchData)", v);
  return m;
}

/* -- the cache ---------------------------------------------------------------
 * CACHE_SLOTS frozen Regexp objects, found by a hash of (source, options) and
 * a probe of CACHE_PROBE slots; a miss replaces the least recently used slot
 * of its probe window. The objects live in an Array held by the Regexp class
 * (an instance variable), so the GC sees them; the slot table is a C object
 * held the same way. One of each per VM. */
#define CACHE_SLOTS 512
#define CACHE_PROBE 8

typedef struct {
  uint32_t hash;
  uint32_t used; /* 0: empty; else the clock when last returned */
} slot_t;

typedef struct {
  slot_t slots[CACHE_SLOTS];
  uint32_t clock;
} cache_t;

/* The current VM's cache (a VM per worker; the master's at config time). */
static struct {
  mrb_state *mrb;
  cache_t *table;
  struct RArray *objs;
} cur;

/* $1..$9 that may be non-nil in last.mrb: only those are reset. */
static struct {
  mrb_state *mrb;
  int nth;
  mrb_sym tilde, nsym[10];
} last;

/* The cache dies with its VM: forget the VM, whose address a later one may
 * reuse (a reload makes a new VM and closes the old one). */
static void cache_free(mrb_state *mrb, void *p)
{
  if (cur.table == p) memset(&cur, 0, sizeof(cur));
  if (last.mrb == mrb) memset(&last, 0, sizeof(last));
  mrb_free(mrb, p);
}

static const struct mrb_data_type cache_type = {"Regexp cache", cache_free};

static void cache_open(mrb_state *mrb)
{
  if (cur.mrb == mrb) return;
  struct RClass *c = gw_re_class(mrb);
  mrb_sym tsym = mrb_intern_lit(mrb, "__gw_cache"), osym = mrb_intern_lit(mrb, "__gw_cache_objs");
  mrb_value t = mrb_iv_get(mrb, mrb_obj_value(c), tsym);
  if (mrb_nil_p(t)) {
    cache_t *table = mrb_calloc(mrb, 1, sizeof(cache_t));
    t = mrb_obj_value(mrb_data_object_alloc(mrb, mrb->object_class, table, &cache_type));
    mrb_iv_set(mrb, mrb_obj_value(c), tsym, t);
    mrb_value objs = mrb_ary_new_capa(mrb, CACHE_SLOTS);
    for (int i = 0; i < CACHE_SLOTS; i++) mrb_ary_push(mrb, objs, mrb_nil_value());
    mrb_iv_set(mrb, mrb_obj_value(c), osym, objs);
  }
  cur.mrb = mrb;
  cur.table = DATA_PTR(t);
  cur.objs = mrb_ary_ptr(mrb_iv_get(mrb, mrb_obj_value(c), osym));
}

static uint32_t hash_of(const char *s, mrb_int len, int opts)
{
  uint32_t h = 2166136261u ^ (uint32_t)opts;
  for (mrb_int i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static mrb_value re_new_object(mrb_state *mrb, gw_regex_t *re, const char *src, mrb_int len, int opts)
{
  gw_re_t *r = mrb_malloc(mrb, sizeof(*r));
  r->re = NULL;
  r->src = NULL;
  struct RData *d = mrb_data_object_alloc(mrb, gw_re_class(mrb), r, &re_type);
  r->src = mrb_malloc(mrb, (size_t)len + 1);
  memcpy(r->src, src, (size_t)len);
  r->src[len] = '\0';
  r->len = len;
  r->opts = opts;
  r->re = re;
  return mrb_obj_value(d);
}

mrb_value gw_re_lookup(mrb_state *mrb, const char *src, mrb_int len, int opts, mrb_bool shared)
{
  cache_open(mrb);
  uint32_t h = hash_of(src, len, opts);
  cache_t *t = cur.table;
  size_t victim = h % CACHE_SLOTS;
  mrb_value hit = mrb_nil_value();
  for (size_t k = 0; k < CACHE_PROBE; k++) {
    size_t i = (h + k) % CACHE_SLOTS;
    slot_t *s = &t->slots[i];
    if (s->used && s->hash == h) {
      mrb_value obj = ARY_PTR(cur.objs)[i];
      gw_re_t *r = DATA_PTR(obj);
      if (r->opts == opts && r->len == len && memcmp(r->src, src, (size_t)len) == 0) {
        s->used = ++t->clock ? t->clock : (t->clock = 1);
        hit = obj;
        break;
      }
    }
    if (s->used < t->slots[victim].used) victim = i;
  }
  if (mrb_nil_p(hit)) {
    char err[256];
    gw_regex_t *re = gw_regex_new(src, (size_t)len, opts, err, sizeof(err));
    if (re == NULL) mrb_raisef(mrb, gw_re_error_class(mrb), "%s: /%v/", err, mrb_str_new(mrb, src, len));
    mrb_value obj;
    int ai = mrb_gc_arena_save(mrb);
    obj = re_new_object(mrb, re, src, len, opts);
    mrb_obj_freeze(mrb, obj);
    cache_open(mrb); /* (a GC may not move it, but be plain about it) */
    mrb_ary_set(mrb, mrb_obj_value(cur.objs), (mrb_int)victim, obj);
    t->slots[victim].hash = h;
    t->slots[victim].used = ++t->clock ? t->clock : (t->clock = 1);
    mrb_gc_arena_restore(mrb, ai);
    hit = obj;
  }
  if (shared) return hit;
  gw_re_t *r = DATA_PTR(hit);
  return re_new_object(mrb, gw_regex_ref(r->re), src, len, opts);
}

mrb_value gw_re_exec(mrb_state *mrb, mrb_value self, mrb_value str, mrb_int pos, int anchored)
{
  gw_re_t *r = gw_re_get(mrb, self);
  const size_t *ov;
  if (pos < 0 || pos > RSTRING_LEN(str)) return mrb_nil_value();
  int rc = gw_regex_exec(r->re, RSTRING_PTR(str), (size_t)RSTRING_LEN(str), (size_t)pos, anchored, &ov);
  if (rc < 0) mrb_raisef(mrb, gw_re_error_class(mrb), "%s: /%v/", gw_regex_last_error(), mrb_str_new(mrb, r->src, r->len));
  if (rc == 0) return mrb_nil_value();
  return gw_md_new(mrb, self, str, ov, gw_regex_groups(r->re) + 1);
}

mrb_value gw_md_new(mrb_state *mrb, mrb_value self, mrb_value str, const size_t *ov, int n)
{
  gw_md_t *m = mrb_malloc(mrb, sizeof(*m) + sizeof(size_t) * 2 * (size_t)n);
  m->n = n;
  memcpy(m->ov, ov, sizeof(size_t) * 2 * (size_t)n);
  mrb_value md = mrb_obj_value(mrb_data_object_alloc(mrb, gw_md_class(mrb), m, &md_type));
  mrb_value s = mrb_frozen_p(mrb_basic_ptr(str)) ? str : mrb_obj_freeze(mrb, mrb_str_dup(mrb, str));
  mrb_iv_set(mrb, md, mrb_intern_lit(mrb, "@string"), s);
  mrb_iv_set(mrb, md, mrb_intern_lit(mrb, "@regexp"), self);
  return md;
}

mrb_value gw_md_group(mrb_state *mrb, mrb_value md, int i)
{
  gw_md_t *m = gw_md_get(mrb, md);
  if (i < 0 || i >= m->n || m->ov[2 * i] == GW_RE_UNSET) return mrb_nil_value();
  mrb_value s = mrb_iv_get(mrb, md, mrb_intern_lit(mrb, "@string"));
  return mrb_str_new(mrb, RSTRING_PTR(s) + m->ov[2 * i], (mrb_int)(m->ov[2 * i + 1] - m->ov[2 * i]));
}

int gw_re_name_group(const gw_regex_t *re, const size_t *ov, int pairs, const char *name, size_t len)
{
  int found = -1, n = gw_regex_name_count(re);
  for (int i = 0; i < n; i++) {
    int g;
    const char *nm = gw_regex_name_at(re, i, &g);
    if (strlen(nm) != len || memcmp(nm, name, len) != 0) continue;
    /* several groups of that name: the last one that took part */
    int took = g < pairs && ov[2 * g] != GW_RE_UNSET;
    if (found < 0 || (took && (ov[2 * found] == GW_RE_UNSET || g > found))) found = g;
  }
  return found;
}

int gw_md_name_group(mrb_state *mrb, mrb_value md, mrb_value name)
{
  gw_md_t *m = gw_md_get(mrb, md);
  gw_re_t *r = gw_re_get(mrb, mrb_iv_get(mrb, md, mrb_intern_lit(mrb, "@regexp")));
  const char *want;
  mrb_int wlen;
  if (mrb_symbol_p(name)) {
    want = mrb_sym_name_len(mrb, mrb_symbol(name), &wlen);
  } else {
    want = RSTRING_PTR(name);
    wlen = RSTRING_LEN(name);
  }
  int found = gw_re_name_group(r->re, m->ov, m->n, want, (size_t)wlen);
  if (found < 0) mrb_raisef(mrb, E_INDEX_ERROR, "undefined group name reference: %v", mrb_str_new(mrb, want, wlen));
  return found;
}

void gw_re_set_last_match(mrb_state *mrb, mrb_value md)
{
  if (last.mrb != mrb) {
    cache_open(mrb); /* its end (cache_free) resets `last` */
    last.mrb = mrb;
    last.nth = 9;
    last.tilde = mrb_intern_lit(mrb, "$~");
    char name[3] = "$0";
    for (int i = 1; i <= 9; i++) {
      name[1] = (char)('0' + i);
      last.nsym[i] = mrb_intern(mrb, name, 2);
    }
  }
  mrb_gv_set(mrb, last.tilde, md);
  int n = 0;
  if (!mrb_nil_p(md)) {
    n = gw_md_get(mrb, md)->n - 1;
    if (n > 9) n = 9;
  }
  int upto = n > last.nth ? n : last.nth;
  int ai = mrb_gc_arena_save(mrb);
  for (int i = 1; i <= upto; i++) {
    mrb_gv_set(mrb, last.nsym[i], i <= n ? gw_md_group(mrb, md, i) : mrb_nil_value());
    mrb_gc_arena_restore(mrb, ai);
  }
  last.nth = n;
}
