/* tls_hook.h - `tls: { on_handshake: ->(ssl) { ... } }`: a Ruby proc run for
 * every TLS handshake of a server, during the ClientHello, to choose the
 * certificate (ngx_mruby's mruby_ssl_handshake_handler and Nginx::SSL).
 * tls_server.c calls it through the function pointer config_load.c hands it. */
#ifndef GW_TLS_HOOK_H
#define GW_TLS_HOOK_H

#include <mruby.h>

#include "tls_server.h"

/* The hook's argument for proc (kept alive by the config's Ruby objects);
 * NULL when out of memory. Freed with gw_tls_hook_free(). */
void *gw_tls_hook_new(mrb_state *mrb, mrb_value proc);
void gw_tls_hook_free(void *hook);

/* gw_tls_hook_fn: calls proc with an Nginx::SSL, synchronously (an async
 * call raises); an exception fails the handshake with its message in err. */
int gw_tls_hook_run(void *hook, gw_tls_hello_t *hello, char *err, size_t errlen);

/* gw_tls_config_t.on_handshake_drop: a connection whose handshake kept a
 * Userdata (Userdata.new in the hook: its requests start with a copy) ends. */
void gw_tls_hook_drop(void *hook, int data);

#endif
