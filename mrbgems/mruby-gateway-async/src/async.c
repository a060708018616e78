/* async.c - the async gem: Async.sleep (sleep.c) and Async::HTTP
 * (subrequest.c), on the check they share (yield.c). */
#include <mruby.h>

#include "async.h"

void mrb_mruby_gateway_async_gem_init(mrb_state *mrb)
{
  struct RClass *async = mrb_define_module(mrb, "Async");
  gw_async_sleep_init(mrb, async);
  gw_async_subrequest_init(mrb, async);
}

void mrb_mruby_gateway_async_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
