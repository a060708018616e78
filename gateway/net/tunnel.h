/* tunnel.h - a byte tunnel between two sockets (a proxied WebSocket after
 * its 101 Switching Protocols): what one side sends is written to the other,
 * both ways, on a worker's event_base.
 *
 * Knows nothing of HTTP. Back-pressure: a side is not read while the other
 * side's unsent output is above GW_TUNNEL_HIGH_WATER, and is read again once
 * that drops below GW_TUNNEL_LOW_WATER, so a slow peer never makes the
 * gateway buffer more than about the high water mark per direction.
 * Half-close: when a side shuts down writing (EOF), the other side's writing
 * is shut down once what was queued for it is flushed; the tunnel ends when
 * both directions ended, on any error, or after idle_timeout_ms without a
 * byte moving either way. Then both sockets are closed and all is freed.
 *
 * Each side is a byte end (byte_end.h): a plain socket (read and written
 * here directly, as cheap as ever), a socket with a layer that moves in with
 * it and does that side's reads and writes (TLS toward a wss:// client or a
 * wss:// upstream), or a socketless end (an HTTP/2 stream carrying an RFC
 * 8441 WebSocket) whose layer wakes the side's events itself and whose flow
 * control is the back-pressure. */
#ifndef GW_TUNNEL_H
#define GW_TUNNEL_H

#include <event2/buffer.h>
#include <event2/event.h>

#include "byte_end.h"

#define GW_TUNNEL_HIGH_WATER (256 * 1024)
#define GW_TUNNEL_LOW_WATER (64 * 1024)
#define GW_TUNNEL_DEFAULT_TIMEOUT_MS 60000

typedef struct gw_tunnel_s gw_tunnel_t;
/* Takes ownership of both sockets (non-blocking), also on failure (they are
 * closed). to_a / to_b: bytes already due to a / to b (a response head, what
 * was read past it); their contents are moved in (either may be NULL).
 * idle_timeout_ms <= 0: GW_TUNNEL_DEFAULT_TIMEOUT_MS. NULL when out of memory, or
 * when writing what was already due failed (the tunnel is gone then). */
gw_tunnel_t *gw_tunnel_new(struct event_base *base, int fd_a, struct evbuffer *to_a, int fd_b, struct evbuffer *to_b,
                           int idle_timeout_ms);

/* The general form: each side a byte end (byte_end.h: a socket, maybe with a
 * layer such as TLS, or a socketless HTTP/2 stream), owned from now on, also
 * on failure, with the bytes already due to it (moved in; may be NULL).
 * peer_a (side a's address) is copied for TLS's logs when side a is a TLS
 * client of ours (gw_tls_io). */
gw_tunnel_t *gw_tunnel_new_ends(struct event_base *base, const gw_byte_end_t *a, struct evbuffer *to_a,
                                const char *peer_a, const gw_byte_end_t *b, struct evbuffer *to_b, int idle_timeout_ms);

/* Tunnels open in this process right now. */
unsigned long gw_tunnel_count(void);

/* Worker stop: closes every tunnel now. */
void gw_tunnel_close_all(void);

#endif
