/* tls_hook.c - running the tls on_handshake proc (tls_hook.h). The Ruby
 * side (Nginx::SSL, mrbgems/mruby-gateway-nginx) reaches the handshake
 * through gw_mrb_tls_hello() while the proc runs. */
#include <stdio.h>
#include <stdlib.h>

#include <mruby.h>
#include <mruby/error.h>
#include <mruby/string.h>

#include "gw_mruby.h"
#include "mruby_handler.h"
#include "tls_hook.h"

typedef struct {
  mrb_state *mrb;
  mrb_value proc;
} tls_hook_t;

static gw_tls_hello_t *current; /* the handshake being decided, or NULL */

gw_tls_hello_t *gw_mrb_tls_hello(void) { return current; }

void *gw_tls_hook_new(mrb_state *mrb, mrb_value proc)
{
  tls_hook_t *h = malloc(sizeof(*h));
  if (h == NULL) return NULL;
  h->mrb = mrb;
  h->proc = proc;
  return h;
}

void gw_tls_hook_free(void *hook) { free(hook); }

/* proc.call(Nginx::SSL.new) */
static mrb_value call_proc(mrb_state *mrb, void *ud)
{
  tls_hook_t *h = ud;
  struct RClass *ssl = mrb_class_get_under(mrb, mrb_module_get(mrb, "Nginx"), "SSL");
  mrb_value obj = mrb_obj_new(mrb, ssl, 0, NULL);
  return mrb_funcall_argv(mrb, h->proc, mrb_intern_lit(mrb, "call"), 1, &obj);
}

int gw_tls_hook_run(void *hook, gw_tls_hello_t *hello, char *err, size_t errlen)
{
  tls_hook_t *h = hook;
  mrb_state *mrb = h->mrb;
  int ai = mrb_gc_arena_save(mrb);
  current = hello;
  gw_mruby_no_wait("tls on_handshake");
  mrb_bool raised = FALSE;
  mrb_value r = mrb_protect_error(mrb, call_proc, h, &raised);
  gw_mruby_no_wait(NULL);
  current = NULL;
  int rc = 0;
  if (raised || mrb->exc) {
    mrb_value msg = mrb_inspect(mrb, raised ? r : mrb_obj_value(mrb->exc));
    snprintf(err, errlen, "the hook raised %s", mrb_string_p(msg) ? mrb_string_cstr(mrb, msg) : "?");
    mrb->exc = NULL;
    rc = -1;
  }
  mrb_gc_arena_restore(mrb, ai);
  return rc;
}

void gw_tls_hook_drop(void *hook, int data)
{
  (void)hook;
  gw_mrb_unroot(data - 1); /* kept as slot + 1 (nginx.c's SSL._gw_userdata) */
}
