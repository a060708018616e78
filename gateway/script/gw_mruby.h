/* gw_mruby.h - the bridge: what the gems in mrbgems/ may use of the core.
 *
 * Gems see requests, the current worker's loop and the fiber protocol
 * through this header (implemented by mruby_handler.c, vm.c, data_clients.c
 * and tls_hook.c), plus the
 * request API it includes (request.h: reading a request, the pending
 * registry) and the helper layer (headers.h, log.h, stats.h, trace.h,
 * subrequest.h for Async::HTTP; shdict.h for Gateway::SharedDict; redis.h,
 * the clients layer's Redis client, for Async::Redis; tarantool.h and
 * iproto.h for Async::Tarantool; ws_handler.h and websocket.h, a scripted
 * WebSocket's connection, for Gateway::WebSocket). Gems never touch a request's fields that
 * belong to the core's own bookkeeping, and never free what the core owns.
 *
 * Rule of every async primitive (docs/DESIGN.md §3): the native `_gw_*` validates
 * its arguments, arms its event, registers it as pending on the current
 * request and returns; the mrblib wrapper then calls Fiber.yield; the
 * completion calls gw_fiber_resume() from the loop with the value (or an
 * exception object, which the wrapper raises). */
#ifndef GW_MRUBY_H
#define GW_MRUBY_H

#include <event2/event.h>
#include <mruby.h>

#include "request.h"
#include "stats.h"
#include "subrequest.h"
#include "timeline.h"
#include "trace.h"
#include "version.h"
#include "ws_handler.h"

/* A VM with every gem of build_config.rb loaded, its memory capped at
 * GW_VM_MEMORY_LIMIT until gw_vm_set_memory_limit(). NULL with err set on
 * failure. Closed with gw_vm_close(). */
#define GW_VM_MEMORY_LIMIT ((size_t)512 << 20)
mrb_state *gw_vm_open(char *err, size_t errlen);
void gw_vm_set_memory_limit(mrb_state *mrb, size_t bytes);
void gw_vm_close(mrb_state *mrb);

/* The request whose handler fiber is running; raises if called outside a
 * handler (e.g. at config time). */
gw_request_t *gw_mrb_current_request(mrb_state *mrb);
/* Same, NULL instead of raising. */
gw_request_t *gw_mrb_current_request_or_null(void);
/* 1 if v is one of the worker's handler or filter fibers (whose body is a
 * Gateway runner): only the core may resume those. */
int gw_mrb_is_request_fiber(mrb_value v);

/* The Gateway::Request object of req (created on first use). */
mrb_value gw_mrb_request_value(mrb_state *mrb, gw_request_t *req);
/* The request behind a Gateway::Request object; raises if it has finished. */
gw_request_t *gw_mrb_request_ptr(mrb_state *mrb, mrb_value obj);
/* A value kept for req (GC-rooted) until it ends: Async::HTTP.last_response
 * (nil: none yet). Kept in C, so a handler that never asks for its
 * Gateway::Request does not make one for it. Raises when out of memory. */
void gw_mrb_set_last_response(mrb_state *mrb, gw_request_t *req, mrb_value v);
mrb_value gw_mrb_last_response(gw_request_t *req);

/* The event loop of this worker (NULL in the master / at config time). */
struct event_base *gw_mrb_event_base(void);
/* This process's data clients (Async::Redis, Async::Tarantool: one pool per
 * address and credentials, shared by every Ruby object naming them), by a
 * key the gem builds ("redis\naddr\n..."): the client put under key, or
 * NULL. They live as long as the process; a forked worker starts from the
 * master's (empty) registry. (data_clients.c) */
void *gw_mrb_client_get(const char *key);
/* Registers client under key; -1 when out of memory (the caller keeps it). */
int gw_mrb_client_put(const char *key, void *client);

/* A data client object's servers (the C side of an Async::Redis or
 * Async::Tarantool): the addresses it was given, each turned on first use
 * into this worker's client of that address and credentials (the registry
 * above), used in turn; and its timeout. Part of the gem's DATA struct,
 * disposed of by its dfree. */
typedef struct {
  int n;          /* addresses */
  char **addrs;
  void **clients; /* per address: NULL until first used */
  unsigned rr;
  char *creds;    /* the registry key's tail: what else makes a pool differ */
  int timeout_ms; /* 0: none */
} gw_mrb_servers_t;
/* How a gem makes a client: NULL with err when addr is not one it can use. */
typedef struct {
  const char *kind; /* "redis": the registry key's head, and error messages */
  void *(*make)(struct event_base *base, const char *addr, const void *params, char *err, size_t errlen);
  void (*destroy)(void *client);
} gw_mrb_client_maker_t;
/* s from an Array of address Strings, the credentials key tail (copied) and
 * a timeout in seconds (<= 0: none). Raises; what s holds by then is freed
 * by gw_mrb_servers_dispose. */
void gw_mrb_servers_init(mrb_state *mrb, gw_mrb_servers_t *s, mrb_value addrs, const char *creds, mrb_float timeout);
void gw_mrb_servers_dispose(gw_mrb_servers_t *s);
/* The next address's client (round robin), made by m with params on first
 * use. Raises outside a worker (what: the class, for the message), and an
 * ArgumentError with make's error. */
void *gw_mrb_servers_next(mrb_state *mrb, gw_mrb_servers_t *s, const char *what, const gw_mrb_client_maker_t *m,
                          const void *params);
/* One data client operation pending on a request: the first member of the
 * gem's call struct (malloc'ed, with its operation). */
typedef struct {
  gw_pending_t pending;
  gw_request_t *req;
  const char *kind;  /* "redis": in messages and the trace */
  const char *addr;  /* the client's address (lives as long as the client) */
  int timeout_ms;
} gw_mrb_data_call_t;
/* A call of size bytes for the current request to the client of kind at
 * addr, with s's timeout; raises when out of memory. */
void *gw_mrb_data_call_new(mrb_state *mrb, size_t size, const char *kind, const char *addr, const gw_mrb_servers_t *s);
/* c's operation was started (started 0: out of memory: c is freed, and this
 * raises): c waits on its request (cancel: the gem's, which stops the
 * operation and frees c) and the fiber is to park. */
void gw_mrb_data_call_wait(mrb_state *mrb, gw_mrb_data_call_t *c, int started, void (*cancel)(gw_pending_t *));
/* c's operation ended: its fiber resumes with a Gateway::TimeoutError or
 * Gateway::UpstreamError for err ("redis ADDR: err.msg"), else with
 * convert(mrb, ud) (an exception it raises is the value); c is freed. */
void gw_mrb_data_call_done(gw_mrb_data_call_t *c, gw_err_t err, mrb_value (*convert)(mrb_state *mrb, void *ud),
                           void *ud);
/* A copy of a String argument, NULL for nil; raises when out of memory. */
char *gw_mrb_strdup_or_null(mrb_state *mrb, mrb_value s);

/* A gem's call that blocks the worker on purpose (HttpRequest) begins
 * (begin 1) or ends (0): the dashboard's loop timeline shows it as BLOCKED,
 * a recorded trace as a "blocking call: what" span. */
void gw_mrb_blocking(int begin, const char *what);

/* Refreshes this worker's gauges in the shared stats table (no-op outside a worker). */
void gw_mrb_publish_stats(void);

/* Index of this worker within its server's pool; -1 in the master. */
int gw_mrb_worker_index(void);

/* Resumes req's parked fiber with v (called from a loop callback, never from
 * inside a fiber). The pending operation must have removed itself first. */
void gw_fiber_resume(gw_request_t *req, mrb_value v);

/* Runs proc (called with a detached Gateway::Request: method "TASK",
 * target label) in a fiber of its own on behalf of no client request, from
 * the loop (never from inside a fiber): async calls work in it as in a
 * handler; its result is dropped, an exception logged. -1 outside a worker
 * or when out of memory. (mruby_handler.c) */
int gw_mrb_task_start(mrb_value proc, const char *label);

/* The TLS handshake whose `tls: { on_handshake: }` hook is running (tls_server.h's
 * gw_tls_hello_* calls choose its certificate), or NULL outside the hook.
 * (tls_hook.c) */
struct gw_tls_hello_s *gw_mrb_tls_hello(void);

/* Called by the fiber runners (Gateway._job_yield) when a job is over: the
 * fiber is then reused for another request rather than discarded. */
void gw_mrb_job_done(void);
/* Every primitive that parks the running fiber calls this before it arms
 * anything, so the error is clear and nothing is left pending: raises unless
 * Ruby runs in the request's own fiber (not a Fiber the handler made) and not
 * across a C function frame (a block a C-implemented method calls back, e.g.
 * a Hash default block), which mruby 3.1 cannot suspend. what names the
 * primitive in the message ("Async.sleep"). */
void gw_mrb_check_yieldable(mrb_state *mrb, const char *what);
/* An async primitive is about to park the running fiber on a wake-up it armed
 * (a fiber that parks without one is failed: nothing would resume it). */
void gw_mrb_will_wait(void);

/* Keeps v alive across GC while parked work refers to it. Returns a slot for
 * gw_mrb_unroot(). */
int gw_mrb_root(mrb_value v);
void gw_mrb_unroot(int slot);
/* The value a slot keeps. */
mrb_value gw_mrb_rooted(int slot);

/* req.proxy_pass(url, hash_key:): the upstream answers req once the handler
 * returns (url and key are copied). */
void gw_mrb_set_proxy_pass(mrb_state *mrb, gw_request_t *req, const char *url, const char *key);
/* req.fastcgi_pass(target, script_filename:): the FastCGI server answers req
 * once the handler returns (copied; script_filename may be NULL). */
void gw_mrb_set_fastcgi_pass(mrb_state *mrb, gw_request_t *req, const char *target, const char *script_filename);
/* Its split_path_info: (the Regexp gem's, a pattern of two groups), after
 * gw_mrb_set_fastcgi_pass: referenced until the request ends. */
void gw_mrb_set_fastcgi_split(gw_request_t *req, struct gw_regex_s *split);
/* req.send_file(path): the file answers req once the handler returns
 * (static.c: relative to the location's root, or absolute; path copied). */
void gw_mrb_set_send_file(mrb_state *mrb, gw_request_t *req, const char *path, size_t len);
/* The handler's code raised (Gateway._fail): its response becomes a 500. */
void gw_mrb_fail(gw_request_t *req);

/* Output of a handler. Raise ArgumentError on bad input. */
void gw_mrb_write(mrb_state *mrb, gw_request_t *req, mrb_value str);
/* The same for len bytes at p (no Ruby string made for them). */
void gw_mrb_write_bytes(gw_request_t *req, const char *p, size_t len);
void gw_mrb_set_status(mrb_state *mrb, gw_request_t *req, mrb_int status);
void gw_mrb_set_header(mrb_state *mrb, gw_request_t *req, mrb_value name, mrb_value value);

/* A Gateway::Headers of hs: lower-case names, repeated fields joined with ", ". */
mrb_value gw_mrb_headers_new(mrb_state *mrb, const gw_headers_t *hs);

/* Raises class_name (e.g. "Gateway::TimeoutError") with msg; builds the
 * exception object without raising when raise == 0. */
mrb_value gw_mrb_error(mrb_state *mrb, const char *class_name, const char *msg);

#endif
