/* proxy_accept.c - waiting for a connection's PROXY header (proxy_accept.h).
 *
 * Nothing is taken off the socket until the whole header is there: each
 * time bytes arrive (an edge-triggered read event, so bytes left waiting do
 * not wake the loop again) the first GW_PROXY_V2_MAX bytes are peeked at
 * and parsed; once the parser knows the header's length exactly that many
 * bytes are read. What follows it (a TLS ClientHello, the HTTP/2 preface, a
 * request) stays in the socket for the protocol that takes the connection.
 * A waiting connection holds this small struct and no buffer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "addr.h"
#include "log.h"
#include "proxy_accept.h"
#include "proxy_proto.h"
#include "stats.h"
#include "timeutil.h"

typedef struct pp_wait_s {
  gw_context_t *ctx;
  int fd;
  gw_sockaddr_t peer;
  gw_proxy_accept_ready_t ready;
  struct event ev;          /* read, edge-triggered */
  struct event timer;       /* header_timeout from the accept (not pushed back by bytes) */
  struct pp_wait_s *next, *prev;
} pp_wait_t;

static pp_wait_t *waiting; /* this worker's connections still without a header */

static void peer_text(const pp_wait_t *w, char *buf, size_t size)
{
  if (gw_addr_to_string(&w->peer.sa, buf, size) < 0) snprintf(buf, size, "-");
}

static void wait_free(pp_wait_t *w, int close_fd)
{
  event_del(&w->ev);
  event_del(&w->timer);
  if (w->prev) w->prev->next = w->next;
  else waiting = w->next;
  if (w->next) w->next->prev = w->prev;
  if (close_fd) close(w->fd);
  free(w);
}

static void reject(pp_wait_t *w, const char *why, uint64_t *counter)
{
  char peer[48];
  peer_text(w, peer, sizeof(peer));
  gw_log_warn("%s: %s; closing (proxy_protocol)", peer, why);
  (*counter)++;
  wait_free(w, 1);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  reject(arg, "no complete PROXY protocol header within header_timeout", &gw_stats_self->proxy_protocol_timeouts);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
  pp_wait_t *w = arg;
  (void)what;
  unsigned char buf[GW_PROXY_V2_MAX];
  ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n == 0) { /* closed without a byte: a port probe (a balancer's TCP check), not worth a line */
    wait_free(w, 1);
    return;
  }
  if (n < 0) {
    reject(w, "read error before its PROXY protocol header", &gw_stats_self->proxy_protocol_rejected);
    return;
  }
  gw_proxy_header_t h;
  const char *why;
  int r = gw_proxy_parse(buf, (size_t)n, &h, &why);
  if (r == GW_PROXY_MORE) return; /* the rest comes with the next edge */
  if (r < 0) {
    reject(w, why, &gw_stats_self->proxy_protocol_rejected);
    return;
  }
  if (recv(fd, buf, (size_t)r, 0) != r) { /* peeked: it is there */
    reject(w, "read error on its PROXY protocol header", &gw_stats_self->proxy_protocol_rejected);
    return;
  }
  gw_stats_self->proxy_protocol_headers++;
  gw_context_t *ctx = w->ctx;
  gw_proxy_accept_ready_t ready = w->ready;
  gw_sockaddr_t peer = w->peer;
  wait_free(w, 0);
  if (h.local) ready(ctx, fd, &peer.sa, &peer.sa, 0);
  else ready(ctx, fd, &h.src.sa, &peer.sa, 1);
}

int gw_proxy_accept_start(gw_context_t *ctx, int fd, const struct sockaddr *peer, socklen_t peer_len,
                          gw_proxy_accept_ready_t ready)
{
  const gw_server_t *s = ctx->server;
  pp_wait_t *w = calloc(1, sizeof(*w));
  if (w == NULL) {
    close(fd);
    return -1;
  }
  w->ctx = ctx;
  w->fd = fd;
  w->ready = ready;
  memcpy(&w->peer, peer, peer_len < sizeof(w->peer) ? peer_len : sizeof(w->peer));
  w->next = waiting;
  if (waiting) waiting->prev = w;
  waiting = w;
  event_assign(&w->ev, ctx->base, fd, EV_READ | EV_PERSIST | EV_ET, on_readable, w);
  evtimer_assign(&w->timer, ctx->base, on_timeout, w);
  if (s->nproxy_from > 0 && !gw_addr_cidr_match(s->proxy_from, s->nproxy_from, peer)) {
    reject(w, "peer not in proxy_protocol_from", &gw_stats_self->proxy_protocol_untrusted);
    return 0;
  }
  struct timeval tv = gw_timeval_from_ms(s->limits.header_timeout_ms);
  event_add(&w->timer, &tv);
  event_add(&w->ev, NULL);
  return 0;
}

void gw_proxy_accept_close_all(void)
{
  while (waiting) wait_free(waiting, 1);
}
