/* nginx.c - the ngx_mruby output calls as natives: they run once or more per
 * request, so they skip the Ruby layers of Gateway::Request. */
#include <mruby.h>
#include <mruby/string.h>

#include "gw_mruby.h"

static mrb_value nginx_rputs(mrb_state *mrb, mrb_value self)
{
  mrb_value s = mrb_get_arg1(mrb);
  (void)self;
  gw_mrb_write(mrb, gw_mrb_current_request(mrb), s);
  return mrb_nil_value();
}

static mrb_value nginx_echo(mrb_state *mrb, mrb_value self)
{
  mrb_value s = mrb_get_arg1(mrb);
  (void)self;
  gw_request_t *req = gw_mrb_current_request(mrb);
  gw_mrb_write(mrb, req, s);
  gw_mrb_write(mrb, req, mrb_str_new_lit(mrb, "\n"));
  return mrb_nil_value();
}

/* Sets the status; output written before or after it is sent with it.
 * Nginx::OK (0) and Nginx::DECLINED (-5) set nothing: in a rewrite or
 * access phase the request goes on to the next phase. */
static mrb_value nginx_return(mrb_state *mrb, mrb_value self)
{
  mrb_int status = 200;
  (void)self;
  mrb_get_args(mrb, "|i", &status);
  if (status != 0 && status != -5) gw_mrb_set_status(mrb, gw_mrb_current_request(mrb), status);
  return mrb_fixnum_value(status);
}

void mrb_mruby_gateway_nginx_gem_init(mrb_state *mrb)
{
  struct RClass *nginx = mrb_define_module(mrb, "Nginx");
  mrb_define_module_function(mrb, nginx, "rputs", nginx_rputs, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, nginx, "echo", nginx_echo, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, nginx, "return", nginx_return, MRB_ARGS_OPT(1));
}

void mrb_mruby_gateway_nginx_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
