/* pooled_exchange.c - one request over a pooled connection, the protocol
 * plugged in (pooled_exchange.h).
 *
 * Re-entrancy: the done callback runs only from gw_px_finish(), the last
 * thing any path does, never inside a start call (failures found there go
 * through the request's own event, which cancel deletes); a cancel from
 * inside the protocol's user callbacks only marks the request, which
 * gw_px_leave_cb() abandons once the callback returned. A pool freed from
 * inside a callback is destroyed when the outermost one returned. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "log.h"
#include "pooled_exchange.h"

#define BODY_OUT_HIGH (64 * 1024) /* framed body waiting for the socket */
#define SEND_ROUNDS 64

static const gw_err_t ERR_REFUSED = {GW_ERR_CONNECT_REFUSED, "connection refused"};
static const gw_err_t ERR_CONNECT_TIMEOUT = {GW_ERR_CONNECT_TIMEOUT, "upstream connect timed out"};
static const gw_err_t ERR_CONNECT = {GW_ERR_CONNECT, "cannot connect to upstream"};
static const gw_err_t ERR_TLS_BROKEN = {GW_ERR_RESET, "upstream TLS connection failed"};
static const gw_err_t ERR_NOMEM = {GW_ERR_NOMEM, "out of memory"};

static void conn_send(gw_px_conn_t *c);
static void on_req_deferred(evutil_socket_t fd, short what, void *arg);
static void req_connect(gw_px_t *x);

/* ---- the pool ---- */

static void pool_destroy(gw_pool_t *p)
{
  const gw_px_ops_t *ops = p->px;
  void *proto = p->proto;
  if (p->live > 0) gw_log_error("%s: pool freed with %lu requests in flight", ops->name, p->live);
  gw_pool_free(p); /* the idle connections first: their protocol parts may use proto */
  if (ops->proto_free) ops->proto_free(proto);
}

void gw_px_pool_release(gw_pool_t *p)
{
  if (p == NULL) return;
  if (p->cb_depth > 0) {
    p->free_pending = 1;
    return;
  }
  pool_destroy(p);
}

/* ---- connections ---- */

static void conn_close(gw_px_conn_t *c)
{
  gw_pool_close(&c->pc); /* on_conn_free releases the protocol's part */
}

/* Lets go of x's connection: parked when keep allows, else closed. */
static void conn_detach(gw_px_t *x, int keep)
{
  gw_px_conn_t *c = x->conn;
  if (c == NULL) return;
  gw_pool_t *p = x->pool;
  x->conn = NULL;
  c->x = NULL;
  if (!keep || gw_pool_keepalive_max(p) <= 0 || p->free_pending) {
    conn_close(c);
    return;
  }
  if (p->px->conn_park) p->px->conn_park(c);
  c->state = GW_PX_IDLE;
  c->served = 1;
  gw_pool_park(&c->pc); /* read event on again (a paused request may have turned it off) */
}

static void conn_attach(gw_px_conn_t *c, gw_px_t *x)
{
  c->x = x;
  x->conn = c;
  c->state = GW_PX_ACTIVE;
  if (c->pc.pool->px->attach) c->pc.pool->px->attach(c);
  if (c->pc.rev_added == x->paused) gw_pool_conn_read(&c->pc, !x->paused); /* a pooled one reads already */
  if (x->paused) gw_pool_conn_timer_stop(&c->pc);
  else gw_pool_conn_timer(&c->pc, x->timeout_ms);
}

void gw_px_conn_ready(gw_px_conn_t *c)
{
  gw_pool_conn_write(&c->pc, 0);
  conn_attach(c, c->x);
  conn_send(c);
}

static void conn_connected(gw_px_conn_t *c)
{
  c->pc.pool->opened++;
  size_t hl;
  const unsigned char *h = gw_pool_key_proxy(c->pc.key, &hl);
  if (hl > 0 && send(c->pc.fd, h, hl, MSG_NOSIGNAL) != (ssize_t)hl) {
    /* A new socket's empty send buffer takes these few dozen bytes whole. */
    gw_log_info("%s%s%s: could not send the PROXY protocol header: %s", c->pc.pool->px->name, c->x->label ? " " : "",
                c->x->label ? c->x->label : "", strerror(errno));
    gw_px_fail(c->x, ERR_CONNECT);
    return;
  }
  if (c->pc.pool->px->connected && c->pc.pool->px->connected(c)) return;
  gw_px_conn_ready(c);
}

/* ---- the end of a request ---- */

static void req_free(gw_px_t *x)
{
  gw_pool_t *p = x->pool;
  if (x->deferred) event_del(&x->dev); /* (event_del costs a lock: only when it was used) */
  if (x->body_out) {
    event_del(&x->sent_ev);
    evbuffer_free(x->body_out);
  }
  if (x->key) gw_pool_key_put(p, x->key);
  p->live--;
  p->px->free(x);
}

void gw_px_finish(gw_px_t *x, gw_err_t err, int keep)
{
  gw_pool_t *p = x->pool;
  conn_detach(x, keep);
  p->cb_depth++;
  p->px->done(x, err);
  p->cb_depth--;
  req_free(x);
  if (p->free_pending && p->cb_depth == 0) pool_destroy(p);
}

void gw_px_abandon(gw_px_t *x)
{
  gw_pool_t *p = x->pool;
  conn_detach(x, 0);
  req_free(x);
  if (p->free_pending && p->cb_depth == 0) pool_destroy(p);
}

void gw_px_fail(gw_px_t *x, gw_err_t err)
{
  if (!x->starting) {
    gw_px_finish(x, err, 0);
    return;
  }
  conn_detach(x, 0);
  x->err = err;
  if (x->deferred) return; /* reported already, from the loop */
  x->deferred = 1;
  event_assign(&x->dev, x->pool->base, -1, 0, on_req_deferred, x); /* only now: most requests never need it */
  event_active(&x->dev, EV_TIMEOUT, 1);
}

static void on_req_deferred(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_px_t *x = arg;
  gw_px_finish(x, x->err, 0);
}

static void on_body_taken(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_px_t *x = arg;
  x->on_body_sent(x->arg);
}

int gw_px_leave_cb(gw_px_t *x)
{
  x->in_cb = 0;
  x->pool->cb_depth--;
  if (!x->cancelled) return 0;
  gw_px_abandon(x);
  return 1;
}

/* ---- failures and the one retry ---- */

static gw_err_t errno_error(const gw_px_ops_t *ops, int e)
{
  switch (e) {
  case ECONNREFUSED: return ERR_REFUSED;
  case ECONNRESET:
  case EPIPE: return ops->err_reset;
  case EPROTO: return ERR_TLS_BROKEN; /* a TLS error after the handshake: something may have been sent */
  default: return ERR_CONNECT;
  }
}

/* A pooled connection that died before any response byte: most likely
 * closed by the server while idle. Safe to resend once if the request is
 * idempotent or nothing of it was sent. */
static int req_can_retry(const gw_px_t *x, const gw_px_conn_t *c)
{
  return c->served && !x->no_retry && !x->retried && !x->got_bytes && !x->body_taken &&
         (x->idempotent || x->wire_off == 0);
}

static void req_retry(gw_px_t *x)
{
  conn_detach(x, 0);
  x->retried = 1;
  x->pool->retried++;
  x->wire_off = 0;
  x->got_bytes = 0;
  if (x->pool->px->reset) x->pool->px->reset(x);
  req_connect(x);
}

void gw_px_io_failed(gw_px_conn_t *c, int e)
{
  gw_px_t *x = c->x;
  if (req_can_retry(x, c)) {
    req_retry(x);
    return;
  }
  gw_px_fail(x, e == 0 ? c->pc.pool->px->err_premature : errno_error(c->pc.pool->px, e));
}

int gw_px_retry_on_eof(gw_px_conn_t *c)
{
  if (!req_can_retry(c->x, c)) return 0;
  req_retry(c->x);
  return 1;
}


/* ---- sending ---- */

/* The server stopped reading (EPIPE/ECONNRESET) and the request cannot be
 * resent: it may have answered early (e.g. a 413). Stop writing and let the
 * read side, which the error has made readable, deliver that or the error. */
static void conn_stop_sending(gw_px_conn_t *c)
{
  gw_px_t *x = c->x;
  x->wire_off = x->wire_len;
  x->send_stopped = 1;
  x->no_keepalive = 1;
  gw_pool_conn_write(&c->pc, 0);
}

static void send_failed(gw_px_conn_t *c, int e)
{
  if ((e == EPIPE || e == ECONNRESET) && !req_can_retry(c->x, c)) conn_stop_sending(c);
  else gw_px_io_failed(c, e);
}

static void body_take(gw_px_t *x)
{
  if (x->pool->px->frame_body(x) > 0) {
    x->body_taken = 1;
    if (x->on_body_sent) event_active(&x->sent_ev, EV_TIMEOUT, 1);
  }
}

/* The streamed body after the wire bytes, as far as the socket and the
 * caller allow. */
static void body_send(gw_px_conn_t *c)
{
  gw_px_t *x = c->x;
  for (int i = 0; i < SEND_ROUNDS; i++) {
    if (!x->body_ended && evbuffer_get_length(x->body_out) < BODY_OUT_HIGH) body_take(x);
    if (evbuffer_get_length(x->body_out) == 0) break;
    int n = c->io ? c->io->write_buffer(c, x->body_out) : evbuffer_write(x->body_out, c->pc.fd);
    if (n > 0) {
      if (!x->paused) gw_pool_conn_timer(&c->pc, x->timeout_ms); /* progress: a send timeout */
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      gw_pool_conn_write(&c->pc, 1);
      return;
    }
    send_failed(c, n < 0 ? errno : EPIPE);
    return;
  }
  gw_pool_conn_write(&c->pc, evbuffer_get_length(x->body_out) > 0);
}

/* Writes what is left of the request; arms the write event on EAGAIN. */
static void conn_send(gw_px_conn_t *c)
{
  gw_px_t *x = c->x;
  if (x->send_stopped) {
    gw_pool_conn_write(&c->pc, 0);
    return;
  }
  for (int i = 0; i < SEND_ROUNDS && x->wire_off < x->wire_len; i++) {
    const char *at = x->wire + x->wire_off;
    size_t left = x->wire_len - x->wire_off;
    ssize_t n = c->io ? c->io->write(c, at, left) : send(c->pc.fd, at, left, MSG_NOSIGNAL);
    if (n > 0) {
      x->wire_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    send_failed(c, n < 0 ? errno : EPIPE);
    return;
  }
  if (x->wire_off < x->wire_len) gw_pool_conn_write(&c->pc, 1);
  else if (x->body_src != NULL) body_send(c);
  else gw_pool_conn_write(&c->pc, 0);
}


/* ---- connecting, and the pool's events ---- */

static void req_connect(gw_px_t *x)
{
  gw_pool_t *p = x->pool;
  gw_pool_conn_t *pc;
  int rc = gw_pool_connect(p, x->key, &pc);
  if (pc == NULL) { /* socket() (logged) or memory */
    gw_px_fail(x, ERR_CONNECT);
    return;
  }
  gw_px_conn_t *c = (gw_px_conn_t *)pc;
  c->state = GW_PX_CONNECTING;
  c->served = 0;
  c->io = NULL;
  c->x = x;
  x->conn = c;
  if (p->px->conn_init(c) < 0) {
    gw_px_fail(x, ERR_NOMEM);
    return;
  }
  if (rc == 0) {
    conn_connected(c);
  } else if (rc == EINPROGRESS) {
    gw_pool_conn_write(pc, 1);
    gw_pool_conn_timer(pc, x->connect_timeout_ms);
  } else {
    if (rc != ECONNREFUSED)
      gw_log_info("%s%s%s: connect(): %s", p->px->name, x->label ? " " : "", x->label ? x->label : "", strerror(rc));
    gw_px_fail(x, rc == ECONNREFUSED ? ERR_REFUSED : ERR_CONNECT);
  }
}

static void on_conn_read(gw_pool_conn_t *pc)
{
  gw_px_conn_t *c = (gw_px_conn_t *)pc;
  if (c->state == GW_PX_HANDSHAKE) c->pc.pool->px->handshake(c);
  else c->pc.pool->px->readable(c); /* never idle here: pool.c handles those */
}

static void on_conn_write(gw_pool_conn_t *pc)
{
  gw_px_conn_t *c = (gw_px_conn_t *)pc;
  if (c->state == GW_PX_ACTIVE) {
    conn_send(c);
    return;
  }
  if (c->state == GW_PX_HANDSHAKE) {
    c->pc.pool->px->handshake(c);
    return;
  }
  int err = gw_pool_conn_error(pc);
  if (err == EINPROGRESS || err == EINTR) return;
  if (err != 0) {
    /* unix sockets: EAGAIN when the listen backlog is full */
    if (err != ECONNREFUSED) {
      const char *label = c->x->label;
      gw_log_info("%s%s%s: connect: %s", c->pc.pool->px->name, label ? " " : "", label ? label : "", strerror(err));
    }
    gw_px_fail(c->x, err == ECONNREFUSED ? ERR_REFUSED : ERR_CONNECT);
    return;
  }
  conn_connected(c);
}

static void on_conn_timeout(gw_pool_conn_t *pc)
{
  gw_px_conn_t *c = (gw_px_conn_t *)pc;
  switch (c->state) {
  case GW_PX_CONNECTING: gw_px_fail(c->x, ERR_CONNECT_TIMEOUT); break;
  case GW_PX_HANDSHAKE: c->pc.pool->px->handshake_timeout(c); break;
  case GW_PX_ACTIVE: gw_px_fail(c->x, c->pc.pool->px->err_timeout); break;
  case GW_PX_IDLE: break; /* pool.c closes idle ones itself */
  }
}

static void on_conn_free(gw_pool_conn_t *pc)
{
  gw_px_conn_t *c = (gw_px_conn_t *)pc;
  if (c->pc.pool->px->conn_free) c->pc.pool->px->conn_free(c);
}

static int on_conn_idle_check(gw_pool_conn_t *pc)
{
  gw_px_conn_t *c = (gw_px_conn_t *)pc;
  return c->pc.pool->px->idle_check ? c->pc.pool->px->idle_check(pc) : 0;
}

gw_pool_t *gw_px_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms, const gw_px_ops_t *ops,
                          size_t conn_size, void *proto)
{
  static const gw_pool_conn_ops_t pool_ops = {.on_read = on_conn_read,
                                              .on_write = on_conn_write,
                                              .on_timeout = on_conn_timeout,
                                              .on_free = on_conn_free,
                                              .idle_check = on_conn_idle_check};
  gw_pool_t *p = gw_pool_new(base, keepalive_max, idle_timeout_ms, &pool_ops, conn_size);
  if (p == NULL) return NULL;
  p->px = ops;
  p->proto = proto;
  return p;
}

/* ---- requests ---- */

int gw_px_init(gw_px_t *x, gw_pool_t *p, void *arg, struct evbuffer *body_src, void (*on_body_sent)(void *arg))
{
  x->pool = p;
  x->arg = arg;
  if (body_src == NULL) return 0;
  x->body_out = evbuffer_new();
  if (x->body_out == NULL) return -1;
  x->body_src = body_src;
  x->on_body_sent = on_body_sent;
  event_assign(&x->sent_ev, p->base, -1, 0, on_body_taken, x);
  return 0;
}

void gw_px_start(gw_px_t *x, gw_pool_key_t *key, gw_err_t err)
{
  gw_pool_t *p = x->pool;
  p->live++;
  x->key = key;
  x->starting = 1;
  if (key == NULL) {
    gw_px_fail(x, err);
    x->starting = 0;
    return;
  }
  /* Most recently parked first; a request that cannot be resent (not
   * idempotent, or a streamed body taken once) checks for a connection that
   * died unnoticed before trusting it. */
  gw_px_conn_t *c = NULL;
  while (!x->no_retry && (c = (gw_px_conn_t *)gw_pool_take(p, key)) != NULL) {
    c->state = GW_PX_ACTIVE;
    if ((!x->idempotent || x->body_src) && gw_pool_conn_is_stale(&c->pc)) {
      conn_close(c);
      continue;
    }
    break;
  }
  if (c != NULL) {
    p->reused++;
    conn_attach(c, x);
    conn_send(c);
  } else {
    req_connect(x);
  }
  x->starting = 0;
}

void gw_px_cancel(gw_px_t *x)
{
  if (x == NULL) return;
  if (x->in_cb) {
    x->cancelled = 1; /* abandoned once the callback returned */
    return;
  }
  gw_px_abandon(x);
}

void gw_px_pause(gw_px_t *x)
{
  if (x == NULL || x->paused || x->cancelled) return;
  x->paused = 1;
  /* While connecting the connect timer keeps running; attaching leaves
   * reading off. */
  if (x->conn && x->conn->state == GW_PX_ACTIVE) {
    gw_pool_conn_read(&x->conn->pc, 0);
    gw_pool_conn_timer_stop(&x->conn->pc);
  }
}

void gw_px_resume(gw_px_t *x)
{
  if (x == NULL || !x->paused || x->cancelled) return;
  x->paused = 0;
  gw_px_conn_t *c = x->conn;
  if (c == NULL || c->state != GW_PX_ACTIVE) return;
  gw_pool_conn_read(&c->pc, 1);
  gw_pool_conn_timer(&c->pc, x->timeout_ms);
  /* Inside the protocol's callback its parse loop just goes on; otherwise
   * what was kept is delivered from the loop, never from inside this call. */
  if (!x->in_cb && c->pc.pool->px->kept(c)) gw_pool_conn_kick_read(&c->pc);
}

void gw_px_body_more(gw_px_t *x, int complete)
{
  if (x == NULL || x->body_src == NULL || x->cancelled) return;
  if (complete) x->body_complete = 1;
  gw_px_conn_t *c = x->conn;
  if (c == NULL || c->state != GW_PX_ACTIVE || c->pc.wev_added) return; /* sent when it can be */
  x->starting = 1; /* a failure now is reported from the loop */
  conn_send(c);
  x->starting = 0;
}
