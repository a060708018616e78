/* core.c - natives of the Gateway module: logging and process facts. */
#include <unistd.h>

#include <mruby.h>
#include <mruby/string.h>

#include "gw_mruby.h"
#include "log.h"

static mrb_value gw_mrb_log(mrb_state *mrb, mrb_value self)
{
  mrb_int level;
  char *msg;
  (void)self;
  mrb_get_args(mrb, "iz", &level, &msg);
  if (level < GW_LOG_DEBUG || level > GW_LOG_CRIT) mrb_raise(mrb, E_ARGUMENT_ERROR, "bad log level");
  gw_log((gw_log_level_t)level, "%s", msg);
  return mrb_nil_value();
}

static mrb_value gw_mrb_pid(mrb_state *mrb, mrb_value self)
{
  (void)mrb;
  (void)self;
  return mrb_fixnum_value(getpid());
}

static mrb_value gw_mrb_worker_id(mrb_state *mrb, mrb_value self)
{
  (void)mrb;
  (void)self;
  return mrb_fixnum_value(gw_mrb_worker_index());
}

void mrb_mruby_gateway_core_gem_init(mrb_state *mrb)
{
  struct RClass *gw = mrb_define_module(mrb, "Gateway");
  mrb_define_module_function(mrb, gw, "_gw_log", gw_mrb_log, MRB_ARGS_REQ(2));
  mrb_define_module_function(mrb, gw, "pid", gw_mrb_pid, MRB_ARGS_NONE());
  mrb_define_module_function(mrb, gw, "worker_id", gw_mrb_worker_id, MRB_ARGS_NONE());
}

void mrb_mruby_gateway_core_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
