/* proxy_accept.c - waiting for a connection's PROXY header (proxy_accept.h).
 *
 * Nothing is taken off the socket until the whole header is there: the
 * first GW_PROXY_V2_MAX bytes are peeked at and parsed, and once the parser
 * knows the header's length exactly that many bytes are read. What follows
 * it (a TLS ClientHello, the HTTP/2 preface, a request) stays in the socket
 * for the protocol that takes the connection.
 *
 * A balancer writes the header right after its connect, so it is usually
 * there by the time the connection is accepted: it is tried at once, and
 * only a connection whose header is not complete yet is put on the loop.
 * That one waits with an edge-triggered read event (bytes left waiting do
 * not wake the loop again; each new segment does) and a timer from the
 * accept, holding this small struct and no buffer. */
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

/* Closes fd with a log line naming the peer and why, and counts it. */
static void reject(int fd, const gw_sockaddr_t *peer, const char *why, uint64_t *counter)
{
  char text[48];
  if (gw_addr_to_string(&peer->sa, text, sizeof(text)) < 0) memcpy(text, "-", 2);
  gw_log_warn("%s: %s; closing (proxy_protocol)", text, why);
  (*counter)++;
  close(fd);
}

/* What the bytes so far say, nothing taken: 0 not complete yet; 1 a header
 * of *len bytes (*h); -1 no good: *why (NULL: closed before a byte, a port
 * probe such as a balancer's TCP check, not worth a line) and *counter. */
static int peek_header(int fd, gw_proxy_header_t *h, int *len, const char **why, uint64_t **counter)
{
  unsigned char buf[GW_PROXY_V2_MAX];
  ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK);
  *counter = &gw_stats_self->proxy_protocol_rejected;
  *why = NULL;
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  if (n == 0) return -1;
  if (n < 0) {
    *why = "read error before its PROXY protocol header";
    return -1;
  }
  *len = gw_proxy_parse(buf, (size_t)n, h, why);
  return *len == GW_PROXY_MORE ? 0 : *len > 0 ? 1 : -1;
}

/* Takes the header off fd and hands the connection on, or closes it. */
static void finish(gw_context_t *ctx, int fd, const gw_sockaddr_t *peer, gw_proxy_accept_ready_t ready, int st,
                   const gw_proxy_header_t *h, int len, const char *why, uint64_t *counter)
{
  unsigned char buf[GW_PROXY_V2_MAX];
  if (st > 0 && recv(fd, buf, (size_t)len, 0) != len) { /* peeked: it is there */
    st = -1;
    why = "read error on its PROXY protocol header";
  }
  if (st < 0) {
    if (why) reject(fd, peer, why, counter);
    else close(fd);
    return;
  }
  gw_stats_self->proxy_protocol_headers++;
  if (h->local) ready(ctx, fd, &peer->sa, &peer->sa, 0);
  else ready(ctx, fd, &h->src.sa, &peer->sa, 1);
}

static void wait_free(pp_wait_t *w)
{
  event_del(&w->ev);
  event_del(&w->timer);
  if (w->prev) w->prev->next = w->next;
  else waiting = w->next;
  if (w->next) w->next->prev = w->prev;
  free(w);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
  pp_wait_t *w = arg;
  (void)fd;
  (void)what;
  reject(w->fd, &w->peer, "no complete PROXY protocol header within header_timeout",
         &gw_stats_self->proxy_protocol_timeouts);
  wait_free(w);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
  pp_wait_t *w = arg;
  (void)what;
  gw_proxy_header_t h;
  int len = 0;
  const char *why;
  uint64_t *counter;
  int st = peek_header((int)fd, &h, &len, &why, &counter);
  if (st == 0) return; /* the rest comes with the next edge */
  gw_context_t *ctx = w->ctx;
  gw_proxy_accept_ready_t ready = w->ready;
  gw_sockaddr_t peer = w->peer;
  wait_free(w); /* its events go before the descriptor is handed on or closed */
  finish(ctx, (int)fd, &peer, ready, st, &h, len, why, counter);
}

int gw_proxy_accept_start(gw_context_t *ctx, int fd, const struct sockaddr *sa, socklen_t sa_len,
                          gw_proxy_accept_ready_t ready)
{
  const gw_server_t *s = ctx->server;
  gw_sockaddr_t peer;
  memset(&peer, 0, sizeof(peer));
  memcpy(&peer, sa, sa_len < sizeof(peer) ? sa_len : sizeof(peer));
  if (s->nproxy_from > 0 && !gw_addr_cidr_match(s->proxy_from, s->nproxy_from, sa)) {
    reject(fd, &peer, "peer not in proxy_protocol_from", &gw_stats_self->proxy_protocol_untrusted);
    return 0;
  }
  gw_proxy_header_t h;
  int len = 0;
  const char *why;
  uint64_t *counter;
  int st = peek_header(fd, &h, &len, &why, &counter);
  if (st != 0) { /* usually: the balancer wrote it right after its connect */
    finish(ctx, fd, &peer, ready, st, &h, len, why, counter);
    return 0;
  }
  pp_wait_t *w = calloc(1, sizeof(*w));
  if (w == NULL) {
    close(fd);
    return -1;
  }
  w->ctx = ctx;
  w->fd = fd;
  w->ready = ready;
  w->peer = peer;
  w->next = waiting;
  if (waiting) waiting->prev = w;
  waiting = w;
  event_assign(&w->ev, ctx->base, fd, EV_READ | EV_PERSIST | EV_ET, on_readable, w);
  evtimer_assign(&w->timer, ctx->base, on_timeout, w);
  struct timeval tv = gw_timeval_from_ms(s->limits.header_timeout_ms);
  event_add(&w->timer, &tv);
  event_add(&w->ev, NULL);
  return 0;
}

void gw_proxy_accept_close_all(void)
{
  while (waiting) {
    close(waiting->fd);
    wait_free(waiting);
  }
}
