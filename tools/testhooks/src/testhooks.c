/* testhooks.c - GatewayTest, fault injection for the specs. Linked only into
 * build/gateway-test (and build/asan/gateway-test), with gateway/shm/shdict.c
 * compiled again under -DGW_TEST_HOOKS; build/gateway has neither, so no
 * config script can block the workers with it.
 *
 *   GatewayTest.hold_shdict_lock(name, ms)  takes shared_dict name's lock and
 *       keeps it ms milliseconds (0..60000), blocking this worker, as a
 *       process that stalls or dies holding it would. */
#include <mruby.h>
#include <mruby/string.h>

#include "shdict.h"

static mrb_value hold_shdict_lock(mrb_state *mrb, mrb_value self)
{
  mrb_value name;
  mrb_int ms;
  (void)self;
  mrb_get_args(mrb, "Si", &name, &ms);
  if (ms < 0 || ms > 60000) mrb_raise(mrb, E_ARGUMENT_ERROR, "GatewayTest.hold_shdict_lock: 0..60000 ms");
  gw_shdict_t *d = gw_shdict_find(mrb_string_cstr(mrb, name));
  if (d == NULL) mrb_raisef(mrb, E_ARGUMENT_ERROR, "GatewayTest.hold_shdict_lock: no shared_dict %v", name);
  gw_shdict_hold_lock(d, (int)ms);
  return mrb_nil_value();
}

void mrb_mruby_gateway_testhooks_gem_init(mrb_state *mrb)
{
  struct RClass *m = mrb_define_module(mrb, "GatewayTest");
  mrb_define_module_function(mrb, m, "hold_shdict_lock", hold_shdict_lock, MRB_ARGS_REQ(2));
}

void mrb_mruby_gateway_testhooks_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
