/* tunnel.c - a byte tunnel between two sockets (see tunnel.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event_struct.h>

#include "timeutil.h"
#include "tls_server.h"
#include "tunnel.h"

#define READ_SIZE (64 * 1024)
#define READS_PER_EVENT 4 /* then other connections get their turn */

typedef struct {
  int fd;                   /* -1: a socketless end (an HTTP/2 stream), driven by io->watch */
  const gw_io_t *io;        /* this side's layer (TLS, a stream), or NULL: a plain socket */
  void *ioc;                /* owned: io's state */
  struct event rev, wev;
  struct evbuffer *out;     /* owned: read from the other side, not yet written here */
  unsigned reading : 1;     /* rev is added */
  unsigned writing : 1;     /* wev is added */
  unsigned rd_eof : 1;      /* this side shut down its writing (we read EOF) */
  unsigned wr_shut : 1;     /* we shut down writing to this side */
} side_t;

struct gw_tunnel_s {
  side_t s[2];
  struct event tev;         /* the idle timer */
  int timeout_ms;
  int64_t last;             /* CLOCK_MONOTONIC_COARSE ms of the last byte moved */
  gw_tunnel_t *next, *prev; /* all tunnels, for gw_tunnel_close_all */
  char *peer;               /* owned: side a's address for TLS's logs; NULL when plain */
};

static gw_tunnel_t *tunnels;
static unsigned long ntunnels;

static void tunnel_free(gw_tunnel_t *t)
{
  for (int i = 0; i < 2; i++) {
    side_t *s = &t->s[i];
    if (s->out == NULL) continue; /* never set up (gw_tunnel_new failed) */
    event_del(&s->rev);
    event_del(&s->wev);
    evbuffer_free(s->out);
  }
  event_del(&t->tev);
  for (int i = 0; i < 2; i++) {
    side_t *s = &t->s[i];
    if (s->io && s->io->watch && s->out) s->io->watch(s->ioc, NULL, NULL);
    gw_byte_end_t e = {s->fd, s->io, s->ioc};
    gw_byte_end_drop(&e); /* close_notify (or RST_STREAM) while the socket is open, then the socket */
  }
  free(t->peer);
  if (t->prev) t->prev->next = t->next;
  else tunnels = t->next;
  if (t->next) t->next->prev = t->prev;
  ntunnels--;
  free(t);
}

/* A socketless side's events are never added: its layer activates them. */
static void set_reading(side_t *s, int on)
{
  if (s->fd >= 0 && on && !s->reading) event_add(&s->rev, NULL);
  else if (s->fd >= 0 && !on && s->reading) event_del(&s->rev);
  s->reading = on ? 1 : 0;
}

static void set_writing(side_t *s, int on)
{
  if (s->fd >= 0 && on && !s->writing) event_add(&s->wev, NULL);
  else if (s->fd >= 0 && !on && s->writing) event_del(&s->wev);
  s->writing = on ? 1 : 0;
}

/* Side i reads while the other side's queue is below the high water mark;
 * once stopped, it starts again below the low one. */
static void update_reading(gw_tunnel_t *t, int i)
{
  side_t *s = &t->s[i];
  size_t queued = evbuffer_get_length(t->s[1 - i].out);
  set_reading(s, !s->rd_eof && (s->reading ? queued <= GW_TUNNEL_HIGH_WATER : queued < GW_TUNNEL_LOW_WATER));
  /* Decrypted bytes OpenSSL holds (a stream's DATA) raise no socket event: read them now. */
  if (s->io && s->reading && s->io->pending(s->ioc)) event_active(&s->rev, EV_READ, 0);
}

static int finished(const gw_tunnel_t *t)
{
  return t->s[0].rd_eof && t->s[1].rd_eof && evbuffer_get_length(t->s[0].out) == 0 &&
         evbuffer_get_length(t->s[1].out) == 0;
}

/* Writes what is queued for side j. Returns 0, or -1 when the tunnel was
 * freed (an error, or both directions ended). */
static int flush_side(gw_tunnel_t *t, int j)
{
  side_t *s = &t->s[j];
  while (evbuffer_get_length(s->out) > 0) {
    int n = s->io ? s->io->write(s->ioc, s->out) : evbuffer_write(s->out, s->fd);
    if (n > 0) {
      t->last = gw_coarse_ms();
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    tunnel_free(t); /* the peer is gone: so is the tunnel */
    return -1;
  }
  int more = evbuffer_get_length(s->out) > 0;
  set_writing(s, more);
  if (!more && t->s[1 - j].rd_eof && !s->wr_shut) { /* half-close passed on, after the data */
    if (s->io) s->io->shutdown(s->ioc);
    if (s->fd >= 0) shutdown(s->fd, SHUT_WR);
    s->wr_shut = 1;
  }
  if (finished(t)) {
    tunnel_free(t);
    return -1;
  }
  update_reading(t, 1 - j); /* room again: the other side may be read */
  return 0;
}

/* A plain socket's read: into a stack buffer, then straight to the other
 * side's socket when it is plain with nothing queued (the common case, a
 * WebSocket message each way: no FIONREAD ioctl as evbuffer_read() makes,
 * no buffer chain allocated and freed); what that socket does not take is
 * queued. As read(2). A failed send is left to flush_side, which meets the
 * error again on the queued bytes. */
static ssize_t relay_plain(side_t *s, side_t *peer)
{
  char buf[READ_SIZE];
  ssize_t n = recv(s->fd, buf, sizeof(buf), 0);
  if (n <= 0) return n;
  ssize_t sent = 0;
  if (peer->io == NULL && peer->fd >= 0 && evbuffer_get_length(peer->out) == 0) {
    sent = send(peer->fd, buf, (size_t)n, MSG_NOSIGNAL);
    if (sent < 0) sent = 0;
  }
  if (sent < n && evbuffer_add(peer->out, buf + sent, (size_t)(n - sent)) < 0) {
    errno = ENOMEM;
    return -1;
  }
  return n;
}

/* Reads side i into the other side's queue, then writes it there. */
static void on_readable(gw_tunnel_t *t, int i)
{
  side_t *s = &t->s[i];
  side_t *peer = &t->s[1 - i];
  if (!s->reading) return; /* a socketless side's layer woke us while paused */
  for (int k = 0; k < READS_PER_EVENT; k++) {
    if (evbuffer_get_length(peer->out) > GW_TUNNEL_HIGH_WATER) break;
    ssize_t n = s->io ? s->io->read(s->ioc, peer->out, READ_SIZE) : relay_plain(s, peer);
    if (n > 0) {
      t->last = gw_coarse_ms();
      if (n < READ_SIZE) break;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) { /* reset */
      tunnel_free(t);
      return;
    }
    s->rd_eof = 1; /* EOF: the peer's writing is shut down once its queue is out */
    break;
  }
  if (flush_side(t, 1 - i) < 0) return;
  update_reading(t, i);
}

static void on_read0(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  on_readable(arg, 0);
}

static void on_read1(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  on_readable(arg, 1);
}

static void on_write0(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_tunnel_t *t = arg;
  if (t->s[0].writing) flush_side(t, 0);
}

static void on_write1(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_tunnel_t *t = arg;
  if (t->s[1].writing) flush_side(t, 1);
}

static void arm_timer(gw_tunnel_t *t, int64_t ms)
{
  struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
  evtimer_add(&t->tev, &tv);
}

/* The idle timer: bytes moved meanwhile push the deadline on. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_tunnel_t *t = arg;
  int64_t left = t->last + t->timeout_ms - gw_coarse_ms();
  if (left > 0) {
    arm_timer(t, left);
    return;
  }
  tunnel_free(t);
}

gw_tunnel_t *gw_tunnel_new(struct event_base *base, int fd_a, struct evbuffer *to_a, int fd_b, struct evbuffer *to_b,
                           int idle_timeout_ms)
{
  gw_byte_end_t a = {fd_a, NULL, NULL}, b = {fd_b, NULL, NULL};
  return gw_tunnel_new_ends(base, &a, to_a, NULL, &b, to_b, idle_timeout_ms);
}

gw_tunnel_t *gw_tunnel_new_ends(struct event_base *base, const gw_byte_end_t *a, struct evbuffer *to_a,
                                const char *peer_a, const gw_byte_end_t *b, struct evbuffer *to_b, int idle_timeout_ms)
{
  gw_tunnel_t *t = calloc(1, sizeof(*t));
  int server_tls = a->io == &gw_tls_io;
  char *peer = server_tls ? strdup(peer_a ? peer_a : "-") : NULL;
  if (t == NULL || (server_tls && peer == NULL)) {
    free(t);
    free(peer);
    gw_byte_end_drop(a);
    gw_byte_end_drop(b);
    return NULL;
  }
  t->s[0].fd = a->fd;
  t->s[0].io = a->io;
  t->s[0].ioc = a->ioc;
  t->peer = peer;
  if (server_tls) gw_tls_conn_set_peer(a->ioc, peer); /* it keeps the pointer: ours lives as long */
  t->s[1].fd = b->fd;
  t->s[1].io = b->io;
  t->s[1].ioc = b->ioc;
  t->next = tunnels;
  if (tunnels) tunnels->prev = t;
  tunnels = t;
  ntunnels++;
  struct evbuffer *out0 = evbuffer_new(), *out1 = evbuffer_new();
  if (out0 == NULL || out1 == NULL) {
    if (out0) evbuffer_free(out0);
    if (out1) evbuffer_free(out1);
    tunnel_free(t);
    return NULL;
  }
  t->s[0].out = out0;
  t->s[1].out = out1;
  if (to_a) evbuffer_add_buffer(out0, to_a);
  if (to_b) evbuffer_add_buffer(out1, to_b);
  int fd_a = a->fd, fd_b = b->fd;
  event_assign(&t->s[0].rev, base, fd_a, EV_READ | EV_PERSIST, on_read0, t);
  event_assign(&t->s[0].wev, base, fd_a, EV_WRITE | EV_PERSIST, on_write0, t);
  event_assign(&t->s[1].rev, base, fd_b, EV_READ | EV_PERSIST, on_read1, t);
  event_assign(&t->s[1].wev, base, fd_b, EV_WRITE | EV_PERSIST, on_write1, t);
  evtimer_assign(&t->tev, base, on_timer, t);
  for (int i = 0; i < 2; i++)
    if (t->s[i].io && t->s[i].io->watch) t->s[i].io->watch(t->s[i].ioc, &t->s[i].rev, &t->s[i].wev);
  t->timeout_ms = idle_timeout_ms > 0 ? idle_timeout_ms : GW_TUNNEL_DEFAULT_TIMEOUT_MS;
  t->last = gw_coarse_ms();
  arm_timer(t, t->timeout_ms);
  if (flush_side(t, 0) < 0 || flush_side(t, 1) < 0) return NULL; /* what was already due */
  update_reading(t, 0); /* and what OpenSSL decrypted past the handshake */
  update_reading(t, 1);
  return t;
}

unsigned long gw_tunnel_count(void)
{
  return ntunnels;
}

void gw_tunnel_close_all(void)
{
  for (int guard = 0; tunnels != NULL && guard < 10000000; guard++) tunnel_free(tunnels);
}
