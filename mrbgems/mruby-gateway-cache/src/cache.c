/* cache.c - Gateway::Cache's natives over gateway/cache_store.c: zones
 * declared by the config (`cache :api, ...`), found by name, purged, their
 * counters; and Gateway::Request#_gw_cache_prepare, through which a
 * location's key:/bypass: lambdas hand their verdict to gateway/cache.c. */
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/hash.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "cache_store.h"
#include "gw_mruby.h"
#include "request.h"

static const struct mrb_data_type zone_type = {"Gateway::Cache", NULL}; /* the mapping outlives the VM */

static gw_cache_store_t *zone(mrb_state *mrb, mrb_value self)
{
  return mrb_data_get_ptr(mrb, self, &zone_type);
}

static mrb_value c_find(mrb_state *mrb, mrb_value self)
{
  mrb_value name;
  mrb_get_args(mrb, "S", &name);
  gw_cache_store_t *s = gw_cache_store_find(mrb_string_cstr(mrb, name));
  if (s == NULL) return mrb_nil_value();
  mrb_value v = mrb_obj_value(mrb_data_object_alloc(mrb, mrb_class_ptr(self), s, &zone_type));
  mrb_iv_set(mrb, v, mrb_intern_lit(mrb, "@name"), name);
  return v;
}

/* _gw_declare(name, memory, path or nil, max_size): checked by the DSL. */
static mrb_value c_declare(mrb_state *mrb, mrb_value self)
{
  mrb_value name, path;
  mrb_int memory, max_size;
  char err[512];
  (void)self;
  mrb_get_args(mrb, "Sioi", &name, &memory, &path, &max_size);
  const char *p = mrb_nil_p(path) ? NULL : mrb_string_cstr(mrb, path);
  if (gw_cache_store_declare(mrb_string_cstr(mrb, name), (size_t)memory, p, (uint64_t)max_size, err, sizeof(err)) != 0)
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "cache :%v: %s", name, err);
  return mrb_nil_value();
}

static mrb_value c_purge(mrb_state *mrb, mrb_value self)
{
  mrb_value key;
  mrb_get_args(mrb, "S", &key);
  return mrb_int_value(mrb, (mrb_int)gw_cache_store_purge(zone(mrb, self), RSTRING_PTR(key), (size_t)RSTRING_LEN(key)));
}

static mrb_value c_purge_prefix(mrb_state *mrb, mrb_value self)
{
  mrb_value prefix;
  mrb_get_args(mrb, "S", &prefix);
  return mrb_int_value(mrb, (mrb_int)gw_cache_store_purge_prefix(zone(mrb, self), RSTRING_PTR(prefix),
                                                                 (size_t)RSTRING_LEN(prefix)));
}

static mrb_value c_stats(mrb_state *mrb, mrb_value self)
{
  gw_cache_stats_t st;
  gw_cache_store_stats(zone(mrb, self), &st);
  mrb_value h = mrb_hash_new(mrb);
#define PUT(f) mrb_hash_set(mrb, h, mrb_symbol_value(mrb_intern_lit(mrb, #f)), mrb_int_value(mrb, (mrb_int)st.f))
  PUT(hits);
  PUT(misses);
  PUT(stores);
  PUT(store_failures);
  PUT(evictions);
  PUT(purges);
  PUT(bad_files);
  PUT(entries);
  PUT(mem_bytes);
  PUT(mem_capacity);
  PUT(disk_bytes);
  PUT(max_size);
#undef PUT
  return h;
}

/* req._gw_cache_prepare(key or nil, bypass): what the location's key: and
 * bypass: lambdas said for this request (cache.h). */
static mrb_value req_cache_prepare(mrb_state *mrb, mrb_value self)
{
  mrb_value key;
  mrb_bool bypass;
  mrb_get_args(mrb, "ob", &key, &bypass);
  gw_request_t *req = gw_mrb_request_ptr(mrb, self);
  req->cache.bypass = bypass;
  if (mrb_nil_p(key)) return mrb_nil_value();
  if (!mrb_string_p(key)) mrb_raise(mrb, E_TYPE_ERROR, "cache: key: must be a String");
  char *k = malloc((size_t)RSTRING_LEN(key) + 1);
  if (k == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  memcpy(k, RSTRING_PTR(key), (size_t)RSTRING_LEN(key));
  k[RSTRING_LEN(key)] = '\0';
  free(req->cache.key);
  req->cache.key = k;
  req->cache.key_len = (size_t)RSTRING_LEN(key);
  return mrb_nil_value();
}

void mrb_mruby_gateway_cache_gem_init(mrb_state *mrb)
{
  struct RClass *gw = mrb_module_get(mrb, "Gateway");
  struct RClass *c = mrb_define_class_under(mrb, gw, "Cache", mrb->object_class);
  MRB_SET_INSTANCE_TT(c, MRB_TT_DATA);
  mrb_define_class_method(mrb, c, "_gw_find", c_find, MRB_ARGS_REQ(1));
  mrb_define_class_method(mrb, c, "_gw_declare", c_declare, MRB_ARGS_REQ(4));
  mrb_define_method(mrb, c, "_gw_purge", c_purge, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, c, "_gw_purge_prefix", c_purge_prefix, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, c, "stats", c_stats, MRB_ARGS_NONE());
  struct RClass *req = mrb_class_get_under(mrb, gw, "Request");
  mrb_define_method(mrb, req, "_gw_cache_prepare", req_cache_prepare, MRB_ARGS_REQ(2));
}

void mrb_mruby_gateway_cache_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
