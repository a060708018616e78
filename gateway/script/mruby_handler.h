/* mruby_handler.h - the mruby handler: a location's Ruby block, and header
 * and body filters, run in fibers (handler.h's objects), and the worker's
 * Ruby runtime behind the bridge the gems use (gw_mruby.h). */
#ifndef GW_MRUBY_HANDLER_H
#define GW_MRUBY_HANDLER_H

#include <sys/stat.h>

#include <mruby.h>

#include "handler.h"
#include "request.h"

/* The handler of a location whose block is proc (kept alive by the
 * config's Ruby objects). NULL when out of memory. */
gw_handler_t *gw_mruby_handler_new(mrb_state *mrb, mrb_value proc);

/* The phases a Ruby block can run in besides the content (handler.h). */
typedef enum {
  GW_MRUBY_REWRITE,       /* proc.call(req) before access; may change req.uri or answer */
  GW_MRUBY_ACCESS,        /* proc.call(req) before the content; may answer (403...) */
  GW_MRUBY_HEADER_FILTER, /* proc.call(req) on the response head: status, headers_out */
  GW_MRUBY_BODY_FILTER,   /* proc.call(body, req) on the whole body: a String result replaces it */
  GW_MRUBY_LOG            /* proc.call(req) once the response was queued; may not wait */
} gw_mruby_phase_t;

/* A step calling proc in that phase, in a fiber of its own (async calls
 * allowed, but in the log phase). NULL when out of memory. */
gw_filter_t *gw_mruby_filter_new(mrb_state *mrb, mrb_value proc, gw_mruby_phase_t phase);

/* static.h's ruby_file: runs the handler file at path (read from fd) for
 * req, compiled once per worker and again when its mtime, size or inode
 * changed; one that does not compile answers 500 with its FILE:LINE in the
 * error log. */
void gw_mruby_ruby_file(gw_request_t *req, const char *path, int fd, const struct stat *st);

/* Runs an init_worker / exit_worker proc (nil: nothing) outside any
 * request; an exception is logged with `what`. */
void gw_mruby_worker_hook(mrb_value proc, const char *what);

/* Ruby about to run synchronously on behalf of `what` ("tls on_handshake"),
 * outside any fiber: async calls raise a clear error until
 * gw_mruby_no_wait(NULL). */
void gw_mruby_no_wait(const char *what);

/* Worker set-up: GC roots, the runner procs, classes; ctx must outlive the
 * runtime. Returns 0 or -1. dispose undoes it (worker exit). */
int gw_mruby_worker_init(gw_context_t *ctx);
void gw_mruby_worker_dispose(void);

/* Fibers parked (and sub-request tasks running) right now, for the gauges. */
unsigned gw_mruby_parked_fibers(void);

#endif
