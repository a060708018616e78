/* async.h - shared between the async gem's natives. */
#ifndef GW_ASYNC_GEM_H
#define GW_ASYNC_GEM_H

#include <mruby.h>

/* Raises FiberError unless the running handler fiber can yield from here (yield.c). */
void gw_async_check_yieldable(mrb_state *mrb, const char *what);
/* Define Async.sleep (sleep.c) and the Async::HTTP natives (subrequest.c). */
void gw_async_sleep_init(mrb_state *mrb, struct RClass *async);
void gw_async_subrequest_init(mrb_state *mrb, struct RClass *async);

#endif
