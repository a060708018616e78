/* redis.c - the Redis client (redis.h): connections per address on the
 * worker's loop, RESP replies parsed by hiredis's reader.
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
 * The reader builds this module's reply objects (bounded array sizes and
 * buffered bytes, so a hostile server cannot make us allocate without limit).
 *
 * A dead server: a failed connect marks the address down for a pause that
 * doubles from 100 ms to 2 s; operations during the pause fail at once
 * (GW_ERR_CONNECT), and the first one after it tries again. An idle pooled
 * connection keeps its read event armed, so a server that closes it (a
 * restart) is noticed and the connection dropped before anyone uses it.
 *
 * Sentinel ("sentinel:NAME@host:port,..."): the master's address is asked
 * of the sentinels (SENTINEL get-master-addr-by-name, each in turn) before
 * the first connect and again whenever the master is lost (a failed or
 * broken connection, a -READONLY answer); a subscription to +switch-master
 * on every sentinel moves the client at once when they promote a replica.
 * Connections to an older master are dropped as they come back. A command
 * is sent again, once, to the new master only when it cannot have run on
 * the old one (its connect failed, or the old master answered -READONLY)
 * or when it only reads; any other write fails to its caller.
 *
 * Cluster ("cluster:host:port,..."): a client per node, and the slot map
 * (CLUSTER SLOTS, asked of the nodes in turn) choosing one for each call
 * by the hash slot of its keys (all keys of one call must share a slot,
 * as Redis requires). A -MOVED answer updates the map, asks for a new one
 * and sends the call to the named node; -ASK sends it there once, after
 * ASKING. A node that cannot be reached makes the map be asked for again
 * before the call is sent, once more. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <hiredis/read.h>

#include "addr.h"
#include "log.h"
#include "redis.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 2000

typedef struct conn_s {
  gw_redis_t *r;
  struct conn_s *next_idle;
  int fd;
  struct event rev, wev;
  redisReader *reader;
  gw_buf_t out;             /* bytes to write; out_off already written */
  size_t out_off;
  int connecting;
  int setup_replies;        /* replies to AUTH / SELECT still to come */
  gw_redis_op_t *op;        /* in flight, or NULL: idle */
  gw_redis_sub_t *sub;      /* a subscriber's connection (outside the pool) */
  unsigned epoch;           /* the client's epoch (master) it was opened for */
} conn_t;

struct gw_redis_op_s {
  gw_redis_t *r;
  gw_redis_op_t *next, *prev; /* in the waiting line */
  int queued, retried;
  gw_redis_op_t *inner;       /* cluster: the call on a node's client */
  int slot, redirects;        /* cluster: the keys' slot (-1: none) */
  conn_t *conn;
  struct event timer, later;
  int has_timer, has_later;
  gw_buf_t cmd;
  size_t nreplies, got;
  gw_redis_reply_t **replies; /* &one for a single command */
  gw_redis_reply_t *one;
  gw_err_t err;
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
  struct event_base *base;
  char *addr;
  gw_sockaddr_t sa;
  socklen_t salen;
  int db;
  char *password;
  int pool, nconns;
  conn_t *idle;             /* stack of idle connections */
  gw_redis_op_t *wait_head, *wait_tail;
  double down_until_ms;     /* connects fail fast until then */
  int backoff_ms;
  /* Sentinel only (master_name != NULL): sa is the master's while have_master. */
  char *master_name;
  gw_redis_t **sentinels;   /* a client per sentinel */
  gw_redis_sub_t **switch_subs; /* SUBSCRIBE +switch-master on each */
  size_t nsentinels, ask_next, asked;
  gw_redis_op_t *asking;    /* SENTINEL get-master-addr-by-name in flight */
  int have_master;
  unsigned epoch;           /* bumped when the master changes */
  /* Cluster only (nodes != NULL). */
  gw_redis_t **nodes;       /* a client per node met */
  size_t nnodes, slots_next, slots_asked;
  uint16_t *slot_node;      /* GW_REDIS_SLOTS entries: node index + 1, 0: unknown */
  gw_redis_op_t *asking_slots; /* CLUSTER SLOTS in flight */
  int have_slots;
};

#define GW_REDIS_SLOTS 16384
#define MAX_REDIRECTS 5

/* -- replies ------------------------------------------------------------------ */

static gw_redis_reply_t *new_reply(const redisReadTask *t)
{
  gw_redis_reply_t *r = calloc(1, sizeof(*r));
  if (r == NULL) return NULL;
  r->type = t->type;
  if (t->parent) {
    gw_redis_reply_t *p = t->parent->obj;
    p->element[t->idx] = r;
  }
  return r;
}

static void *create_string(const redisReadTask *t, char *str, size_t len)
{
  char *copy = malloc(len + 1);
  if (copy == NULL) return NULL;
  gw_redis_reply_t *r = new_reply(t);
  if (r == NULL) {
    free(copy);
    return NULL;
  }
  memcpy(copy, str, len);
  copy[len] = '\0';
  r->str = copy;
  r->len = len;
  return r;
}

static void *create_array(const redisReadTask *t, int elements)
{
  if (elements < 0 || elements > GW_REDIS_MAX_ELEMENTS) return NULL; /* the reader reports it */
  gw_redis_reply_t **el = calloc(elements > 0 ? (size_t)elements : 1, sizeof(*el));
  if (el == NULL) return NULL;
  gw_redis_reply_t *r = new_reply(t);
  if (r == NULL) {
    free(el);
    return NULL;
  }
  r->element = el;
  r->elements = (size_t)elements;
  return r;
}

static void *create_integer(const redisReadTask *t, long long value)
{
  gw_redis_reply_t *r = new_reply(t);
  if (r) r->integer = value;
  return r;
}

static void *create_nil(const redisReadTask *t)
{
  gw_redis_reply_t *r = new_reply(t);
  if (r) r->type = REDIS_REPLY_NIL; /* the task's type is the bulk's or array's */
  return r;
}

void gw_redis_reply_free(gw_redis_reply_t *r)
{
  if (r == NULL) return;
  for (size_t i = 0; i < r->elements; i++) gw_redis_reply_free(r->element[i]);
  free(r->element);
  free(r->str);
  free(r);
}

static void free_object(void *obj)
{
  gw_redis_reply_free(obj);
}

static redisReplyObjectFunctions reply_fns = {create_string, create_array, create_integer, create_nil, free_object};

void *gw_redis_reader_new(void)
{
  return redisReaderCreateWithFunctions(&reply_fns);
}

void gw_redis_reader_free(void *reader)
{
  if (reader) redisReaderFree(reader);
}

int gw_redis_reader_feed(void *reader, const char *data, size_t len)
{
  redisReader *rd = reader;
  if (rd->err) return -1;
  if (rd->len - rd->pos + len > GW_REDIS_MAX_BUFFERED) return -1;
  return redisReaderFeed(rd, data, len) == REDIS_OK ? 0 : -1;
}

int gw_redis_reader_next(void *reader, gw_redis_reply_t **out, const char **err)
{
  redisReader *rd = reader;
  void *reply = NULL;
  *out = NULL;
  if (redisReaderGetReply(rd, &reply) != REDIS_OK || rd->err) {
    if (reply) gw_redis_reply_free(reply);
    *err = rd->errstr[0] ? rd->errstr : "protocol error";
    return -1;
  }
  if (reply == NULL) return 0;
  *out = reply;
  return 1;
}

/* -- commands ------------------------------------------------------------------ */

static int append_len(gw_buf_t *b, char kind, size_t n)
{
  char tmp[32];
  char *p = tmp + sizeof(tmp);
  *--p = '\n';
  *--p = '\r';
  do {
    *--p = (char)('0' + n % 10);
    n /= 10;
  } while (n);
  *--p = kind;
  return gw_buf_append(b, p, (size_t)(tmp + sizeof(tmp) - p));
}

int gw_redis_append_array(gw_buf_t *b, size_t argc)
{
  return append_len(b, '*', argc);
}

int gw_redis_append_bulk(gw_buf_t *b, const char *s, size_t len)
{
  if (append_len(b, '$', len) < 0 || gw_buf_append(b, s, len) < 0) return -1;
  return gw_buf_append(b, "\r\n", 2);
}

/* -- connections ---------------------------------------------------------------- */

static void on_read(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);
static void dispatch(gw_redis_t *r, gw_redis_op_t *op);
static void sub_lost(gw_redis_sub_t *s, gw_err_t err);
static void lose_master(gw_redis_t *r);
static int may_fail_over(const gw_redis_op_t *op, int unsent);

static void free_replies(gw_redis_op_t *op)
{
  for (size_t i = 0; i < op->got; i++) gw_redis_reply_free(op->replies[i]);
  op->got = 0;
}

static void op_free(gw_redis_op_t *op)
{
  if (op->has_timer) event_del(&op->timer);
  if (op->has_later) event_del(&op->later);
  free_replies(op);
  if (op->replies != &op->one) free(op->replies);
  gw_buf_dispose(&op->cmd);
  free(op);
}

static void queue_remove(gw_redis_op_t *op)
{
  gw_redis_t *r = op->r;
  if (op->prev) op->prev->next = op->next;
  else r->wait_head = op->next;
  if (op->next) op->next->prev = op->prev;
  else r->wait_tail = op->prev;
  op->next = op->prev = NULL;
  op->queued = 0;
}

/* Closes c (nothing is called back); the next waiter may open a new one. */
static void conn_close(conn_t *c)
{
  gw_redis_t *r = c->r;
  if (c->op == NULL && c->sub == NULL) { /* idle: take it off the stack */
    for (conn_t **p = &r->idle; *p; p = &(*p)->next_idle)
      if (*p == c) {
        *p = c->next_idle;
        break;
      }
  }
  if (c->op) c->op->conn = NULL;
  if (c->sub) c->sub->conn = NULL;
  event_del(&c->rev);
  event_del(&c->wev);
  close(c->fd);
  redisReaderFree(c->reader);
  gw_buf_dispose(&c->out);
  if (c->sub == NULL) r->nconns--;
  free(c);
  if (r->wait_head && r->nconns < r->pool && gw_now_ms() >= r->down_until_ms) {
    gw_redis_op_t *op = r->wait_head;
    queue_remove(op);
    dispatch(r, op);
  }
}

static void mark_down(gw_redis_t *r)
{
  r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : BACKOFF_FIRST_MS;
  if (r->backoff_ms > BACKOFF_MAX_MS) r->backoff_ms = BACKOFF_MAX_MS;
  r->down_until_ms = gw_now_ms() + r->backoff_ms;
}

static void op_finish(gw_redis_op_t *op, gw_err_t err)
{
  if (op->has_timer) event_del(&op->timer);
  op->cb(err, op->replies, err.kind == GW_OK ? op->got : 0, op->arg);
  op_free(op);
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
  gw_redis_op_t *op = arg;
  (void)fd;
  (void)what;
  op->has_later = 0;
  op_finish(op, op->err);
}

static void finish_later(gw_redis_op_t *op, gw_err_t err)
{
  op->err = err;
  event_assign(&op->later, op->r->base, -1, 0, on_later, op);
  op->has_later = 1;
  event_active(&op->later, EV_TIMEOUT, 0);
}

/* The waiters cannot get a connection while the server is down. */
static void fail_waiters(gw_redis_t *r, gw_err_t err)
{
  while (r->wait_head) {
    gw_redis_op_t *op = r->wait_head;
    queue_remove(op);
    finish_later(op, err);
  }
}

/* c failed: it is closed, and its operation (or subscriber) told. Behind
 * sentinels the master is asked for again, and an operation that may fail
 * over waits for the answer instead. */
static void conn_lost(conn_t *c, gw_err_t err, int not_run)
{
  gw_redis_op_t *op = c->op;
  gw_redis_sub_t *sub = c->sub;
  int connect_failed = c->connecting;
  gw_redis_t *r = c->r;
  int sentinel = r->master_name != NULL && sub == NULL;
  if (sentinel && c->epoch == r->epoch) lose_master(r);
  if (sentinel && op && may_fail_over(op, not_run)) {
    c->op = NULL;
    op->conn = NULL;
    op->retried = 1;
    conn_close(c);
    dispatch(r, op); /* queued until the sentinels answer */
    return;
  }
  if (connect_failed) mark_down(r);
  conn_close(c);
  if (connect_failed) fail_waiters(r, err);
  if (op) op_finish(op, err);
  if (sub) sub_lost(sub, err);
}

static void conn_fail(conn_t *c, gw_err_t err)
{
  conn_lost(c, err, c->connecting);
}

/* Writes what c has to send. A send error fails c's operation only from
 * on_write (now_ok): elsewhere we may be inside gw_redis_exec(), which never
 * calls back, so the write event is armed and reports it from the loop. */
static void flush(conn_t *c, int now_ok)
{
  while (c->out_off < c->out.len) {
    ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      event_add(&c->wev, NULL);
      return;
    }
    if (n < 0 && !now_ok) {
      event_add(&c->wev, NULL);
      return;
    }
    if (n < 0) {
      conn_fail(c, gw_err(GW_ERR_RESET, "connection to redis reset"));
      return;
    }
    c->out_off += (size_t)n;
  }
  c->out.len = c->out_off = 0;
  event_del(&c->wev);
}

static int append_setup(gw_redis_t *r, conn_t *c)
{
  if (r->password) {
    if (gw_redis_append_array(&c->out, 2) < 0 || gw_redis_append_bulk(&c->out, "AUTH", 4) < 0 ||
        gw_redis_append_bulk(&c->out, r->password, strlen(r->password)) < 0)
      return -1;
    c->setup_replies++;
  }
  if (r->db > 0) {
    char db[16];
    int n = snprintf(db, sizeof(db), "%d", r->db);
    if (gw_redis_append_array(&c->out, 2) < 0 || gw_redis_append_bulk(&c->out, "SELECT", 6) < 0 ||
        gw_redis_append_bulk(&c->out, db, (size_t)n) < 0)
      return -1;
    c->setup_replies++;
  }
  return 0;
}

/* A new connection (connecting), its setup commands queued; NULL with *err. */
static conn_t *conn_open(gw_redis_t *r, gw_redis_sub_t *sub, gw_err_t *err)
{
  conn_t *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    *err = gw_err(GW_ERR_NOMEM, "out of memory");
    return NULL;
  }
  c->r = r;
  c->sub = sub;
  c->epoch = r->epoch;
  c->fd = socket(r->sa.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  c->reader = redisReaderCreateWithFunctions(&reply_fns);
  if (c->fd < 0 || c->reader == NULL || append_setup(r, c) < 0) {
    *err = gw_err(GW_ERR_CONNECT, "cannot connect to redis");
    goto fail;
  }
  if (r->sa.sa.sa_family != AF_UNIX) {
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  event_assign(&c->rev, r->base, c->fd, EV_READ | EV_PERSIST, on_read, c);
  event_assign(&c->wev, r->base, c->fd, EV_WRITE | EV_PERSIST, on_write, c);
  if (connect(c->fd, &r->sa.sa, r->salen) == 0 || errno == EINPROGRESS) {
    c->connecting = 1; /* reads start once connected (on_write) */
    event_add(&c->wev, NULL);
    if (sub == NULL) r->nconns++;
    return c;
  }
  *err = errno == ECONNREFUSED || errno == ENOENT ? gw_err(GW_ERR_CONNECT_REFUSED, "connection to redis refused")
                                                  : gw_err(GW_ERR_CONNECT, "cannot connect to redis");
  mark_down(r);
fail:
  if (c->fd >= 0) close(c->fd);
  if (c->reader) redisReaderFree(c->reader);
  gw_buf_dispose(&c->out);
  free(c);
  return NULL;
}

/* op goes out on c. */
static void start(conn_t *c, gw_redis_op_t *op)
{
  c->op = op;
  op->conn = c;
  if (gw_buf_append(&c->out, op->cmd.data, op->cmd.len) < 0) {
    c->op = NULL;
    op->conn = NULL;
    conn_close(c);
    finish_later(op, gw_err(GW_ERR_NOMEM, "out of memory"));
    return;
  }
  if (!c->connecting) flush(c, 0);
}

static void enqueue(gw_redis_t *r, gw_redis_op_t *op)
{
  op->queued = 1;
  op->prev = r->wait_tail;
  if (r->wait_tail) r->wait_tail->next = op;
  else r->wait_head = op;
  r->wait_tail = op;
}

static void discover(gw_redis_t *r);

static void dispatch(gw_redis_t *r, gw_redis_op_t *op)
{
  if (r->master_name && !r->have_master) {
    enqueue(r, op);
    discover(r);
  } else if (r->idle) {
    conn_t *c = r->idle;
    r->idle = c->next_idle;
    c->next_idle = NULL;
    start(c, op);
  } else if (r->nconns < r->pool) {
    gw_err_t err;
    conn_t *c = conn_open(r, NULL, &err);
    if (c == NULL) finish_later(op, err);
    else start(c, op);
  } else {
    enqueue(r, op);
  }
}

/* c answered everything it was sent: back to the pool or the next waiter. */
static void conn_release(conn_t *c)
{
  gw_redis_t *r = c->r;
  c->op = NULL;
  if (c->epoch != r->epoch) { /* to a master that is no more */
    conn_close(c);
  } else if (r->wait_head) {
    gw_redis_op_t *op = r->wait_head;
    queue_remove(op);
    start(c, op);
  } else {
    c->next_idle = r->idle;
    r->idle = c;
  }
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
  conn_t *c = arg;
  (void)what;
  if (c->connecting) {
    int e = 0;
    socklen_t len = sizeof(e);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0) e = errno;
    if (e != 0) {
      conn_fail(c, e == ECONNREFUSED ? gw_err(GW_ERR_CONNECT_REFUSED, "connection to redis refused")
                                     : gw_err(GW_ERR_CONNECT, "cannot connect to redis"));
      return;
    }
    c->connecting = 0;
    event_add(&c->rev, NULL);
    c->r->backoff_ms = 0;
    if (c->sub) {
      c->sub->backoff_ms = 0;
    }
  }
  flush(c, 1);
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

static void on_read(evutil_socket_t fd, short what, void *arg)
{
  conn_t *c = arg;
  (void)what;
  char buf[16384];
  ssize_t n = recv(fd, buf, sizeof(buf), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (c->op == NULL && c->sub == NULL) { /* idle: closed by the server, or a stray byte */
    conn_close(c);
    return;
  }
  if (n == 0) {
    conn_fail(c, gw_err(GW_ERR_CLOSED, "redis closed the connection"));
    return;
  }
  if (n < 0) {
    conn_fail(c, gw_err(GW_ERR_RESET, "connection to redis reset"));
    return;
  }
  if (gw_redis_reader_feed(c->reader, buf, (size_t)n) < 0) {
    conn_fail(c, gw_err(GW_ERR_BAD_RESPONSE, "redis sent an invalid reply"));
    return;
  }
  for (;;) {
    gw_redis_reply_t *reply;
    const char *perr;
    int rc = gw_redis_reader_next(c->reader, &reply, &perr);
    if (rc < 0) {
      gw_log_error("redis %s: invalid reply (%s); connection closed", c->r->addr, perr);
      conn_fail(c, gw_err(GW_ERR_BAD_RESPONSE, "redis sent an invalid reply"));
      return;
    }
    if (rc == 0) return;
    if (c->setup_replies > 0) {
      c->setup_replies--;
      int bad = reply->type == REDIS_REPLY_ERROR;
      if (bad) gw_log_error("redis %s: AUTH or SELECT failed: %s", c->r->addr, reply->str);
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
    gw_redis_op_t *op = c->op;
    if (op == NULL) { /* more replies than commands */
      gw_redis_reply_free(reply);
      conn_close(c);
      return;
    }
    if (reply->type == REDIS_REPLY_ERROR && c->r->master_name && reply->len >= 8 &&
        memcmp(reply->str, "READONLY", 8) == 0) { /* a replica now: the command did not run */
      gw_redis_reply_free(reply);
      conn_lost(c, gw_err(GW_ERR_CLOSED, "redis master became a replica"), 1);
      return;
    }
    op->replies[op->got++] = reply;
    if (op->got < op->nreplies) continue;
    /* Complete. Bytes beyond its replies were never asked for: drop c. */
    redisReader *rd = c->reader;
    if (rd->pos < rd->len || rd->ridx >= 0) {
      c->op = NULL;
      op->conn = NULL;
      conn_close(c);
    } else {
      op->conn = NULL;
      conn_release(c);
    }
    op_finish(op, gw_err_none());
    return; /* c may be in use by someone else now */
  }
}

/* -- operations ------------------------------------------------------------------ */

static void cluster_start(gw_redis_op_t *op);

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
  gw_redis_op_t *op = arg;
  (void)fd;
  (void)what;
  op->has_timer = 0;
  if (op->queued) queue_remove(op);
  if (op->conn) conn_close(op->conn); /* its reply would come unasked for */
  if (op->inner) gw_redis_cancel(op->inner);
  op->inner = NULL;
  if (op->has_later) { /* a failure was about to be delivered: the timeout wins */
    event_del(&op->later);
    op->has_later = 0;
  }
  op_finish(op, gw_err(GW_ERR_TIMEOUT, "redis timed out"));
}

gw_redis_op_t *gw_redis_exec(gw_redis_t *r, const char *cmd, size_t len, size_t nreplies, int timeout_ms,
                             gw_redis_done_cb cb, void *arg)
{
  gw_redis_op_t *op = calloc(1, sizeof(*op));
  if (op == NULL) return NULL;
  op->r = r;
  op->cb = cb;
  op->arg = arg;
  op->nreplies = nreplies;
  op->replies = nreplies <= 1 || r->nodes ? &op->one : calloc(nreplies, sizeof(*op->replies));
  if (op->replies == NULL) {
    free(op);
    return NULL;
  }
  if (timeout_ms > 0) {
    evtimer_assign(&op->timer, r->base, on_timeout, op);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(&op->timer, &tv);
    op->has_timer = 1;
  }
  if (r->nodes) {
    if (gw_buf_append(&op->cmd, cmd, len) < 0) {
      op_free(op);
      return NULL;
    }
    cluster_start(op);
    return op;
  }
  if (r->idle && r->wait_head == NULL && r->master_name == NULL) { /* the common case: straight onto an idle connection, no copy */
    conn_t *c = r->idle;
    r->idle = c->next_idle;
    c->next_idle = NULL;
    c->op = op;
    op->conn = c;
    if (gw_buf_append(&c->out, cmd, len) < 0) {
      c->op = NULL;
      op->conn = NULL;
      conn_close(c);
      finish_later(op, gw_err(GW_ERR_NOMEM, "out of memory"));
    } else {
      flush(c, 0);
    }
    return op;
  }
  if (gw_buf_append(&op->cmd, cmd, len) < 0) {
    op_free(op);
    return NULL;
  }
  if (gw_now_ms() < r->down_until_ms && r->nconns == 0)
    finish_later(op, gw_err(GW_ERR_CONNECT, "redis is down (reconnecting with backoff)"));
  else
    dispatch(r, op);
  return op;
}

void gw_redis_cancel(gw_redis_op_t *op)
{
  if (op->inner) gw_redis_cancel(op->inner);
  if (op->queued) queue_remove(op);
  if (op->conn) conn_close(op->conn); /* an unread reply: never reused */
  op_free(op);
}

/* -- subscribers ------------------------------------------------------------------ */

static void sub_connect(gw_redis_sub_t *s)
{
  gw_err_t err;
  if (s->r->master_name && !s->r->have_master) { /* ask first; try again after a pause */
    discover(s->r);
    sub_lost(s, gw_err(GW_ERR_CONNECT, "waiting for the sentinels to name the master"));
    return;
  }
  conn_t *c = conn_open(s->r, s, &err);
  if (c == NULL) {
    sub_lost(s, err);
    return;
  }
  s->conn = c;
  if (gw_buf_append(&c->out, s->cmd.data, s->cmd.len) < 0) {
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
  s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : BACKOFF_FIRST_MS;
  if (s->backoff_ms > BACKOFF_MAX_MS) s->backoff_ms = BACKOFF_MAX_MS;
  struct timeval tv = {s->backoff_ms / 1000, (s->backoff_ms % 1000) * 1000};
  evtimer_add(&s->retry, &tv);
}

gw_redis_sub_t *gw_redis_subscribe(gw_redis_t *r, const char *cmd, size_t len, gw_redis_message_cb on_message,
                                   gw_redis_state_cb on_state, void *arg)
{
  if (r->nodes) r = r->nodes[0]; /* a cluster sends every PUBLISH to every node */
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
  evtimer_assign(&s->retry, r->base, on_retry, s);
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
    c->r->nconns++; /* conn_close counts it out of the pool */
    conn_close(c);
  }
  gw_buf_dispose(&s->cmd);
  free(s);
}

/* -- sentinel ---------------------------------------------------------------------- */

/* Commands that only read: safe to send again after a broken connection. */
static int is_read_only(const gw_buf_t *cmd)
{
  static const char *const reads[] = {"GET", "MGET", "EXISTS", "TTL", "PTTL", "TYPE", "STRLEN", "GETRANGE",
                                      "HGET", "HMGET", "HGETALL", "HEXISTS", "HLEN", "HKEYS", "HVALS",
                                      "LRANGE", "LLEN", "LINDEX", "SMEMBERS", "SISMEMBER", "SCARD",
                                      "ZRANGE", "ZSCORE", "ZCARD", "ZRANK", "ZCOUNT", "PING"};
  /* "*N\r\n$L\r\nNAME\r\n" */
  const char *p = memchr(cmd->data, '\n', cmd->len), *end = cmd->data + cmd->len;
  if (p == NULL || ++p >= end || *p != '$') return 0;
  const char *name = memchr(p, '\n', (size_t)(end - p));
  if (name == NULL || ++name >= end) return 0;
  const char *cr = memchr(name, '\r', (size_t)(end - name));
  if (cr == NULL) return 0;
  size_t n = (size_t)(cr - name);
  for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
    if (strlen(reads[i]) == n && strncasecmp(reads[i], name, n) == 0) return 1;
  return 0;
}

/* Once, and one command (a batch may have run in part). */
static int may_fail_over(const gw_redis_op_t *op, int not_run)
{
  return !op->retried && op->nreplies == 1 && op->got == 0 && op->cmd.len > 0 &&
         (not_run || is_read_only(&op->cmd));
}

static void set_master(gw_redis_t *r, const char *ip, const char *port, const char *why)
{
  char addr[128];
  snprintf(addr, sizeof(addr), strchr(ip, ':') ? "[%s]:%s" : "%s:%s", ip, port);
  gw_sockaddr_t sa;
  socklen_t len = gw_addr_parse_fixed(addr, &sa);
  if (len == 0) {
    gw_log_error("redis %s: sentinel named an invalid master address %s", r->addr, addr);
    return;
  }
  if (len != r->salen || memcmp(&sa, &r->sa, len) != 0) {
    if (r->salen) gw_log_notice("redis %s: master is now %s (%s)", r->addr, addr, why);
    r->sa = sa;
    r->salen = len;
    r->backoff_ms = 0;
    r->down_until_ms = 0;
    r->epoch++;
    while (r->idle) conn_close(r->idle);
  }
  r->have_master = 1;
  while (r->wait_head && (r->idle || r->nconns < r->pool)) {
    gw_redis_op_t *op = r->wait_head;
    queue_remove(op);
    dispatch(r, op);
  }
}

/* The master is asked for again before the next command; connections to
 * the one we had close as they come back. */
static void lose_master(gw_redis_t *r)
{
  if (!r->have_master) return;
  r->have_master = 0;
  r->epoch++;
  while (r->idle) conn_close(r->idle);
}

static void on_master_addr(gw_err_t err, gw_redis_reply_t **replies, size_t n, void *arg)
{
  gw_redis_t *r = arg;
  const gw_redis_reply_t *a = n == 1 ? replies[0] : NULL;
  r->asking = NULL;
  if (err.kind == GW_OK && a && a->type == REDIS_REPLY_ARRAY && a->elements == 2 &&
      a->element[0]->type == REDIS_REPLY_STRING && a->element[1]->type == REDIS_REPLY_STRING) {
    r->asked = 0;
    set_master(r, a->element[0]->str, a->element[1]->str, "sentinel");
    return;
  }
  gw_log_error("redis %s: sentinel %s: %s", r->addr, gw_redis_addr(r->sentinels[r->ask_next % r->nsentinels]),
               err.kind != GW_OK ? err.msg : a && a->type == REDIS_REPLY_ERROR ? a->str : "no master of that name");
  r->ask_next++;
  if (++r->asked < r->nsentinels) {
    discover(r);
    return;
  }
  r->asked = 0;
  mark_down(r);
  fail_waiters(r, gw_err(GW_ERR_CONNECT, "no redis sentinel named a master"));
}

/* Asks the next sentinel for the master (one question at a time). */
static void discover(gw_redis_t *r)
{
  if (r->asking) return;
  gw_buf_t cmd = {0};
  if (gw_redis_append_array(&cmd, 3) == 0 && gw_redis_append_bulk(&cmd, "SENTINEL", 8) == 0 &&
      gw_redis_append_bulk(&cmd, "get-master-addr-by-name", 23) == 0 &&
      gw_redis_append_bulk(&cmd, r->master_name, strlen(r->master_name)) == 0)
    r->asking = gw_redis_exec(r->sentinels[r->ask_next % r->nsentinels], cmd.data, cmd.len, 1, 1000,
                              on_master_addr, r);
  gw_buf_dispose(&cmd);
  if (r->asking == NULL) fail_waiters(r, gw_err(GW_ERR_NOMEM, "out of memory"));
}

/* "+switch-master NAME old-ip old-port new-ip new-port" */
static void on_switch_master(gw_redis_reply_t *m, void *arg)
{
  gw_redis_t *r = arg;
  if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 || m->element[2]->type != REDIS_REPLY_STRING) return;
  char name[256], old_ip[64], old_port[8], ip[64], port[8];
  if (sscanf(m->element[2]->str, "%255s %63s %7s %63s %7s", name, old_ip, old_port, ip, port) == 5 &&
      strcmp(name, r->master_name) == 0)
    set_master(r, ip, port, "+switch-master");
}

static void on_switch_state(gw_err_t err, void *arg)
{
  (void)err;
  (void)arg;
}

static gw_redis_t *sentinel_new(gw_redis_t *r, const char *spec, char *err, size_t errlen)
{
  const char *at = strchr(spec, '@');
  if (at == NULL || at == spec || at[1] == '\0') {
    snprintf(err, errlen, "redis sentinel address must be \"sentinel:NAME@host:port,...\", got \"sentinel:%s\"", spec);
    return NULL;
  }
  r->master_name = strndup(spec, (size_t)(at - spec));
  for (const char *p = at + 1; p; p = strchr(p, ',')) {
    p += *p == ',';
    r->nsentinels++;
  }
  r->sentinels = calloc(r->nsentinels, sizeof(*r->sentinels));
  r->switch_subs = calloc(r->nsentinels, sizeof(*r->switch_subs));
  if (r->master_name == NULL || r->sentinels == NULL || r->switch_subs == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  gw_buf_t cmd = {0};
  if (gw_redis_append_array(&cmd, 2) < 0 || gw_redis_append_bulk(&cmd, "SUBSCRIBE", 9) < 0 ||
      gw_redis_append_bulk(&cmd, "+switch-master", 14) < 0) {
    gw_buf_dispose(&cmd);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  const char *p = at + 1;
  for (size_t i = 0; i < r->nsentinels; i++) {
    const char *comma = strchr(p, ',');
    char *one = strndup(p, comma ? (size_t)(comma - p) : strlen(p));
    gw_redis_params_t sp = {one, 0, NULL, 1};
    r->sentinels[i] = one ? gw_redis_new(r->base, &sp, err, errlen) : NULL;
    free(one);
    if (r->sentinels[i] == NULL ||
        (r->switch_subs[i] = gw_redis_subscribe(r->sentinels[i], cmd.data, cmd.len, on_switch_master,
                                                on_switch_state, r)) == NULL) {
      if (one == NULL || r->sentinels[i]) snprintf(err, errlen, "out of memory");
      gw_buf_dispose(&cmd);
      return NULL;
    }
    p = comma ? comma + 1 : NULL;
  }
  gw_buf_dispose(&cmd);
  return r;
}

/* -- cluster ------------------------------------------------------------------------ */

/* CRC16-CCITT (XModem), as Redis Cluster hashes keys (cluster spec, appendix A). */
static unsigned key_hash_slot(const char *key, size_t len)
{
  const char *open = memchr(key, '{', len); /* a {hash tag}: only it is hashed, when not empty */
  if (open) {
    const char *close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
    if (close && close > open + 1) {
      key = open + 1;
      len = (size_t)(close - key);
    }
  }
  unsigned crc = 0;
  for (size_t i = 0; i < len; i++) {
    crc ^= (unsigned)(unsigned char)key[i] << 8;
    for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  }
  return (crc & 0xffff) % GW_REDIS_SLOTS;
}

/* One "$len\r\nbytes\r\n" of a command this module encoded. */
static const char *next_bulk(const char *p, const char *end, const char **s, size_t *n)
{
  if (p >= end || *p != '$') return NULL;
  *n = (size_t)strtoul(p + 1, NULL, 10);
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  if (nl == NULL || (size_t)(end - nl - 1) < *n + 2) return NULL;
  *s = nl + 1;
  return *s + *n + 2;
}

/* The key is the first argument, the fourth of EVAL/EVALSHA when it has
 * keys, none of the commands without. */
int gw_redis_commands_slot(const char *p, size_t len)
{
  static const char *const keyless[] = {"MULTI", "EXEC", "DISCARD", "PING", "ECHO", "INFO", "TIME", "PUBLISH",
                                        "SCRIPT", "CLUSTER", "ASKING", "DBSIZE", "COMMAND", "CLIENT", "CONFIG"};
  const char *end = p + len;
  int slot = -1;
  while (p < end && *p == '*') {
    long argc = strtol(p + 1, NULL, 10);
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL || argc < 1) return slot;
    p = nl + 1;
    const char *name, *key = NULL;
    size_t name_len, key_len = 0;
    if ((p = next_bulk(p, end, &name, &name_len)) == NULL) return slot;
    int key_at = 1, is_keyless = 0;
    for (size_t i = 0; i < sizeof(keyless) / sizeof(keyless[0]); i++)
      if (strlen(keyless[i]) == name_len && strncasecmp(keyless[i], name, name_len) == 0) is_keyless = 1;
    if ((name_len == 4 && strncasecmp(name, "EVAL", 4) == 0) || (name_len == 7 && strncasecmp(name, "EVALSHA", 7) == 0))
      key_at = 3;
    for (long i = 1; i < argc; i++) {
      const char *a;
      size_t n;
      if ((p = next_bulk(p, end, &a, &n)) == NULL) return slot;
      if (i == 2 && key_at == 3 && strtol(a, NULL, 10) < 1) is_keyless = 1; /* numkeys 0 */
      if (i == key_at) {
        key = a;
        key_len = n;
      }
    }
    if (is_keyless || key == NULL) continue;
    int s = (int)key_hash_slot(key, key_len);
    if (slot >= 0 && s != slot) return -2;
    slot = s;
  }
  return slot;
}

/* The client of the node at addr ("ip:port"), made when first met; -1 when out of memory or a bad address. */
static int node_index(gw_redis_t *r, const char *addr)
{
  for (size_t i = 0; i < r->nnodes; i++)
    if (strcmp(gw_redis_addr(r->nodes[i]), addr) == 0) return (int)i;
  if (r->nnodes >= 1000) return -1;
  gw_redis_t **more = realloc(r->nodes, (r->nnodes + 1) * sizeof(*more));
  if (more == NULL) return -1;
  r->nodes = more;
  char err[200];
  gw_redis_params_t p = {addr, 0, r->password, r->pool};
  if ((r->nodes[r->nnodes] = gw_redis_new(r->base, &p, err, sizeof(err))) == NULL) {
    gw_log_error("redis %s: node %s: %s", r->addr, addr, err);
    return -1;
  }
  return (int)r->nnodes++;
}

static void ask_slots(gw_redis_t *r);
static void cluster_send(gw_redis_op_t *op, int node, int asking);

/* Ends a cluster call with n replies of a node's call (the node's client frees them). */
static void cluster_finish(gw_redis_op_t *op, gw_err_t err, gw_redis_reply_t **replies, size_t n)
{
  if (op->has_timer) event_del(&op->timer);
  op->has_timer = 0;
  op->cb(err, replies, n, op->arg);
  op_free(op);
}

/* Sends op to the node its slot maps to, or waits for the map. */
static void cluster_dispatch(gw_redis_op_t *op)
{
  gw_redis_t *r = op->r;
  int node = op->slot >= 0 ? (int)r->slot_node[op->slot] - 1 : 0;
  if (!r->have_slots || node < 0) {
    enqueue(r, op);
    ask_slots(r);
    return;
  }
  cluster_send(op, node, 0);
}

static void cluster_start(gw_redis_op_t *op)
{
  op->slot = gw_redis_commands_slot(op->cmd.data, op->cmd.len);
  if (op->slot == -2) {
    finish_later(op, gw_err(GW_ERR_BAD_NAME, "redis cluster: the keys of one call must hash to one slot "
                                             "(give them a common {hash tag})"));
    return;
  }
  cluster_dispatch(op);
}

/* "MOVED 3999 127.0.0.1:6381" or "ASK ...": the slot and the address; 0 if reply is neither. */
static int redirect_of(const gw_redis_reply_t *reply, int *ask, int *slot, char *addr, size_t size)
{
  if (reply->type != REDIS_REPLY_ERROR) return 0;
  char kind[8], where[200];
  if (sscanf(reply->str, "%7s %d %199s", kind, slot, where) != 3 || *slot < 0 || *slot >= GW_REDIS_SLOTS) return 0;
  if (strcmp(kind, "MOVED") != 0 && strcmp(kind, "ASK") != 0) return 0;
  *ask = kind[0] == 'A';
  if (where[0] == ':') { /* an empty host: the node's own, which we only know as the sender */
    return 0;
  }
  snprintf(addr, size, "%s", where);
  return 1;
}

static void on_node_done(gw_err_t err, gw_redis_reply_t **replies, size_t n, void *arg)
{
  gw_redis_op_t *op = arg;
  gw_redis_t *r = op->r;
  int asked = op->redirects < 0; /* ASKING's +OK comes first */
  op->inner = NULL;
  if (asked) {
    op->redirects = -op->redirects;
    if (n > 0) {
      replies++;
      n--;
    }
  }
  if (err.kind != GW_OK) {
    if (!op->retried && (gw_err_is_connect_failure(err.kind) || err.kind == GW_ERR_CLOSED || err.kind == GW_ERR_RESET) &&
        (op->slot < 0 || may_fail_over(op, gw_err_is_connect_failure(err.kind)))) {
      op->retried = 1; /* the node is gone: the map may have moved on */
      r->have_slots = 0;
      cluster_dispatch(op);
      return;
    }
    cluster_finish(op, err, replies, 0);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    int ask, slot;
    char addr[200];
    if (!redirect_of(replies[i], &ask, &slot, addr, sizeof(addr))) continue;
    if (op->redirects >= MAX_REDIRECTS) break;
    int node = node_index(r, addr);
    if (node < 0) break;
    op->redirects++;
    if (!ask) {
      r->slot_node[slot] = (uint16_t)(node + 1);
      ask_slots(r); /* the rest of the map has likely moved too */
    }
    cluster_send(op, node, ask);
    return;
  }
  cluster_finish(op, err, replies, n);
}

static void cluster_send(gw_redis_op_t *op, int node, int asking)
{
  static const char asking_cmd[] = "*1\r\n$6\r\nASKING\r\n";
  gw_buf_t b = {0};
  const char *cmd = op->cmd.data;
  size_t len = op->cmd.len;
  if (asking) {
    if (gw_buf_append(&b, asking_cmd, sizeof(asking_cmd) - 1) < 0 || gw_buf_append(&b, cmd, len) < 0) {
      gw_buf_dispose(&b);
      finish_later(op, gw_err(GW_ERR_NOMEM, "out of memory"));
      return;
    }
    cmd = b.data;
    len = b.len;
    op->redirects = -op->redirects; /* marks the ASKING reply to skip */
  }
  op->inner = gw_redis_exec(op->r->nodes[node], cmd, len, op->nreplies + (asking ? 1 : 0), 0, on_node_done, op);
  gw_buf_dispose(&b);
  if (op->inner == NULL) finish_later(op, gw_err(GW_ERR_NOMEM, "out of memory"));
}

/* CLUSTER SLOTS: [[start, end, [ip, port, id...], replicas...], ...] */
static int read_slots(gw_redis_t *r, const gw_redis_reply_t *a)
{
  if (a->type != REDIS_REPLY_ARRAY) return -1;
  memset(r->slot_node, 0, GW_REDIS_SLOTS * sizeof(*r->slot_node));
  for (size_t i = 0; i < a->elements; i++) {
    const gw_redis_reply_t *e = a->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER || e->element[2]->type != REDIS_REPLY_ARRAY ||
        e->element[2]->elements < 2)
      return -1;
    long long from = e->element[0]->integer, to = e->element[1]->integer;
    const gw_redis_reply_t *ip = e->element[2]->element[0], *port = e->element[2]->element[1];
    if (from < 0 || to >= GW_REDIS_SLOTS || from > to || ip->type != REDIS_REPLY_STRING || ip->len == 0 ||
        port->type != REDIS_REPLY_INTEGER)
      return -1;
    char addr[200];
    snprintf(addr, sizeof(addr), strchr(ip->str, ':') ? "[%s]:%lld" : "%s:%lld", ip->str, port->integer);
    int node = node_index(r, addr);
    if (node < 0) return -1;
    for (long long s = from; s <= to; s++) r->slot_node[s] = (uint16_t)(node + 1);
  }
  return 0;
}

static void on_slots(gw_err_t err, gw_redis_reply_t **replies, size_t n, void *arg)
{
  gw_redis_t *r = arg;
  gw_redis_t *asked = r->nodes[r->slots_next % r->nnodes];
  r->asking_slots = NULL;
  if (err.kind == GW_OK && n == 1 && read_slots(r, replies[0]) == 0) {
    r->have_slots = 1;
    r->slots_asked = 0;
    while (r->wait_head) {
      gw_redis_op_t *op = r->wait_head;
      queue_remove(op);
      cluster_dispatch(op);
      if (!r->have_slots) return; /* a slot still unknown: asked again */
    }
    return;
  }
  gw_log_error("redis %s: CLUSTER SLOTS from %s: %s", r->addr, gw_redis_addr(asked),
               err.kind != GW_OK ? err.msg : n == 1 && replies[0]->type == REDIS_REPLY_ERROR ? replies[0]->str : "not a slot map");
  r->slots_next++;
  if (++r->slots_asked < r->nnodes) {
    ask_slots(r);
    return;
  }
  r->slots_asked = 0;
  fail_waiters(r, gw_err(GW_ERR_CONNECT, "no redis cluster node answered with its slots"));
}

/* Asks the next node for the slot map (one question at a time). */
static void ask_slots(gw_redis_t *r)
{
  static const char cmd[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
  if (r->asking_slots) return;
  r->asking_slots = gw_redis_exec(r->nodes[r->slots_next % r->nnodes], cmd, sizeof(cmd) - 1, 1, 1000, on_slots, r);
  if (r->asking_slots == NULL) fail_waiters(r, gw_err(GW_ERR_NOMEM, "out of memory"));
}

static gw_redis_t *cluster_new(gw_redis_t *r, const char *seeds, char *err, size_t errlen)
{
  r->slot_node = calloc(GW_REDIS_SLOTS, sizeof(*r->slot_node));
  if (r->slot_node == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  for (const char *p = seeds; p;) {
    const char *comma = strchr(p, ',');
    char *one = strndup(p, comma ? (size_t)(comma - p) : strlen(p));
    gw_sockaddr_t sa;
    if (one == NULL || gw_addr_parse_fixed(one, &sa) == 0 || node_index(r, one) < 0) {
      snprintf(err, errlen, "redis cluster node must be \"IP:port\" or \"localhost:port\", got \"%s\"", one ? one : "");
      free(one);
      return NULL;
    }
    free(one);
    p = comma ? comma + 1 : NULL;
  }
  return r;
}

/* -- the client ------------------------------------------------------------------ */

gw_redis_t *gw_redis_new(struct event_base *base, const gw_redis_params_t *p, char *err, size_t errlen)
{
  gw_redis_t *r = calloc(1, sizeof(*r));
  if (r == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  r->base = base;
  r->password = p->password ? strdup(p->password) : NULL;
  r->pool = p->pool > 0 ? p->pool : 1;
  if (strncmp(p->addr, "sentinel:", 9) == 0 || strncmp(p->addr, "cluster:", 8) == 0) {
    if ((p->addr[0] == 's' ? sentinel_new(r, p->addr + 9, err, errlen) : cluster_new(r, p->addr + 8, err, errlen)) == NULL) {
      gw_redis_free(r);
      return NULL;
    }
  } else if ((r->salen = gw_addr_parse_fixed(p->addr, &r->sa)) == 0) {
    snprintf(err, errlen, "redis address must be \"IP:port\", \"localhost:port\" or \"unix:/path\", got \"%s\"",
             p->addr);
    gw_redis_free(r);
    return NULL;
  }
  r->addr = strdup(p->addr);
  r->db = p->db;
  return r;
}

void gw_redis_free(gw_redis_t *r)
{
  if (r == NULL) return;
  while (r->idle) conn_close(r->idle);
  if (r->asking) gw_redis_cancel(r->asking);
  for (size_t i = 0; i < r->nsentinels; i++) {
    if (r->switch_subs && r->switch_subs[i]) gw_redis_subscriber_free(r->switch_subs[i]);
    if (r->sentinels) gw_redis_free(r->sentinels[i]);
  }
  free(r->switch_subs);
  free(r->sentinels);
  free(r->master_name);
  if (r->asking_slots) gw_redis_cancel(r->asking_slots);
  for (size_t i = 0; i < r->nnodes; i++) gw_redis_free(r->nodes[i]);
  free(r->nodes);
  free(r->slot_node);
  free(r->addr);
  free(r->password);
  free(r);
}

const char *gw_redis_addr(const gw_redis_t *r)
{
  return r->addr;
}
