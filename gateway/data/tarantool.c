/* tarantool.c - the Tarantool client (tarantool.h): connections per address
 * and user on the worker's loop, requests pipelined by sync id.
 *
 * A request goes to the pool's connection with the fewest requests in
 * flight; a new connection is opened (up to pool:) only when every one has
 * PIPELINE_DEPTH in flight, so requests share few connections: the requests
 * made in one loop iteration leave in one send (flush_soon), Tarantool reads
 * them in one read and its replies come back in few (issue #16 measured
 * this against one connection per concurrent request). A connection reads the greeting, sends AUTH (chap-sha1 on the
 * greeting's salt) when a user is set and holds its requests until AUTH is
 * answered. A failed connect marks the address down for a pause that doubles
 * from 100 ms to 2 s; requests fail at once meanwhile.
 *
 * Replies are matched by sync. A timed-out or cancelled request's reply is
 * "stale": its connection is retired (takes nothing new) and closed once its
 * remaining requests are answered. A reply whose sync matches nothing (and no
 * stale one is expected) is garbage: the connection is closed, its requests
 * fail. Callbacks of a read run while the connection is marked busy, so one
 * that cancels or fails another request only marks the connection for
 * closing; failures are delivered from a loop event of their own. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "addr.h"
#include "buf.h"
#include "iproto.h"
#include "log.h"
#include "tarantool.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 2000
#define READ_CHUNK 16384
/* Requests in flight on a connection before another is opened: Tarantool
 * serves a connection's requests concurrently (net_msg_max 768), and one
 * connection lets it read a whole batch per read and answer in one write. */
#define PIPELINE_DEPTH 64

enum { ST_CONNECTING, ST_GREETING, ST_AUTH, ST_READY };

typedef struct conn_s {
  gw_tnt_t *t;
  struct conn_s *next, *prev; /* every connection of t */
  int fd;
  struct event rev, wev;
  struct event flush_ev;      /* the write of every request queued in this loop iteration */
  int flush_queued;
  int state;
  int retired;                /* takes no new request; closed when nops is 0 */
  int busy, doomed;           /* inside on_read; closed when it returns */
  gw_buf_t in;                /* received, in_off already consumed */
  size_t in_off;
  gw_buf_t out;               /* to write, out_off already written */
  size_t out_off;
  gw_buf_t held;              /* requests waiting for the greeting / AUTH */
  gw_tnt_op_t *ops, *ops_tail; /* requests whose replies are awaited, oldest first
                                 (Tarantool mostly answers in order: the match is near the head) */
  int nops;
  unsigned stale;             /* replies coming that nobody awaits */
  uint64_t sync, auth_sync;
} conn_t;

struct gw_tnt_op_s {
  gw_tnt_t *t;
  conn_t *conn;
  gw_tnt_op_t *next, *prev;
  uint64_t sync;
  struct event timer, later;
  int has_timer, has_later;
  gw_err_t err;
  gw_tnt_done_cb cb;
  void *arg;
};

struct gw_tnt_s {
  struct event_base *base;
  char *addr, *user, *password;
  gw_sockaddr_t sa;
  socklen_t salen;
  int pool, nconns;           /* nconns: connections not retired */
  conn_t *conns;
  double down_until_ms;
  int backoff_ms;
};

/* -- operations ---------------------------------------------------------------- */

static void op_detach(gw_tnt_op_t *op)
{
  conn_t *c = op->conn;
  if (c == NULL) return;
  if (op->prev) op->prev->next = op->next;
  else c->ops = op->next;
  if (op->next) op->next->prev = op->prev;
  else c->ops_tail = op->prev;
  op->next = op->prev = NULL;
  op->conn = NULL;
  c->nops--;
}

static void op_free(gw_tnt_op_t *op)
{
  if (op->has_timer) event_del(&op->timer);
  if (op->has_later) event_del(&op->later);
  free(op);
}

static void op_finish(gw_tnt_op_t *op, gw_err_t err, uint64_t code, const char *body, size_t len)
{
  if (op->has_timer) {
    event_del(&op->timer);
    op->has_timer = 0;
  }
  op->cb(err, code, body, len, op->arg);
  op_free(op);
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
  gw_tnt_op_t *op = arg;
  (void)fd;
  (void)what;
  op->has_later = 0;
  op_finish(op, op->err, 0, NULL, 0);
}

/* op (on no connection) fails from a loop event of its own. */
static void finish_later(gw_tnt_op_t *op, gw_err_t err)
{
  op->err = err;
  event_assign(&op->later, op->t->base, -1, 0, on_later, op);
  op->has_later = 1;
  event_active(&op->later, EV_TIMEOUT, 0);
}

/* -- connections ------------------------------------------------------------------ */

static void conn_destroy(conn_t *c)
{
  gw_tnt_t *t = c->t;
  if (c->prev) c->prev->next = c->next;
  else t->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  if (!c->retired) t->nconns--;
  event_del(&c->rev);
  event_del(&c->wev);
  event_del(&c->flush_ev);
  close(c->fd);
  gw_buf_dispose(&c->in);
  gw_buf_dispose(&c->out);
  gw_buf_dispose(&c->held);
  free(c);
}

static void conn_close(conn_t *c)
{
  if (c->busy) c->doomed = 1;
  else conn_destroy(c);
}

static void conn_retire(conn_t *c)
{
  if (!c->retired) {
    c->retired = 1;
    c->t->nconns--;
  }
  if (c->nops == 0) conn_close(c);
}

static void mark_down(gw_tnt_t *t)
{
  t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : BACKOFF_FIRST_MS;
  if (t->backoff_ms > BACKOFF_MAX_MS) t->backoff_ms = BACKOFF_MAX_MS;
  t->down_until_ms = gw_now_ms() + t->backoff_ms;
}

/* c is closed; each of its requests fails with err (from the loop). */
static void conn_fail(conn_t *c, gw_err_t err)
{
  if (c->state == ST_CONNECTING) mark_down(c->t);
  if (!c->retired) {
    c->retired = 1;
    c->t->nconns--;
  }
  while (c->ops) {
    gw_tnt_op_t *op = c->ops;
    op_detach(op);
    finish_later(op, err);
  }
  conn_close(c);
}

/* Writes what c has (called from loop events only: a send error fails c). */
static void flush(conn_t *c)
{
  while (c->out_off < c->out.len) {
    ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      event_add(&c->wev, NULL);
      return;
    }
    if (n < 0) {
      conn_fail(c, gw_err(GW_ERR_RESET, "connection to tarantool reset"));
      return;
    }
    c->out_off += (size_t)n;
  }
  c->out.len = c->out_off = 0;
  event_del(&c->wev);
}

static void become_ready(conn_t *c)
{
  c->state = ST_READY;
  if (c->held.len > 0) {
    if (gw_buf_append(&c->out, c->held.data, c->held.len) < 0) {
      conn_fail(c, gw_err(GW_ERR_NOMEM, "out of memory"));
      return;
    }
    gw_buf_dispose(&c->held);
  }
  flush(c);
}

static void on_read(evutil_socket_t fd, short what, void *arg);

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
  conn_t *c = arg;
  (void)fd;
  (void)what;
  c->flush_queued = 0;
  flush(c);
}

/* Requests made by the handlers run in this loop iteration go out in one
 * send: the event runs after the events already active (issue #16). */
static void flush_soon(conn_t *c)
{
  if (c->flush_queued || event_pending(&c->wev, EV_WRITE, NULL)) return;
  c->flush_queued = 1;
  event_active(&c->flush_ev, EV_TIMEOUT, 0);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
  conn_t *c = arg;
  (void)what;
  if (c->state == ST_CONNECTING) {
    int e = 0;
    socklen_t len = sizeof(e);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0) e = errno;
    if (e != 0) {
      conn_fail(c, e == ECONNREFUSED ? gw_err(GW_ERR_CONNECT_REFUSED, "connection to tarantool refused")
                                     : gw_err(GW_ERR_CONNECT, "cannot connect to tarantool"));
      return;
    }
    c->state = ST_GREETING;
    c->t->backoff_ms = 0;
    event_add(&c->rev, NULL);
    event_del(&c->wev);
    return;
  }
  flush(c);
}

static conn_t *conn_open(gw_tnt_t *t, gw_err_t *err)
{
  conn_t *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    *err = gw_err(GW_ERR_NOMEM, "out of memory");
    return NULL;
  }
  c->t = t;
  c->fd = socket(t->sa.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) {
    *err = gw_err(GW_ERR_CONNECT, "cannot connect to tarantool");
    free(c);
    return NULL;
  }
  if (t->sa.sa.sa_family != AF_UNIX) {
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  if (connect(c->fd, &t->sa.sa, t->salen) < 0 && errno != EINPROGRESS) {
    *err = errno == ECONNREFUSED || errno == ENOENT ? gw_err(GW_ERR_CONNECT_REFUSED, "connection to tarantool refused")
                                                    : gw_err(GW_ERR_CONNECT, "cannot connect to tarantool");
    mark_down(t);
    close(c->fd);
    free(c);
    return NULL;
  }
  event_assign(&c->rev, t->base, c->fd, EV_READ | EV_PERSIST, on_read, c);
  event_assign(&c->wev, t->base, c->fd, EV_WRITE | EV_PERSIST, on_write, c);
  event_assign(&c->flush_ev, t->base, -1, 0, on_flush, c);
  event_add(&c->wev, NULL); /* connected: then the greeting is read */
  c->state = ST_CONNECTING;
  c->next = t->conns;
  if (t->conns) t->conns->prev = c;
  t->conns = c;
  t->nconns++;
  return c;
}

/* The message of an error reply's body, for the log. */
static void error_message(const char *body, size_t len, char *msg, size_t size)
{
  const char *v;
  size_t vlen;
  gw_mp_t t;
  snprintf(msg, size, "unknown error");
  if (gw_iproto_body_find(body, len, GW_IPROTO_KEY_ERROR, &v, &vlen) == 1) {
    gw_mp_next(&v, &t);
    if (t.type == GW_MP_STR) snprintf(msg, size, "%.*s", (int)t.len, t.ptr);
  }
}

/* One step of reading: 1 consumed something, 0 needs more bytes, -1 c failed. */
static int read_one(conn_t *c)
{
  const char *p = c->in.data + c->in_off;
  size_t avail = c->in.len - c->in_off;
  gw_tnt_t *t = c->t;
  if (c->state == ST_GREETING) {
    if (avail < GW_IPROTO_GREETING_SIZE) return 0;
    unsigned char salt[64];
    size_t saltlen;
    if (gw_iproto_greeting(p, avail, salt, &saltlen) < 0) {
      gw_log_error("tarantool %s: not a Tarantool greeting; connection closed", t->addr);
      conn_fail(c, gw_err(GW_ERR_BAD_RESPONSE, "tarantool sent an invalid greeting"));
      return -1;
    }
    c->in_off += GW_IPROTO_GREETING_SIZE;
    if (t->user == NULL) {
      become_ready(c);
      return c->doomed ? -1 : 1;
    }
    unsigned char scramble[GW_IPROTO_SCRAMBLE_SIZE];
    const char *pw = t->password ? t->password : "";
    gw_iproto_scramble(salt, pw, strlen(pw), scramble);
    gw_buf_t body = GW_BUF_INIT;
    c->auth_sync = ++c->sync;
    int rc = gw_iproto_auth_body(&body, t->user, scramble);
    if (rc == 0) rc = gw_iproto_request(&c->out, GW_IPROTO_AUTH, c->auth_sync, body.data, body.len);
    gw_buf_dispose(&body);
    if (rc < 0) {
      conn_fail(c, gw_err(GW_ERR_NOMEM, "out of memory"));
      return -1;
    }
    c->state = ST_AUTH;
    flush(c);
    return c->doomed ? -1 : 1;
  }
  size_t prefix, plen;
  int rc = gw_iproto_frame(p, avail, &prefix, &plen);
  if (rc == 0 || (rc == 1 && avail - prefix < plen)) return 0;
  gw_iproto_reply_t r;
  if (rc < 0 || gw_iproto_parse(p + prefix, plen, &r) < 0) {
    gw_log_error("tarantool %s: invalid reply; connection closed", t->addr);
    conn_fail(c, gw_err(GW_ERR_BAD_RESPONSE, "tarantool sent an invalid reply"));
    return -1;
  }
  c->in_off += prefix + plen;
  if (c->state == ST_AUTH && r.sync == c->auth_sync) {
    if (r.code == 0) {
      become_ready(c);
      return c->doomed ? -1 : 1;
    }
    char msg[256];
    error_message(r.body, r.body_len, msg, sizeof(msg));
    gw_log_error("tarantool %s: AUTH as %s failed: %s", t->addr, t->user, msg);
    conn_fail(c, gw_err(GW_ERR_CONNECT, "tarantool refused the user or password (see the error log)"));
    return -1;
  }
  gw_tnt_op_t *op = c->ops;
  while (op && op->sync != r.sync) op = op->next;
  if (op == NULL) {
    if (c->stale > 0) { /* a cancelled or timed-out request's */
      c->stale--;
      return 1;
    }
    gw_log_error("tarantool %s: a reply to no request (sync %llu); connection closed", t->addr,
                 (unsigned long long)r.sync);
    conn_fail(c, gw_err(GW_ERR_BAD_RESPONSE, "tarantool sent an invalid reply"));
    return -1;
  }
  op_detach(op);
  op_finish(op, gw_err_none(), r.code, r.body, r.body_len);
  if (c->retired && c->nops == 0) conn_close(c);
  return c->doomed ? -1 : 1;
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
  conn_t *c = arg;
  (void)what;
  if (gw_buf_reserve(&c->in, READ_CHUNK) < 0) {
    conn_fail(c, gw_err(GW_ERR_NOMEM, "out of memory"));
    return;
  }
  ssize_t n = recv(fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n == 0) {
    conn_fail(c, gw_err(GW_ERR_CLOSED, "tarantool closed the connection"));
    return;
  }
  if (n < 0) {
    conn_fail(c, gw_err(GW_ERR_RESET, "connection to tarantool reset"));
    return;
  }
  c->in.len += (size_t)n;
  c->busy = 1;
  while (read_one(c) > 0) {
  }
  c->busy = 0;
  if (c->doomed) {
    conn_destroy(c);
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

/* -- requests ---------------------------------------------------------------------- */

static void drop(gw_tnt_op_t *op)
{
  conn_t *c = op->conn;
  if (c == NULL) return;
  op_detach(op);
  c->stale++;
  conn_retire(c);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
  gw_tnt_op_t *op = arg;
  (void)fd;
  (void)what;
  op->has_timer = 0;
  drop(op);
  if (op->has_later) { /* a failure was about to be delivered: the timeout wins */
    event_del(&op->later);
    op->has_later = 0;
  }
  op_finish(op, gw_err(GW_ERR_TIMEOUT, "tarantool timed out"), 0, NULL, 0);
}

/* The connection for a new request, or NULL with *err. */
static conn_t *pick(gw_tnt_t *t, gw_err_t *err)
{
  conn_t *best = NULL;
  for (conn_t *c = t->conns; c; c = c->next)
    if (!c->retired && (best == NULL || c->nops < best->nops)) best = c;
  if (best && (best->nops < PIPELINE_DEPTH || t->nconns >= t->pool)) return best;
  if (gw_now_ms() < t->down_until_ms) {
    *err = gw_err(GW_ERR_CONNECT, "tarantool is down (reconnecting with backoff)");
    return best;
  }
  conn_t *c = conn_open(t, err);
  return c ? c : best;
}

gw_tnt_op_t *gw_tnt_exec(gw_tnt_t *t, uint32_t type, const char *body, size_t body_len, int timeout_ms,
                         gw_tnt_done_cb cb, void *arg)
{
  gw_tnt_op_t *op = calloc(1, sizeof(*op));
  if (op == NULL) return NULL;
  op->t = t;
  op->cb = cb;
  op->arg = arg;
  if (timeout_ms > 0) {
    evtimer_assign(&op->timer, t->base, on_timeout, op);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(&op->timer, &tv);
    op->has_timer = 1;
  }
  gw_err_t err = gw_err_none();
  conn_t *c = pick(t, &err);
  if (c == NULL) {
    finish_later(op, err);
    return op;
  }
  op->sync = ++c->sync;
  if (gw_iproto_request(c->state == ST_READY ? &c->out : &c->held, type, op->sync, body, body_len) < 0) {
    finish_later(op, gw_err(GW_ERR_NOMEM, "out of memory"));
    return op;
  }
  op->conn = c;
  op->prev = c->ops_tail;
  if (c->ops_tail) c->ops_tail->next = op;
  else c->ops = op;
  c->ops_tail = op;
  c->nops++;
  if (c->state == ST_READY) flush_soon(c);
  return op;
}

void gw_tnt_cancel(gw_tnt_op_t *op)
{
  drop(op);
  op_free(op);
}

/* -- the client ---------------------------------------------------------------------- */

gw_tnt_t *gw_tnt_new(struct event_base *base, const gw_tnt_params_t *p, char *err, size_t errlen)
{
  gw_tnt_t *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  t->salen = gw_addr_parse_fixed(p->addr, &t->sa);
  if (t->salen == 0) {
    snprintf(err, errlen, "tarantool address must be \"IP:port\", \"localhost:port\" or \"unix:/path\", got \"%s\"",
             p->addr);
    free(t);
    return NULL;
  }
  t->base = base;
  t->addr = strdup(p->addr);
  t->user = p->user ? strdup(p->user) : NULL;
  t->password = p->password ? strdup(p->password) : NULL;
  t->pool = p->pool > 0 ? p->pool : 1;
  return t;
}

void gw_tnt_free(gw_tnt_t *t)
{
  if (t == NULL) return;
  while (t->conns) conn_destroy(t->conns);
  free(t->addr);
  free(t->user);
  free(t->password);
  free(t);
}

const char *gw_tnt_addr(const gw_tnt_t *t)
{
  return t->addr;
}
