/* tarantool.c - the Tarantool client (tarantool.h): connections per address
 * and user on the worker's loop, requests pipelined by sync id.
 *
 * A request goes to the pool's connection with the fewest requests in
 * flight; a new connection is opened (up to pool:) only when every one has
 * PIPELINE_DEPTH in flight, so requests share few connections: the requests
 * made in one loop iteration leave in one send (flush_soon), Tarantool reads
 * them in one read and its replies come back in few (issue #16 measured
 * this against one connection per concurrent request). A connection reads
 * the greeting, sends AUTH (chap-sha1 on the greeting's salt) when a user is
 * set and holds its requests until AUTH is answered. Sockets, connect,
 * sending, backoff and mark-down (requests fail at once while the address
 * is down) are the data clients' core (data_conn.h).
 *
 * Replies are matched by sync. A timed-out or cancelled request's reply is
 * "stale": its connection is retired (takes nothing new) and closed once its
 * remaining requests are answered. A reply whose sync matches nothing (and no
 * stale one is expected) is garbage: the connection is closed, its requests
 * fail. A connection closed while its replies' callbacks run is freed when
 * the read returns (data_conn.c); failures are delivered from a loop event
 * of their own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "data_conn.h"
#include "iproto.h"
#include "log.h"
#include "tarantool.h"

/* Requests in flight on a connection before another is opened: Tarantool
 * serves a connection's requests concurrently (net_msg_max 768), and one
 * connection lets it read a whole batch per read and answer in one write. */
#define PIPELINE_DEPTH 64

enum { ST_GREETING, ST_AUTH, ST_READY }; /* ST_GREETING while connecting too */

typedef struct {
  gw_dconn_t dc;              /* counted: takes new requests; else retired, closed once
                                 its pending requests (dc.head, by sync) are answered */
  int state;
  gw_buf_t held;              /* requests waiting for the greeting / AUTH */
  unsigned stale;             /* replies coming that nobody awaits */
  uint64_t sync, auth_sync;
} conn_t;

struct gw_tnt_op_s {
  gw_dreq_t q;                /* q.id: the request's sync */
  gw_tnt_done_cb cb;
  void *arg;
};

struct gw_tnt_s {
  gw_dpool_t pool;
  char *addr, *user, *password;
};

/* -- operations ---------------------------------------------------------------- */

static void op_finish(gw_tnt_op_t *op, gw_err_t err, uint64_t code, const char *body, size_t len)
{
  gw_dreq_stop(&op->q);
  op->cb(err, code, body, len, op->arg);
  free(op);
}

static void op_fail(gw_dreq_t *q, gw_err_t err)
{
  op_finish((gw_tnt_op_t *)q, err, 0, NULL, 0);
}

/* -- connections ------------------------------------------------------------------ */

static void conn_dispose(gw_dconn_t *dc)
{
  gw_buf_dispose(&((conn_t *)dc)->held);
}

static void conn_retire(conn_t *c)
{
  gw_dconn_uncount(&c->dc);
  if (c->dc.npending == 0) gw_dconn_close(&c->dc);
}

/* c is closed; each of its requests fails with err (from the loop). */
static void conn_fail(gw_dconn_t *dc, gw_err_t err)
{
  if (dc->connecting) gw_dpool_mark_down(dc->pool);
  gw_dconn_uncount(dc);
  while (dc->head) {
    gw_dreq_t *q = dc->head;
    gw_dreq_detach(q);
    gw_dreq_fail_later(q, err);
  }
  gw_dconn_close(dc);
}

static void become_ready(conn_t *c)
{
  c->state = ST_READY;
  if (c->held.len > 0) {
    if (gw_buf_append(&c->dc.out, c->held.data, c->held.len) < 0) {
      conn_fail(&c->dc, gw_err(GW_ERR_NOMEM, "out of memory"));
      return;
    }
    gw_buf_dispose(&c->held);
  }
  gw_dconn_flush(&c->dc, 1);
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
  gw_dconn_t *dc = &c->dc;
  const char *p = dc->in.data + dc->in_off;
  size_t avail = dc->in.len - dc->in_off;
  gw_tnt_t *t = (gw_tnt_t *)dc->pool;
  if (c->state == ST_GREETING) {
    if (avail < GW_IPROTO_GREETING_SIZE) return 0;
    unsigned char salt[64];
    size_t saltlen;
    if (gw_iproto_greeting(p, avail, salt, &saltlen) < 0) {
      gw_log_error("tarantool %s: not a Tarantool greeting; connection closed", t->addr);
      conn_fail(dc, gw_err(GW_ERR_BAD_RESPONSE, "tarantool sent an invalid greeting"));
      return -1;
    }
    dc->in_off += GW_IPROTO_GREETING_SIZE;
    if (t->user == NULL) {
      become_ready(c);
      return dc->closed ? -1 : 1;
    }
    unsigned char scramble[GW_IPROTO_SCRAMBLE_SIZE];
    const char *pw = t->password ? t->password : "";
    gw_iproto_scramble(salt, pw, strlen(pw), scramble);
    gw_buf_t body = GW_BUF_INIT;
    c->auth_sync = ++c->sync;
    int rc = gw_iproto_auth_body(&body, t->user, scramble);
    if (rc == 0) rc = gw_iproto_request(&dc->out, GW_IPROTO_AUTH, c->auth_sync, body.data, body.len);
    gw_buf_dispose(&body);
    if (rc < 0) {
      conn_fail(dc, gw_err(GW_ERR_NOMEM, "out of memory"));
      return -1;
    }
    c->state = ST_AUTH;
    gw_dconn_flush(dc, 1);
    return dc->closed ? -1 : 1;
  }
  size_t prefix, plen;
  int rc = gw_iproto_frame(p, avail, &prefix, &plen);
  if (rc == 0 || (rc == 1 && avail - prefix < plen)) return 0;
  gw_iproto_reply_t r;
  if (rc < 0 || gw_iproto_parse(p + prefix, plen, &r) < 0) {
    gw_log_error("tarantool %s: invalid reply; connection closed", t->addr);
    conn_fail(dc, gw_err(GW_ERR_BAD_RESPONSE, "tarantool sent an invalid reply"));
    return -1;
  }
  dc->in_off += prefix + plen;
  if (c->state == ST_AUTH && r.sync == c->auth_sync) {
    if (r.code == 0) {
      become_ready(c);
      return dc->closed ? -1 : 1;
    }
    char msg[256];
    error_message(r.body, r.body_len, msg, sizeof(msg));
    gw_log_error("tarantool %s: AUTH as %s failed: %s", t->addr, t->user, msg);
    conn_fail(dc, gw_err(GW_ERR_CONNECT, "tarantool refused the user or password (see the error log)"));
    return -1;
  }
  gw_dreq_t *q = gw_dconn_find(dc, r.sync);
  if (q == NULL) {
    if (c->stale > 0) { /* a cancelled or timed-out request's */
      c->stale--;
      return 1;
    }
    gw_log_error("tarantool %s: a reply to no request (sync %llu); connection closed", t->addr,
                 (unsigned long long)r.sync);
    conn_fail(dc, gw_err(GW_ERR_BAD_RESPONSE, "tarantool sent an invalid reply"));
    return -1;
  }
  gw_dreq_detach(q);
  op_finish((gw_tnt_op_t *)q, gw_err_none(), r.code, r.body, r.body_len);
  if (!dc->counted && dc->npending == 0) gw_dconn_close(dc);
  return dc->closed ? -1 : 1;
}

static void conn_readable(gw_dconn_t *dc)
{
  while (read_one((conn_t *)dc) > 0) {
  }
}

/* -- requests ---------------------------------------------------------------------- */

/* op no longer awaits its reply: its connection is retired. */
static void drop(gw_tnt_op_t *op)
{
  conn_t *c = (conn_t *)op->q.conn;
  if (c == NULL) return;
  gw_dreq_detach(&op->q);
  c->stale++;
  conn_retire(c);
}

static void op_timed_out(gw_dreq_t *q)
{
  drop((gw_tnt_op_t *)q);
  op_finish((gw_tnt_op_t *)q, gw_err(GW_ERR_TIMEOUT, "tarantool timed out"), 0, NULL, 0);
}

static const gw_dconn_proto_t proto = {
    "tarantool", "connection to tarantool refused", "cannot connect to tarantool",
    "tarantool closed the connection", "connection to tarantool reset",
    "tarantool is down (reconnecting with backoff)",
    NULL, conn_readable, conn_fail, conn_dispose, op_timed_out, op_fail};

/* The connection for a new request, or NULL with *err. */
static conn_t *pick(gw_tnt_t *t, gw_err_t *err)
{
  gw_dconn_t *best = gw_dpool_least_loaded(&t->pool);
  if (best && (best->npending < PIPELINE_DEPTH || t->pool.n >= t->pool.max)) return (conn_t *)best;
  if (gw_dpool_is_down(&t->pool)) {
    *err = gw_err(GW_ERR_CONNECT, proto.down);
    return (conn_t *)best;
  }
  gw_dconn_t *c = gw_dconn_open(&t->pool, sizeof(conn_t), 1, err);
  return (conn_t *)(c ? c : best);
}

gw_tnt_op_t *gw_tnt_exec(gw_tnt_t *t, uint32_t type, const char *body, size_t body_len, int timeout_ms,
                         gw_tnt_done_cb cb, void *arg)
{
  gw_tnt_op_t *op = calloc(1, sizeof(*op));
  if (op == NULL) return NULL;
  op->cb = cb;
  op->arg = arg;
  gw_dreq_init(&op->q, &t->pool, timeout_ms);
  gw_err_t err = gw_err_none();
  conn_t *c = pick(t, &err);
  if (c == NULL) {
    gw_dreq_fail_later(&op->q, err);
    return op;
  }
  op->q.id = ++c->sync;
  if (gw_iproto_request(c->state == ST_READY ? &c->dc.out : &c->held, type, op->q.id, body, body_len) < 0) {
    gw_dreq_fail_later(&op->q, gw_err(GW_ERR_NOMEM, "out of memory"));
    return op;
  }
  gw_dconn_attach(&c->dc, &op->q);
  if (c->state == ST_READY) gw_dconn_flush_soon(&c->dc);
  return op;
}

void gw_tnt_cancel(gw_tnt_op_t *op)
{
  drop(op);
  gw_dreq_stop(&op->q);
  free(op);
}

/* -- the client ---------------------------------------------------------------------- */

gw_tnt_t *gw_tnt_new(struct event_base *base, const gw_tnt_params_t *p, char *err, size_t errlen)
{
  gw_tnt_t *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (gw_dpool_init(&t->pool, base, &proto, p->addr, p->pool, err, errlen) < 0) {
    free(t);
    return NULL;
  }
  t->addr = strdup(p->addr);
  t->user = p->user ? strdup(p->user) : NULL;
  t->password = p->password ? strdup(p->password) : NULL;
  return t;
}

void gw_tnt_free(gw_tnt_t *t)
{
  if (t == NULL) return;
  gw_dpool_dispose(&t->pool);
  free(t->addr);
  free(t->user);
  free(t->password);
  free(t);
}

const char *gw_tnt_addr(const gw_tnt_t *t)
{
  return t->addr;
}
