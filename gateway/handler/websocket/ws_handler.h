/* ws_handler.h - a `websocket:` location: WebSocket handlers written in Ruby.
 *
 * It checks the client's handshake (RFC 6455: GET, Upgrade: websocket,
 * Sec-WebSocket-Version 13 else 426, a valid Sec-WebSocket-Key else 400),
 * picks a subprotocol, answers 101 with the Sec-WebSocket-Accept, takes the
 * socket (and its TLS state) from the connection into websocket.c, and runs
 * the location's Ruby block (a script handler, mruby_handler.c) for a
 * detached copy of the request: the connection's request is over, logged
 * with status 101. The Ruby side (Gateway::WebSocket, in
 * mrbgems/mruby-gateway-websocket) finds the connection through
 * gw_ws_handler_socket(). When the block returns the connection closes
 * with 1000; when it raises (logged) with 1011. */
#ifndef GW_WS_HANDLER_H
#define GW_WS_HANDLER_H

#include <stddef.h>

#include "handler.h"
#include "request.h"
#include "websocket.h"

/* script: the handler that runs for the detached request (an mruby handler
 * of a Gateway::WebSocket::Runner around the location's block), owned from
 * now on, also on failure. max_message 0 / timeout_ms 0: websocket.h's
 * defaults. protocols are copied. NULL when out of memory. */
gw_handler_t *gw_ws_handler_new(gw_handler_t *script, size_t max_message, int timeout_ms, const char *const *protocols,
                                size_t nprotocols);

/* The connection of a WebSocket handler's request, or NULL (another
 * request, or the handler ended). */
gw_ws_t *gw_ws_handler_socket(const gw_request_t *req);

/* Worker stop: every session still running ends now (its fiber is dropped,
 * not resumed); the connections themselves go with gw_ws_close_all(). */
void gw_ws_handler_close_all(void);

#endif
