/* subrequest.c - Async::HTTP.sub_request: internal locations and URLs. */
#include <mruby.h>

#include "async.h"
#include "gw_mruby.h"

void gw_async_subrequest_init(mrb_state *mrb, struct RClass *async)
{
  (void)mrb;
  (void)async;
}
