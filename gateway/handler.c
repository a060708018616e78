/* handler.c - runs handlers in fibers and implements the bridge (gw_mruby.h).
 *
 * Every handler runs in its own mruby Fiber whose body is Gateway::RUNNER
 * (mrbgems/mruby-gateway-request): it calls the location's block with the
 * request, turns a Rack-style result into a response and rescues every
 * exception. A fiber is started and resumed only from the event loop (never
 * from inside another fiber), always from the root context, and through a
 * Ruby proc (Gateway::RESUME), not mrb_fiber_resume(): see there why. A
 * fiber that parks with nothing pending (a bare Fiber.yield) fails its
 * request instead of hanging it. While a fiber is parked its only GC root is
 * one slot of the worker's `roots` array, taken at start and given back at
 * finish or abort.
 *
 * Fibers are reused, as threads in a pool: the runner loops, reporting each
 * job done (gw_mrb_job_done) and yielding for the next. Creating a fiber
 * (its context and stacks) costs more than the rest of a small handler, and
 * the idle ones are few. A fiber that was aborted while parked, died, or
 * grew a large stack is dropped instead. */
#include <ctype.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/error.h>
#include <mruby/hash.h>
#include <mruby/proc.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "gw_mruby.h"
#include "handler.h"
#include "log.h"
#include "proxy.h"
#include "worker.h"

/* The C request owns itself; the Ruby object only points at it. */
static const struct mrb_data_type request_type = {"Gateway::Request", NULL};

int gw_handler_worker_init(gw_worker_t *w)
{
  mrb_state *mrb = w->mrb;
  w->roots = mrb_ary_new(mrb);
  mrb_gc_register(mrb, w->roots);
  struct RClass *gw = mrb_module_get(mrb, "Gateway");
  static const char *const names[2] = {"RUNNER", "FILTER_RUNNER"};
  for (int kind = 0; kind < 2; kind++) {
    mrb_value runner = mrb_const_get(mrb, mrb_obj_value(gw), mrb_intern_cstr(mrb, names[kind]));
    if (mrb->exc || !mrb_proc_p(runner)) return -1;
    w->runners[kind] = mrb_proc_ptr(runner);
    mrb_gc_register(mrb, runner); /* even if the constant is reassigned */
    w->idle_fibers[kind] = mrb_ary_new(mrb);
    mrb_gc_register(mrb, w->idle_fibers[kind]);
  }
  mrb_value resume = mrb_const_get(mrb, mrb_obj_value(gw), mrb_intern_lit(mrb, "RESUME"));
  if (mrb->exc || !mrb_array_p(resume) || RARRAY_LEN(resume) != 3) return -1;
  for (int n = 1; n <= 2; n++) {
    mrb_value p = mrb_ary_ref(mrb, resume, n);
    if (!mrb_proc_p(p)) return -1;
    w->resumers[n] = mrb_proc_ptr(p);
    mrb_gc_register(mrb, p); /* even if the constant is reassigned */
  }
  w->request_class = mrb_class_get_under(mrb, gw, "Request");
  w->fiber_class = mrb_class_get(mrb, "Fiber");
  w->sym_new = mrb_intern_lit(mrb, "new");
  return mrb->exc ? -1 : 0;
}

static int take_slot(gw_worker_t *w)
{
  if (w->nfree > 0) return w->free_slots[--w->nfree];
  int slot = (int)RARRAY_LEN(w->roots);
  mrb_ary_push(w->mrb, w->roots, mrb_nil_value());
  return slot;
}

static void give_slot(gw_worker_t *w, int slot)
{
  mrb_ary_set(w->mrb, w->roots, slot, mrb_nil_value());
  if (w->nfree == w->free_cap) {
    int cap = w->free_cap ? w->free_cap * 2 : 64;
    int *p = realloc(w->free_slots, (size_t)cap * sizeof(int));
    if (p == NULL) return; /* the slot leaks; the array stays correct */
    w->free_slots = p;
    w->free_cap = cap;
  }
  w->free_slots[w->nfree++] = slot;
}

static mrb_value fiber_of(gw_request_t *req)
{
  return mrb_ary_ref(req->worker->mrb, req->worker->roots, req->root_slot);
}

/* A fiber left parked for good (an abort, or not kept for reuse). mruby's GC
 * counts objects, not the stacks their contexts malloc'd, so thousands of
 * them can pile up before it runs: collect them now and then. */
static void count_dropped(gw_worker_t *w)
{
  if (++w->dropped_fibers >= GW_DROPPED_FIBERS_GC) {
    w->dropped_fibers = 0;
    event_active(w->gc_ev, EV_TIMEOUT, 0);
  }
}

/* Unroots the request's fiber (if it has one). */
static void drop_fiber(gw_request_t *req)
{
  if (req->root_slot >= 0) {
    gw_worker_t *w = req->worker;
    if (mrb_test(mrb_fiber_alive_p(w->mrb, fiber_of(req)))) count_dropped(w);
    give_slot(w, req->root_slot);
    req->root_slot = -1;
  }
}

/* The job is over and the fiber waits for the next: back to the idle pool,
 * unless the pool is full or the fiber's stacks grew (deep recursion), which
 * would keep that memory for good. */
static void recycle_fiber(gw_request_t *req, gw_fiber_kind_t kind)
{
  gw_worker_t *w = req->worker;
  mrb_value fiber = fiber_of(req);
  const struct mrb_context *cx = ((struct RFiber *)mrb_ptr(fiber))->cxt;
  mrb_value pool = w->idle_fibers[kind];
  if (RARRAY_LEN(pool) < GW_IDLE_FIBERS && cx->stend - cx->stbase <= GW_IDLE_FIBER_STACK &&
      cx->ciend - cx->cibase <= GW_IDLE_FIBER_FRAMES) {
    mrb_ary_push(w->mrb, pool, fiber);
  } else {
    count_dropped(w);
  }
  give_slot(w, req->root_slot);
  req->root_slot = -1;
}

void gw_handler_release(gw_request_t *req)
{
  if (!mrb_nil_p(req->rb_req)) {
    DATA_PTR(req->rb_req) = NULL;
    req->rb_req = mrb_nil_value();
  }
  drop_fiber(req);
}

/* -- running the fiber ------------------------------------------------------- */

typedef struct {
  struct RProc *resumer; /* Gateway::RESUME[argc - 1] */
  mrb_int argc;          /* fiber, then 1 or 2 values */
  mrb_value argv[3];
} resume_args_t;

/* fiber.resume(values...) from Ruby (Gateway::RESUME says why not from C). */
static mrb_value do_resume(mrb_state *mrb, void *ud)
{
  resume_args_t *a = ud;
  return mrb_yield_argv(mrb, mrb_obj_value(a->resumer), a->argc, a->argv);
}

/* A handler failed outside the runner's own rescue (which logs for itself). */
static void fail_unexpectedly(gw_request_t *req, mrb_value exc)
{
  mrb_state *mrb = req->worker->mrb;
  mrb_value msg = mrb_inspect(mrb, exc);
  gw_log_error("handler for %s %.*s failed: %s", req->method, (int)req->path_len, req->target,
               mrb_string_p(msg) ? mrb_string_cstr(mrb, msg) : "?");
  req->failed = 1;
}

/* -- trace mode ------------------------------------------------------------ */

int gw_trace;

void gw_trace_wait(gw_request_t *req, const char *fmt, ...)
{
  if (!gw_trace) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(req->waiting_for, sizeof(req->waiting_for), fmt, ap);
  va_end(ap);
}

void gw_trace_event(gw_request_t *req, const char *event)
{
  gw_log_notice("trace #%lu %s %.*s%s +%.3f ms: %s", req->id, req->method, (int)req->path_len, req->target,
                req->parent ? " (sub-request)" : "", gw_now_ms() - req->t_start_ms, event);
}

void gw_trace_start(gw_request_t *req)
{
  static unsigned long next_id;
  req->id = ++next_id;
  req->t_start_ms = gw_now_ms();
  req->waiting_for[0] = '\0';
  gw_trace_event(req, req->location ? (req->location->proxy_pass ? "routed to a proxy_pass location"
                                                                   : "routed to a handler location")
                                    : "no location matches");
}

static mrb_value call_rack(mrb_state *mrb, void *ud)
{
  mrb_value *args = ud;
  return mrb_funcall_argv(mrb, args[0], mrb_intern_lit(mrb, "_rack"), 1, &args[1]);
}

/* [status, headers, body]: Gateway::Request#_rack sets the response. */
static void rack_response(gw_request_t *req, mrb_value result)
{
  mrb_state *mrb = req->worker->mrb;
  mrb_value args[2] = {req->rb_req, result};
  mrb_bool raised = FALSE;
  mrb_value exc = mrb_protect_error(mrb, call_rack, args, &raised);
  if (raised) {
    fail_unexpectedly(req, exc);
    mrb->exc = NULL;
    gw_request_simple_response(req, 500, NULL);
  }
}

/* The fiber returned `result`: build the response unless the handler did. */
static void complete(gw_request_t *req, mrb_value result)
{
  if (req->after_filter) { /* a header filter: its caller goes on (or fails) */
    void (*then)(gw_request_t *) = req->after_filter;
    req->after_filter = NULL;
    req->filtering = 0;
    then(req);
    return;
  }
  if (req->failed) {
    gw_request_simple_response(req, 500, NULL);
  } else if (req->filtering) {
    /* a body filter changed the body, or left it */
  } else if (req->proxy_url) { /* req.proxy_pass(url): the upstream answers */
    drop_fiber(req);
    gw_proxy_start(req, req->proxy_url, req->proxy_key);
    return;
  } else if (!req->has_output && mrb_string_p(result)) {
    /* The common case: borrowed, not copied. No Ruby code runs (and so no
     * GC) before on_finish has written it out. */
    if (req->status == 0) req->status = 200;
    req->text_plain = gw_headers_find(&req->resp_headers, "content-type") == NULL;
    req->inline_body = RSTRING_PTR(result);
    req->inline_len = (size_t)RSTRING_LEN(result);
  } else if (!req->has_output && mrb_array_p(result)) {
    rack_response(req, result);
  } else if (req->status == 0) {
    req->status = 200;
  }
  if (gw_trace) {
    char done[48];
    snprintf(done, sizeof(done), "response ready, status %d", req->status ? req->status : 200);
    gw_trace_event(req, done);
  }
  gw_request_finish(req);
}

/* A header filter is called like a handler, filter.call(req): RUNNER serves both. */
static gw_fiber_kind_t fiber_kind(const gw_request_t *req)
{
  return req->filtering && !req->after_filter ? GW_FIBER_FILTER : GW_FIBER_HANDLER;
}

static void run(gw_request_t *req, mrb_int argc, const mrb_value *argv)
{
  gw_worker_t *w = req->worker;
  mrb_state *mrb = w->mrb;
  mrb_value fiber = fiber_of(req);
  resume_args_t a = {w->resumers[argc], argc + 1, {fiber, argv[0], argc > 1 ? argv[1] : mrb_nil_value()}};
  mrb_bool raised = FALSE;
  w->current = req;
  w->job_done = 0;
  w->will_wait = 0;
  if (gw_trace) {
    char ev[160];
    if (req->waiting_for[0])
      snprintf(ev, sizeof(ev), "fiber resumed by %s", req->waiting_for);
    else
      snprintf(ev, sizeof(ev), "fiber started (%s)",
               req->after_filter ? "header filter" : req->filtering ? "body filter" : "handler");
    gw_trace_event(req, ev);
    req->waiting_for[0] = '\0';
  }
  mrb_value result = mrb_protect_error(mrb, do_resume, &a, &raised);
  w->current = NULL;
  if (raised || mrb->exc) {
    fail_unexpectedly(req, raised ? result : mrb_obj_value(mrb->exc));
    mrb->exc = NULL;
  } else if (w->job_done) {
    recycle_fiber(req, fiber_kind(req));
  } else if (mrb_test(mrb_fiber_alive_p(mrb, fiber)) && !w->will_wait) {
    /* Parked, but on nothing that will resume it: a bare Fiber.yield. */
    gw_log_error("handler for %s %.*s failed: its fiber yielded without waiting for anything "
                 "(Fiber.yield in a handler; use Async.sleep or Async::HTTP)",
                 req->method, (int)req->path_len, req->target);
    req->failed = 1;
  } else if (mrb_test(mrb_fiber_alive_p(mrb, fiber))) {
    if (gw_trace) {
      char ev[160];
      snprintf(ev, sizeof(ev), "fiber suspended, waiting for %s", req->waiting_for);
      gw_trace_event(req, ev);
    }
    return; /* parked: a pending operation will resume it */
  }
  complete(req, result);
}

static void start_fiber(gw_request_t *req, gw_fiber_kind_t kind, mrb_value code)
{
  gw_worker_t *w = req->worker;
  mrb_state *mrb = w->mrb;
  int ai = mrb_gc_arena_save(mrb);
  mrb_value rbreq = gw_mrb_request_value(mrb, req);
  mrb_value pool = w->idle_fibers[kind];
  mrb_value fiber;
  if (RARRAY_LEN(pool) > 0) {
    fiber = mrb_ary_pop(mrb, pool);
    mrb_gc_protect(mrb, fiber); /* until rooted below */
  } else {
    fiber = mrb_funcall_with_block(mrb, mrb_obj_value(w->fiber_class), w->sym_new, 0, NULL,
                                   mrb_obj_value(w->runners[kind]));
  }
  drop_fiber(req); /* the handler's fiber, before its body filter's */
  if (mrb->exc) { /* out of memory, in practice */
    fail_unexpectedly(req, mrb_obj_value(mrb->exc));
    mrb->exc = NULL;
    complete(req, mrb_nil_value());
  } else {
    req->root_slot = gw_mrb_root(fiber);
    mrb_value argv[2] = {code, rbreq};
    run(req, 2, argv);
  }
  mrb_gc_arena_restore(mrb, ai);
}

void gw_handler_start(gw_request_t *req)
{
  start_fiber(req, GW_FIBER_HANDLER, req->location->handler);
}

void gw_handler_filter_body(gw_request_t *req, mrb_value filter)
{
  req->filtering = 1;
  start_fiber(req, GW_FIBER_FILTER, filter);
}

void gw_handler_filter_head(gw_request_t *req, mrb_value filter, void (*then)(gw_request_t *req))
{
  req->filtering = 1;
  req->after_filter = then;
  start_fiber(req, GW_FIBER_HANDLER, filter);
}

void gw_mrb_job_done(void)
{
  if (gw_worker) gw_worker->job_done = 1;
}

void gw_mrb_will_wait(void)
{
  if (gw_worker) gw_worker->will_wait = 1;
}

void gw_fiber_resume(gw_request_t *req, mrb_value v)
{
  mrb_state *mrb = req->worker->mrb;
  int ai = mrb_gc_arena_save(mrb);
  run(req, 1, &v);
  mrb_gc_arena_restore(mrb, ai);
}

int gw_mrb_root(mrb_value v)
{
  int slot = take_slot(gw_worker);
  mrb_ary_set(gw_worker->mrb, gw_worker->roots, slot, v);
  return slot;
}

void gw_mrb_unroot(int slot)
{
  give_slot(gw_worker, slot);
}

/* -- bridge ------------------------------------------------------------------ */

mrb_value gw_mrb_headers_new(mrb_state *mrb, const gw_headers_t *hs)
{
  static struct RClass *headers_class; /* one VM per process */
  if (headers_class == NULL) headers_class = mrb_class_get_under(mrb, mrb_module_get(mrb, "Gateway"), "Headers");
  mrb_value h = mrb_hash_new_capa(mrb, (mrb_int)hs->count);
  for (size_t i = 0; i < hs->count; i++) {
    const gw_header_t *f = &hs->items[i];
    mrb_value k = mrb_str_new(mrb, f->name, (mrb_int)f->name_len);
    char *p = RSTRING_PTR(k);
    for (size_t j = 0; j < f->name_len; j++) p[j] = (char)tolower((unsigned char)p[j]);
    mrb_value v = mrb_str_new(mrb, f->value, (mrb_int)f->value_len);
    mrb_value old = mrb_hash_fetch(mrb, h, k, mrb_nil_value());
    if (mrb_string_p(old)) { /* a repeated field */
      mrb_str_cat_lit(mrb, old, ", ");
      mrb_str_cat_str(mrb, old, v);
      continue;
    }
    mrb_hash_set(mrb, h, k, v);
  }
  struct RObject *o = (struct RObject *)mrb_obj_alloc(mrb, MRB_TT_OBJECT, headers_class);
  mrb_value obj = mrb_obj_value(o);
  mrb_iv_set(mrb, obj, mrb_intern_lit(mrb, "@h"), h); /* Gateway::Headers#initialize, without the call */
  return obj;
}

gw_request_t *gw_mrb_current_request_or_null(void)
{
  return gw_worker ? gw_worker->current : NULL;
}

int gw_mrb_is_request_fiber(mrb_value v)
{
  if (gw_worker == NULL || mrb_type(v) != MRB_TT_FIBER) return 0;
  const struct mrb_context *c = ((struct RFiber *)mrb_ptr(v))->cxt;
  return c != NULL && c->cibase != NULL &&
         (c->cibase->proc == gw_worker->runners[0] || c->cibase->proc == gw_worker->runners[1]);
}

int gw_mrb_in_request_fiber(mrb_state *mrb)
{
  gw_request_t *req = gw_mrb_current_request_or_null();
  if (req == NULL || req->root_slot < 0) return 0;
  return ((struct RFiber *)mrb_ptr(fiber_of(req)))->cxt == mrb->c;
}

gw_request_t *gw_mrb_current_request(mrb_state *mrb)
{
  gw_request_t *req = gw_mrb_current_request_or_null();
  if (req == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "no current request: this can only be called inside a handler");
  return req;
}

mrb_value gw_mrb_request_value(mrb_state *mrb, gw_request_t *req)
{
  if (mrb_nil_p(req->rb_req)) {
    struct RData *d = mrb_data_object_alloc(mrb, req->worker->request_class, req, &request_type);
    req->rb_req = mrb_obj_value(d);
  }
  return req->rb_req;
}

gw_request_t *gw_mrb_request_ptr(mrb_state *mrb, mrb_value obj)
{
  gw_request_t *req = mrb_data_check_get_ptr(mrb, obj, &request_type);
  if (req == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "this request has already finished");
  return req;
}

struct event_base *gw_mrb_event_base(void)
{
  return gw_worker ? gw_worker->base : NULL;
}

void gw_mrb_publish_stats(void)
{
  if (gw_worker) gw_worker_publish_stats(gw_worker);
}

int gw_mrb_worker_index(void)
{
  return gw_worker ? gw_worker->index : -1;
}

void gw_mrb_write(mrb_state *mrb, gw_request_t *req, mrb_value str)
{
  str = mrb_obj_as_string(mrb, str);
  evbuffer_add(req->resp_body, RSTRING_PTR(str), (size_t)RSTRING_LEN(str));
  req->has_output = 1;
}

void gw_mrb_set_status(mrb_state *mrb, gw_request_t *req, mrb_int status)
{
  if (status < 100 || status > 999) mrb_raisef(mrb, E_ARGUMENT_ERROR, "invalid HTTP status %i (100..999)", status);
  req->status = (int)status;
}

void gw_mrb_set_header(mrb_state *mrb, gw_request_t *req, mrb_value name, mrb_value value)
{
  name = mrb_obj_as_string(mrb, name);
  value = mrb_obj_as_string(mrb, value);
  if (gw_request_set_header(req, RSTRING_PTR(name), (size_t)RSTRING_LEN(name), RSTRING_PTR(value),
                            (size_t)RSTRING_LEN(value)) != 0) {
    gw_log_error("refused response header %s: the name must be a token and the value may not contain CR, LF or NUL",
                 mrb_string_cstr(mrb, mrb_inspect(mrb, name)));
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "invalid response header %v: the name must be a token and the value may not "
               "contain CR, LF or NUL", name);
  }
}

mrb_value gw_mrb_error(mrb_state *mrb, const char *class_name, const char *msg)
{
  struct RClass *gw = mrb_module_get(mrb, "Gateway");
  const char *short_name = strncmp(class_name, "Gateway::", 9) == 0 ? class_name + 9 : class_name;
  struct RClass *cls = mrb_class_get_under(mrb, gw, short_name);
  return mrb_exc_new_str(mrb, cls, mrb_str_new_cstr(mrb, msg));
}
