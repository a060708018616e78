/* data_conn.c - the data clients' connection core (data_conn.h): sockets,
 * non-blocking connect, the send and receive loops, backoff and mark-down
 * per address, and the requests pending on a connection. What the bytes
 * mean is the protocol's (redis.c, tarantool.c).
 *
 * A connection's memory is never freed inside its own read callback: a
 * protocol that closes it there (a reply's callback may cancel another
 * request) only marks it closed, and on_read frees it when it returns. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "data_conn.h"
#include "log.h"

#define READ_CHUNK 16384

/* -- the pool ------------------------------------------------------------------ */

int gw_dpool_init(gw_dpool_t *p, struct event_base *base, const gw_dconn_proto_t *proto, const char *addr, int max,
                  char *err, size_t errlen)
{
  memset(p, 0, sizeof(*p));
  p->base = base;
  p->proto = proto;
  p->max = max > 0 ? max : 1;
  if (addr && (p->salen = gw_addr_parse_fixed(addr, &p->sa)) == 0) {
    snprintf(err, errlen, "%s address must be \"IP:port\", \"localhost:port\" or \"unix:/path\", got \"%s\"",
             proto->name, addr);
    return -1;
  }
  return 0;
}

void gw_dpool_dispose(gw_dpool_t *p)
{
  while (p->conns) gw_dconn_close(p->conns);
}

void gw_dpool_mark_down(gw_dpool_t *p)
{
  p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : GW_DPOOL_BACKOFF_FIRST_MS;
  if (p->backoff_ms > GW_DPOOL_BACKOFF_MAX_MS) p->backoff_ms = GW_DPOOL_BACKOFF_MAX_MS;
  p->down_until_ms = gw_now_ms() + p->backoff_ms;
}

int gw_dpool_is_down(const gw_dpool_t *p)
{
  return gw_now_ms() < p->down_until_ms;
}

void gw_dpool_set_addr(gw_dpool_t *p, const gw_sockaddr_t *sa, socklen_t salen)
{
  p->sa = *sa;
  p->salen = salen;
  p->backoff_ms = 0;
  p->down_until_ms = 0;
}

gw_dconn_t *gw_dpool_idle_pop(gw_dpool_t *p)
{
  gw_dconn_t *c = p->idle;
  if (c) {
    p->idle = c->next_idle;
    c->next_idle = NULL;
    c->idle = 0;
  }
  return c;
}

gw_dconn_t *gw_dpool_least_loaded(gw_dpool_t *p)
{
  gw_dconn_t *best = NULL;
  for (gw_dconn_t *c = p->conns; c; c = c->next)
    if (c->counted && (best == NULL || c->npending < best->npending)) best = c;
  return best;
}

void gw_dpool_wait(gw_dpool_t *p, gw_dreq_t *q)
{
  q->waiting = 1;
  q->next = NULL;
  q->prev = p->wait_tail;
  if (p->wait_tail) p->wait_tail->next = q;
  else p->wait_head = q;
  p->wait_tail = q;
}

void gw_dreq_unwait(gw_dreq_t *q)
{
  gw_dpool_t *p = q->pool;
  if (!q->waiting) return;
  if (q->prev) q->prev->next = q->next;
  else p->wait_head = q->next;
  if (q->next) q->next->prev = q->prev;
  else p->wait_tail = q->prev;
  q->next = q->prev = NULL;
  q->waiting = 0;
}

gw_dreq_t *gw_dpool_next_waiter(gw_dpool_t *p)
{
  gw_dreq_t *q = p->wait_head;
  if (q) gw_dreq_unwait(q);
  return q;
}

void gw_dpool_fail_waiters(gw_dpool_t *p, gw_err_t err)
{
  gw_dreq_t *q;
  while ((q = gw_dpool_next_waiter(p))) gw_dreq_fail_later(q, err);
}

/* -- connections ------------------------------------------------------------------ */

static void on_read(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);
static void on_flush(evutil_socket_t fd, short what, void *arg);

static gw_err_t connect_error(const gw_dpool_t *p, int e)
{
  return e == ECONNREFUSED || e == ENOENT ? gw_err(GW_ERR_CONNECT_REFUSED, p->proto->refused)
                                          : gw_err(GW_ERR_CONNECT, p->proto->unreachable);
}

gw_dconn_t *gw_dconn_open(gw_dpool_t *p, size_t size, int counted, gw_err_t *err)
{
  gw_dconn_t *c = calloc(1, size);
  if (c == NULL) {
    *err = gw_err(GW_ERR_NOMEM, "out of memory");
    return NULL;
  }
  c->pool = p;
  c->fd = socket(p->sa.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) {
    *err = gw_err(GW_ERR_CONNECT, p->proto->unreachable);
    free(c);
    return NULL;
  }
  if (p->sa.sa.sa_family != AF_UNIX) {
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  if (connect(c->fd, &p->sa.sa, p->salen) < 0 && errno != EINPROGRESS) {
    *err = connect_error(p, errno);
    gw_dpool_mark_down(p);
    close(c->fd);
    free(c);
    return NULL;
  }
  event_assign(&c->rev, p->base, c->fd, EV_READ | EV_PERSIST, on_read, c);
  event_assign(&c->wev, p->base, c->fd, EV_WRITE | EV_PERSIST, on_write, c);
  event_assign(&c->flush_ev, p->base, -1, 0, on_flush, c);
  event_add(&c->wev, NULL); /* connected: then reads start (on_write) */
  c->connecting = 1;
  c->counted = counted != 0;
  p->n += c->counted;
  c->next = p->conns;
  if (p->conns) p->conns->prev = c;
  p->conns = c;
  return c;
}

static void conn_free(gw_dconn_t *c)
{
  gw_buf_dispose(&c->in);
  gw_buf_dispose(&c->out);
  free(c);
}

void gw_dconn_uncount(gw_dconn_t *c)
{
  if (c->counted) c->pool->n--;
  c->counted = 0;
}

void gw_dconn_close(gw_dconn_t *c)
{
  gw_dpool_t *p = c->pool;
  if (c->closed) return;
  c->closed = 1;
  if (c->idle)
    for (gw_dconn_t **i = &p->idle; *i; i = &(*i)->next_idle)
      if (*i == c) {
        *i = c->next_idle;
        break;
      }
  if (c->prev) c->prev->next = c->next;
  else p->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  gw_dconn_uncount(c);
  if (p->proto->dispose) p->proto->dispose(c);
  while (c->head) gw_dreq_detach(c->head);
  event_del(&c->rev);
  event_del(&c->wev);
  event_del(&c->flush_ev);
  close(c->fd);
  if (!c->busy) conn_free(c);
}

void gw_dconn_idle_push(gw_dconn_t *c)
{
  c->idle = 1;
  c->next_idle = c->pool->idle;
  c->pool->idle = c;
}

void gw_dconn_flush(gw_dconn_t *c, int report_now)
{
  while (c->out_off < c->out.len) {
    ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || !report_now)) {
      event_add(&c->wev, NULL); /* an error: reported from on_write */
      return;
    }
    if (n < 0) {
      c->pool->proto->failed(c, gw_err(GW_ERR_RESET, c->pool->proto->reset));
      return;
    }
    c->out_off += (size_t)n;
  }
  c->out.len = c->out_off = 0;
  event_del(&c->wev);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
  gw_dconn_t *c = arg;
  (void)fd;
  (void)what;
  c->flush_queued = 0;
  gw_dconn_flush(c, 1);
}

void gw_dconn_flush_soon(gw_dconn_t *c)
{
  if (c->flush_queued || event_pending(&c->wev, EV_WRITE, NULL)) return;
  c->flush_queued = 1;
  event_active(&c->flush_ev, EV_TIMEOUT, 0);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
  gw_dconn_t *c = arg;
  gw_dpool_t *p = c->pool;
  (void)what;
  if (c->connecting) {
    int e = 0;
    socklen_t len = sizeof(e);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0) e = errno;
    if (e != 0) {
      p->proto->failed(c, e == ECONNREFUSED ? gw_err(GW_ERR_CONNECT_REFUSED, p->proto->refused)
                                            : gw_err(GW_ERR_CONNECT, p->proto->unreachable));
      return;
    }
    c->connecting = 0;
    p->backoff_ms = 0;
    event_add(&c->rev, NULL);
    if (p->proto->connected) {
      c->busy = 1;
      p->proto->connected(c);
      c->busy = 0;
      if (c->closed) {
        conn_free(c);
        return;
      }
    }
  }
  gw_dconn_flush(c, 1);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
  gw_dconn_t *c = arg;
  const gw_dconn_proto_t *proto = c->pool->proto;
  (void)what;
  if (c->in.cap - c->in.len < READ_CHUNK && gw_buf_reserve(&c->in, READ_CHUNK) < 0) {
    proto->failed(c, gw_err(GW_ERR_NOMEM, "out of memory"));
    return;
  }
  ssize_t n = recv(fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    proto->failed(c, n == 0 ? gw_err(GW_ERR_CLOSED, proto->closed) : gw_err(GW_ERR_RESET, proto->reset));
    return;
  }
  c->in.len += (size_t)n;
  c->busy = 1;
  proto->readable(c);
  c->busy = 0;
  if (c->closed) {
    conn_free(c);
    return;
  }
  if (c->in_off == c->in.len) {
    c->in.len = c->in_off = 0;
  } else if (c->in_off > 0) {
    memmove(c->in.data, c->in.data + c->in_off, c->in.len - c->in_off);
    c->in.len -= c->in_off;
    c->in_off = 0;
  }
}

/* -- pending requests ---------------------------------------------------------------- */

void gw_dconn_attach(gw_dconn_t *c, gw_dreq_t *q)
{
  q->conn = c;
  q->next = NULL;
  q->prev = c->tail;
  if (c->tail) c->tail->next = q;
  else c->head = q;
  c->tail = q;
  c->npending++;
}

gw_dreq_t *gw_dconn_find(const gw_dconn_t *c, uint64_t id)
{
  gw_dreq_t *q = c->head; /* replies mostly come in order: the match is near the head */
  while (q && q->id != id) q = q->next;
  return q;
}

void gw_dreq_detach(gw_dreq_t *q)
{
  gw_dconn_t *c = q->conn;
  if (c == NULL) return;
  if (q->prev) q->prev->next = q->next;
  else c->head = q->next;
  if (q->next) q->next->prev = q->prev;
  else c->tail = q->prev;
  q->next = q->prev = NULL;
  q->conn = NULL;
  c->npending--;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
  gw_dreq_t *q = arg;
  (void)fd;
  (void)what;
  q->has_timer = 0;
  if (q->has_later) { /* a failure was about to be delivered: the timeout wins */
    event_del(&q->later);
    q->has_later = 0;
  }
  q->pool->proto->timed_out(q);
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
  gw_dreq_t *q = arg;
  (void)fd;
  (void)what;
  q->has_later = 0;
  q->pool->proto->fail(q, q->err);
}

void gw_dreq_init(gw_dreq_t *q, gw_dpool_t *p, int timeout_ms)
{
  q->pool = p;
  if (timeout_ms > 0) {
    evtimer_assign(&q->timer, p->base, on_timer, q);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(&q->timer, &tv);
    q->has_timer = 1;
  }
}

void gw_dreq_fail_later(gw_dreq_t *q, gw_err_t err)
{
  q->err = err;
  event_assign(&q->later, q->pool->base, -1, 0, on_later, q);
  q->has_later = 1;
  event_active(&q->later, EV_TIMEOUT, 0);
}

void gw_dreq_stop(gw_dreq_t *q)
{
  if (q->has_timer) event_del(&q->timer);
  if (q->has_later) event_del(&q->later);
  q->has_timer = q->has_later = 0;
}
