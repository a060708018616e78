/* subrequest.c - Async::HTTP: sub-requests as start-now/join-later tasks.
 *
 * Async::HTTP._gw_start creates an Async::HTTP::Task and starts the core
 * sub-request (gateway/script/subrequest.c). While it runs, the Task object is a GC
 * root and the task is pending on the parent request (an abort cancels it).
 * On completion the result (Async::HTTP::Response or an exception) is stored
 * in the Task's @result; if the handler is parked in Task#join (_gw_join),
 * its fiber is resumed with it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/hash.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "async.h"
#include "gw_mruby.h"

typedef struct {
  gw_pending_t pending;   /* on the parent request */
  gw_request_t *parent;
  mrb_state *mrb;
  gw_subreq_t *sub;
  mrb_value self;         /* the Task object */
  int slot;               /* its GC root while running */
  int waiting;            /* the parent fiber is parked in join */
} task_t;

/* Looked up once at gem init (one VM per process; workers inherit it). */
static struct {
  struct RClass *response, *task;
  mrb_sym iv_result, iv_done, iv_status, iv_body, iv_headers, iv_raw;
} k;

/* Ownership stays with the C side: the Task's pointer is cleared when the
 * task completes or is cancelled, and the struct freed there. */
static const struct mrb_data_type task_type = {"Async::HTTP::Task", NULL};

static void task_release(task_t *t)
{
  DATA_PTR(t->self) = NULL;
  gw_mrb_unroot(t->slot);
  free(t);
}

static void task_cancel(gw_pending_t *p)
{
  task_t *t = (task_t *)p;
  gw_subrequest_cancel(t->sub);
  task_release(t);
}

/* An Async::HTTP::Response. Most handlers only read the body, so the header
 * fields are kept packed in one String ("name\0value\0...": neither may
 * hold a NUL) and turned into a Gateway::Headers by #headers on first use. */
static mrb_value make_response(mrb_state *mrb, int status, gw_headers_t *headers, struct evbuffer *body)
{
  size_t raw_len = 0;
  for (size_t i = 0; i < headers->count; i++) raw_len += headers->items[i].name_len + headers->items[i].value_len + 2;
  mrb_value raw = mrb_str_new(mrb, NULL, (mrb_int)raw_len);
  char *p = RSTRING_PTR(raw);
  for (size_t i = 0; i < headers->count; i++) {
    const gw_header_t *f = &headers->items[i];
    memcpy(p, f->name, f->name_len + 1); /* with its NUL */
    p += f->name_len + 1;
    memcpy(p, f->value, f->value_len + 1);
    p += f->value_len + 1;
  }
  size_t len = evbuffer_get_length(body);
  mrb_value b = mrb_str_new(mrb, NULL, (mrb_int)len);
  evbuffer_remove(body, RSTRING_PTR(b), len);
  mrb_value res = mrb_obj_value(mrb_obj_alloc(mrb, MRB_TT_OBJECT, k.response));
  mrb_iv_set(mrb, res, k.iv_status, mrb_fixnum_value(status));
  mrb_iv_set(mrb, res, k.iv_body, b);
  mrb_iv_set(mrb, res, k.iv_raw, raw);
  return res;
}

/* Async::HTTP::Response#headers: the packed fields as a Gateway::Headers. */
static mrb_value response_headers(mrb_state *mrb, mrb_value self)
{
  mrb_value h = mrb_iv_get(mrb, self, k.iv_headers);
  if (!mrb_nil_p(h)) return h;
  mrb_value raw = mrb_iv_get(mrb, self, k.iv_raw);
  gw_headers_t hs;
  gw_headers_init(&hs);
  if (mrb_string_p(raw)) {
    const char *p = RSTRING_PTR(raw), *end = p + RSTRING_LEN(raw);
    while (p < end) {
      size_t name_len = strlen(p);
      const char *value = p + name_len + 1;
      if (value >= end) break;
      size_t value_len = strlen(value);
      gw_headers_add(&hs, p, name_len, value, value_len);
      p = value + value_len + 1;
    }
  }
  h = gw_mrb_headers_new(mrb, &hs);
  gw_headers_dispose(&hs);
  mrb_iv_set(mrb, self, k.iv_headers, h);
  mrb_iv_remove(mrb, self, k.iv_raw);
  return h;
}

static void on_done(int status, gw_headers_t *headers, struct evbuffer *body, gw_err_t err, void *arg)
{
  task_t *t = arg;
  gw_request_t *parent = t->parent;
  mrb_state *mrb = t->mrb;
  int ai = mrb_gc_arena_save(mrb);
  gw_request_pending_remove(&t->pending);
  mrb_value result;
  if (err.kind != GW_OK)
    result = gw_mrb_error(mrb, gw_err_is_timeout(err.kind) ? "Gateway::TimeoutError" : "Gateway::UpstreamError", err.msg);
  else
    result = make_response(mrb, status, headers, body);
  mrb_value self = t->self;
  mrb_iv_set(mrb, self, k.iv_result, result);
  mrb_iv_set(mrb, self, k.iv_done, mrb_true_value());
  int waiting = t->waiting;
  task_release(t);
  if (waiting) gw_fiber_resume(parent, result);
  mrb_gc_arena_restore(mrb, ai);
}

/* Async::HTTP._gw_start(target, method, headers_hash_or_nil, body_or_nil, timeout_or_nil),
 * for Async::HTTP.start/.sub_request (method upper-cased). Checks the
 * arguments itself, without an mrb_get_args format: one call per sub-request. */
static mrb_value http_start(mrb_state *mrb, mrb_value self)
{
  (void)self;
  if (mrb_get_argc(mrb) != 5) mrb_raise(mrb, E_ARGUMENT_ERROR, "_gw_start(target, method, headers, body, timeout)");
  const mrb_value *argv = mrb_get_argv(mrb);
  mrb_value headers = argv[2], body = argv[3], timeout = argv[4];
  if (!mrb_string_p(argv[0]))
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "sub_request: target must be a String, got %!v", argv[0]);
  if (!mrb_string_p(argv[1])) mrb_raisef(mrb, E_ARGUMENT_ERROR, "sub_request: unsupported method %!v", argv[1]);
  if (!mrb_nil_p(body) && !mrb_string_p(body)) mrb_raise(mrb, E_ARGUMENT_ERROR, "sub_request: body must be a String");
  if (!mrb_nil_p(timeout) && !mrb_integer_p(timeout) && !mrb_float_p(timeout))
    mrb_raise(mrb, E_ARGUMENT_ERROR, "sub_request: timeout must be a positive number");
  const char *target = mrb_string_cstr(mrb, argv[0]), *method = mrb_string_cstr(mrb, argv[1]);
  gw_request_t *parent = gw_mrb_current_request(mrb);
  if (target[0] != '/' && strncmp(target, "http://", 7) != 0 && strncmp(target, "https://", 8) != 0 &&
      strncmp(target, "h2c://", 6) != 0 && strncmp(target, "h2://", 5) != 0)
    mrb_raisef(mrb, E_ARGUMENT_ERROR,
               "sub_request: target must be a location path (\"/x\") or an http://, https://, h2c:// or h2:// URL, got %s",
               target);

  gw_headers_t hs;
  gw_headers_init(&hs);
  if (mrb_hash_p(headers)) {
    mrb_value keys = mrb_hash_keys(mrb, headers);
    for (mrb_int i = 0; i < RARRAY_LEN(keys); i++) {
      mrb_value k = mrb_obj_as_string(mrb, mrb_ary_ref(mrb, keys, i));
      mrb_value v = mrb_obj_as_string(mrb, mrb_hash_get(mrb, headers, mrb_ary_ref(mrb, keys, i)));
      if (!gw_header_field_is_safe(RSTRING_PTR(k), (size_t)RSTRING_LEN(k), RSTRING_PTR(v), (size_t)RSTRING_LEN(v))) {
        gw_headers_dispose(&hs);
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "sub_request: invalid header %v (CR, LF or NUL, or a bad name)", k);
      }
      gw_headers_add(&hs, RSTRING_PTR(k), (size_t)RSTRING_LEN(k), RSTRING_PTR(v), (size_t)RSTRING_LEN(v));
    }
  }
  gw_subreq_params_t p = {
    .method = NULL,
    .target = target,
    .headers = &hs,
    .body = mrb_string_p(body) ? RSTRING_PTR(body) : NULL,
    .body_len = mrb_string_p(body) ? (size_t)RSTRING_LEN(body) : 0,
    .timeout_ms = 0,
  };
  if (!mrb_nil_p(timeout)) {
    mrb_float t = mrb_as_float(mrb, timeout);
    if (!(t > 0)) mrb_raise(mrb, E_ARGUMENT_ERROR, "sub_request: timeout must be a positive number");
    if (t > 86400.0) mrb_raise(mrb, E_ARGUMENT_ERROR, "sub_request: timeout must be at most 86400 seconds");
    p.timeout_ms = (int)ceil(t * 1000); /* 0.0005 is half a millisecond, not "no timeout" */
  }
  static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"};
  for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
    if (strcmp(method, methods[i]) == 0) p.method = methods[i];
  if (p.method == NULL) {
    gw_headers_dispose(&hs);
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "sub_request: unsupported method %s", method);
  }

  task_t *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    gw_headers_dispose(&hs);
    mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  }
  t->self = mrb_obj_value(mrb_data_object_alloc(mrb, k.task, t, &task_type));
  t->parent = parent;
  t->mrb = mrb;
  t->sub = gw_subrequest_start(parent, &p, on_done, t);
  gw_headers_dispose(&hs);
  if (t->sub == NULL) {
    DATA_PTR(t->self) = NULL;
    free(t);
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "sub_request: cannot start a request to %s (a bad URL, or sub-requests nested too deep)",
               target);
  }
  t->slot = gw_mrb_root(t->self);
  gw_request_pending_add(parent, &t->pending, task_cancel);
  return t->self;
}

/* Task#_gw_join: parks the handler's fiber until this task completes (as
 * Fiber.yield does, in the same call) and returns what it completed with. */
static mrb_value task_join(mrb_state *mrb, mrb_value self)
{
  task_t *t = DATA_PTR(self);
  if (t == NULL) return mrb_iv_get(mrb, self, k.iv_result); /* already done */
  if (t->parent != gw_mrb_current_request(mrb))
    mrb_raise(mrb, E_RUNTIME_ERROR, "a sub-request can only be joined by the request that started it");
  if (t->waiting) mrb_raise(mrb, E_RUNTIME_ERROR, "this sub-request is already being joined");
  gw_async_check_yieldable(mrb, "Async::HTTP (join)");
  t->waiting = 1;
  gw_trace_wait(t->parent, "a sub-request's response");
  return mrb_fiber_yield(mrb, 0, NULL);
}

/* Async::HTTP._gw_set_last_response(res) -> res, kept for the current request. */
static mrb_value http_set_last(mrb_state *mrb, mrb_value self)
{
  mrb_value res = mrb_get_arg1(mrb);
  (void)self;
  gw_mrb_set_last_response(mrb, gw_mrb_current_request(mrb), res);
  return res;
}

static mrb_value http_last(mrb_state *mrb, mrb_value self)
{
  (void)self;
  return gw_mrb_last_response(gw_mrb_current_request(mrb));
}

void gw_async_subrequest_init(mrb_state *mrb, struct RClass *async)
{
  struct RClass *http = mrb_define_module_under(mrb, async, "HTTP");
  struct RClass *task = mrb_define_class_under(mrb, http, "Task", mrb->object_class);
  MRB_SET_INSTANCE_TT(task, MRB_TT_DATA);
  mrb_undef_class_method(mrb, task, "new");
  mrb_define_module_function(mrb, http, "_gw_start", http_start, MRB_ARGS_REQ(5));
  mrb_define_method(mrb, task, "_gw_join", task_join, MRB_ARGS_NONE());
  k.task = task;
  k.iv_result = mrb_intern_lit(mrb, "@result");
  k.iv_done = mrb_intern_lit(mrb, "@done");
  k.iv_status = mrb_intern_lit(mrb, "@status");
  k.iv_body = mrb_intern_lit(mrb, "@body");
  k.iv_headers = mrb_intern_lit(mrb, "@headers");
  k.iv_raw = mrb_intern_lit(mrb, "@_raw");
  mrb_define_module_function(mrb, http, "_gw_set_last_response", http_set_last, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, http, "last_response", http_last, MRB_ARGS_NONE());
  /* Response's Ruby methods are in mrblib, which loads after this. */
  k.response = mrb_define_class_under(mrb, http, "Response", mrb->object_class);
  mrb_undef_class_method(mrb, k.response, "new");
  mrb_define_method(mrb, k.response, "headers", response_headers, MRB_ARGS_NONE());
}
