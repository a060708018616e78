/* head_filter.h - the location's header_filter on a response streamed from
 * an upstream (proxy_pass, fastcgi): it runs on the head before anything
 * goes to the client, with the upstream paused meanwhile; then the head goes
 * out as the filter left it and the body flows, or the client gets 500 (the
 * filter raised) or 502 (the upstream failed meanwhile). The handler's side
 * (pause, resume, start streaming, let go of its operation) is a small ops
 * table, so proxy.c and fastcgi.c share this order of events. */
#ifndef GW_HEAD_FILTER_H
#define GW_HEAD_FILTER_H

#include "error.h"
#include "handler.h"
#include "request.h"

typedef struct {
  void (*pause)(void *op);                   /* stop reading the upstream */
  void (*resume)(void *op);                  /* ... and go on */
  void (*begin)(void *op, long long length); /* the head goes out: gw_request_stream_begin */
  void (*release)(void *op);                 /* the operation is over: unregister, cancel, free */
} gw_head_filter_ops_t;

/* Embedded in the handler's operation; zeroed with it. */
typedef struct {
  const gw_head_filter_ops_t *ops;
  void *op;
  int running;       /* the filter runs: the upstream is paused */
  int done_meanwhile;/* the upstream finished while it ran (bodyless, or failed) */
  gw_err_t done_err;
  long long length;  /* what to announce once it is done */
} gw_head_filter_t;

/* From the upstream's on_head, once req->status and resp_headers are set:
 * runs the location's header_filter if there is one (returns 1: the ops
 * continue later), else calls ops->begin(op, length) at once (returns 0). */
int gw_head_filter_run(gw_head_filter_t *hf, gw_request_t *req, const gw_head_filter_ops_t *ops, void *op,
                       long long length);
static inline int gw_head_filter_start(gw_head_filter_t *hf, gw_request_t *req, const gw_head_filter_ops_t *ops,
                                       void *op, long long length)
{
  if (req->location == NULL || req->location->header_filter == NULL) { /* the common case, inline */
    ops->begin(op, length);
    return 0;
  }
  return gw_head_filter_run(hf, req, ops, op, length);
}

/* From the upstream's done callback: 1 when the filter still runs and takes
 * the outcome up when it is done (the caller returns), else 0. */
static inline int gw_head_filter_upstream_done(gw_head_filter_t *hf, gw_err_t err)
{
  if (!hf->running) return 0;
  hf->done_meanwhile = 1;
  hf->done_err = err;
  return 1;
}

#endif
