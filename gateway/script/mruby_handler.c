/* mruby_handler.c - the mruby handler: runs a location's Ruby block, and
 * header and body filters, in fibers, and implements the bridge the gems
 * use (gw_mruby.h).
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
 * What a request holds of Ruby (its fiber's root slot, its Gateway::Request
 * object, a req.proxy_pass URL) lives in a script_t, the request's
 * handler.state, which the request releases when it finishes or aborts.
 *
 * Fibers are reused, as threads in a pool: the runner loops, reporting each
 * job done (gw_mrb_job_done) and yielding for the next. Creating a fiber
 * (its context and stacks) costs more than the rest of a small handler, and
 * the idle ones are few. A fiber keeps its root slot while it waits for
 * its next job (the idle pool is a list of slots), so taking one from the
 * pool and giving it back touch no Ruby object. A fiber that was aborted
 * while parked, died, or grew a large stack is dropped instead. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <event2/event.h>
#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/error.h>
#include <mruby/hash.h>
#include <mruby/proc.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "config.h"
#include "cpu_limit.h"
#include "gw_mruby.h"
#include "handler.h"
#include "log.h"
#include "mruby_handler.h"
#include "fastcgi.h"
#include "proxy.h"
#include "regex.h"
#include "static.h"

/* What a fiber runs. */
typedef enum { RUN_HANDLER, RUN_REWRITE, RUN_ACCESS, RUN_HEADER_FILTER, RUN_BODY_FILTER, RUN_LOG } run_kind_t;

/* Fiber bodies: Gateway::RUNNER (handlers, and header filters: filter.call(req))
 * and Gateway::FILTER_RUNNER (body filters). */
typedef enum { FIBER_RUNNER, FIBER_FILTER_RUNNER } fiber_kind_t;

/* Idle fibers kept per kind for reuse, and the largest stacks (VM values,
 * call frames) a fiber may have grown and still be kept. */
#define IDLE_FIBERS 128
#define IDLE_FIBER_STACK 1024
#define IDLE_FIBER_FRAMES 64

/* Aborted requests whose parked fibers trigger one full GC (count_dropped). */
#define DROPPED_FIBERS_GC 256

/* The runtime of this worker (one worker, one VM per process); its ctx is
 * NULL in the master and at config time. */
static struct {
  gw_context_t *ctx;
  mrb_state *mrb;
  gw_request_t *current;    /* request whose fiber is running right now, or NULL */
  mrb_value roots;          /* Array: GC roots of parked fibers, one slot per request */
  int *free_slots;          /* free indexes of `roots` (stack) */
  int nfree, free_cap;
  struct RProc *runners[2]; /* by fiber_kind_t */
  int *idle_slots[2];       /* root slots of the fibers of each kind waiting for their next job (stacks) */
  int nidle[2];
  struct RProc *resumers[3]; /* Gateway::RESUME[1], [2]: resume a fiber with 1 or 2 values */
  int job_done;             /* the fiber just resumed reported its job done */
  int will_wait;            /* ... or called an async primitive, which parks it */
  struct RClass *request_class;
  struct RClass *fiber_class;
  mrb_sym sym_new;
  struct event *gc_ev;      /* a full GC, after many aborted fibers */
  int dropped_fibers;
  struct script_s *spare;   /* released script_t kept for the next requests */
  int nspare;
  const char *no_wait;      /* Ruby runs synchronously for this (tls on_handshake): no async call */
  mrb_value ruby_files;     /* Hash: ruby_files: path => [mtime s, ns, size, inode, lambda]; nil: none yet */
} rt;

/* A request's ties to Ruby (its handler.state). */
typedef struct script_s {
  gw_req_state_t super;
  gw_request_t *req;
  mrb_value rb_req;         /* Gateway::Request wrapping req, or nil; its pointer is
                               cleared when the request ends */
  int req_slot;             /* slot in `roots` holding rb_req made on demand; -1: none */
  int last_slot;            /* slot in `roots` holding its last_response; -1: none */
  int root_slot;            /* slot in `roots` holding the running fiber; -1: none */
  int failed;               /* the code raised; the response is 500 */
  run_kind_t kind;          /* what the fiber runs */
  gw_filter_done_cb done;   /* a filter's continuation, and its argument */
  void *done_arg;
  char *proxy_url;          /* owned: req.proxy_pass(url) from the handler, or NULL */
  char *proxy_key;          /* owned: its hash_key: (fastcgi: its script_filename:), or NULL */
  int proxy_fastcgi;        /* proxy_url is req.fastcgi_pass's target */
  gw_regex_t *fastcgi_split; /* its split_path_info: (a reference of ours), or NULL */
  char *send_path;          /* owned: req.send_file(path) from the handler, or NULL */
  size_t send_len;
  struct script_s *next_spare;
} script_t;

#define SPARE_SCRIPTS 64

/* The C request owns itself; the Ruby object only points at it. */
static const struct mrb_data_type request_type = {"Gateway::Request", NULL};

static void on_full_gc(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  (void)arg;
  mrb_full_gc(rt.mrb); /* from the loop: no Ruby code is running */
}

int gw_mruby_worker_init(gw_context_t *ctx)
{
  mrb_state *mrb = ctx->mrb;
  rt.ctx = ctx;
  rt.mrb = mrb;
  rt.roots = mrb_ary_new(mrb);
  mrb_gc_register(mrb, rt.roots);
  rt.gc_ev = event_new(ctx->base, -1, 0, on_full_gc, NULL);
  struct RClass *gw = mrb_module_get(mrb, "Gateway");
  static const char *const names[2] = {"RUNNER", "FILTER_RUNNER"};
  for (int kind = 0; kind < 2; kind++) {
    mrb_value runner = mrb_const_get(mrb, mrb_obj_value(gw), mrb_intern_cstr(mrb, names[kind]));
    if (mrb->exc || !mrb_proc_p(runner)) return -1;
    rt.runners[kind] = mrb_proc_ptr(runner);
    mrb_gc_register(mrb, runner); /* even if the constant is reassigned */
    rt.idle_slots[kind] = malloc(IDLE_FIBERS * sizeof(int));
    if (rt.idle_slots[kind] == NULL) return -1;
  }
  mrb_value resume = mrb_const_get(mrb, mrb_obj_value(gw), mrb_intern_lit(mrb, "RESUME"));
  if (mrb->exc || !mrb_array_p(resume) || RARRAY_LEN(resume) != 3) return -1;
  for (int n = 1; n <= 2; n++) {
    mrb_value p = mrb_ary_ref(mrb, resume, n);
    if (!mrb_proc_p(p)) return -1;
    rt.resumers[n] = mrb_proc_ptr(p);
    mrb_gc_register(mrb, p); /* even if the constant is reassigned */
  }
  rt.ruby_files = mrb_nil_value();
  rt.request_class = mrb_class_get_under(mrb, gw, "Request");
  rt.fiber_class = mrb_class_get(mrb, "Fiber");
  rt.sym_new = mrb_intern_lit(mrb, "new");
  if (ctx->server->cpu_limits && gw_cpu_limit_start(mrb) < 0) {
    gw_log_error("cpu_limit: cannot start the CPU-time tick: %s", strerror(errno));
    return -1;
  }
  return mrb->exc || rt.gc_ev == NULL ? -1 : 0;
}

void gw_mruby_worker_dispose(void)
{
  if (rt.ctx == NULL) return;
  gw_cpu_limit_stop();
  mrb_gc_unregister(rt.mrb, rt.roots);
  free(rt.free_slots);
  free(rt.idle_slots[0]);
  free(rt.idle_slots[1]);
  if (rt.gc_ev) event_free(rt.gc_ev);
  while (rt.spare) {
    script_t *s = rt.spare;
    rt.spare = s->next_spare;
    free(s);
  }
  memset(&rt, 0, sizeof(rt));
}

unsigned gw_mruby_parked_fibers(void)
{
  /* Every used root slot but the idle fibers' holds a parked fiber or a running sub-request task. */
  return rt.ctx ? (unsigned)(RARRAY_LEN(rt.roots) - rt.nfree - rt.nidle[0] - rt.nidle[1]) : 0;
}

static int take_slot(void)
{
  if (rt.nfree > 0) return rt.free_slots[--rt.nfree];
  int slot = (int)RARRAY_LEN(rt.roots);
  mrb_ary_push(rt.mrb, rt.roots, mrb_nil_value());
  return slot;
}

static void give_slot(int slot)
{
  mrb_ary_set(rt.mrb, rt.roots, slot, mrb_nil_value());
  if (rt.nfree == rt.free_cap) {
    int cap = rt.free_cap ? rt.free_cap * 2 : 64;
    int *p = realloc(rt.free_slots, (size_t)cap * sizeof(int));
    if (p == NULL) return; /* the slot leaks; the array stays correct */
    rt.free_slots = p;
    rt.free_cap = cap;
  }
  rt.free_slots[rt.nfree++] = slot;
}

static mrb_value fiber_of(const script_t *s)
{
  return RARRAY_PTR(rt.roots)[s->root_slot]; /* a slot taken is within the array */
}

/* A fiber left parked for good (an abort, or not kept for reuse). mruby's GC
 * counts objects, not the stacks their contexts malloc'd, so thousands of
 * them can pile up before it runs: collect them now and then. */
static void count_dropped(void)
{
  if (++rt.dropped_fibers >= DROPPED_FIBERS_GC) {
    rt.dropped_fibers = 0;
    event_active(rt.gc_ev, EV_TIMEOUT, 0);
  }
}

/* Unroots the request's fiber (if it has one). */
static void drop_fiber(script_t *s)
{
  if (s->root_slot >= 0) {
    if (mrb_test(mrb_fiber_alive_p(rt.mrb, fiber_of(s)))) count_dropped();
    give_slot(s->root_slot);
    s->root_slot = -1;
  }
}

static fiber_kind_t fiber_kind(run_kind_t kind)
{
  return kind == RUN_BODY_FILTER ? FIBER_FILTER_RUNNER : FIBER_RUNNER;
}

/* The job is over and the fiber waits for the next: back to the idle pool
 * with its root slot, unless the pool is full or the fiber's stacks grew
 * (deep recursion), which would keep that memory for good. */
static void recycle_fiber(script_t *s)
{
  const struct mrb_context *cx = ((struct RFiber *)mrb_ptr(fiber_of(s)))->cxt;
  fiber_kind_t kind = fiber_kind(s->kind);
  if (rt.nidle[kind] < IDLE_FIBERS && cx->stend - cx->stbase <= IDLE_FIBER_STACK &&
      cx->ciend - cx->cibase <= IDLE_FIBER_FRAMES) {
    rt.idle_slots[kind][rt.nidle[kind]++] = s->root_slot;
  } else {
    count_dropped();
    give_slot(s->root_slot);
  }
  s->root_slot = -1;
}

/* The request ended: drop its ties to Ruby. */
static void script_release(gw_req_state_t *state)
{
  script_t *s = (script_t *)state;
  if (!mrb_nil_p(s->rb_req)) DATA_PTR(s->rb_req) = NULL;
  if (s->req_slot >= 0) give_slot(s->req_slot);
  if (s->last_slot >= 0) give_slot(s->last_slot);
  drop_fiber(s);
  free(s->proxy_url);
  free(s->proxy_key);
  gw_regex_unref(s->fastcgi_split);
  free(s->send_path);
  if (rt.nspare < SPARE_SCRIPTS) {
    s->next_spare = rt.spare;
    rt.spare = s;
    rt.nspare++;
  } else {
    free(s);
  }
}

/* req's script_t, made on first use. NULL when out of memory. */
static script_t *script_of(gw_request_t *req)
{
  if (req->handler.state) return (script_t *)req->handler.state; /* only this handler sets one */
  script_t *s = rt.spare;
  if (s != NULL) {
    rt.spare = s->next_spare;
    rt.nspare--;
    memset(s, 0, sizeof(*s));
  } else if ((s = calloc(1, sizeof(*s))) == NULL) {
    return NULL;
  }
  s->super.release = script_release;
  s->req = req;
  s->rb_req = mrb_nil_value();
  s->root_slot = s->req_slot = s->last_slot = -1;
  req->handler.state = &s->super;
  return s;
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
static void fail_unexpectedly(script_t *s, mrb_value exc)
{
  gw_request_t *req = s->req;
  mrb_value msg = mrb_inspect(rt.mrb, exc);
  gw_log_error("handler for %s %.*s failed: %s", req->in.method, (int)req->in.path_len, req->in.target,
               mrb_string_p(msg) ? mrb_string_cstr(rt.mrb, msg) : "?");
  s->failed = 1;
}

static mrb_value call_rack(mrb_state *mrb, void *ud)
{
  mrb_value *args = ud;
  return mrb_funcall_argv(mrb, args[0], mrb_intern_lit(mrb, "_rack"), 1, &args[1]);
}

/* [status, headers, body]: Gateway::Request#_rack sets the response. */
static void rack_response(script_t *s, mrb_value result)
{
  mrb_state *mrb = rt.mrb;
  mrb_value args[2] = {gw_mrb_request_value(mrb, s->req), result};
  mrb_bool raised = FALSE;
  mrb_value exc = mrb_protect_error(mrb, call_rack, args, &raised);
  if (raised) {
    fail_unexpectedly(s, exc);
    mrb->exc = NULL;
    gw_request_simple_response(s->req, 500, NULL);
  }
}

/* The fiber returned `result`: build the response unless the handler did,
 * or hand a filter's result on. */
static void complete(script_t *s, mrb_value result)
{
  gw_request_t *req = s->req;
  if (s->kind != RUN_HANDLER) { /* another phase: its caller goes on (or fails) */
    int verdict = s->failed ? GW_STEP_FAILED : GW_STEP_NEXT;
    if (verdict == GW_STEP_NEXT && (s->kind == RUN_REWRITE || s->kind == RUN_ACCESS)) {
      /* It answered if it set a status, wrote, or returned [status, headers, body]
       * (Nginx.return 403, req.respond, a Rack triple); else the request goes on. */
      if (!req->resp.has_output && mrb_array_p(result)) rack_response(s, result);
      if (req->resp.status != 0 || req->resp.has_output || mrb_array_p(result)) verdict = GW_STEP_ANSWERED;
    }
    s->failed = 0;
    s->kind = RUN_HANDLER;
    s->done(req, verdict, s->done_arg);
    return;
  }
  if (s->failed) {
    gw_request_simple_response(req, 500, NULL);
  } else if (s->proxy_url) { /* req.proxy_pass(url): the upstream answers */
    drop_fiber(s);
    gw_request_head_keep(req); /* with the fields the handler set */
    if (s->proxy_fastcgi) gw_fastcgi_start(req, s->proxy_url, s->proxy_key, s->fastcgi_split);
    else gw_proxy_start(req, s->proxy_url, s->proxy_key);
    return;
  } else if (s->send_path) { /* req.send_file(path): the file answers (static.c) */
    drop_fiber(s);
    gw_request_head_keep(req);
    gw_static_send_file(req, s->send_path, s->send_len); /* copies the path before the script is released */
    return;
  } else if (!req->resp.has_output && mrb_string_p(result)) {
    /* The common case: borrowed, not copied. No Ruby code runs (and so no
     * GC) before the protocol has written it out. */
    if (req->resp.status == 0) req->resp.status = 200;
    req->resp.text_plain = req->resp.headers.count == 0 || gw_headers_find(&req->resp.headers, "content-type") == NULL;
    req->resp.inline_body = RSTRING_PTR(result);
    req->resp.inline_len = (size_t)RSTRING_LEN(result);
  } else if (!req->resp.has_output && mrb_array_p(result)) {
    rack_response(s, result);
  } else if (req->resp.status == 0) {
    req->resp.status = !req->resp.has_output && req->resp.default_status ? req->resp.default_status : 200;
  }
  if (gw_trace) {
    char done[48];
    snprintf(done, sizeof(done), "response ready, status %d", req->resp.status ? req->resp.status : 200);
    gw_trace_event(req, done);
  }
  gw_request_finish(req); /* through the location's filters (request.c) */
}

static const char *run_kind_name(run_kind_t kind)
{
  static const char *const names[] = {"handler", "rewrite phase", "access phase", "header filter", "body filter",
                                      "log phase"};
  return names[kind];
}

static void run(script_t *s, mrb_int argc, const mrb_value *argv)
{
  gw_request_t *req = s->req;
  mrb_state *mrb = rt.mrb;
  mrb_value fiber = fiber_of(s);
  resume_args_t a = {rt.resumers[argc], argc + 1, {fiber, argv[0], argc > 1 ? argv[1] : mrb_nil_value()}};
  mrb_bool raised = FALSE;
  rt.current = req;
  rt.job_done = 0;
  rt.will_wait = 0;
  if (gw_trace) {
    char ev[160];
    if (req->trace.waiting_for[0])
      snprintf(ev, sizeof(ev), "fiber resumed by %s", req->trace.waiting_for);
    else
      snprintf(ev, sizeof(ev), "fiber started (%s)", run_kind_name(s->kind));
    gw_trace_event(req, ev);
    req->trace.waiting_for[0] = '\0';
  }
  const gw_location_t *loc = req->handler.location;
  if (loc) gw_cpu_limit_enter(loc->cpu_limit_ms, loc->path, loc->exact);
  uint32_t was = gw_timeline_enter(GW_TL_FIBER, req->trace.id);
  mrb_value result = mrb_protect_error(mrb, do_resume, &a, &raised);
  gw_timeline_leave(was);
  const char *file;
  int line;
  int stopped = gw_cpu_limit_leave(&file, &line);
  rt.current = NULL;
  if (stopped) {
    /* Past its cpu_limit twice: the hook raised on every instruction until
     * the fiber had left Ruby; it is dead (and dropped with the request). */
    char at[320] = "";
    if (file) snprintf(at, sizeof(at), " at %s:%d", file, line);
    gw_log_error("handler for %s %.*s stopped: it rescued Gateway::CPULimitExceeded and ran on past twice its "
                 "cpu_limit of %g s in location \"%s%s\"%s",
                 req->in.method, (int)req->in.path_len, req->in.target, loc->cpu_limit_ms / 1000.0, loc->exact ? "= " : "",
                 loc->path, at);
    s->failed = 1;
    mrb->exc = NULL;
  } else if (raised || mrb->exc) {
    fail_unexpectedly(s, raised ? result : mrb_obj_value(mrb->exc));
    mrb->exc = NULL;
  } else if (rt.job_done) {
    recycle_fiber(s);
  } else if (mrb_test(mrb_fiber_alive_p(mrb, fiber)) && !rt.will_wait) {
    /* Parked, but on nothing that will resume it: a bare Fiber.yield. */
    gw_log_error("handler for %s %.*s failed: its fiber yielded without waiting for anything "
                 "(Fiber.yield in a handler; use Async.sleep or Async::HTTP)",
                 req->in.method, (int)req->in.path_len, req->in.target);
    s->failed = 1;
  } else if (mrb_test(mrb_fiber_alive_p(mrb, fiber)) && s->kind == RUN_LOG) {
    /* The response is out and the request is about to be reused: nothing
     * may wait for it (its wait is cancelled when the phase ends). */
    gw_log_error("log phase for %s %.*s: it cannot wait (%s); the wait was cancelled", req->in.method,
                 (int)req->in.path_len, req->in.target, req->trace.waiting_for[0] ? req->trace.waiting_for : "an async call");
  } else if (mrb_test(mrb_fiber_alive_p(mrb, fiber))) {
    if (gw_trace) {
      char ev[160];
      snprintf(ev, sizeof(ev), "fiber suspended, waiting for %s", req->trace.waiting_for);
      gw_trace_event(req, ev);
    }
    return; /* parked: a pending operation will resume it */
  }
  complete(s, result);
}

/* s's Gateway::Request, made if need be (not rooted: see gw_mrb_request_value). */
static mrb_value request_object(mrb_state *mrb, script_t *s)
{
  if (mrb_nil_p(s->rb_req)) s->rb_req = mrb_obj_value(mrb_data_object_alloc(mrb, rt.request_class, s->req, &request_type));
  return s->rb_req;
}

/* Runs code (the location's block, or a filter) for req in a fiber; with_req
 * 0: code takes no argument, and is passed none (no Gateway::Request is made
 * for it, the fiber is resumed with one value: no array of two). */
static void start_fiber(gw_request_t *req, run_kind_t kind, mrb_value code, int with_req, gw_filter_done_cb done,
                        void *done_arg)
{
  mrb_state *mrb = rt.mrb;
  int ai = mrb_gc_arena_save(mrb);
  script_t *s = script_of(req);
  if (s == NULL) { /* out of memory */
    if (done) {
      done(req, 1, done_arg);
    } else {
      gw_request_simple_response(req, 500, NULL);
      gw_request_finish(req);
    }
    return;
  }
  s->kind = kind;
  s->done = done;
  s->done_arg = done_arg;
  mrb_value rbreq = with_req ? request_object(mrb, s) : mrb_nil_value();
  fiber_kind_t fk = fiber_kind(kind);
  int slot = -1;
  if (rt.nidle[fk] > 0) {
    slot = rt.idle_slots[fk][--rt.nidle[fk]]; /* rooted there already */
  } else {
    mrb_value fiber = mrb_funcall_with_block(mrb, mrb_obj_value(rt.fiber_class), rt.sym_new, 0, NULL,
                                             mrb_obj_value(rt.runners[fk]));
    if (!mrb->exc) slot = gw_mrb_root(fiber);
  }
  drop_fiber(s); /* the handler's fiber, before its body filter's */
  if (mrb->exc) { /* out of memory, in practice */
    fail_unexpectedly(s, mrb_obj_value(mrb->exc));
    mrb->exc = NULL;
    complete(s, mrb_nil_value());
  } else {
    s->root_slot = slot;
    mrb_value argv[2] = {code, rbreq};
    run(s, with_req ? 2 : 1, argv);
  }
  mrb_gc_arena_restore(mrb, ai);
}

/* -- the handler and filter objects ------------------------------------------- */

typedef struct {
  gw_handler_t super;
  mrb_value proc;           /* kept alive by the config's Ruby objects */
  int with_req;             /* the block takes an argument (the request) */
} mruby_handler_t;

static void handler_on_req(gw_handler_t *self, gw_request_t *req)
{
  const mruby_handler_t *h = (const mruby_handler_t *)self;
  start_fiber(req, RUN_HANDLER, h->proc, h->with_req, NULL, NULL);
}

static void handler_dispose(gw_handler_t *self)
{
  free(self);
}

gw_handler_t *gw_mruby_handler_new(mrb_state *mrb, mrb_value proc)
{
  (void)mrb;
  mruby_handler_t *h = malloc(sizeof(*h));
  if (h == NULL) return NULL;
  h->super = (gw_handler_t){.name = "mruby", .on_req = handler_on_req, .dispose = handler_dispose};
  h->proc = proc;
  /* `do ... end`, not `do |req| ... end`: Gateway::Request.current makes it if asked */
  h->with_req = !mrb_proc_p(proc) || mrb_proc_arity(mrb_proc_ptr(proc)) != 0;
  return &h->super;
}

typedef struct {
  gw_filter_t super;
  mrb_value proc;           /* kept alive by the config's Ruby objects */
  run_kind_t kind;
} mruby_filter_t;

static void filter_run(gw_filter_t *self, gw_request_t *req, gw_filter_done_cb done, void *arg)
{
  mruby_filter_t *f = (mruby_filter_t *)self;
  start_fiber(req, f->kind, f->proc, 1, done, arg);
}

static void filter_dispose(gw_filter_t *self)
{
  free(self);
}

gw_filter_t *gw_mruby_filter_new(mrb_state *mrb, mrb_value proc, gw_mruby_phase_t phase)
{
  (void)mrb;
  mruby_filter_t *f = malloc(sizeof(*f));
  if (f == NULL) return NULL;
  f->super = (gw_filter_t){.run = filter_run, .dispose = filter_dispose};
  f->proc = proc;
  static const run_kind_t kinds[] = {[GW_MRUBY_REWRITE] = RUN_REWRITE, [GW_MRUBY_ACCESS] = RUN_ACCESS,
                                     [GW_MRUBY_HEADER_FILTER] = RUN_HEADER_FILTER,
                                     [GW_MRUBY_BODY_FILTER] = RUN_BODY_FILTER, [GW_MRUBY_LOG] = RUN_LOG};
  f->kind = kinds[phase];
  return &f->super;
}

/* -- ruby_files: handler files beneath a static root ---------------------------- */

#define RUBY_FILE_MAX (16 << 20)

static mrb_value compile_source(mrb_state *mrb, void *ud)
{
  mrb_value *args = ud;
  return mrb_funcall_argv(mrb, mrb_obj_value(mrb_module_get(mrb, "Gateway")), mrb_intern_lit(mrb, "_compile_source"),
                          2, args);
}

/* The file's text from fd, or nil (unreadable, too large). */
static mrb_value read_fd(mrb_state *mrb, int fd, off_t size)
{
  if (size < 0 || size > RUBY_FILE_MAX) return mrb_nil_value();
  mrb_value text = mrb_str_new(mrb, NULL, (size_t)size);
  off_t off = 0;
  while (off < size) {
    ssize_t n = pread(fd, RSTRING_PTR(text) + off, (size_t)(size - off), off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return mrb_nil_value();
    off += n;
  }
  return text;
}

void gw_mruby_ruby_file(gw_request_t *req, const char *path, int fd, const struct stat *st)
{
  mrb_state *mrb = rt.mrb;
  int ai = mrb_gc_arena_save(mrb);
  if (mrb_nil_p(rt.ruby_files)) {
    rt.ruby_files = mrb_hash_new(mrb);
    mrb_gc_register(mrb, rt.ruby_files);
  }
  mrb_value key = mrb_str_new_cstr(mrb, path);
  mrb_value e = mrb_hash_get(mrb, rt.ruby_files, key);
  mrb_value stamp[4] = {mrb_int_value(mrb, (mrb_int)st->st_mtim.tv_sec), mrb_int_value(mrb, (mrb_int)st->st_mtim.tv_nsec),
                        mrb_int_value(mrb, (mrb_int)st->st_size), mrb_int_value(mrb, (mrb_int)st->st_ino)};
  int fresh = mrb_array_p(e) && RARRAY_LEN(e) == 5;
  for (int i = 0; fresh && i < 4; i++) fresh = mrb_integer(mrb_ary_ref(mrb, e, i)) == mrb_integer(stamp[i]);
  mrb_value code;
  if (fresh) {
    code = mrb_ary_ref(mrb, e, 4);
  } else { /* new, or changed since it was compiled */
    mrb_value text = read_fd(mrb, fd, st->st_size);
    if (mrb_nil_p(text)) {
      gw_log_error("ruby_files: %s: cannot read it (or larger than %d bytes)", path, RUBY_FILE_MAX);
      gw_request_simple_response(req, 500, NULL);
      gw_request_finish(req);
      mrb_gc_arena_restore(mrb, ai);
      return;
    }
    mrb_value args[2] = {text, key};
    mrb_bool raised = FALSE;
    code = mrb_protect_error(mrb, compile_source, args, &raised);
    if (raised || mrb->exc) {
      mrb_value msg = mrb_funcall(mrb, raised ? code : mrb_obj_value(mrb->exc), "message", 0);
      mrb->exc = NULL;
      gw_log_error("ruby_files: %s", mrb_string_p(msg) ? mrb_string_cstr(mrb, msg) : "?");
      mrb_hash_delete_key(mrb, rt.ruby_files, key);
      gw_request_simple_response(req, 500, NULL);
      gw_request_finish(req);
      mrb_gc_arena_restore(mrb, ai);
      return;
    }
    mrb_value entry = mrb_ary_new_from_values(mrb, 4, stamp);
    mrb_ary_push(mrb, entry, code);
    mrb_hash_set(mrb, rt.ruby_files, key, entry);
  }
  start_fiber(req, RUN_HANDLER, code, 1, NULL, NULL);
  mrb_gc_arena_restore(mrb, ai);
}

/* -- init_worker / exit_worker ------------------------------------------------- */

static mrb_value call_hook(mrb_state *mrb, void *ud)
{
  return mrb_funcall_argv(mrb, *(mrb_value *)ud, mrb_intern_lit(mrb, "call"), 0, NULL);
}

void gw_mruby_worker_hook(mrb_value proc, const char *what)
{
  if (mrb_nil_p(proc) || rt.ctx == NULL) return;
  mrb_state *mrb = rt.mrb;
  int ai = mrb_gc_arena_save(mrb);
  mrb_bool raised = FALSE;
  mrb_value r = mrb_protect_error(mrb, call_hook, &proc, &raised);
  if (raised || mrb->exc) {
    mrb_value msg = mrb_inspect(mrb, raised ? r : mrb_obj_value(mrb->exc));
    gw_log_error("%s raised: %s", what, mrb_string_p(msg) ? mrb_string_cstr(mrb, msg) : "?");
    mrb->exc = NULL;
  }
  mrb_gc_arena_restore(mrb, ai);
}

/* -- tasks: Ruby in a fiber on behalf of no client ----------------------------
 *
 * Code started by the worker itself (a pub/sub message's block) runs as a
 * handler of a detached request: method "TASK", target `label`, no
 * location, no client. So it gets a fiber and a current request like any
 * handler, and every async primitive (registered as pending on that request)
 * works unchanged. Its protocol side throws the response away and frees the
 * request from a fresh loop event. A task still parked when the worker exits
 * is not waited for. */

static void task_free(evutil_socket_t fd, short what, void *arg)
{
  gw_request_t *req = arg;
  (void)fd;
  (void)what;
  gw_request_dispose(req);
  free(req);
}

static void task_done(gw_request_t *req)
{
  if (req->resp.status >= 500) gw_log_error("task %s failed (see above)", req->in.target);
  if (event_base_once(rt.ctx->base, -1, EV_TIMEOUT, task_free, req, NULL) != 0) {
    gw_log_error("task %s: cannot free it (out of memory)", req->in.target);
  }
}

static const gw_protocol_t task_protocol = {.send = task_done};

int gw_mrb_task_start(mrb_value proc, const char *label)
{
  if (rt.ctx == NULL) return -1;
  gw_request_t *req = malloc(sizeof(*req));
  if (req == NULL) return -1;
  gw_request_init(req, rt.ctx, rt.ctx->server, &task_protocol, NULL);
  req->in.method = "TASK";
  req->in.method_id = -1;
  req->in.http_minor = 1;
  req->client.remote_addr = "-";
  if (gw_request_set_target(req, label, strlen(label)) != 0) {
    gw_request_dispose(req);
    free(req);
    return -1;
  }
  req->handler.running = 1;
  start_fiber(req, RUN_HANDLER, proc, 1, NULL, NULL);
  return 0;
}

/* -- bridge ------------------------------------------------------------------ */

void gw_mrb_job_done(void)
{
  rt.job_done = 1;
}

void gw_mrb_will_wait(void)
{
  rt.will_wait = 1;
}

void gw_fiber_resume(gw_request_t *req, mrb_value v)
{
  mrb_state *mrb = rt.mrb;
  int ai = mrb_gc_arena_save(mrb);
  run((script_t *)req->handler.state, 1, &v);
  mrb_gc_arena_restore(mrb, ai);
}

int gw_mrb_root(mrb_value v)
{
  int slot = take_slot();
  mrb_ary_set(rt.mrb, rt.roots, slot, v);
  return slot;
}

void gw_mrb_unroot(int slot)
{
  if (rt.ctx == NULL) return; /* the worker's runtime is gone (exit): nothing to give back */
  give_slot(slot);
}

mrb_value gw_mrb_rooted(int slot)
{
  return mrb_ary_ref(rt.mrb, rt.roots, slot);
}

gw_request_t *gw_mrb_current_request_or_null(void)
{
  return rt.current;
}

int gw_mrb_is_request_fiber(mrb_value v)
{
  if (rt.ctx == NULL || mrb_type(v) != MRB_TT_FIBER) return 0;
  const struct mrb_context *c = ((struct RFiber *)mrb_ptr(v))->cxt;
  return c != NULL && c->cibase != NULL && (c->cibase->proc == rt.runners[0] || c->cibase->proc == rt.runners[1]);
}

/* 1 if Ruby runs in the current request's own fiber right now (not in a
 * Fiber the handler created, not at the root). */
static int in_request_fiber(mrb_state *mrb)
{
  gw_request_t *req = rt.current;
  const script_t *s = req ? (const script_t *)req->handler.state : NULL;
  if (s == NULL || s->root_slot < 0) return 0;
  return ((struct RFiber *)mrb_ptr(fiber_of(s)))->cxt == mrb->c;
}

void gw_mruby_no_wait(const char *what) { rt.no_wait = what; }

void gw_mrb_check_yieldable(mrb_state *mrb, const char *what)
{
  if (rt.no_wait)
    mrb_raisef(mrb, E_RUNTIME_ERROR, "%s cannot wait in %s: it runs synchronously, outside any fiber", what,
               rt.no_wait);
  if (mrb->c != mrb->root_c && !in_request_fiber(mrb))
    mrb_raisef(mrb, mrb_class_get(mrb, "FiberError"),
               "%s cannot wait inside a Fiber the handler created: the wait would suspend that "
               "Fiber, not the request; call it in the handler itself", what);
  for (mrb_callinfo *ci = mrb->c->ci; ci >= mrb->c->cibase; ci--) {
    if (ci->cci > 0)
      mrb_raisef(mrb, mrb_class_get(mrb, "FiberError"),
                 "%s cannot wait here: it was called inside a block passed to a method written in C, and "
                 "mruby 3.1 cannot suspend a fiber across a C frame; call it outside that block", what);
  }
  if (mrb->c == mrb->root_c) mrb_raisef(mrb, E_RUNTIME_ERROR, "%s can only be called inside a handler", what);
}

gw_request_t *gw_mrb_current_request(mrb_state *mrb)
{
  gw_request_t *req = rt.current;
  if (req == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "no current request: this can only be called inside a handler");
  return req;
}

mrb_value gw_mrb_request_value(mrb_state *mrb, gw_request_t *req)
{
  script_t *s = script_of(req);
  if (s == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  if (mrb_nil_p(s->rb_req)) {
    /* made on demand (a handler that takes no argument asked for it): rooted
     * until the request ends, as the handler may drop it and park */
    request_object(mrb, s);
    s->req_slot = gw_mrb_root(s->rb_req);
  }
  return s->rb_req;
}

void gw_mrb_set_last_response(mrb_state *mrb, gw_request_t *req, mrb_value v)
{
  script_t *s = script_of(req);
  if (s == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  if (s->last_slot < 0) s->last_slot = gw_mrb_root(v);
  else mrb_ary_set(mrb, rt.roots, s->last_slot, v);
}

mrb_value gw_mrb_last_response(gw_request_t *req)
{
  const script_t *s = (const script_t *)req->handler.state;
  return s && s->last_slot >= 0 ? gw_mrb_rooted(s->last_slot) : mrb_nil_value();
}

gw_request_t *gw_mrb_request_ptr(mrb_state *mrb, mrb_value obj)
{
  gw_request_t *req = mrb_data_check_get_ptr(mrb, obj, &request_type);
  if (req == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "this request has already finished");
  return req;
}

void gw_mrb_set_proxy_pass(mrb_state *mrb, gw_request_t *req, const char *url, const char *key)
{
  script_t *s = script_of(req);
  char *u = strdup(url), *k = key ? strdup(key) : NULL;
  if (s == NULL || u == NULL || (key && k == NULL)) {
    free(u);
    free(k);
    mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  }
  free(s->proxy_url);
  free(s->proxy_key);
  s->proxy_url = u;
  s->proxy_key = k;
  s->proxy_fastcgi = 0;
  gw_regex_unref(s->fastcgi_split);
  s->fastcgi_split = NULL;
}

void gw_mrb_set_fastcgi_pass(mrb_state *mrb, gw_request_t *req, const char *target, const char *script_filename)
{
  gw_mrb_set_proxy_pass(mrb, req, target, script_filename);
  script_of(req)->proxy_fastcgi = 1;
}

void gw_mrb_set_fastcgi_split(gw_request_t *req, gw_regex_t *split)
{
  script_t *s = script_of(req);
  if (s == NULL || !s->proxy_fastcgi) return;
  gw_regex_unref(s->fastcgi_split);
  s->fastcgi_split = gw_regex_ref(split);
}

void gw_mrb_set_send_file(mrb_state *mrb, gw_request_t *req, const char *path, size_t len)
{
  script_t *s = script_of(req);
  char *p = malloc(len + 1);
  if (s == NULL || p == NULL) {
    free(p);
    mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  }
  memcpy(p, path, len);
  p[len] = '\0';
  free(s->send_path);
  s->send_path = p;
  s->send_len = len;
}

void gw_mrb_fail(gw_request_t *req)
{
  script_t *s = script_of(req);
  if (s) s->failed = 1;
}

struct event_base *gw_mrb_event_base(void)
{
  return rt.ctx ? rt.ctx->base : NULL;
}

/* The timeline's BLOCKED state and the trace's "blocking call" events. */
void gw_mrb_blocking(int begin, const char *what)
{
  static uint32_t was;
  gw_request_t *req = rt.current;
  if (begin)
    was = gw_timeline_enter(GW_TL_BLOCKED, req ? req->trace.id : 0);
  else
    gw_timeline_leave(was);
  if (gw_trace && req) {
    char ev[200];
    snprintf(ev, sizeof(ev), begin ? "blocking call: %s" : "blocking call returned: %s", what);
    gw_trace_event(req, ev);
  }
}

void gw_mrb_publish_stats(void)
{
  if (rt.ctx) rt.ctx->publish_stats(rt.ctx);
}

int gw_mrb_worker_index(void)
{
  return rt.ctx ? rt.ctx->index : -1;
}

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

void gw_mrb_write(mrb_state *mrb, gw_request_t *req, mrb_value str)
{
  str = mrb_obj_as_string(mrb, str);
  gw_mrb_write_bytes(req, RSTRING_PTR(str), (size_t)RSTRING_LEN(str));
}

void gw_mrb_write_bytes(gw_request_t *req, const char *p, size_t len)
{
  evbuffer_add(req->resp.body, p, len);
  req->resp.has_output = 1;
}

void gw_mrb_set_status(mrb_state *mrb, gw_request_t *req, mrb_int status)
{
  if (status < 100 || status > 999) mrb_raisef(mrb, E_ARGUMENT_ERROR, "invalid HTTP status %i (100..999)", status);
  req->resp.status = (int)status;
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
