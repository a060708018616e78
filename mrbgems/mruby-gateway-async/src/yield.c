/* yield.c - the check every async primitive makes before it parks the
 * running fiber. */
#include <mruby.h>

#include "async.h"
#include "gw_mruby.h"

/* gw_mrb_check_yieldable, then tells the core that the coming park is a
 * real wait. */
void gw_async_check_yieldable(mrb_state *mrb, const char *what)
{
  gw_mrb_check_yieldable(mrb, what);
  gw_mrb_will_wait();
}
