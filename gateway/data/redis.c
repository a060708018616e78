/* redis.c - the Redis client (redis.h): connections per address on the
 * worker's loop, RESP replies parsed by hiredis's reader (redis_resp.c).
 *
 * Why the reader on our own sockets and not hiredis's async API with its
 * libevent adapter: per command both run the same reader; the async API
 * adds a redisAsyncContext per connection, an sds-formatted command and a
 * callback node per command, and an event_add/event_del pair per write,
 * and hiredis 0.14 (Debian 12's) has no command timeout and no way to take
 * back one command's callback: a timed-out or cancelled command would leave
 * the context waiting for a reply we no longer want. Here a connection has
 * at most one batch in flight, so cancelling it is closing that connection,
 * and reuse needs no bookkeeping: an idle connection has nothing unread.
 *
 * Sockets, connect, sending, and the backoff of a dead server are the data
 * clients' core (data_conn.h): a failed connect marks the address down for
 * a pause that doubles from 100 ms to 2 s; operations during the pause fail
 * at once (GW_ERR_CONNECT), and the first one after it tries again. An idle
 * pooled connection keeps its read event armed, so a server that closes it
 * (a restart) is noticed and the connection dropped before anyone uses it.
 *
 * A client whose server's address a finder gives (redis_sentinel.c: the
 * master Redis Sentinels name) asks it before the first connect and again
 * whenever the server is lost (a failed or broken connection, a -READONLY
 * answer); connections to an older address are dropped as they come back.
 * A command is sent again, once, to the new address only when it cannot
 * have run on the old one (its connect failed, or the old master answered
 * -READONLY) or when it only reads; any other write fails to its caller.
 *
 * Cluster ("cluster:host:port,..."): redis_cluster.c, a client per node of
 * this file's, routing the calls of a client made by gw_redis_new_router. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <hiredis/read.h>

#include "addr.h"
#include "data_conn.h"
#include "log.h"
#include "redis.h"

typedef struct {
  gw_dconn_t dc;            /* dc.head: the operation in flight, or NULL: idle */
  void *reader;             /* gw_redis_reader_new */
  int setup_replies;        /* replies to AUTH / SELECT still to come */
  gw_redis_sub_t *sub;      /* a subscriber's connection (outside the pool) */
  unsigned epoch;           /* the client's epoch (address) it was opened for */
} conn_t;

struct gw_redis_op_s {
  gw_dreq_t q;                /* q.conn: the connection it is on */
  gw_redis_t *r;
  gw_redis_op_t *next, *prev; /* in the waiting line */
  int retried;
  gw_buf_t cmd;
  size_t nreplies, got;
  gw_redis_reply_t **replies; /* &one for a single command */
  gw_redis_reply_t *one;
  gw_redis_done_cb cb;
  void *arg;
};

struct gw_redis_sub_s {
  gw_redis_t *r;
  conn_t *conn;             /* NULL while waiting to reconnect */
  gw_buf_t cmd;
  struct event retry;
  int backoff_ms;
  int in_callback, dead;    /* freed while its callback ran: free after */
  gw_redis_message_cb on_message;
  gw_redis_state_cb on_state;
  void *arg;
};

struct gw_redis_s {
  gw_dpool_t pool;          /* the address's connections (a router's: none) */
  const gw_redis_router_t *router; /* takes every call (a Cluster's client), or NULL */
  void *routed;             /* the router's state */
  char *addr;
  int db;
  char *password;
  /* A found address's client only (finder != NULL): pool.sa is the server's while have_addr. */
  const gw_redis_finder_t *finder;
  void *found;              /* the finder's state */
  int have_addr;
  unsigned epoch;           /* bumped when the address changes or is lost */
};


/* -- connections ---------------------------------------------------------------- */

static void dispatch(gw_redis_t *r, gw_redis_op_t *op);
static void sub_lost(gw_redis_sub_t *s, gw_err_t err);
static void lose_addr(gw_redis_t *r);
static int may_fail_over(const gw_redis_op_t *op, int unsent);

static gw_redis_t *client_of(const conn_t *c)
{
  return (gw_redis_t *)c->dc.pool;
}

/* The operation in flight on c, or NULL: idle (or a subscriber's). */
static gw_redis_op_t *op_of(const conn_t *c)
{
  return (gw_redis_op_t *)c->dc.head;
}

static void free_replies(gw_redis_op_t *op)
{
  for (size_t i = 0; i < op->got; i++) gw_redis_reply_free(op->replies[i]);
  op->got = 0;
}

static void op_free(gw_redis_op_t *op)
{
  gw_dreq_stop(&op->q);
  free_replies(op);
  if (op->replies != &op->one) free(op->replies);
  gw_buf_dispose(&op->cmd);
  free(op);
}

static void conn_dispose(gw_dconn_t *dc)
{
  conn_t *c = (conn_t *)dc;
  gw_redis_reader_free(c->reader);
}

/* Closes c (nothing is called back); the next waiter may open a new one. */
static void conn_close(conn_t *c)
{
  gw_redis_t *r = client_of(c);
  if (c->sub) c->sub->conn = NULL;
  gw_dconn_close(&c->dc);
  if (r->pool.wait_head && r->pool.n < r->pool.max && !gw_dpool_is_down(&r->pool))
    dispatch(r, (gw_redis_op_t *)gw_dpool_next_waiter(&r->pool));
}

static void op_finish(gw_redis_op_t *op, gw_err_t err)
{
  gw_dreq_stop(&op->q);
  op->cb(err, op->replies, err.kind == GW_OK ? op->got : 0, op->arg);
  op_free(op);
}

static void op_fail(gw_dreq_t *q, gw_err_t err)
{
  op_finish((gw_redis_op_t *)q, err);
}

/* c failed: it is closed, and its operation (or subscriber) told. A found
 * address (Sentinel's master) is asked for again, and an operation that
 * may fail over waits for the answer instead. */
static void conn_lost(conn_t *c, gw_err_t err, int not_run)
{
  gw_redis_op_t *op = op_of(c);
  gw_redis_sub_t *sub = c->sub;
  int connect_failed = c->dc.connecting;
  gw_redis_t *r = client_of(c);
  int found = r->finder != NULL && sub == NULL;
  if (found && c->epoch == r->epoch) lose_addr(r);
  if (found && op && may_fail_over(op, not_run)) {
    gw_dreq_detach(&op->q);
    op->retried = 1;
    conn_close(c);
    dispatch(r, op); /* queued until the finder answers */
    return;
  }
  if (connect_failed) gw_dpool_mark_down(&r->pool);
  conn_close(c);
  if (connect_failed) gw_dpool_fail_waiters(&r->pool, err);
  if (op) op_finish(op, err);
  if (sub) sub_lost(sub, err);
}

static void conn_fail(conn_t *c, gw_err_t err)
{
  conn_lost(c, err, c->dc.connecting);
}

/* The core's report: an idle connection the server closed is dropped. */
static void conn_failed(gw_dconn_t *dc, gw_err_t err)
{
  conn_t *c = (conn_t *)dc;
  if (op_of(c) == NULL && c->sub == NULL) conn_close(c);
  else conn_fail(c, err);
}

static int append_setup(gw_redis_t *r, conn_t *c)
{
  gw_buf_t *out = &c->dc.out;
  if (r->password) {
    if (gw_redis_append_array(out, 2) < 0 || gw_redis_append_bulk(out, "AUTH", 4) < 0 ||
        gw_redis_append_bulk(out, r->password, strlen(r->password)) < 0)
      return -1;
    c->setup_replies++;
  }
  if (r->db > 0) {
    char db[16];
    int n = snprintf(db, sizeof(db), "%d", r->db);
    if (gw_redis_append_array(out, 2) < 0 || gw_redis_append_bulk(out, "SELECT", 6) < 0 ||
        gw_redis_append_bulk(out, db, (size_t)n) < 0)
      return -1;
    c->setup_replies++;
  }
  return 0;
}

/* A new connection (connecting), its setup commands queued; NULL with *err.
 * A subscriber's is not one of the pool's. */
static conn_t *conn_open(gw_redis_t *r, gw_redis_sub_t *sub, gw_err_t *err)
{
  conn_t *c = (conn_t *)gw_dconn_open(&r->pool, sizeof(conn_t), sub == NULL, err);
  if (c == NULL) return NULL;
  c->sub = sub;
  c->epoch = r->epoch;
  c->reader = gw_redis_reader_new();
  if (c->reader == NULL || append_setup(r, c) < 0) {
    *err = gw_err(GW_ERR_CONNECT, "cannot connect to redis");
    c->sub = NULL;
    gw_dconn_close(&c->dc);
    return NULL;
  }
  return c;
}

/* op (its command cmd) goes out on c. */
static void send_on(conn_t *c, gw_redis_op_t *op, const char *cmd, size_t len)
{
  gw_dconn_attach(&c->dc, &op->q);
  if (gw_buf_append(&c->dc.out, cmd, len) < 0) {
    gw_dreq_detach(&op->q);
    conn_close(c);
    gw_dreq_fail_later(&op->q, gw_err(GW_ERR_NOMEM, "out of memory"));
    return;
  }
  if (!c->dc.connecting) gw_dconn_flush(&c->dc, 0);
}

static void start(conn_t *c, gw_redis_op_t *op)
{
  send_on(c, op, op->cmd.data, op->cmd.len);
}

static void dispatch(gw_redis_t *r, gw_redis_op_t *op)
{
  if (r->finder && !r->have_addr) {
    gw_dpool_wait(&r->pool, &op->q);
    r->finder->find(r->found);
  } else if (r->pool.idle) {
    start((conn_t *)gw_dpool_idle_pop(&r->pool), op);
  } else if (r->pool.n < r->pool.max) {
    gw_err_t err;
    conn_t *c = conn_open(r, NULL, &err);
    if (c == NULL) gw_dreq_fail_later(&op->q, err);
    else start(c, op);
  } else {
    gw_dpool_wait(&r->pool, &op->q);
  }
}

/* c answered everything it was sent: back to the pool or the next waiter. */
static void conn_release(conn_t *c)
{
  gw_redis_t *r = client_of(c);
  if (c->epoch != r->epoch) { /* to an address that is no more */
    conn_close(c);
  } else if (r->pool.wait_head) {
    start(c, (gw_redis_op_t *)gw_dpool_next_waiter(&r->pool));
  } else {
    gw_dconn_idle_push(&c->dc);
  }
}

static void conn_connected(gw_dconn_t *dc)
{
  conn_t *c = (conn_t *)dc;
  if (c->sub) c->sub->backoff_ms = 0;
}

/* One reply for c's subscriber; 0 if c still lives. */
static int sub_reply(conn_t *c, gw_redis_reply_t *reply)
{
  gw_redis_sub_t *s = c->sub;
  s->in_callback = 1;
  s->on_message(reply, s->arg);
  s->in_callback = 0;
  gw_redis_reply_free(reply);
  if (s->dead) {
    gw_redis_subscriber_free(s);
    return -1;
  }
  return 0;
}

static void conn_readable(gw_dconn_t *dc)
{
  conn_t *c = (conn_t *)dc;
  gw_redis_t *r = client_of(c);
  if (op_of(c) == NULL && c->sub == NULL) { /* idle: a stray byte */
    conn_close(c);
    return;
  }
  int fed = gw_redis_reader_feed(c->reader, dc->in.data + dc->in_off, dc->in.len - dc->in_off);
  dc->in_off = dc->in.len; /* the reader keeps what it has not parsed */
  if (fed < 0) {
    conn_fail(c, gw_err(GW_ERR_BAD_RESPONSE, "redis sent an invalid reply"));
    return;
  }
  for (;;) {
    gw_redis_reply_t *reply;
    const char *perr;
    int rc = gw_redis_reader_next(c->reader, &reply, &perr);
    if (rc < 0) {
      gw_log_error("redis %s: invalid reply (%s); connection closed", r->addr, perr);
      conn_fail(c, gw_err(GW_ERR_BAD_RESPONSE, "redis sent an invalid reply"));
      return;
    }
    if (rc == 0) return;
    if (c->setup_replies > 0) {
      c->setup_replies--;
      int bad = reply->type == REDIS_REPLY_ERROR;
      if (bad) gw_log_error("redis %s: AUTH or SELECT failed: %s", r->addr, reply->str);
      gw_redis_reply_free(reply);
      if (bad) {
        conn_fail(c, gw_err(GW_ERR_CONNECT, "redis refused AUTH or SELECT (see the error log)"));
        return;
      }
      continue;
    }
    if (c->sub) {
      if (sub_reply(c, reply) < 0) return;
      continue;
    }
    gw_redis_op_t *op = op_of(c);
    if (op == NULL) { /* more replies than commands */
      gw_redis_reply_free(reply);
      conn_close(c);
      return;
    }
    if (reply->type == REDIS_REPLY_ERROR && r->finder && reply->len >= 8 &&
        memcmp(reply->str, "READONLY", 8) == 0) { /* a replica now: the command did not run */
      gw_redis_reply_free(reply);
      conn_lost(c, gw_err(GW_ERR_CLOSED, "redis master became a replica"), 1);
      return;
    }
    op->replies[op->got++] = reply;
    if (op->got < op->nreplies) continue;
    /* Complete. Bytes beyond its replies were never asked for: drop c. */
    gw_dreq_detach(&op->q);
    if (gw_redis_reader_pending(c->reader)) conn_close(c);
    else conn_release(c);
    op_finish(op, gw_err_none());
    return; /* c may be in use by someone else now */
  }
}

/* -- operations ------------------------------------------------------------------ */

static void op_timed_out(gw_dreq_t *q)
{
  gw_redis_op_t *op = (gw_redis_op_t *)q;
  gw_dreq_unwait(&op->q);
  if (q->conn) conn_close((conn_t *)q->conn); /* its reply would come unasked for */
  op_finish(op, gw_err(GW_ERR_TIMEOUT, "redis timed out"));
}

static const gw_dconn_proto_t proto = {
    "redis", "connection to redis refused", "cannot connect to redis", "redis closed the connection",
    "connection to redis reset", "redis is down (reconnecting with backoff)",
    conn_connected, conn_readable, conn_failed, conn_dispose, op_timed_out, op_fail};

gw_redis_op_t *gw_redis_exec(gw_redis_t *r, const char *cmd, size_t len, size_t nreplies, int timeout_ms,
                             gw_redis_done_cb cb, void *arg)
{
  if (r->router) return r->router->exec(r->routed, cmd, len, nreplies, timeout_ms, cb, arg);
  gw_redis_op_t *op = calloc(1, sizeof(*op));
  if (op == NULL) return NULL;
  op->r = r;
  op->cb = cb;
  op->arg = arg;
  op->nreplies = nreplies;
  op->replies = nreplies <= 1 ? &op->one : calloc(nreplies, sizeof(*op->replies));
  if (op->replies == NULL) {
    free(op);
    return NULL;
  }
  gw_dreq_init(&op->q, &r->pool, timeout_ms);
  if (r->pool.idle && r->pool.wait_head == NULL && r->finder == NULL) { /* the common case: straight onto an idle connection, no copy */
    send_on((conn_t *)gw_dpool_idle_pop(&r->pool), op, cmd, len);
    return op;
  }
  if (gw_buf_append(&op->cmd, cmd, len) < 0) {
    op_free(op);
    return NULL;
  }
  if (gw_dpool_is_down(&r->pool) && r->pool.n == 0)
    gw_dreq_fail_later(&op->q, gw_err(GW_ERR_CONNECT, proto.down));
  else
    dispatch(r, op);
  return op;
}

void gw_redis_cancel(gw_redis_op_t *op)
{
  gw_redis_t *r = (gw_redis_t *)op->q.pool; /* a router's operation begins with a gw_dreq_t too */
  if (r->router) {
    r->router->cancel(op);
    return;
  }
  gw_dreq_unwait(&op->q);
  if (op->q.conn) conn_close((conn_t *)op->q.conn); /* an unread reply: never reused */
  op_free(op);
}

/* -- subscribers ------------------------------------------------------------------ */

static void sub_connect(gw_redis_sub_t *s)
{
  gw_err_t err;
  if (s->r->finder && !s->r->have_addr) { /* ask first; try again after a pause */
    s->r->finder->find(s->r->found);
    sub_lost(s, gw_err(GW_ERR_CONNECT, "waiting for the sentinels to name the master"));
    return;
  }
  conn_t *c = conn_open(s->r, s, &err);
  if (c == NULL) {
    sub_lost(s, err);
    return;
  }
  s->conn = c;
  if (gw_buf_append(&c->dc.out, s->cmd.data, s->cmd.len) < 0) {
    conn_fail(c, gw_err(GW_ERR_NOMEM, "out of memory"));
    return;
  }
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  sub_connect(arg);
}

static void sub_lost(gw_redis_sub_t *s, gw_err_t err)
{
  s->conn = NULL;
  s->on_state(err, s->arg);
  s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : GW_DPOOL_BACKOFF_FIRST_MS;
  if (s->backoff_ms > GW_DPOOL_BACKOFF_MAX_MS) s->backoff_ms = GW_DPOOL_BACKOFF_MAX_MS;
  struct timeval tv = {s->backoff_ms / 1000, (s->backoff_ms % 1000) * 1000};
  evtimer_add(&s->retry, &tv);
}

gw_redis_sub_t *gw_redis_subscribe(gw_redis_t *r, const char *cmd, size_t len, gw_redis_message_cb on_message,
                                   gw_redis_state_cb on_state, void *arg)
{
  if (r->router) r = r->router->subscriber(r->routed);
  gw_redis_sub_t *s = calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  s->r = r;
  s->on_message = on_message;
  s->on_state = on_state;
  s->arg = arg;
  if (gw_buf_append(&s->cmd, cmd, len) < 0) {
    free(s);
    return NULL;
  }
  evtimer_assign(&s->retry, r->pool.base, on_retry, s);
  event_active(&s->retry, EV_TIMEOUT, 0); /* connect from the loop */
  return s;
}

void gw_redis_subscriber_free(gw_redis_sub_t *s)
{
  if (s->in_callback) {
    s->dead = 1;
    return;
  }
  event_del(&s->retry);
  if (s->conn) {
    conn_t *c = s->conn;
    c->sub = NULL;
    conn_close(c);
  }
  gw_buf_dispose(&s->cmd);
  free(s);
}

/* -- a found address ------------------------------------------------------------ */

/* Once, and one command (a batch may have run in part). */
static int may_fail_over(const gw_redis_op_t *op, int not_run)
{
  return !op->retried && op->nreplies == 1 && op->got == 0 && op->cmd.len > 0 &&
         (not_run || gw_redis_commands_read_only(op->cmd.data, op->cmd.len));
}

void gw_redis_found(gw_redis_t *r, const gw_sockaddr_t *sa, socklen_t len, const char *addr, const char *why)
{
  if (len != r->pool.salen || memcmp(sa, &r->pool.sa, len) != 0) {
    if (r->pool.salen) gw_log_notice("redis %s: master is now %s (%s)", r->addr, addr, why);
    gw_dpool_set_addr(&r->pool, sa, len);
    r->epoch++;
    while (r->pool.idle) conn_close((conn_t *)r->pool.idle);
  }
  r->have_addr = 1;
  while (r->pool.wait_head && (r->pool.idle || r->pool.n < r->pool.max))
    dispatch(r, (gw_redis_op_t *)gw_dpool_next_waiter(&r->pool));
}

void gw_redis_not_found(gw_redis_t *r, gw_err_t err)
{
  gw_dpool_fail_waiters(&r->pool, err);
}

/* The address is asked for again before the next command; connections to
 * the one we had close as they come back. */
static void lose_addr(gw_redis_t *r)
{
  if (!r->have_addr) return;
  r->have_addr = 0;
  r->epoch++;
  while (r->pool.idle) conn_close((conn_t *)r->pool.idle);
}

/* -- the client ------------------------------------------------------------------ */

/* A client of p; its address parsed from p->addr unless a finder gives it. */
static gw_redis_t *client_new(struct event_base *base, const gw_redis_params_t *p, int parse, char *err, size_t errlen)
{
  gw_redis_t *r = calloc(1, sizeof(*r));
  if (r == NULL || (r->addr = strdup(p->addr)) == NULL ||
      (p->password && (r->password = strdup(p->password)) == NULL)) {
    gw_redis_free(r);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (gw_dpool_init(&r->pool, base, &proto, parse ? p->addr : NULL, p->pool, err, errlen) < 0) {
    gw_redis_free(r);
    return NULL;
  }
  r->db = p->db;
  return r;
}

gw_redis_t *gw_redis_new(struct event_base *base, const gw_redis_params_t *p, char *err, size_t errlen)
{
  return client_new(base, p, 1, err, errlen);
}

gw_redis_t *gw_redis_new_found(struct event_base *base, const gw_redis_params_t *p, const gw_redis_finder_t *finder,
                               void *state, char *err, size_t errlen)
{
  gw_redis_t *r = client_new(base, p, 0, err, errlen);
  if (r) {
    r->finder = finder;
    r->found = state;
  }
  return r;
}

void gw_redis_free(gw_redis_t *r)
{
  if (r == NULL) return;
  while (r->pool.idle) conn_close((conn_t *)r->pool.idle);
  if (r->finder) r->finder->free(r->found);
  if (r->router) r->router->free(r->routed);
  free(r->addr);
  free(r->password);
  free(r);
}

gw_redis_t *gw_redis_new_router(struct event_base *base, const char *addr, const gw_redis_router_t *router, void *state)
{
  char err[8];
  gw_redis_t *r = calloc(1, sizeof(*r));
  if (r == NULL || gw_dpool_init(&r->pool, base, router->proto, NULL, 1, err, sizeof(err)) < 0 ||
      (r->addr = strdup(addr)) == NULL) {
    free(r);
    return NULL;
  }
  r->router = router;
  r->routed = state;
  return r;
}

gw_dpool_t *gw_redis_pool(gw_redis_t *r)
{
  return &r->pool;
}

const char *gw_redis_addr(const gw_redis_t *r)
{
  return r->addr;
}
