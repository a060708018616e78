/* handler.h - runs a location's Ruby handler in its own fiber. */
#ifndef GW_HANDLER_H
#define GW_HANDLER_H

#include <mruby.h>

#include "request.h"

/* Creates the request's fiber and runs it until it finishes or parks. */
void gw_handler_start(gw_request_t *req);

/* Runs a location's body filter on req's complete response, in a fiber of its
 * own; a String result replaces the body. Finishes req afterwards. */
void gw_handler_filter_body(gw_request_t *req, mrb_value filter);

/* Runs a header filter (filter.call(req)) on req's response head in a fiber
 * of its own, then calls then(req), also when the filter raised (then
 * req->failed is set). req is not finished here: then() goes on. */
void gw_handler_filter_head(gw_request_t *req, mrb_value filter, void (*then)(gw_request_t *req));

/* Drops the request's ties to Ruby: the fiber's GC root slot and the
 * Gateway::Request object's pointer to req. Safe to call twice. */
void gw_handler_release(gw_request_t *req);

/* Worker set-up: GC root array, the runner proc, classes. Returns 0 or -1. */
int gw_handler_worker_init(gw_worker_t *w);

#endif
