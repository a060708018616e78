/* stubs.c - what fuzz_request links instead of worker.c, handler.c, proxy.c
 * and status.c (which would pull in mruby, the resolver and the upstream).
 *
 * The harness gives its server zero locations, so gw_request_start() always
 * answers 404 through gw_router_match() == NULL: nothing below that needs a
 * VM may ever run. Each such stub aborts, which libFuzzer reports as a crash,
 * so a wrong assumption shows up at once instead of being fuzzed around. */
#include <stdio.h>
#include <stdlib.h>

#include "gw_mruby.h"
#include "handler.h"
#include "proxy.h"
#include "status.h"
#include "worker.h"

#define UNREACHABLE(what)                                                   \
  do {                                                                      \
    fprintf(stderr, "fuzz stub: %s called, but the server has no locations\n", what); \
    abort();                                                                \
  } while (0)

int gw_trace; /* handler.c's; stays 0: no trace */

void gw_trace_start(gw_request_t *req)
{
  (void)req;
  UNREACHABLE("gw_trace_start");
}

void gw_handler_start(gw_request_t *req)
{
  (void)req;
  UNREACHABLE("gw_handler_start");
}

void gw_proxy_start_url(gw_request_t *req, const char *url, const gw_url_t *u, const char *key)
{
  (void)req, (void)url, (void)u, (void)key;
  UNREACHABLE("gw_proxy_start_url");
}

void gw_status_respond(gw_request_t *req)
{
  (void)req;
  UNREACHABLE("gw_status_respond");
}

/* handler.c's version touches the VM only when the request has a Ruby
 * object or a GC root slot; without handlers it never gets either. */
void gw_handler_release(gw_request_t *req)
{
  if (!mrb_nil_p(req->rb_req) || req->root_slot >= 0) UNREACHABLE("gw_handler_release with Ruby state");
}

/* worker.c's breaks the loop of a stopping worker; the harness counts instead. */
unsigned long gw_fuzz_conns_closed;

void gw_worker_conn_closed(gw_worker_t *w)
{
  (void)w;
  gw_fuzz_conns_closed++;
}
