/* yield.c - the check every async primitive makes before it parks the
 * running fiber. */
#include <mruby.h>

#include "async.h"
#include "gw_mruby.h"

/* Called by every primitive that parks the fiber, before it arms anything, so
 * an error is clear and nothing is left pending: the wait must suspend the
 * request's own fiber (not a Fiber the handler made), and not across a C
 * function frame (a block a C-implemented method calls back, e.g. a Hash
 * default block), which mruby 3.1 cannot do. Then it tells the core that
 * the coming park is a real wait. */
void gw_async_check_yieldable(mrb_state *mrb, const char *what)
{
  if (mrb->c != mrb->root_c && !gw_mrb_in_request_fiber(mrb))
    mrb_raisef(mrb, mrb_class_get(mrb, "FiberError"),
               "%s cannot wait inside a Fiber the handler created: the wait would suspend that "
               "Fiber, not the request; call it in the handler itself", what);
  for (mrb_callinfo *ci = mrb->c->ci; ci >= mrb->c->cibase; ci--) {
    if (ci->cci > 0)
      mrb_raisef(mrb, mrb_class_get(mrb, "FiberError"),
                 "%s cannot wait here: it was called inside a block passed to a method written in C, and "
                 "mruby 3.1 cannot suspend a fiber across a C frame; call it outside that block", what);
  }
  if (mrb->c == mrb->root_c)
    mrb_raisef(mrb, E_RUNTIME_ERROR, "%s can only be called inside a handler", what);
  gw_mrb_will_wait();
}
