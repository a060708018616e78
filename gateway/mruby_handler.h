/* mruby_handler.h - the mruby handler: a location's Ruby block, and header
 * and body filters, run in fibers (handler.h's objects), and the worker's
 * Ruby runtime behind the bridge the gems use (gw_mruby.h). */
#ifndef GW_MRUBY_HANDLER_H
#define GW_MRUBY_HANDLER_H

#include <mruby.h>

#include "handler.h"

/* The handler of a location whose block is proc (kept alive by the
 * config's Ruby objects). NULL when out of memory. */
gw_handler_t *gw_mruby_handler_new(mrb_state *mrb, mrb_value proc);

/* A filter calling proc: on the response head (body 0: proc.call(req);
 * status and headers may change) or on the whole body (body 1:
 * proc.call(body, req); a String result replaces the body). Async calls
 * are allowed in both. NULL when out of memory. */
gw_filter_t *gw_mruby_filter_new(mrb_state *mrb, mrb_value proc, int body);

/* Worker set-up: GC roots, the runner procs, classes; ctx must outlive the
 * runtime. Returns 0 or -1. dispose undoes it (worker exit). */
int gw_mruby_worker_init(gw_context_t *ctx);
void gw_mruby_worker_dispose(void);

/* Fibers parked (and sub-request tasks running) right now, for the gauges. */
unsigned gw_mruby_parked_fibers(void);

#endif
