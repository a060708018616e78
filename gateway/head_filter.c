/* head_filter.c - a location's header_filter before a streamed upstream
 * response goes out (head_filter.h). */
#include "head_filter.h"
#include "handler.h"

static void after_filter(gw_request_t *req, int verdict, void *arg)
{
  gw_head_filter_t *hf = arg;
  const gw_head_filter_ops_t *ops = hf->ops;
  void *op = hf->op; /* hf lives in op: read it all before release */
  int filter_failed = verdict == GW_STEP_FAILED;
  int done_meanwhile = hf->done_meanwhile;
  hf->running = 0;
  int failed = filter_failed || (done_meanwhile && hf->done_err.kind != GW_OK);
  if (failed || gw_request_bodyless(req)) { /* nothing (more) to stream */
    ops->release(op);
    if (failed) gw_request_simple_response(req, filter_failed ? 500 : 502, NULL);
    gw_request_finish(req);
    return;
  }
  ops->begin(op, hf->length);
  if (done_meanwhile) { /* a response without a body (HEAD/204/304) */
    ops->release(op);
    gw_request_stream_end(req, 1);
    return;
  }
  ops->resume(op);
}

int gw_head_filter_run(gw_head_filter_t *hf, gw_request_t *req, const gw_head_filter_ops_t *ops, void *op,
                       long long length)
{
  gw_filter_t *filter = req->location ? req->location->header_filter : NULL;
  if (filter == NULL) {
    ops->begin(op, length);
    return 0;
  }
  /* Nothing goes to the client, and no body is read, until it is done. */
  hf->ops = ops;
  hf->op = op;
  hf->running = 1;
  hf->done_meanwhile = 0;
  hf->length = length;
  ops->pause(op);
  filter->run(filter, req, after_filter, hf);
  return 1;
}
