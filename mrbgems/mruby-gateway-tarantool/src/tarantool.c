/* tarantool.c - Async::Tarantool's natives over the core's Tarantool client
 * (gateway/data/tarantool.c): an object's servers (the bridge's per-worker
 * clients, one pool per address, user and password), Ruby values packed
 * into msgpack request bodies, replies read in place (iproto.c's reader)
 * into Ruby objects, the pending operation registered on the request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>
#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/error.h>
#include <mruby/hash.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "gw_mruby.h"
#include "iproto.h"
#include "tarantool.h"

#define MAX_DEPTH 32 /* nesting of packed Ruby values and of decoded replies (the C stack is the limit) */

/* -- an object's servers: this worker's clients (gw_mrb_servers_t) ------------ */

typedef struct {
  gw_mrb_servers_t servers;
  char *user, *password;
  int pool;
} handle_t;

static void *make_client(struct event_base *base, const char *addr, const void *params, char *err, size_t errlen)
{
  const handle_t *h = params;
  gw_tnt_params_t p = {addr, h->user, h->password, h->pool};
  return gw_tnt_new(base, &p, err, errlen);
}

static void destroy_client(void *t)
{
  gw_tnt_free(t);
}

static const gw_mrb_client_maker_t maker = {"tarantool", make_client, destroy_client};

static void handle_free(mrb_state *mrb, void *p)
{
  handle_t *h = p;
  (void)mrb;
  if (h == NULL) return;
  gw_mrb_servers_dispose(&h->servers);
  free(h->user);
  free(h->password);
  free(h);
}

static const struct mrb_data_type handle_type = {"Async::Tarantool", handle_free};

/* _gw_init(addrs, user, password, pool, timeout) */
static mrb_value tnt_init(mrb_state *mrb, mrb_value self)
{
  mrb_value addrs, user, password;
  mrb_int pool;
  mrb_float timeout;
  mrb_get_args(mrb, "Aooif", &addrs, &user, &password, &pool, &timeout);
  handle_t *h = calloc(1, sizeof(*h));
  if (h == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  DATA_TYPE(self) = &handle_type;
  DATA_PTR(self) = h;
  h->pool = (int)pool;
  h->user = gw_mrb_strdup_or_null(mrb, user);
  h->password = gw_mrb_strdup_or_null(mrb, password);
  char creds[640];
  snprintf(creds, sizeof(creds), "%s\n%s", h->user ? h->user : "", h->password ? h->password : "");
  gw_mrb_servers_init(mrb, &h->servers, addrs, creds, timeout);
  return self;
}

/* -- Ruby -> msgpack -------------------------------------------------------------- */

static void pack_failed(mrb_state *mrb)
{
  mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
}

static void pack(mrb_state *mrb, msgpack_packer *pk, mrb_value v, int depth)
{
  if (depth > MAX_DEPTH) mrb_raise(mrb, E_ARGUMENT_ERROR, "Async::Tarantool: arguments nested too deeply (or cyclic)");
  int rc = 0;
  switch (mrb_type(v)) {
  case MRB_TT_FALSE: rc = mrb_nil_p(v) ? msgpack_pack_nil(pk) : msgpack_pack_false(pk); break;
  case MRB_TT_TRUE: rc = msgpack_pack_true(pk); break;
  case MRB_TT_INTEGER: rc = msgpack_pack_int64(pk, (int64_t)mrb_integer(v)); break;
  case MRB_TT_FLOAT: rc = msgpack_pack_double(pk, (double)mrb_float(v)); break;
  case MRB_TT_SYMBOL: v = mrb_sym_str(mrb, mrb_symbol(v)); /* fall through */
  case MRB_TT_STRING:
    rc = msgpack_pack_str(pk, (size_t)RSTRING_LEN(v));
    if (rc == 0) rc = msgpack_pack_str_body(pk, RSTRING_PTR(v), (size_t)RSTRING_LEN(v));
    break;
  case MRB_TT_ARRAY: {
    mrb_int n = RARRAY_LEN(v);
    rc = msgpack_pack_array(pk, (size_t)n);
    for (mrb_int i = 0; i < n && rc == 0; i++) pack(mrb, pk, mrb_ary_ref(mrb, v, i), depth + 1);
    break;
  }
  case MRB_TT_HASH: {
    mrb_value keys = mrb_hash_keys(mrb, v);
    mrb_int n = RARRAY_LEN(keys);
    rc = msgpack_pack_map(pk, (size_t)n);
    for (mrb_int i = 0; i < n && rc == 0; i++) {
      mrb_value k = mrb_ary_ref(mrb, keys, i);
      pack(mrb, pk, k, depth + 1);
      pack(mrb, pk, mrb_hash_get(mrb, v, k), depth + 1);
    }
    break;
  }
  default: pack(mrb, pk, mrb_obj_as_string(mrb, v), depth); break;
  }
  if (rc != 0) pack_failed(mrb);
}

/* -- msgpack -> Ruby --------------------------------------------------------------- */

/* The checked object at *p as Ruby objects, read in place (no msgpack-c
 * zone in between); deeper than MAX_DEPTH raises Gateway::UpstreamError. */
static mrb_value to_ruby(mrb_state *mrb, const char **p, int depth)
{
  gw_mp_t t;
  gw_mp_next(p, &t);
  switch (t.type) {
  case GW_MP_NIL: return mrb_nil_value();
  case GW_MP_BOOL: return mrb_bool_value(t.v.b);
  case GW_MP_UINT:
    if (t.v.u > (uint64_t)MRB_INT_MAX) return mrb_float_value(mrb, (mrb_float)t.v.u);
    return mrb_int_value(mrb, (mrb_int)t.v.u);
  case GW_MP_INT: return mrb_int_value(mrb, (mrb_int)t.v.i);
  case GW_MP_FLOAT: return mrb_float_value(mrb, (mrb_float)t.v.f);
  case GW_MP_STR:
  case GW_MP_BIN:
  case GW_MP_EXT: return mrb_str_new(mrb, t.ptr, (mrb_int)t.len); /* ext (decimal, uuid): raw */
  case GW_MP_ARRAY:
  case GW_MP_MAP: break;
  }
  if (depth >= MAX_DEPTH)
    mrb_exc_raise(mrb, gw_mrb_error(mrb, "Gateway::UpstreamError", "tarantool sent a reply nested too deeply"));
  if (t.type == GW_MP_ARRAY) {
    mrb_value a = mrb_ary_new_capa(mrb, (mrb_int)t.len);
    for (uint32_t i = 0; i < t.len; i++) mrb_ary_push(mrb, a, to_ruby(mrb, p, depth + 1));
    return a;
  }
  mrb_value h = mrb_hash_new_capa(mrb, (mrb_int)t.len);
  for (uint32_t i = 0; i < t.len; i++) {
    mrb_value k = to_ruby(mrb, p, depth + 1);
    mrb_hash_set(mrb, h, k, to_ruby(mrb, p, depth + 1));
  }
  return h;
}

/* The value under key in the reply body, or nil. */
static mrb_value body_value(mrb_state *mrb, const char *body, size_t len, uint64_t key)
{
  const char *v;
  size_t vlen;
  if (gw_iproto_body_find(body, len, key, &v, &vlen) == 0) return mrb_nil_value();
  return to_ruby(mrb, &v, 1);
}

typedef struct {
  uint64_t code;
  const char *body;
  size_t len;
  int whole;
} convert_t;

static mrb_value convert(mrb_state *mrb, void *ud)
{
  convert_t *cv = ud;
  if (cv->code == 0 && cv->whole) {
    const char *p = cv->body;
    return cv->len > 0 ? to_ruby(mrb, &p, 0) : mrb_hash_new(mrb);
  }
  if (cv->code == 0) return body_value(mrb, cv->body, cv->len, GW_IPROTO_KEY_DATA);
  mrb_value errmsg = body_value(mrb, cv->body, cv->len, GW_IPROTO_KEY_ERROR);
  struct RClass *cls =
      mrb_class_get_under(mrb, mrb_class_get_under(mrb, mrb_module_get(mrb, "Async"), "Tarantool"), "Error");
  if (!mrb_string_p(errmsg)) errmsg = mrb_format(mrb, "tarantool error %d", (int)(cv->code & 0x7fff));
  mrb_value exc = mrb_exc_new_str(mrb, cls, errmsg);
  mrb_iv_set(mrb, exc, mrb_intern_lit(mrb, "@code"), mrb_int_value(mrb, (mrb_int)(cv->code & 0x7fff)));
  return exc;
}

/* -- one request, pending on the request -------------------------------------------- */

typedef struct {
  gw_mrb_data_call_t base;
  gw_tnt_op_t *op;
  int whole; /* the reply's whole body (EXECUTE), not its DATA */
} call_t;

static void call_cancel(gw_pending_t *p)
{
  call_t *c = (call_t *)p;
  gw_tnt_cancel(c->op); /* its connection is retired: its reply is never read as another's */
  free(c);
}

static void on_done(gw_err_t err, uint64_t code, const char *body, size_t len, void *arg)
{
  call_t *c = arg;
  convert_t cv = {code, body, len, c->whole};
  gw_mrb_data_call_done(&c->base, err, convert, &cv);
}

/* Sends a request of type whose body is the Hash body or, when it is nil,
 * the map of the n pairs kv (key, value, ...); arms the request: the Ruby
 * side then waits (Fiber.yield) for on_done's value. */
static void arm(mrb_state *mrb, mrb_value self, uint32_t type, int whole, mrb_value body, const mrb_value *kv, int n)
{
  handle_t *h = mrb_data_get_ptr(mrb, self, &handle_type);
  if (h == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "Async::Tarantool: not initialized");
  gw_mrb_check_yieldable(mrb, "Async::Tarantool");
  gw_tnt_t *t = gw_mrb_servers_next(mrb, &h->servers, "Async::Tarantool", &maker, h);
  /* One scratch buffer of this process: a value that raises leaves nothing to free. */
  static gw_buf_t b;
  b.len = 0;
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, gw_iproto_buf_write);
  if (!mrb_nil_p(body)) {
    pack(mrb, &pk, body, 0);
  } else {
    if (msgpack_pack_map(&pk, (size_t)n) != 0) pack_failed(mrb);
    for (int k = 0; k < 2 * n; k++) pack(mrb, &pk, kv[k], 1);
  }
  call_t *c = gw_mrb_data_call_new(mrb, sizeof(*c), "tarantool", gw_tnt_addr(t), &h->servers);
  c->whole = whole;
  c->op = gw_tnt_exec(t, type, b.data, b.len, h->servers.timeout_ms, on_done, c);
  if (b.cap > 65536) gw_buf_dispose(&b); /* keep a small one only */
  gw_mrb_data_call_wait(mrb, &c->base, c->op != NULL, call_cancel);
}

/* _gw_send(type, body): body a Hash (iproto keys => values); the reply's DATA. */
static mrb_value tnt_send(mrb_state *mrb, mrb_value self)
{
  mrb_int type;
  mrb_value body;
  mrb_get_args(mrb, "iH", &type, &body);
  arm(mrb, self, (uint32_t)type, 0, body, NULL, 0);
  return mrb_nil_value();
}

/* _gw_call(fn, args), _gw_eval(expr, args): the hot path of a handler
 * calling Tarantool, so no Hash is built and no format string parsed. */
static void call_like(mrb_state *mrb, mrb_value self, uint32_t type, uint64_t key)
{
  const mrb_value *argv = mrb_get_argv(mrb);
  if (mrb_get_argc(mrb) != 2 || !mrb_string_p(argv[0]) || !mrb_array_p(argv[1]))
    mrb_raise(mrb, E_ARGUMENT_ERROR, "Async::Tarantool: a name (String) and an Array of arguments");
  mrb_value kv[4] = {mrb_int_value(mrb, (mrb_int)key), argv[0], mrb_int_value(mrb, GW_IPROTO_KEY_TUPLE), argv[1]};
  arm(mrb, self, type, 0, mrb_nil_value(), kv, 2);
}

static mrb_value tnt_call(mrb_state *mrb, mrb_value self)
{
  call_like(mrb, self, GW_IPROTO_CALL, GW_IPROTO_KEY_FUNCTION);
  return mrb_nil_value();
}

static mrb_value tnt_eval(mrb_state *mrb, mrb_value self)
{
  call_like(mrb, self, GW_IPROTO_EVAL, GW_IPROTO_KEY_EXPR);
  return mrb_nil_value();
}

/* _gw_execute(sql, binds): SQL EXECUTE; the reply's whole body as a Hash
 * (METADATA, DATA, SQL_INFO by their iproto keys), shaped in mrblib. */
static mrb_value tnt_execute(mrb_state *mrb, mrb_value self)
{
  mrb_value sql, binds;
  mrb_get_args(mrb, "SA", &sql, &binds);
  mrb_value kv[4] = {mrb_int_value(mrb, GW_IPROTO_KEY_SQL_TEXT), sql, mrb_int_value(mrb, GW_IPROTO_KEY_SQL_BIND), binds};
  arm(mrb, self, GW_IPROTO_EXECUTE, 1, mrb_nil_value(), kv, 2);
  return mrb_nil_value();
}

void mrb_mruby_gateway_tarantool_gem_init(mrb_state *mrb)
{
  struct RClass *async = mrb_define_module(mrb, "Async");
  struct RClass *c = mrb_define_class_under(mrb, async, "Tarantool", mrb->object_class);
  MRB_SET_INSTANCE_TT(c, MRB_TT_DATA);
  mrb_define_method(mrb, c, "_gw_init", tnt_init, MRB_ARGS_REQ(5));
  mrb_define_method(mrb, c, "_gw_send", tnt_send, MRB_ARGS_REQ(2));
  mrb_define_method(mrb, c, "_gw_call", tnt_call, MRB_ARGS_REQ(2));
  mrb_define_method(mrb, c, "_gw_eval", tnt_eval, MRB_ARGS_REQ(2));
  mrb_define_method(mrb, c, "_gw_execute", tnt_execute, MRB_ARGS_REQ(2));
}

void mrb_mruby_gateway_tarantool_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
