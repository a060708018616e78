/* gem.c - mruby-gateway-regexp's entry point: Regexp, MatchData, then the
 * String methods that take one (mrblib adds the Ruby-level rest), and
 * Gateway::Request#captures for regex locations. */
#include <mruby.h>

#include "re.h"

void mrb_mruby_gateway_regexp_gem_init(mrb_state *mrb)
{
  gw_re_init_regexp(mrb);
  gw_re_init_matchdata(mrb);
  gw_re_init_string(mrb);
  gw_re_init_request(mrb);
}
