/* shdict.c - Gateway::SharedDict's natives over gateway/shm/shdict.c: values
 * converted to and from gw_shval_t, times in seconds, errors raised.
 * Nothing here raises while the dictionary's lock is held (shdict.c copies
 * values out and releases it before we build Ruby objects). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/error.h>
#include <mruby/variable.h>
#include <mruby/string.h>

#include "gw_mruby.h"
#include "shdict.h"

static const struct mrb_data_type dict_type = {"Gateway::SharedDict", NULL}; /* the mapping outlives the VM */

static int64_t now_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static gw_shdict_t *dict(mrb_state *mrb, mrb_value self)
{
  return mrb_data_get_ptr(mrb, self, &dict_type);
}

static mrb_value key_arg(mrb_state *mrb, mrb_value k)
{
  if (mrb_symbol_p(k)) k = mrb_sym_str(mrb, mrb_symbol(k));
  if (!mrb_string_p(k)) mrb_raisef(mrb, E_TYPE_ERROR, "SharedDict: a key must be a String, got %v", k);
  if (RSTRING_LEN(k) == 0 || RSTRING_LEN(k) > GW_SHDICT_MAX_KEY)
    mrb_raise(mrb, E_ARGUMENT_ERROR, "SharedDict: a key must be 1 to 65535 bytes");
  return k;
}

static gw_shval_t to_val(mrb_state *mrb, mrb_value v)
{
  gw_shval_t r = {0};
  if (mrb_nil_p(v)) r.type = GW_SHV_NIL;
  else if (mrb_true_p(v)) r.type = GW_SHV_TRUE;
  else if (mrb_false_p(v)) r.type = GW_SHV_FALSE;
  else if (mrb_integer_p(v)) r.type = GW_SHV_INT, r.i = mrb_integer(v);
  else if (mrb_float_p(v)) r.type = GW_SHV_FLOAT, r.f = mrb_float(v);
  else if (mrb_string_p(v)) r.type = GW_SHV_STR, r.s = RSTRING_PTR(v), r.len = (size_t)RSTRING_LEN(v);
  else mrb_raisef(mrb, E_TYPE_ERROR, "SharedDict: values are String, Integer, Float, true, false or nil, got %C",
                  mrb_obj_class(mrb, v));
  return r;
}

typedef struct {
  const char *s;
  size_t len;
} bytes_t;

static mrb_value new_str(mrb_state *mrb, void *ud)
{
  bytes_t *b = ud;
  return mrb_str_new(mrb, b->s, (mrb_int)b->len);
}

/* Takes out's malloc'd string: freed here, also when the VM is out of memory. */
static mrb_value from_val(mrb_state *mrb, gw_shval_t *out)
{
  switch (out->type) {
  case GW_SHV_TRUE: return mrb_true_value();
  case GW_SHV_FALSE: return mrb_false_value();
  case GW_SHV_INT: return mrb_int_value(mrb, out->i);
  case GW_SHV_FLOAT: return mrb_float_value(mrb, out->f);
  case GW_SHV_STR: {
    bytes_t b = {out->s, out->len};
    mrb_bool raised = FALSE;
    mrb_value r = mrb_protect_error(mrb, new_str, &b, &raised);
    free((void *)out->s);
    out->s = NULL;
    if (raised) mrb_exc_raise(mrb, r);
    return r;
  }
  default: return mrb_nil_value();
  }
}

static int64_t ttl_arg(mrb_state *mrb, mrb_value ttl)
{
  if (mrb_nil_p(ttl)) return 0;
  mrb_float s = mrb_as_float(mrb, ttl);
  if (!(s > 0) || s > 10 * 365 * 24 * 3600.0)
    mrb_raise(mrb, E_ARGUMENT_ERROR, "SharedDict: ttl must be a positive number of seconds (or nil: never)");
  int64_t ms = (int64_t)(s * 1000.0 + 0.5);
  return ms > 0 ? ms : 1;
}

static void no_memory(mrb_state *mrb, mrb_value self, mrb_value k)
{
  mrb_raisef(mrb, mrb_class_get_under(mrb, mrb_class_get_under(mrb, mrb_module_get(mrb, "Gateway"), "SharedDict"),
                                      "NoMemoryError"),
             "SharedDict %v: no room for key %v (larger than the largest block, or out of memory)",
             mrb_iv_get(mrb, self, mrb_intern_lit(mrb, "@name")), k);
}

static mrb_value sd_find(mrb_state *mrb, mrb_value self)
{
  mrb_value name;
  mrb_get_args(mrb, "S", &name);
  gw_shdict_t *d = gw_shdict_find(mrb_string_cstr(mrb, name));
  if (d == NULL) return mrb_nil_value();
  struct RData *o = mrb_data_object_alloc(mrb, mrb_class_ptr(self), d, &dict_type);
  mrb_value v = mrb_obj_value(o);
  mrb_iv_set(mrb, v, mrb_intern_lit(mrb, "@name"), name);
  return v;
}

static mrb_value sd_declare(mrb_state *mrb, mrb_value self)
{
  mrb_value name;
  mrb_int size;
  char err[256];
  (void)self;
  mrb_get_args(mrb, "Si", &name, &size);
  if (size < 0 || gw_shdict_declare(mrb_string_cstr(mrb, name), (size_t)size, err, sizeof(err)) != 0)
    mrb_raise(mrb, E_ARGUMENT_ERROR, size < 0 ? "shared_dict: negative size" : err);
  return mrb_nil_value();
}

static mrb_value sd_get(mrb_state *mrb, mrb_value self)
{
  mrb_value k = key_arg(mrb, mrb_get_arg1(mrb));
  gw_shval_t out;
  int rc = gw_shdict_get(dict(mrb, self), RSTRING_PTR(k), (size_t)RSTRING_LEN(k), now_ms(), &out);
  if (rc == GW_SHDICT_OOM) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  return rc == 1 ? from_val(mrb, &out) : mrb_nil_value();
}

static mrb_value sd_store(mrb_state *mrb, mrb_value self, int add)
{
  mrb_value k, v, ttl = mrb_nil_value();
  mrb_get_args(mrb, "oo|o", &k, &v, &ttl);
  k = key_arg(mrb, k);
  gw_shval_t val = to_val(mrb, v);
  int64_t ms = ttl_arg(mrb, ttl);
  gw_shdict_t *d = dict(mrb, self);
  int rc = add ? gw_shdict_add(d, RSTRING_PTR(k), (size_t)RSTRING_LEN(k), &val, ms, now_ms())
               : gw_shdict_set(d, RSTRING_PTR(k), (size_t)RSTRING_LEN(k), &val, ms, now_ms());
  if (rc == GW_SHDICT_NOMEM) no_memory(mrb, self, k);
  return mrb_bool_value(add ? rc == 1 : 1);
}

/* _gw_set(k, v, ttl) */
static mrb_value sd_set(mrb_state *mrb, mrb_value self)
{
  return sd_store(mrb, self, 0);
}

/* _gw_add(k, v, ttl) */
static mrb_value sd_add(mrb_state *mrb, mrb_value self)
{
  return sd_store(mrb, self, 1);
}

/* _gw_incr(k, by, init, ttl) */
static mrb_value sd_incr(mrb_state *mrb, mrb_value self)
{
  mrb_value k, by, init, ttl;
  mrb_get_args(mrb, "oooo", &k, &by, &init, &ttl);
  k = key_arg(mrb, k);
  if (!mrb_integer_p(by) && !mrb_float_p(by)) mrb_raise(mrb, E_TYPE_ERROR, "SharedDict#incr: by must be a number");
  if (!mrb_integer_p(init) && !mrb_float_p(init)) mrb_raise(mrb, E_TYPE_ERROR, "SharedDict#incr: init: must be a number");
  gw_shval_t b = to_val(mrb, by), i = to_val(mrb, init), out;
  int rc = gw_shdict_incr(dict(mrb, self), RSTRING_PTR(k), (size_t)RSTRING_LEN(k), &b, &i, ttl_arg(mrb, ttl),
                          now_ms(), &out);
  if (rc == GW_SHDICT_NOTNUM)
    mrb_raisef(mrb, E_TYPE_ERROR, "SharedDict#incr: the value of %v is not a number", k);
  if (rc == GW_SHDICT_NOMEM) no_memory(mrb, self, k);
  return from_val(mrb, &out);
}

static mrb_value sd_delete(mrb_state *mrb, mrb_value self)
{
  mrb_value k = key_arg(mrb, mrb_get_arg1(mrb));
  return mrb_bool_value(gw_shdict_delete(dict(mrb, self), RSTRING_PTR(k), (size_t)RSTRING_LEN(k), now_ms()) == 1);
}

/* Seconds left (Float), 0 for never, nil when absent. */
static mrb_value sd_ttl(mrb_state *mrb, mrb_value self)
{
  mrb_value k = key_arg(mrb, mrb_get_arg1(mrb));
  int64_t ms = gw_shdict_ttl(dict(mrb, self), RSTRING_PTR(k), (size_t)RSTRING_LEN(k), now_ms());
  return ms < 0 ? mrb_nil_value() : mrb_float_value(mrb, (mrb_float)ms / 1000.0);
}

static mrb_value sd_keys(mrb_state *mrb, mrb_value self)
{
  mrb_int limit = 1024;
  mrb_get_args(mrb, "|i", &limit);
  char **keys;
  size_t *lens;
  long n = gw_shdict_keys(dict(mrb, self), (long)limit, now_ms(), &keys, &lens);
  if (n < 0) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  mrb_value a = mrb_ary_new_capa(mrb, n);
  int ai = mrb_gc_arena_save(mrb);
  for (long i = 0; i < n; i++) {
    mrb_ary_push(mrb, a, mrb_str_new(mrb, keys[i], (mrb_int)lens[i])); /* no raise short of OOM */
    mrb_gc_arena_restore(mrb, ai);
  }
  gw_shdict_keys_free(keys, lens);
  return a;
}

static mrb_value sd_flush_all(mrb_state *mrb, mrb_value self)
{
  gw_shdict_flush_all(dict(mrb, self));
  return mrb_nil_value();
}

static mrb_value sd_capacity(mrb_state *mrb, mrb_value self)
{
  return mrb_int_value(mrb, (mrb_int)gw_shdict_capacity(dict(mrb, self)));
}

static mrb_value sd_free_space(mrb_state *mrb, mrb_value self)
{
  return mrb_int_value(mrb, (mrb_int)gw_shdict_free_space(dict(mrb, self)));
}

static mrb_value sd_count(mrb_state *mrb, mrb_value self)
{
  return mrb_int_value(mrb, (mrb_int)gw_shdict_count(dict(mrb, self)));
}

static mrb_value sd_stats(mrb_state *mrb, mrb_value self)
{
  gw_shdict_t *d = dict(mrb, self);
  mrb_value a = mrb_ary_new(mrb);
  mrb_ary_push(mrb, a, mrb_int_value(mrb, (mrb_int)gw_shdict_evictions(d)));
  mrb_ary_push(mrb, a, mrb_int_value(mrb, (mrb_int)gw_shdict_recoveries(d)));
  return a;
}

void mrb_mruby_gateway_shdict_gem_init(mrb_state *mrb)
{
  struct RClass *gw = mrb_module_get(mrb, "Gateway");
  struct RClass *c = mrb_define_class_under(mrb, gw, "SharedDict", mrb->object_class);
  MRB_SET_INSTANCE_TT(c, MRB_TT_DATA);
  mrb_define_class_method(mrb, c, "_gw_find", sd_find, MRB_ARGS_REQ(1));
  mrb_define_class_method(mrb, c, "_gw_declare", sd_declare, MRB_ARGS_REQ(2));
  mrb_define_method(mrb, c, "get", sd_get, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, c, "_gw_set", sd_set, MRB_ARGS_ARG(2, 1));
  mrb_define_method(mrb, c, "_gw_add", sd_add, MRB_ARGS_ARG(2, 1));
  mrb_define_method(mrb, c, "_gw_incr", sd_incr, MRB_ARGS_REQ(4));
  mrb_define_method(mrb, c, "delete", sd_delete, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, c, "ttl", sd_ttl, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, c, "keys", sd_keys, MRB_ARGS_OPT(1));
  mrb_define_method(mrb, c, "flush_all", sd_flush_all, MRB_ARGS_NONE());
  mrb_define_method(mrb, c, "size", sd_capacity, MRB_ARGS_NONE());
  mrb_define_method(mrb, c, "free_space", sd_free_space, MRB_ARGS_NONE());
  mrb_define_method(mrb, c, "count", sd_count, MRB_ARGS_NONE());
  mrb_define_method(mrb, c, "_gw_stats", sd_stats, MRB_ARGS_NONE());
}

void mrb_mruby_gateway_shdict_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
