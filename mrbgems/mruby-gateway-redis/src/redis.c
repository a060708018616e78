/* redis.c - Async::Redis's natives over the core's Redis client
 * (gateway/data/redis.c; redis_sentinel.c and redis_cluster.c for
 * "sentinel:" and "cluster:" addresses): the per-worker clients (one pool
 * per address, db and password, shared by every Async::Redis object naming
 * them), command encoding, the pending operation registered on the
 * request, and the replies turned into Ruby objects. Pub/sub messages run
 * their block in a task fiber (gw_mrb_task_start). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/read.h>
#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/error.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "gw_mruby.h"
#include "log.h"
#include "redis.h"
#include "redis_cluster.h"
#include "redis_sentinel.h"

/* -- an object's servers: this worker's clients (gw_mrb_servers_t) ------------ */

typedef struct {
  gw_mrb_servers_t servers;
  int db, pool;
  char *password;
} handle_t;

static void *make_client(struct event_base *base, const char *addr, const void *params, char *err, size_t errlen)
{
  const handle_t *h = params;
  gw_redis_params_t p = {addr, h->db, h->password, h->pool};
  if (strncmp(addr, "cluster:", 8) == 0) return gw_redis_cluster_new(base, &p, err, errlen);
  if (strncmp(addr, "sentinel:", 9) == 0) return gw_redis_sentinel_new(base, &p, err, errlen);
  return gw_redis_new(base, &p, err, errlen);
}

static void destroy_client(void *r)
{
  gw_redis_free(r);
}

static const gw_mrb_client_maker_t maker = {"redis", make_client, destroy_client};

static void handle_free(mrb_state *mrb, void *p)
{
  handle_t *h = p;
  (void)mrb;
  if (h == NULL) return;
  gw_mrb_servers_dispose(&h->servers);
  free(h->password);
  free(h);
}

static const struct mrb_data_type handle_type = {"Async::Redis", handle_free};

/* _gw_init(addrs, db, password, pool, timeout) */
static mrb_value redis_init(mrb_state *mrb, mrb_value self)
{
  mrb_value addrs, password;
  mrb_int db, pool;
  mrb_float timeout;
  mrb_get_args(mrb, "Aioif", &addrs, &db, &password, &pool, &timeout);
  handle_t *h = calloc(1, sizeof(*h));
  if (h == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  DATA_TYPE(self) = &handle_type;
  DATA_PTR(self) = h;
  h->db = (int)db;
  h->pool = (int)pool;
  h->password = gw_mrb_strdup_or_null(mrb, password);
  char creds[600];
  snprintf(creds, sizeof(creds), "%d\n%s", h->db, h->password ? h->password : "");
  gw_mrb_servers_init(mrb, &h->servers, addrs, creds, timeout);
  return self;
}

/* The next server's client (round robin over the servers). */
static gw_redis_t *pick(mrb_state *mrb, handle_t *h)
{
  return gw_mrb_servers_next(mrb, &h->servers, "Async::Redis", &maker, h);
}

/* -- encoding ------------------------------------------------------------------ */

static void encode_command(mrb_state *mrb, gw_buf_t *b, mrb_value args)
{
  mrb_int argc = RARRAY_LEN(args);
  if (argc == 0) mrb_raise(mrb, E_ARGUMENT_ERROR, "Async::Redis: a command needs a name, e.g. call(\"GET\", key)");
  int rc = gw_redis_append_array(b, (size_t)argc);
  for (mrb_int i = 0; i < argc && rc == 0; i++) {
    mrb_value a = RARRAY_PTR(args)[i];
    if (mrb_nil_p(a)) mrb_raise(mrb, E_ARGUMENT_ERROR, "Async::Redis: nil is not a command argument");
    if (!mrb_string_p(a)) a = mrb_obj_as_string(mrb, a);
    rc = gw_redis_append_bulk(b, RSTRING_PTR(a), (size_t)RSTRING_LEN(a));
  }
  if (rc != 0) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
}

/* -- replies to Ruby -------------------------------------------------------------- */

static struct RClass *error_class(mrb_state *mrb)
{
  return mrb_class_get_under(mrb, mrb_class_get_under(mrb, mrb_module_get(mrb, "Async"), "Redis"), "Error");
}

static mrb_value to_ruby(mrb_state *mrb, const gw_redis_reply_t *r)
{
  switch (r->type) {
  case REDIS_REPLY_STRING:
  case REDIS_REPLY_STATUS: return mrb_str_new(mrb, r->str, (mrb_int)r->len);
  case REDIS_REPLY_INTEGER: return mrb_int_value(mrb, (mrb_int)r->integer);
  case REDIS_REPLY_ERROR: return mrb_exc_new(mrb, error_class(mrb), r->str, (mrb_int)r->len);
  case REDIS_REPLY_ARRAY: {
    mrb_value a = mrb_ary_new_capa(mrb, (mrb_int)r->elements);
    for (size_t i = 0; i < r->elements; i++) mrb_ary_push(mrb, a, to_ruby(mrb, r->element[i]));
    return a;
  }
  default: return mrb_nil_value();
  }
}

enum { MODE_ONE, MODE_PIPELINE, MODE_MULTI };

typedef struct {
  gw_redis_reply_t **replies;
  size_t n;
  int mode;
} convert_t;

static mrb_value convert(mrb_state *mrb, void *ud)
{
  convert_t *c = ud;
  if (c->mode == MODE_ONE) return to_ruby(mrb, c->replies[0]);
  if (c->mode == MODE_MULTI) { /* MULTI's +OK, a +QUEUED each, then EXEC's reply */
    gw_redis_reply_t *exec = c->replies[c->n - 1];
    return to_ruby(mrb, exec); /* EXECABORT: an error, raised; nil: a WATCH failed */
  }
  mrb_value a = mrb_ary_new_capa(mrb, (mrb_int)c->n);
  for (size_t i = 0; i < c->n; i++) mrb_ary_push(mrb, a, to_ruby(mrb, c->replies[i]));
  return a;
}

/* -- one operation, pending on the request --------------------------------------- */

typedef struct {
  gw_mrb_data_call_t base;
  gw_redis_op_t *op;
  int mode;
} call_t;

static void call_cancel(gw_pending_t *p)
{
  call_t *c = (call_t *)p;
  gw_redis_cancel(c->op); /* closes its connection if the reply is unread */
  free(c);
}

static void on_done(gw_err_t err, gw_redis_reply_t **replies, size_t n, void *arg)
{
  call_t *c = arg;
  convert_t cv = {replies, n, c->mode};
  gw_mrb_data_call_done(&c->base, err, convert, &cv);
}

/* _gw_send(commands, mode): mode 0 one command (an Array of arguments),
 * 1 a pipeline, 2 MULTI/EXEC (an Array of such Arrays). Arms the operation;
 * the Ruby side then waits (Async._await). */
static mrb_value redis_send(mrb_state *mrb, mrb_value self)
{
  mrb_value cmds;
  mrb_int mode;
  mrb_get_args(mrb, "Ai", &cmds, &mode);
  handle_t *h = mrb_data_get_ptr(mrb, self, &handle_type);
  if (h == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "Async::Redis: not initialized");
  gw_mrb_check_yieldable(mrb, "Async::Redis");
  gw_redis_t *r = pick(mrb, h);
  /* Encoded into one scratch buffer of this process: an argument that
   * raises leaves nothing to free. */
  static gw_buf_t b;
  b.len = 0;
  size_t nreplies = 1;
  if (mode == MODE_ONE) {
    encode_command(mrb, &b, cmds);
  } else {
    mrb_int n = RARRAY_LEN(cmds);
    if (mode == MODE_MULTI && (gw_redis_append_array(&b, 1) < 0 || gw_redis_append_bulk(&b, "MULTI", 5) < 0))
      mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
    for (mrb_int i = 0; i < n; i++) {
      mrb_value one = RARRAY_PTR(cmds)[i];
      if (!mrb_array_p(one)) mrb_raise(mrb, E_TYPE_ERROR, "Async::Redis: a pipeline holds commands (Arrays)");
      encode_command(mrb, &b, one);
    }
    if (mode == MODE_MULTI && (gw_redis_append_array(&b, 1) < 0 || gw_redis_append_bulk(&b, "EXEC", 4) < 0))
      mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
    nreplies = (size_t)n + (mode == MODE_MULTI ? 2 : 0);
  }
  call_t *c = gw_mrb_data_call_new(mrb, sizeof(*c), "redis", gw_redis_addr(r), &h->servers);
  c->mode = (int)mode;
  c->op = gw_redis_exec(r, b.data, b.len, nreplies, h->servers.timeout_ms, on_done, c);
  if (b.cap > 65536) gw_buf_dispose(&b); /* keep a small one only */
  gw_mrb_data_call_wait(mrb, &c->base, c->op != NULL, call_cancel);
  return mrb_nil_value();
}

/* -- pub/sub ------------------------------------------------------------------------- */

typedef struct subscriber_s {
  struct subscriber_s *next; /* every subscriber of this worker lives for good */
  mrb_state *mrb;
  gw_redis_sub_t *sub;
  mrb_value block;     /* rooted */
  int slot;
  char label[200];
} subscriber_t;

static subscriber_t *subscribers;

static void on_message(gw_redis_reply_t *reply, void *arg)
{
  subscriber_t *s = arg;
  /* ["message", channel, payload] or ["pmessage", pattern, channel, payload];
   * subscribe confirmations are skipped. */
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 || reply->element[0]->type != REDIS_REPLY_STRING) return;
  const char *kind = reply->element[0]->str;
  int pm = strcmp(kind, "pmessage") == 0;
  if (strcmp(kind, "message") != 0 && !(pm && reply->elements == 4)) return;
  gw_redis_reply_t *ch = reply->element[pm ? 2 : 1], *payload = reply->element[pm ? 3 : 2];
  if (ch->type != REDIS_REPLY_STRING || payload->type != REDIS_REPLY_STRING) return;
  mrb_state *mrb = s->mrb;
  int ai = mrb_gc_arena_save(mrb);
  mrb_value args[3] = {s->block, mrb_str_new(mrb, payload->str, (mrb_int)payload->len),
                       mrb_str_new(mrb, ch->str, (mrb_int)ch->len)};
  mrb_value runner = mrb_funcall_argv(mrb, mrb_obj_value(mrb_class_get_under(mrb, mrb_module_get(mrb, "Async"), "Redis")),
                                      mrb_intern_lit(mrb, "_task_for"), 3, args);
  if (mrb->exc) {
    gw_log_error("redis subscriber %s: %s", s->label, "cannot start the block (out of memory)");
    mrb->exc = NULL;
  } else if (gw_mrb_task_start(runner, s->label) != 0) {
    gw_log_error("redis subscriber %s: cannot start the block", s->label);
  }
  mrb_gc_arena_restore(mrb, ai);
}

static void on_state(gw_err_t err, void *arg)
{
  subscriber_t *s = arg;
  if (err.kind != GW_OK) gw_log_warn("redis subscriber %s: %s; reconnecting", s->label, err.msg);
}

/* _gw_subscribe(channels, pattern, block): a dedicated connection of this
 * worker; the block runs in a task fiber per message. */
static mrb_value redis_subscribe(mrb_state *mrb, mrb_value self)
{
  mrb_value chans, block;
  mrb_bool pattern;
  mrb_get_args(mrb, "Abo", &chans, &pattern, &block);
  handle_t *h = mrb_data_get_ptr(mrb, self, &handle_type);
  if (h == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "Async::Redis: not initialized");
  gw_redis_t *r = pick(mrb, h);
  mrb_value cmd = mrb_ary_new(mrb);
  mrb_ary_push(mrb, cmd, mrb_str_new_cstr(mrb, pattern ? "PSUBSCRIBE" : "SUBSCRIBE"));
  for (mrb_int i = 0; i < RARRAY_LEN(chans); i++) mrb_ary_push(mrb, cmd, RARRAY_PTR(chans)[i]);
  gw_buf_t b = GW_BUF_INIT;
  encode_command(mrb, &b, cmd); /* strings only (checked in Ruby): does not raise */
  subscriber_t *s = calloc(1, sizeof(*s));
  if (s == NULL) {
    gw_buf_dispose(&b);
    mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  }
  s->mrb = mrb;
  s->block = block;
  s->slot = gw_mrb_root(block);
  snprintf(s->label, sizeof(s->label), "/redis-subscribe/%s", gw_redis_addr(r));
  s->sub = gw_redis_subscribe(r, b.data, b.len, on_message, on_state, s);
  gw_buf_dispose(&b);
  if (s->sub == NULL) {
    gw_mrb_unroot(s->slot);
    free(s);
    mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  }
  s->next = subscribers;
  subscribers = s;
  return mrb_nil_value();
}

void mrb_mruby_gateway_redis_gem_init(mrb_state *mrb)
{
  struct RClass *async = mrb_define_module(mrb, "Async");
  struct RClass *c = mrb_define_class_under(mrb, async, "Redis", mrb->object_class);
  MRB_SET_INSTANCE_TT(c, MRB_TT_DATA);
  mrb_define_method(mrb, c, "_gw_init", redis_init, MRB_ARGS_REQ(5));
  mrb_define_method(mrb, c, "_gw_send", redis_send, MRB_ARGS_REQ(2));
  mrb_define_method(mrb, c, "_gw_subscribe", redis_subscribe, MRB_ARGS_REQ(3));
}

void mrb_mruby_gateway_redis_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
