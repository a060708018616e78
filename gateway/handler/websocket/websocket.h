/* websocket.h - one server-side WebSocket connection after its 101: the
 * byte end (byte_end.h: a socket, plain or TLS, or an HTTP/2 stream of RFC
 * 8441), RFC 6455 frames through
 * ws_frame.c, and the rules that need a clock or a socket: pings answered
 * with pongs, the close handshake, an idle timeout, bounded output.
 *
 * Knows nothing of Ruby: its owner (ws_handler.c, and the Ruby object of
 * mruby-gateway-websocket) hears of messages, the end and drained output
 * through gw_ws_events_t, called only from the worker's loop, never from
 * inside a gw_ws_* call. Sending only queues: frames leave from the loop.
 *
 * Input back-pressure: on_message may return 0, and the message is kept
 * and nothing more is read until gw_ws_resume() (which delivers it again).
 * Output: gw_ws_queued() tells how much waits; the owner stops producing
 * above GW_WS_HIGH_WATER and hears on_drain below GW_WS_LOW_WATER. The idle
 * timeout (no byte in or out) also ends a peer that stopped reading.
 *
 * Lifetime: the owner calls gw_ws_release() when it is done; the struct is
 * freed once released and its socket closed (on_free tells whoever keeps a
 * pointer, gw_ws_set_events() may name a second listener). */
#ifndef GW_WEBSOCKET_H
#define GW_WEBSOCKET_H

#include <stddef.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "byte_end.h"
#include "tls_server.h"

#define GW_WS_HIGH_WATER (256 * 1024)
#define GW_WS_LOW_WATER (64 * 1024)
#define GW_WS_DEFAULT_MAX_MESSAGE (1024 * 1024)
#define GW_WS_DEFAULT_TIMEOUT_MS 60000
#define GW_WS_CLOSE_TIMEOUT_MS 5000 /* waiting for the peer's close frame */

typedef struct gw_ws_s gw_ws_t;

typedef struct {
  /* A whole message. 1: go on reading; 0: keep it, read nothing more until
   * gw_ws_resume(), which delivers it again. */
  int (*on_message)(void *arg, const char *data, size_t len, int binary);
  /* No more messages: the peer closed (its code; 1005: none), the protocol
   * failed (the code sent), or the connection was lost (1006). Once. */
  void (*on_closed)(void *arg, int code);
  /* The output fell below GW_WS_LOW_WATER after being above GW_WS_HIGH_WATER. */
  void (*on_drain)(void *arg);
  /* The struct is being freed: forget the pointer. */
  void (*on_free)(void *arg);
} gw_ws_events_t;

/* Takes the end over (byte_end.h: a socket, plain or TLS, or a socketless
 * HTTP/2 stream), also on failure. to_client:
 * bytes due first (the 101), from_client: bytes read past the handshake
 * (moved in; either may be NULL). peer is copied (for the logs), protocol
 * (the chosen subprotocol, or NULL) too. max_message 0 / idle_timeout_ms
 * <= 0: the defaults. Nothing is read before gw_ws_set_events(). NULL when
 * out of memory. */
gw_ws_t *gw_ws_new(struct event_base *base, const gw_byte_end_t *end, const char *peer, struct evbuffer *to_client,
                   struct evbuffer *from_client, size_t max_message, int idle_timeout_ms, const char *protocol);

/* Who hears the events (NULL: nobody; messages are then held). */
void gw_ws_set_events(gw_ws_t *ws, const gw_ws_events_t *events, void *arg);
/* The arg of who hears them now, or NULL. */
void *gw_ws_events_arg(const gw_ws_t *ws);

/* Queues a message (text unless binary) in one frame. 0, or -1 when the
 * connection is closing or closed (nothing queued). */
int gw_ws_send(gw_ws_t *ws, int binary, const char *data, size_t len);
/* Bytes waiting to be written. */
size_t gw_ws_queued(const gw_ws_t *ws);
/* Starts the close handshake with code and a reason (cut to fit 123
 * bytes); no-op once started. Messages that still arrive are dropped. */
void gw_ws_close(gw_ws_t *ws, int code, const char *reason, size_t len);
/* 1 while messages may still be sent (no close sent or received). */
int gw_ws_is_open(const gw_ws_t *ws);
/* Reads again after on_message returned 0. */
void gw_ws_resume(gw_ws_t *ws);
/* The subprotocol chosen at the handshake, or NULL. */
const char *gw_ws_protocol(const gw_ws_t *ws);
/* The owner is done (closes with 1000 unless closing already); see above. */
void gw_ws_release(gw_ws_t *ws);
/* 1 once gw_ws_release() was called. */
int gw_ws_released(const gw_ws_t *ws);

/* WebSockets open in this process right now. */
unsigned long gw_ws_count(void);
/* Worker stop: every connection is closed and freed now (on_free only). */
void gw_ws_close_all(void);

#endif
