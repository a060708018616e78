/* websocket.c - Gateway::WebSocket: the Ruby side of a scripted WebSocket
 * (the connection is gateway/handler/websocket/websocket.c's, the handshake ws_handler.c's).
 *
 * One Ruby object per connection, made by Runner#call in the connection's
 * handler fiber (its "own" fiber). ws.receive parks that fiber until a
 * message (on_message resumes it with the String), or the end (nil). While
 * nobody is in receive, websocket.c keeps the message and stops reading:
 * the TCP window is the queue. ws.send queues a frame; the own fiber parks
 * above GW_WS_HIGH_WATER until on_drain; another fiber (a broadcast) never
 * parks, and a connection whose output passes SLOW_PEER_LIMIT that way is
 * closed with 1008 rather than buffered without bound. */
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "gw_mruby.h"

#define SLOW_PEER_LIMIT (4 * GW_WS_HIGH_WATER)

enum { WAIT_NONE, WAIT_RECEIVE, WAIT_DRAIN };

typedef struct {
  gw_pending_t pending;     /* first: the cancel callback gets it */
  mrb_state *mrb;
  gw_ws_t *ws;              /* NULL once websocket.c freed it */
  gw_request_t *owner;      /* the handler's request (valid while ws is not released) */
  gw_request_t *waiter;     /* the request parked on this connection, or NULL */
  int wait;
  int last_binary;
  int close_code;           /* the end's code once closed; 0 while open */
} wsobj_t;

static void wsobj_free(mrb_state *mrb, void *p)
{
  wsobj_t *o = p;
  (void)mrb;
  if (o == NULL) return;
  if (o->ws && gw_ws_events_arg(o->ws) == o) gw_ws_set_events(o->ws, NULL, NULL);
  free(o);
}

static const struct mrb_data_type ws_type = {"Gateway::WebSocket", wsobj_free};

/* Resumes the parked fiber with v (from the loop). */
static void wake(wsobj_t *o, mrb_value v)
{
  gw_request_t *req = o->waiter;
  gw_request_pending_remove(&o->pending);
  o->waiter = NULL;
  o->wait = WAIT_NONE;
  gw_fiber_resume(req, v); /* o may be gone after this */
}

static int on_message(void *arg, const char *data, size_t len, int binary)
{
  wsobj_t *o = arg;
  if (o->wait != WAIT_RECEIVE) return 0; /* kept until the next receive */
  o->last_binary = binary;
  mrb_state *mrb = o->mrb;
  int ai = mrb_gc_arena_save(mrb);
  wake(o, mrb_str_new(mrb, data, (mrb_int)len));
  mrb_gc_arena_restore(mrb, ai);
  return 1;
}

static void on_closed(void *arg, int code)
{
  wsobj_t *o = arg;
  o->close_code = code;
  if (o->wait == WAIT_RECEIVE) wake(o, mrb_nil_value());
  else if (o->wait == WAIT_DRAIN) wake(o, mrb_false_value());
}

static void on_drain(void *arg)
{
  wsobj_t *o = arg;
  if (o->wait == WAIT_DRAIN) wake(o, mrb_true_value());
}

static void on_free(void *arg)
{
  wsobj_t *o = arg;
  o->ws = NULL;
  if (o->close_code == 0) o->close_code = 1006;
}

static const gw_ws_events_t events = {on_message, on_closed, on_drain, on_free};

static void cancel_wait(gw_pending_t *p)
{
  wsobj_t *o = (wsobj_t *)p;
  o->waiter = NULL;
  o->wait = WAIT_NONE;
}

static wsobj_t *get(mrb_state *mrb, mrb_value self)
{
  wsobj_t *o = mrb_data_get_ptr(mrb, self, &ws_type);
  if (o == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "uninitialized Gateway::WebSocket");
  return o;
}

/* 1 when Ruby runs in the connection's own handler right now. */
static int in_owner(const wsobj_t *o)
{
  return o->ws && !gw_ws_released(o->ws) && gw_mrb_current_request_or_null() == o->owner;
}

/* Parks the own fiber on this connection. */
static void park(mrb_state *mrb, wsobj_t *o, int wait, const char *what)
{
  gw_mrb_check_yieldable(mrb, what);
  gw_request_t *req = gw_mrb_current_request(mrb);
  o->waiter = req;
  o->wait = wait;
  gw_request_pending_add(req, &o->pending, cancel_wait);
  gw_mrb_will_wait();
  gw_trace_wait(req, "%s", what);
}

/* WebSocket._attach(req): the connection of a websocket: location's request. */
static mrb_value ws_attach(mrb_state *mrb, mrb_value cls)
{
  gw_request_t *req = gw_mrb_request_ptr(mrb, mrb_get_arg1(mrb));
  gw_ws_t *ws = gw_ws_handler_socket(req);
  if (ws == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "Gateway::WebSocket: this request is not a websocket: location's");
  if (gw_ws_events_arg(ws) != NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "Gateway::WebSocket: this connection has its object already");
  struct RData *d = mrb_data_object_alloc(mrb, mrb_class_ptr(cls), NULL, &ws_type);
  wsobj_t *o = calloc(1, sizeof(*o));
  if (o == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  o->mrb = mrb;
  o->ws = ws;
  o->owner = req;
  d->data = o;
  gw_ws_set_events(ws, &events, o);
  return mrb_obj_value(d);
}

/* true: parked until a message (the wrapper yields); false: closed. */
static mrb_value ws_receive_start(mrb_state *mrb, mrb_value self)
{
  wsobj_t *o = get(mrb, self);
  if (o->ws && !in_owner(o))
    mrb_raise(mrb, E_RUNTIME_ERROR, "ws.receive: only the connection's own handler can receive from it");
  if (o->ws == NULL || o->close_code != 0 || !gw_ws_is_open(o->ws)) return mrb_false_value();
  if (o->wait != WAIT_NONE) mrb_raise(mrb, E_RUNTIME_ERROR, "ws.receive: already waiting");
  park(mrb, o, WAIT_RECEIVE, "ws.receive");
  gw_ws_resume(o->ws); /* a kept message is delivered from the loop */
  return mrb_true_value();
}

static mrb_value ws_send(mrb_state *mrb, mrb_value self)
{
  mrb_value data;
  mrb_bool binary;
  mrb_get_args(mrb, "Sb", &data, &binary);
  wsobj_t *o = get(mrb, self);
  if (o->ws == NULL || gw_ws_send(o->ws, binary, RSTRING_PTR(data), (size_t)RSTRING_LEN(data)) < 0)
    return mrb_false_value();
  size_t queued = gw_ws_queued(o->ws);
  if (queued <= GW_WS_HIGH_WATER) return mrb_true_value();
  if (in_owner(o) && o->wait == WAIT_NONE) {
    park(mrb, o, WAIT_DRAIN, "ws.send (the peer reads slowly)");
    return mrb_symbol_value(mrb_intern_lit(mrb, "wait"));
  }
  if (queued > SLOW_PEER_LIMIT) { /* a broadcast to a peer that does not read */
    static const char why[] = "output over its limit (the peer does not read)";
    gw_ws_close(o->ws, 1008, why, sizeof(why) - 1);
  }
  return mrb_true_value();
}

static int close_code_ok(mrb_int code)
{
  return code == 1000 || (code >= 1001 && code <= 1014 && code != 1004 && code != 1005 && code != 1006) ||
         (code >= 3000 && code <= 4999);
}

/* ws.close(code = 1000, reason = ""): starts the close handshake. */
static mrb_value ws_close(mrb_state *mrb, mrb_value self)
{
  mrb_int code = 1000;
  const char *reason = "";
  mrb_int rlen = 0;
  mrb_get_args(mrb, "|is", &code, &reason, &rlen);
  if (!close_code_ok(code)) mrb_raisef(mrb, E_ARGUMENT_ERROR, "ws.close: invalid close code %i", code);
  if (rlen > 123) mrb_raise(mrb, E_ARGUMENT_ERROR, "ws.close: the reason is limited to 123 bytes");
  wsobj_t *o = get(mrb, self);
  if (o->ws) gw_ws_close(o->ws, (int)code, reason, (size_t)rlen);
  return mrb_nil_value();
}

static mrb_value ws_last_binary(mrb_state *mrb, mrb_value self)
{
  return mrb_bool_value(get(mrb, self)->last_binary);
}

static mrb_value ws_closed(mrb_state *mrb, mrb_value self)
{
  wsobj_t *o = get(mrb, self);
  return mrb_bool_value(o->ws == NULL || !gw_ws_is_open(o->ws));
}

/* The peer's close code (1005: it gave none; 1006: lost), nil while open. */
static mrb_value ws_close_code(mrb_state *mrb, mrb_value self)
{
  wsobj_t *o = get(mrb, self);
  return o->close_code ? mrb_fixnum_value(o->close_code) : mrb_nil_value();
}

static mrb_value ws_protocol(mrb_state *mrb, mrb_value self)
{
  wsobj_t *o = get(mrb, self);
  const char *p = o->ws ? gw_ws_protocol(o->ws) : NULL;
  return p ? mrb_str_new_cstr(mrb, p) : mrb_nil_value();
}

void mrb_mruby_gateway_websocket_gem_init(mrb_state *mrb)
{
  struct RClass *gw = mrb_module_get(mrb, "Gateway");
  struct RClass *c = mrb_define_class_under(mrb, gw, "WebSocket", mrb->object_class);
  MRB_SET_INSTANCE_TT(c, MRB_TT_DATA);
  mrb_undef_class_method(mrb, c, "new");
  mrb_define_class_method(mrb, c, "_attach", ws_attach, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, c, "_receive_start", ws_receive_start, MRB_ARGS_NONE());
  mrb_define_method(mrb, c, "_send", ws_send, MRB_ARGS_REQ(2));
  mrb_define_method(mrb, c, "close", ws_close, MRB_ARGS_OPT(2));
  mrb_define_method(mrb, c, "last_binary?", ws_last_binary, MRB_ARGS_NONE());
  mrb_define_method(mrb, c, "closed?", ws_closed, MRB_ARGS_NONE());
  mrb_define_method(mrb, c, "close_code", ws_close_code, MRB_ARGS_NONE());
  mrb_define_method(mrb, c, "protocol", ws_protocol, MRB_ARGS_NONE());
}

void mrb_mruby_gateway_websocket_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
