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
 * Side a may be TLS (a wss:// client): its gw_tls_conn_t moves in with the
 * socket and does that side's reads and writes; a plain side costs nothing
 * more than before. */
#ifndef GW_TUNNEL_H
#define GW_TUNNEL_H

#include <event2/buffer.h>
#include <event2/event.h>

#define GW_TUNNEL_HIGH_WATER (256 * 1024)
#define GW_TUNNEL_LOW_WATER (64 * 1024)
#define GW_TUNNEL_DEFAULT_TIMEOUT_MS 60000

typedef struct gw_tunnel_s gw_tunnel_t;
struct gw_tls_conn_s;

/* Takes ownership of both sockets (non-blocking), also on failure (they are
 * closed). to_a / to_b: bytes already due to a / to b (a response head, what
 * was read past it); their contents are moved in (either may be NULL).
 * idle_timeout_ms <= 0: GW_TUNNEL_DEFAULT_TIMEOUT_MS. NULL when out of memory, or
 * when writing what was already due failed (the tunnel is gone then). */
gw_tunnel_t *gw_tunnel_new(struct event_base *base, int fd_a, struct evbuffer *to_a, int fd_b, struct evbuffer *to_b,
                           int idle_timeout_ms);

/* The same with side a over TLS: tls_a (NULL: plain) is owned from now on,
 * peer_a (its address, for TLS's logs) is copied. */
gw_tunnel_t *gw_tunnel_new_tls(struct event_base *base, int fd_a, struct gw_tls_conn_s *tls_a, const char *peer_a,
                               struct evbuffer *to_a, int fd_b, struct evbuffer *to_b, int idle_timeout_ms);

/* Tunnels open in this process right now. */
unsigned long gw_tunnel_count(void);

/* Worker stop: closes every tunnel now. */
void gw_tunnel_close_all(void);

#endif
