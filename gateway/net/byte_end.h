/* byte_end.h - one end of a byte stream that the gateway relays (tunnel.c)
 * or speaks WebSocket on (websocket.c), whatever carries it: a plain socket,
 * a socket with an I/O layer over it (TLS toward a client, TLS toward an
 * upstream), or no socket at all (an HTTP/2 stream, RFC 8441).
 *
 * A plain socket has no layer (io NULL): its owner reads and writes the fd
 * itself, so the common case costs nothing more. A layer's read/write work
 * as evbuffer_read()/evbuffer_write() do: > 0 bytes, 0 for the end (read),
 * or -1 with errno (EAGAIN: wait; anything else: the end is lost). */
#ifndef GW_BYTE_END_H
#define GW_BYTE_END_H

#include <stddef.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/event.h>

typedef struct {
  int (*read)(void *ioc, struct evbuffer *into, size_t max);
  int (*write)(void *ioc, struct evbuffer *out);
  /* Readable bytes (or an end) held that no socket event will announce. */
  int (*pending)(void *ioc);
  /* Ends our writing once what was written is out (close_notify, END_STREAM). */
  void (*shutdown)(void *ioc);
  /* Drops the state; a socket, if any, is still open (its owner closes it). */
  void (*free)(void *ioc);
  /* Socketless ends only (fd -1), else NULL: the layer makes rev active when
   * it becomes readable (bytes, the end, a reset), wev when a write that
   * returned EAGAIN may go on; NULL, NULL: stop. The events are assigned
   * (not added) by the owner, with the end as their argument's business. */
  void (*watch)(void *ioc, struct event *rev, struct event *wev);
} gw_io_t;

typedef struct {
  int fd;            /* the socket, or -1 for a socketless end */
  const gw_io_t *io; /* NULL: a plain socket */
  void *ioc;         /* io's state */
} gw_byte_end_t;

/* Drops an end that will not be used: its state, then its socket. */
void gw_byte_end_drop(const gw_byte_end_t *e);

/* A layer's read, for a layer whose own read works as read(2): up to max
 * bytes from read_fn(ioc, ...) straight into space reserved in `into`. */
int gw_byte_end_read_with(struct evbuffer *into, size_t max, ssize_t (*read_fn)(void *ioc, void *buf, size_t n),
                          void *ioc);

/* As evbuffer_read() on a plain socket, without the FIONREAD ioctl it makes
 * before every read: up to max bytes by one read(2). */
int gw_byte_end_read_fd(struct evbuffer *into, int fd, size_t max);

#endif
