/* fcgi_client.c - the non-blocking FastCGI client (fcgi_client.h); the
 * record format is fcgi.c's, sockets and the idle pool are pool.c's.
 *
 * A request is serialised once (BEGIN_REQUEST, PARAMS, the end of PARAMS,
 * and a whole body as STDIN records with their end) into a buffer allocated
 * with it, so a retry can resend it; a streamed body follows as STDIN
 * records framed from the caller's evbuffer when the socket and the caller
 * allow. Input is read into the connection's evbuffer and decoded from
 * there; whatever a pause leaves unparsed stays in it.
 *
 * Re-entrancy as in upstream.c: the done callback runs only from
 * req_finish(), last in every path, never inside gw_fcgi_request(); on_head
 * and on_body run with in_cb set, and a cancel from inside them only marks
 * the request, which the reading loop abandons once they returned. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "addr.h"
#include "buf.h"
#include "fcgi.h"
#include "fcgi_client.h"
#include "log.h"
#include "pool.h"

#define READ_SIZE (64 * 1024)
#define READS_PER_EVENT 4
#define BODY_OUT_HIGH (64 * 1024) /* framed STDIN waiting for the socket */
#define REQUEST_ID 1
#define DEFAULT_CONNECT_TIMEOUT_MS 5000
#define DEFAULT_TIMEOUT_MS 60000
#define STDERR_LINE_MAX 2048

static const gw_err_t ERR_REFUSED = {GW_ERR_CONNECT_REFUSED, "connection refused"};
static const gw_err_t ERR_RESET = {GW_ERR_RESET, "connection reset by FastCGI server"};
static const gw_err_t ERR_PREMATURE = {GW_ERR_CLOSED, "FastCGI server closed the connection prematurely"};
static const gw_err_t ERR_CONNECT_TIMEOUT = {GW_ERR_CONNECT_TIMEOUT, "upstream connect timed out"};
static const gw_err_t ERR_TIMEOUT = {GW_ERR_TIMEOUT, "FastCGI server timed out"};
static const gw_err_t ERR_CONNECT = {GW_ERR_CONNECT, "cannot connect to upstream"};
static const gw_err_t ERR_NOMEM = {GW_ERR_NOMEM, "out of memory"};
static const gw_err_t ERR_NONE = {GW_OK, NULL};

typedef enum { CONN_CONNECTING, CONN_ACTIVE, CONN_IDLE } conn_state_t;

typedef struct {
  gw_pool_conn_t pc;          /* first: socket, events, key (pool.c) */
  gw_fcgi_pool_t *pool;
  gw_fcgi_req_t *req;         /* while CONNECTING / ACTIVE */
  conn_state_t state;
  unsigned served : 1;        /* completed a request: reused */
  struct evbuffer *in;        /* owned: read and not decoded yet */
} fcgi_conn_t;

struct gw_fcgi_req_s {
  gw_fcgi_pool_t *pool;
  gw_pool_key_t *key;         /* held while the request lives */
  fcgi_conn_t *conn;
  gw_fcgi_done_cb cb;
  void (*on_head)(gw_fcgi_response_t *res, void *arg);
  void (*on_body)(const char *data, size_t len, void *arg);
  void (*on_body_sent)(void *arg);
  void *arg;
  struct event dev;           /* a failure found inside gw_fcgi_request / body_more */
  struct event sent_ev;       /* on_body_sent from the loop */
  gw_err_t err;
  int connect_timeout_ms, timeout_ms;
  char label[128];
  gw_fcgi_decoder_t dec;
  gw_buf_t head;              /* STDOUT gathered until the CGI head is complete */
  size_t rest_off, rest_len;  /* body bytes that came with the head, in `head`, not delivered yet */
  gw_buf_t errline;           /* an FCGI_STDERR line not ended yet */
  gw_fcgi_response_t res;
  struct evbuffer *body_src;  /* borrowed */
  struct evbuffer *body_out;  /* owned: framed STDIN not written yet */
  unsigned idempotent : 1;
  unsigned retried : 1;
  unsigned starting : 1;
  unsigned got_bytes : 1;
  unsigned head_done : 1;
  unsigned paused : 1;
  unsigned in_cb : 1;
  unsigned cancelled : 1;
  unsigned body_complete : 1;
  unsigned body_taken : 1;
  unsigned body_ended : 1;
  unsigned send_stopped : 1;
  size_t wire_len, wire_off;
  unsigned char wire[];
};

struct gw_fcgi_pool_s {
  struct event_base *base;
  gw_pool_t *conns;
  int cb_depth;
  int free_pending;
};

static void req_connect(gw_fcgi_req_t *r);
static void conn_send(fcgi_conn_t *c);

/* ---- connections ---- */

static void on_conn_free(gw_pool_conn_t *pc)
{
  fcgi_conn_t *c = (fcgi_conn_t *)pc;
  if (c->in) evbuffer_free(c->in);
  c->in = NULL;
}

static void conn_detach(gw_fcgi_req_t *r, int keep)
{
  fcgi_conn_t *c = r->conn;
  if (c == NULL) return;
  r->conn = NULL;
  c->req = NULL;
  if (keep && gw_pool_keepalive_max(r->pool->conns) > 0 && !r->pool->free_pending &&
      evbuffer_get_length(c->in) == 0) {
    c->state = CONN_IDLE;
    c->served = 1;
    gw_pool_park(&c->pc);
  } else {
    gw_pool_close(&c->pc);
  }
}

/* ---- requests ---- */

static void pool_destroy(gw_fcgi_pool_t *pool)
{
  gw_pool_free(pool->conns);
  free(pool);
}

static void req_free(gw_fcgi_req_t *r)
{
  gw_fcgi_pool_t *pool = r->pool;
  event_del(&r->dev);
  if (r->body_out) {
    event_del(&r->sent_ev);
    evbuffer_free(r->body_out);
  }
  gw_buf_dispose(&r->head);
  gw_buf_dispose(&r->errline);
  gw_headers_dispose(&r->res.headers);
  if (r->key) gw_pool_key_put(pool->conns, r->key);
  free(r);
}

static void req_finish(gw_fcgi_req_t *r, gw_err_t err, int keep)
{
  gw_fcgi_pool_t *pool = r->pool;
  conn_detach(r, keep);
  pool->cb_depth++;
  r->cb(err, r->arg);
  pool->cb_depth--;
  req_free(r);
  if (pool->free_pending && pool->cb_depth == 0) pool_destroy(pool);
}

static void req_abandon(gw_fcgi_req_t *r)
{
  gw_fcgi_pool_t *pool = r->pool;
  conn_detach(r, 0);
  req_free(r);
  if (pool->free_pending && pool->cb_depth == 0) pool_destroy(pool);
}

static void req_fail(gw_fcgi_req_t *r, gw_err_t err)
{
  if (!r->starting) {
    req_finish(r, err, 0);
    return;
  }
  conn_detach(r, 0);
  r->err = err;
  event_active(&r->dev, EV_TIMEOUT, 1);
}

static void on_req_deferred(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_fcgi_req_t *r = arg;
  req_finish(r, r->err, 0);
}

static void on_body_taken(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_fcgi_req_t *r = arg;
  r->on_body_sent(r->arg);
}

static gw_err_t errno_error(int e)
{
  switch (e) {
  case ECONNREFUSED: return ERR_REFUSED;
  case ECONNRESET:
  case EPIPE: return ERR_RESET;
  default: return ERR_CONNECT;
  }
}

/* A pooled connection that died before any response byte: most likely
 * closed by the server while idle (pm.max_requests, a restart). */
static int req_can_retry(const gw_fcgi_req_t *r, const fcgi_conn_t *c)
{
  return c->served && !r->retried && !r->got_bytes && !r->body_taken && (r->idempotent || r->wire_off == 0);
}

static void req_retry(gw_fcgi_req_t *r)
{
  conn_detach(r, 0);
  r->retried = 1;
  r->wire_off = 0;
  req_connect(r);
}

static void conn_io_failed(fcgi_conn_t *c, int e)
{
  gw_fcgi_req_t *r = c->req;
  if (req_can_retry(r, c)) {
    req_retry(r);
    return;
  }
  req_fail(r, e == 0 ? ERR_PREMATURE : errno_error(e));
}

static void conn_timer(fcgi_conn_t *c)
{
  if (!c->req->paused) gw_pool_conn_timer(&c->pc, c->req->timeout_ms);
}

static void conn_attach(fcgi_conn_t *c, gw_fcgi_req_t *r)
{
  c->req = r;
  r->conn = c;
  c->state = CONN_ACTIVE;
  gw_pool_conn_read(&c->pc, !r->paused);
  if (r->paused) gw_pool_conn_timer_stop(&c->pc);
  else gw_pool_conn_timer(&c->pc, r->timeout_ms);
}

/* The upstream stopped reading our request: let the read side deliver an
 * early answer or the error. */
static void conn_stop_sending(fcgi_conn_t *c)
{
  c->req->send_stopped = 1;
  gw_pool_conn_write(&c->pc, 0);
}

/* Streamed body: frames what body_src holds as STDIN records, and the end. */
static void body_take(gw_fcgi_req_t *r)
{
  size_t n = evbuffer_get_length(r->body_src);
  while (n > 0 && evbuffer_get_length(r->body_out) < BODY_OUT_HIGH) {
    size_t k = n > GW_FCGI_MAX_CONTENT ? GW_FCGI_MAX_CONTENT : n;
    unsigned char hdr[GW_FCGI_HEADER_LEN];
    gw_fcgi_put_header(hdr, GW_FCGI_STDIN, REQUEST_ID, k, 0);
    evbuffer_add(r->body_out, hdr, sizeof(hdr));
    evbuffer_remove_buffer(r->body_src, r->body_out, k);
    n -= k;
    r->body_taken = 1;
    if (r->on_body_sent) event_active(&r->sent_ev, EV_TIMEOUT, 1);
  }
  if (r->body_complete && n == 0 && !r->body_ended) {
    gw_fcgi_add_records(r->body_out, GW_FCGI_STDIN, REQUEST_ID, NULL, 0);
    r->body_ended = 1;
  }
}

static int send_failed(fcgi_conn_t *c, int e)
{
  gw_fcgi_req_t *r = c->req;
  if ((e == EPIPE || e == ECONNRESET) && !req_can_retry(r, c)) conn_stop_sending(c);
  else conn_io_failed(c, e);
  return -1;
}

static void conn_send(fcgi_conn_t *c)
{
  gw_fcgi_req_t *r = c->req;
  if (r->send_stopped) {
    gw_pool_conn_write(&c->pc, 0);
    return;
  }
  for (int i = 0; i < 64 && r->wire_off < r->wire_len; i++) {
    ssize_t n = send(c->pc.fd, r->wire + r->wire_off, r->wire_len - r->wire_off, MSG_NOSIGNAL);
    if (n > 0) {
      r->wire_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    send_failed(c, n < 0 ? errno : EPIPE);
    return;
  }
  if (r->wire_off < r->wire_len) {
    gw_pool_conn_write(&c->pc, 1);
    return;
  }
  if (r->body_src == NULL) {
    gw_pool_conn_write(&c->pc, 0);
    return;
  }
  for (int i = 0; i < 64; i++) {
    if (evbuffer_get_length(r->body_out) < BODY_OUT_HIGH) body_take(r);
    if (evbuffer_get_length(r->body_out) == 0) break;
    int n = evbuffer_write(r->body_out, c->pc.fd);
    if (n > 0) {
      conn_timer(c);
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
  gw_pool_conn_write(&c->pc, evbuffer_get_length(r->body_out) > 0);
}

static int req_all_sent(const gw_fcgi_req_t *r)
{
  return r->wire_off == r->wire_len && !r->send_stopped &&
         (r->body_src == NULL || (r->body_ended && evbuffer_get_length(r->body_out) == 0));
}

/* ---- the response ---- */

/* FCGI_STDERR: each complete line goes to the error log (long ones cut). */
static void stderr_piece(gw_fcgi_req_t *r, const char *data, size_t len)
{
  while (len > 0) {
    const char *nl = memchr(data, '\n', len);
    size_t n = nl ? (size_t)(nl - data) : len;
    size_t room = STDERR_LINE_MAX > r->errline.len ? STDERR_LINE_MAX - r->errline.len : 0;
    gw_buf_append(&r->errline, data, n < room ? n : room);
    if (nl == NULL) return;
    size_t l = r->errline.len;
    while (l && (r->errline.data[l - 1] == '\r')) l--;
    if (l) gw_log_error("FastCGI %s sent in stderr: \"%.*s\"", r->label, (int)l, r->errline.data);
    r->errline.len = 0;
    data = nl + 1;
    len -= n + 1;
  }
}

static void stderr_flush(gw_fcgi_req_t *r)
{
  if (r->errline.len) gw_log_error("FastCGI %s sent in stderr: \"%.*s\"", r->label, (int)r->errline.len, r->errline.data);
  r->errline.len = 0;
}

/* What became of the request after a step: it goes on, it is paused (the
 * connection keeps what was not decoded), or it is gone (finished, failed or
 * abandoned: freed, touch nothing). */
enum { GO_ON, PAUSED, GONE };

/* Calls on_head or on_body; GONE when the request was cancelled meanwhile
 * (it is abandoned here), PAUSED when it was paused. */
static int deliver(gw_fcgi_req_t *r, const char *data, size_t len, int head)
{
  gw_fcgi_pool_t *pool = r->pool;
  pool->cb_depth++;
  r->in_cb = 1;
  if (head) r->on_head(&r->res, r->arg);
  else if (r->on_body) r->on_body(data, len, r->arg);
  r->in_cb = 0;
  pool->cb_depth--;
  if (r->cancelled) {
    req_abandon(r);
    return GONE;
  }
  return r->paused ? PAUSED : GO_ON;
}

/* Body bytes that came in the same record as the end of the head. */
static int deliver_rest(gw_fcgi_req_t *r)
{
  while (r->rest_len > 0) {
    const char *at = r->head.data + r->rest_off;
    size_t n = r->rest_len;
    r->rest_off += n;
    r->rest_len = 0;
    int rc = deliver(r, at, n, 0);
    if (rc != GO_ON) return rc;
  }
  return GO_ON;
}

static int stdout_piece(gw_fcgi_req_t *r, const char *data, size_t len)
{
  if (r->head_done) return deliver(r, data, len, 0);
  size_t before = r->head.len;
  if (gw_buf_append(&r->head, data, len) < 0) {
    req_fail(r, ERR_NOMEM);
    return GONE;
  }
  /* Only look where a blank line can newly end (3 bytes back). */
  long end = gw_cgi_head_end(r->head.data, r->head.len, before > 3 ? before - 3 : 0);
  if (end < 0) {
    gw_log_error("FastCGI %s: response head too large", r->label);
    req_fail(r, gw_err(GW_ERR_BAD_RESPONSE, "invalid FastCGI response"));
    return GONE;
  }
  if (end == 0) return GO_ON;
  const char *err;
  if (gw_cgi_head_parse(r->head.data, (size_t)end, &r->res.status, &r->res.headers, &err) < 0) {
    gw_log_error("FastCGI %s: %s", r->label, err);
    req_fail(r, gw_err(GW_ERR_BAD_RESPONSE, "invalid FastCGI response"));
    return GONE;
  }
  r->head_done = 1;
  r->res.reused = r->conn->served;
  r->rest_off = (size_t)end;
  r->rest_len = r->head.len - (size_t)end;
  int rc = deliver(r, NULL, 0, 1);
  return rc == GO_ON ? deliver_rest(r) : rc;
}

/* Decodes what the connection holds. Returns GO_ON to read more. */
static int conn_process(fcgi_conn_t *c)
{
  gw_fcgi_req_t *r = c->req;
  int rc = deliver_rest(r);
  if (rc != GO_ON) return rc;
  /* Every round consumes input or ends the request. */
  for (;;) {
    struct evbuffer_iovec v;
    if (evbuffer_peek(c->in, -1, NULL, &v, 1) < 1 || v.iov_len == 0) return GO_ON;
    size_t used = 0;
    gw_fcgi_out_t out = gw_fcgi_decode(&r->dec, v.iov_base, v.iov_len, &used);
    switch (out) {
    case GW_FCGI_NEED_MORE:
      evbuffer_drain(c->in, used);
      continue;
    case GW_FCGI_OUT_STDERR:
      stderr_piece(r, r->dec.data, r->dec.len);
      evbuffer_drain(c->in, used);
      continue;
    case GW_FCGI_OUT_STDOUT: {
      if (r->dec.len == 0) {
        evbuffer_drain(c->in, used);
        continue;
      }
      /* The piece points into c->in: drained once it was delivered (the
       * callbacks never touch the connection's input). */
      rc = stdout_piece(r, r->dec.data, r->dec.len);
      if (rc == GONE) return GONE;
      evbuffer_drain(c->in, used);
      if (rc == PAUSED) return PAUSED; /* the rest stays in c->in */
      continue;
    }
    case GW_FCGI_OUT_END:
      evbuffer_drain(c->in, used);
      stderr_flush(r);
      if (r->dec.protocol_status != GW_FCGI_REQUEST_COMPLETE) {
        gw_log_error("FastCGI %s: request not completed (protocol status %d)", r->label, r->dec.protocol_status);
        req_fail(r, gw_err(GW_ERR_BAD_RESPONSE, "FastCGI server refused the request"));
        return GONE;
      }
      if (!r->head_done) {
        gw_log_error("FastCGI %s: the response ended without a complete head", r->label);
        req_fail(r, gw_err(GW_ERR_BAD_RESPONSE, "invalid FastCGI response"));
        return GONE;
      }
      req_finish(r, ERR_NONE, req_all_sent(r));
      return GONE;
    case GW_FCGI_OUT_ERROR:
      gw_log_error("FastCGI %s: %s", r->label, r->dec.err);
      req_fail(r, gw_err(GW_ERR_BAD_RESPONSE, "invalid FastCGI response"));
      return GONE;
    }
  }
}

static void conn_readable(fcgi_conn_t *c)
{
  gw_fcgi_req_t *r = c->req;
  if (conn_process(c) != GO_ON) return;
  for (int i = 0; i < READS_PER_EVENT; i++) {
    int n = evbuffer_read(c->in, c->pc.fd, READ_SIZE);
    if (n > 0) {
      r->got_bytes = 1;
      conn_timer(c);
      if (conn_process(c) != GO_ON) return;
      if (n < READ_SIZE) return;
      continue;
    }
    if (n == 0) {
      if (req_can_retry(r, c)) {
        req_retry(r);
        return;
      }
      stderr_flush(r);
      req_fail(r, ERR_PREMATURE);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    conn_io_failed(c, errno);
    return;
  }
}

/* ---- events ---- */

static void conn_connected(fcgi_conn_t *c)
{
  gw_pool_conn_write(&c->pc, 0);
  conn_attach(c, c->req);
  conn_send(c);
}

static void req_connect(gw_fcgi_req_t *r)
{
  gw_pool_conn_t *pc;
  int rc = gw_pool_connect(r->pool->conns, r->key, &pc);
  if (pc == NULL) {
    req_fail(r, ERR_CONNECT);
    return;
  }
  fcgi_conn_t *c = (fcgi_conn_t *)pc;
  c->pool = r->pool;
  c->state = CONN_CONNECTING;
  c->served = 0;
  c->req = r;
  r->conn = c;
  c->in = evbuffer_new();
  if (c->in == NULL) {
    req_fail(r, ERR_NOMEM);
    return;
  }
  if (rc == 0) {
    conn_connected(c);
  } else if (rc == EINPROGRESS) {
    gw_pool_conn_write(pc, 1);
    gw_pool_conn_timer(pc, r->connect_timeout_ms);
  } else {
    if (rc != ECONNREFUSED) gw_log_info("FastCGI %s: connect(): %s", r->label, strerror(rc));
    req_fail(r, rc == ECONNREFUSED ? ERR_REFUSED : ERR_CONNECT);
  }
}

static void on_conn_read(gw_pool_conn_t *pc)
{
  conn_readable((fcgi_conn_t *)pc);
}

static void on_conn_write(gw_pool_conn_t *pc)
{
  fcgi_conn_t *c = (fcgi_conn_t *)pc;
  if (c->state == CONN_ACTIVE) {
    conn_send(c);
    return;
  }
  int err = gw_pool_conn_error(pc);
  if (err == EINPROGRESS || err == EINTR) return;
  if (err != 0) {
    /* unix sockets: EAGAIN when the listen backlog is full */
    if (err != ECONNREFUSED) gw_log_info("FastCGI %s: connect: %s", c->req->label, strerror(err));
    req_fail(c->req, err == ECONNREFUSED ? ERR_REFUSED : ERR_CONNECT);
    return;
  }
  conn_connected(c);
}

static void on_conn_timeout(gw_pool_conn_t *pc)
{
  fcgi_conn_t *c = (fcgi_conn_t *)pc;
  if (c->state == CONN_CONNECTING) req_fail(c->req, ERR_CONNECT_TIMEOUT);
  else if (c->state == CONN_ACTIVE) req_fail(c->req, ERR_TIMEOUT);
}

/* ---- public API ---- */

gw_fcgi_pool_t *gw_fcgi_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms)
{
  static const gw_pool_conn_ops_t ops = {
    .on_read = on_conn_read, .on_write = on_conn_write, .on_timeout = on_conn_timeout, .on_free = on_conn_free};
  gw_fcgi_pool_t *pool = calloc(1, sizeof(*pool));
  if (pool == NULL) return NULL;
  pool->base = base;
  pool->conns = gw_pool_new(base, keepalive_max, idle_timeout_ms, &ops, sizeof(fcgi_conn_t));
  if (pool->conns == NULL) {
    free(pool);
    return NULL;
  }
  return pool;
}

void gw_fcgi_pool_free(gw_fcgi_pool_t *pool)
{
  if (pool == NULL) return;
  if (pool->cb_depth > 0) {
    pool->free_pending = 1;
    return;
  }
  pool_destroy(pool);
}

gw_fcgi_req_t *gw_fcgi_request(gw_fcgi_pool_t *pool, const gw_fcgi_params_t *p, gw_fcgi_done_cb cb, void *arg)
{
  int streamed = p->body_source != NULL;
  size_t body_len = streamed ? 0 : p->body_len;
  size_t plen = p->params_len;
  size_t nrec_params = plen / GW_FCGI_MAX_CONTENT + 1;
  size_t nrec_body = streamed ? 0 : body_len / GW_FCGI_MAX_CONTENT + 2;
  size_t size = 16 + plen + nrec_params * GW_FCGI_HEADER_LEN + GW_FCGI_HEADER_LEN + body_len +
                nrec_body * GW_FCGI_HEADER_LEN;
  gw_fcgi_req_t *r = calloc(1, sizeof(*r) + size);
  if (r == NULL) return NULL;
  r->pool = pool;
  r->cb = cb;
  r->arg = arg;
  r->on_head = p->on_head;
  r->on_body = p->on_body;
  r->idempotent = p->idempotent != 0;
  r->connect_timeout_ms = p->connect_timeout_ms > 0 ? p->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
  r->timeout_ms = p->timeout_ms > 0 ? p->timeout_ms : DEFAULT_TIMEOUT_MS;
  snprintf(r->label, sizeof(r->label), "%s", p->label ? p->label : "-");
  gw_fcgi_decoder_init(&r->dec, REQUEST_ID);
  gw_headers_init(&r->res.headers);
  event_assign(&r->dev, pool->base, -1, 0, on_req_deferred, r);
  if (streamed) {
    r->body_out = evbuffer_new();
    if (r->body_out == NULL) {
      free(r);
      return NULL;
    }
    r->body_src = p->body_source;
    r->body_complete = p->body_complete != 0;
    r->on_body_sent = p->on_body_sent;
    event_assign(&r->sent_ev, pool->base, -1, 0, on_body_taken, r);
  }

  /* BEGIN_REQUEST, PARAMS records, the empty PARAMS, STDIN + its end. */
  unsigned char *w = r->wire;
  gw_fcgi_put_begin(w, REQUEST_ID, 1);
  w += 16;
  size_t off = 0;
  do {
    size_t n = plen - off > GW_FCGI_MAX_CONTENT ? GW_FCGI_MAX_CONTENT : plen - off;
    gw_fcgi_put_header(w, GW_FCGI_PARAMS, REQUEST_ID, n, 0);
    w += GW_FCGI_HEADER_LEN;
    if (n) memcpy(w, p->params + off, n);
    w += n;
    off += n;
  } while (off < plen);
  if (plen) { /* the empty record that ends PARAMS (the loop wrote it when plen is 0) */
    gw_fcgi_put_header(w, GW_FCGI_PARAMS, REQUEST_ID, 0, 0);
    w += GW_FCGI_HEADER_LEN;
  }
  if (!streamed) {
    off = 0;
    while (off < body_len) {
      size_t n = body_len - off > GW_FCGI_MAX_CONTENT ? GW_FCGI_MAX_CONTENT : body_len - off;
      gw_fcgi_put_header(w, GW_FCGI_STDIN, REQUEST_ID, n, 0);
      w += GW_FCGI_HEADER_LEN;
      memcpy(w, p->body + off, n);
      w += n;
      off += n;
    }
    gw_fcgi_put_header(w, GW_FCGI_STDIN, REQUEST_ID, 0, 0);
    w += GW_FCGI_HEADER_LEN;
  }
  r->wire_len = (size_t)(w - r->wire);

  r->starting = 1;
  gw_sockaddr_t addr;
  memset(&addr, 0, sizeof(addr));
  if (p->addr == NULL || p->addrlen == 0 || p->addrlen > sizeof(addr)) {
    gw_log_error("FastCGI %s: bad address", r->label);
    req_fail(r, ERR_CONNECT);
    r->starting = 0;
    return r;
  }
  memcpy(&addr, p->addr, p->addrlen);
  r->key = gw_pool_key_get(pool->conns, &addr, p->addrlen, NULL, NULL);
  if (r->key == NULL) {
    if (r->body_out) evbuffer_free(r->body_out);
    free(r);
    return NULL;
  }
  /* Most recently parked first; one that died unnoticed is dropped before a
   * request that could not be resent trusts it. */
  fcgi_conn_t *c;
  while ((c = (fcgi_conn_t *)gw_pool_take(pool->conns, r->key)) != NULL) {
    c->state = CONN_ACTIVE;
    if ((!r->idempotent || streamed) && gw_pool_conn_is_stale(&c->pc)) {
      gw_pool_close(&c->pc);
      continue;
    }
    break;
  }
  if (c != NULL) {
    conn_attach(c, r);
    conn_send(c);
  } else {
    req_connect(r);
  }
  r->starting = 0;
  return r;
}

void gw_fcgi_cancel(gw_fcgi_req_t *r)
{
  if (r == NULL) return;
  if (r->in_cb) {
    r->cancelled = 1;
    return;
  }
  req_abandon(r);
}

void gw_fcgi_pause(gw_fcgi_req_t *r)
{
  if (r == NULL || r->paused || r->cancelled) return;
  r->paused = 1;
  if (r->conn && r->conn->state == CONN_ACTIVE) {
    gw_pool_conn_read(&r->conn->pc, 0);
    gw_pool_conn_timer_stop(&r->conn->pc);
  }
}

void gw_fcgi_resume(gw_fcgi_req_t *r)
{
  if (r == NULL || !r->paused || r->cancelled) return;
  r->paused = 0;
  fcgi_conn_t *c = r->conn;
  if (c == NULL || c->state != CONN_ACTIVE) return;
  gw_pool_conn_read(&c->pc, 1);
  gw_pool_conn_timer(&c->pc, r->timeout_ms);
  /* What was read before the pause is decoded from the loop. */
  if (!r->in_cb && (evbuffer_get_length(c->in) > 0 || r->rest_len > 0)) gw_pool_conn_kick_read(&c->pc);
}

void gw_fcgi_body_more(gw_fcgi_req_t *r, int complete)
{
  if (r == NULL || r->body_src == NULL || r->cancelled) return;
  if (complete) r->body_complete = 1;
  fcgi_conn_t *c = r->conn;
  if (c == NULL || c->state != CONN_ACTIVE || c->pc.wev_added) return;
  r->starting = 1;
  conn_send(c);
  r->starting = 0;
}
