/* data_clients.c - the bridge's part for the data client gems (gw_mruby.h):
 * this process's registry of clients (one per address and credentials,
 * shared by every Ruby object naming them), a Ruby object's servers, each
 * resolved on first use to the registry's client, used in turn, and an
 * operation pending on a request until its reply resumes the fiber.
 * Async::Redis and Async::Tarantool each had their own copy of these. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/error.h>
#include <mruby/string.h>

#include "gw_mruby.h"

typedef struct data_client_s {
  struct data_client_s *next;
  char *key;
  void *client;
} data_client_t;

static data_client_t *data_clients;

void *gw_mrb_client_get(const char *key)
{
  for (data_client_t *c = data_clients; c; c = c->next)
    if (strcmp(c->key, key) == 0) return c->client;
  return NULL;
}

int gw_mrb_client_put(const char *key, void *client)
{
  data_client_t *c = calloc(1, sizeof(*c));
  if (c == NULL || (c->key = strdup(key)) == NULL) {
    free(c);
    return -1;
  }
  c->client = client;
  c->next = data_clients;
  data_clients = c;
  return 0;
}

char *gw_mrb_strdup_or_null(mrb_state *mrb, mrb_value s)
{
  if (mrb_nil_p(s)) return NULL;
  char *d = strdup(mrb_string_cstr(mrb, s));
  if (d == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  return d;
}

void gw_mrb_servers_init(mrb_state *mrb, gw_mrb_servers_t *s, mrb_value addrs, const char *creds, mrb_float timeout)
{
  mrb_int n = RARRAY_LEN(addrs);
  s->addrs = calloc((size_t)n, sizeof(char *));
  s->clients = calloc((size_t)n, sizeof(void *));
  s->creds = strdup(creds);
  if (s->addrs == NULL || s->clients == NULL || s->creds == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  for (mrb_int i = 0; i < n; i++) {
    s->addrs[i] = gw_mrb_strdup_or_null(mrb, mrb_ary_ref(mrb, addrs, i));
    s->n++;
  }
  /* Whole milliseconds, rounded; a positive timeout never becomes "none". */
  s->timeout_ms = timeout > 0 ? (int)(timeout * 1000.0 + 0.5) : 0;
  if (s->timeout_ms == 0 && timeout > 0) s->timeout_ms = 1;
}

void gw_mrb_servers_dispose(gw_mrb_servers_t *s)
{
  for (int i = 0; i < s->n; i++) free(s->addrs[i]);
  free(s->addrs);
  free(s->clients);
  free(s->creds);
}

void *gw_mrb_servers_next(mrb_state *mrb, gw_mrb_servers_t *s, const char *what, const gw_mrb_client_maker_t *m,
                          const void *params)
{
  int i = (int)(s->rr++ % (unsigned)s->n);
  if (s->clients[i]) return s->clients[i];
  struct event_base *base = gw_mrb_event_base();
  if (base == NULL) mrb_raisef(mrb, E_RUNTIME_ERROR, "%s: requests run only in a worker (a handler or init_worker)", what);
  char key[1024];
  snprintf(key, sizeof(key), "%s\n%s\n%s", m->kind, s->addrs[i], s->creds);
  void *c = gw_mrb_client_get(key);
  if (c == NULL) {
    char err[256];
    c = m->make(base, s->addrs[i], params, err, sizeof(err));
    if (c == NULL) mrb_raise(mrb, E_ARGUMENT_ERROR, err);
    if (gw_mrb_client_put(key, c) < 0) {
      m->destroy(c);
      mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
    }
  }
  return s->clients[i] = c;
}

void *gw_mrb_data_call_new(mrb_state *mrb, size_t size, const char *kind, const char *addr, const gw_mrb_servers_t *s)
{
  gw_mrb_data_call_t *c = malloc(size);
  if (c == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  c->req = gw_mrb_current_request(mrb);
  c->kind = kind;
  c->addr = addr;
  c->timeout_ms = s->timeout_ms;
  return c;
}

void gw_mrb_data_call_wait(mrb_state *mrb, gw_mrb_data_call_t *c, int started, void (*cancel)(gw_pending_t *))
{
  if (!started) {
    free(c);
    mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  }
  gw_request_pending_add(c->req, &c->pending, cancel);
  gw_mrb_will_wait();
  if (gw_trace) gw_trace_wait(c->req, "%s %s", c->kind, c->addr);
}

void gw_mrb_data_call_done(gw_mrb_data_call_t *c, gw_err_t err, mrb_value (*convert)(mrb_state *mrb, void *ud),
                           void *ud)
{
  gw_request_t *req = c->req;
  mrb_state *mrb = req->ctx->mrb;
  int ai = mrb_gc_arena_save(mrb);
  gw_request_pending_remove(&c->pending);
  mrb_value v;
  if (err.kind != GW_OK) {
    char msg[320];
    if (gw_err_is_timeout(err.kind))
      snprintf(msg, sizeof(msg), "%s %s timed out after %.3g s", c->kind, c->addr, c->timeout_ms / 1000.0);
    else
      snprintf(msg, sizeof(msg), "%s %s: %s", c->kind, c->addr, err.msg);
    v = gw_mrb_error(mrb, gw_err_is_timeout(err.kind) ? "Gateway::TimeoutError" : "Gateway::UpstreamError", msg);
  } else {
    mrb_bool raised = FALSE;
    v = mrb_protect_error(mrb, convert, ud, &raised); /* out of VM memory: the exception is the value */
  }
  free(c);
  gw_fiber_resume(req, v);
  mrb_gc_arena_restore(mrb, ai);
}
