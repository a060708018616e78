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
 * Each side is a socket, plain or with an I/O layer over it (gw_tunnel_io_t:
 * TLS toward a wss:// client, or toward a wss:// upstream) that moves in with
 * the socket and does that side's reads and writes; a plain side goes
 * straight to the socket and costs nothing more. */
#ifndef GW_TUNNEL_H
#define GW_TUNNEL_H

#include <event2/buffer.h>
#include <event2/event.h>

#define GW_TUNNEL_HIGH_WATER (256 * 1024)
#define GW_TUNNEL_LOW_WATER (64 * 1024)
#define GW_TUNNEL_DEFAULT_TIMEOUT_MS 60000

typedef struct gw_tunnel_s gw_tunnel_t;
struct gw_tls_conn_s;

/* The reads and writes of a side whose bytes are not the socket's own (TLS).
 * read/write as evbuffer_read()/evbuffer_write(): > 0, 0 for the end (read),
 * or -1 with errno (EAGAIN: wait for the socket). pending: readable bytes
 * held that the socket does not signal. shutdown: ends the writing (before
 * SHUT_WR). free: the state goes, the socket is still open then. */
typedef struct {
  int (*read)(void *ioc, struct evbuffer *into, size_t max);
  int (*write)(void *ioc, struct evbuffer *out);
  int (*pending)(void *ioc);
  void (*shutdown)(void *ioc);
  void (*free)(void *ioc);
} gw_tunnel_io_t;

extern const gw_tunnel_io_t gw_tunnel_io_tls;        /* ioc: a gw_tls_conn_t (tls.h), a client of ours */
extern const gw_tunnel_io_t gw_tunnel_io_tls_client; /* ioc: a gw_tls_client_conn_t (tls_client.h), an upstream */

/* One side: its socket, its I/O layer (NULL: plain) and state, bytes already
 * due to it (moved in; may be NULL). */
typedef struct {
  int fd;
  const gw_tunnel_io_t *io;
  void *ioc;
  struct evbuffer *to;
} gw_tunnel_end_t;

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

/* The general form: both ends (their sockets and I/O states are owned from
 * now on, also on failure); peer_a (side a's address) is copied for TLS's
 * logs when side a is gw_tunnel_io_tls. */
gw_tunnel_t *gw_tunnel_new_ends(struct event_base *base, const gw_tunnel_end_t *a, const gw_tunnel_end_t *b,
                                const char *peer_a, int idle_timeout_ms);

/* Tunnels open in this process right now. */
unsigned long gw_tunnel_count(void);

/* Worker stop: closes every tunnel now. */
void gw_tunnel_close_all(void);

#endif
