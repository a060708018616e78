/* upstream.c - the non-blocking HTTP/1.1 client (sockets, events and the
 * keep-alive pool of idle connections are pool.c's).
 *
 * One request at a time per connection. A request is serialised once into a
 * single buffer allocated with the request (so a retry can resend it), written
 * with send(2) straight from there; a streamed request body follows the head
 * from the caller's evbuffer, moved (framed) into the request's own and
 * written as the socket and the caller allow. The response is read into one
 * per-pool buffer and fed to the connection's llhttp parser; nothing else is
 * buffered on the input side because a connection is only ever reused when
 * the response ended exactly at the end of what was read. The one exception
 * is a streamed response paused from inside on_head/on_body: the bytes of
 * that read not parsed yet are copied into the connection (the "stash") and
 * parsed first once resumed.
 *
 * Buffered mode collects the body into an evbuffer. Streaming mode (on_head
 * set) pauses llhttp (HPE_PAUSED) at the end of the header block and at the
 * end of every body span, calls the user back after llhttp_execute() has
 * returned, then resumes the parser and continues from where it stopped; a
 * pause requested by the user leaves the rest in the stash. Reading stops
 * while paused (read event and timer deleted).
 *
 * Connections are pooled per destination address by pool.c (the key is the
 * binary sockaddr, so "::1" and "0::1" share a pool); a request holds its key
 * while it lives. Idle connections keep their read event armed: any readiness
 * while idle means EOF, an error or stray bytes, and pool.c drops the
 * connection (on_conn_free releases the parser state kept here).
 *
 * Re-entrancy rules: the done callback is only ever invoked from req_finish(),
 * which is the last thing any code path does; it never runs inside
 * gw_client_request() (failures there are deferred through the request's own
 * event, which gw_client_cancel() deletes) nor inside an llhttp callback.
 * on_head/on_body run from conn_parse() between two llhttp_execute() calls,
 * with req->in_cb set: gw_client_cancel() then only marks the request, and
 * conn_parse() reports PARSE_CANCELLED once the callback has returned; the
 * pool read buffer stays valid during them because nothing reads
 * synchronously (gw_client_resume() defers to the loop). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <llhttp.h>

#include "addr.h"
#include "buf.h"
#include "error.h"
#include "headers.h"
#include "log.h"
#include "pool.h"
#include "tls_client.h"
#include "upstream.h"

#define GW_UPSTREAM_READ_SIZE (64 * 1024)
#define GW_UPSTREAM_MAX_HEADER_BYTES (64 * 1024)
#define GW_UPSTREAM_SPARE_BODIES 8
#define GW_UPSTREAM_READS_PER_EVENT 4

#define DEFAULT_CONNECT_TIMEOUT_MS 5000
#define DEFAULT_TIMEOUT_MS 60000
#define DEFAULT_MAX_RESPONSE_BODY ((size_t)64 * 1024 * 1024)

/* Every failure the client reports: its kind and its log text. */
static const gw_err_t ERR_REFUSED = {GW_ERR_CONNECT_REFUSED, "connection refused"};
static const gw_err_t ERR_RESET = {GW_ERR_RESET, "connection reset by upstream"};
static const gw_err_t ERR_PREMATURE = {GW_ERR_CLOSED, "upstream closed connection prematurely"};
static const gw_err_t ERR_CONNECT_TIMEOUT = {GW_ERR_CONNECT_TIMEOUT, "upstream connect timed out"};
static const gw_err_t ERR_HANDSHAKE_TIMEOUT = {GW_ERR_CONNECT_TIMEOUT, "upstream TLS handshake timed out"};
static const gw_err_t ERR_TLS = {GW_ERR_TLS, "upstream TLS handshake failed"};
static const gw_err_t ERR_TLS_BROKEN = {GW_ERR_RESET, "upstream TLS connection failed"};
static const gw_err_t ERR_TIMEOUT = {GW_ERR_TIMEOUT, "upstream timed out"};
static const gw_err_t ERR_INVALID = {GW_ERR_BAD_RESPONSE, "invalid upstream response"};
static const gw_err_t ERR_TOO_LARGE = {GW_ERR_TOO_LARGE, "upstream response too large"};
static const gw_err_t ERR_CONNECT = {GW_ERR_CONNECT, "cannot connect to upstream"};
static const gw_err_t ERR_NOMEM = {GW_ERR_NOMEM, "out of memory"};
static const gw_err_t ERR_NONE = {GW_OK, NULL};

typedef struct upstream_conn_s upstream_conn_t;

typedef enum { CONN_CONNECTING, CONN_HANDSHAKE, CONN_ACTIVE, CONN_IDLE } conn_state_t;

struct upstream_conn_s {
  gw_pool_conn_t pc;           /* first: the socket, its events, its key (pool.c) */
  gw_upstream_pool_t *pool;
  gw_client_req_t *req;        /* set while CONNECTING / HANDSHAKE / ACTIVE */
  gw_tls_client_conn_t *tls;   /* owned; an HTTPS upstream (the key has TLS settings) */
  conn_state_t state;
  unsigned served : 1;         /* has completed a request: a reused connection */
  unsigned kick : 1;           /* streaming, paused mid-read: parse the stash (maybe
                                  empty: the parser may still owe message-complete) */
  llhttp_t parser;
  const char *chunk;           /* start of the data given to llhttp_execute */
  gw_buf_t field;              /* header name then value, accumulated across reads */
  size_t name_len, value_len;  /* of them in field */
  char *stash;                 /* unparsed bytes kept across a pause: [stash_off, stash_len) */
  size_t stash_off, stash_len, stash_cap;
};

struct gw_client_req_s {
  gw_upstream_pool_t *pool;
  gw_pool_key_t *key;          /* the destination, held while the request lives */
  upstream_conn_t *conn;
  gw_client_done_cb cb;
  gw_client_head_cb on_head;   /* non-NULL: streaming mode */
  gw_client_body_cb on_body;
  void *arg;
  const char *span;            /* streaming: body span stashed by on_body for delivery */
  size_t span_len;
  struct event dev;            /* deferred failure from inside gw_client_request */
  gw_err_t err;                /* a failure found while parsing, or to report from dev */
  int connect_timeout_ms;
  int timeout_ms;
  size_t max_body;
  size_t body_bytes;
  size_t hdr_bytes;            /* response bytes before the final header block ended */
  unsigned is_head : 1;
  unsigned idempotent : 1;
  unsigned no_keepalive : 1;
  unsigned retried : 1;
  unsigned starting : 1;       /* inside gw_client_request or gw_client_body_more:
                                  failures must be deferred */
  unsigned got_bytes : 1;      /* some response byte arrived on this attempt */
  unsigned headers_done : 1;   /* final (non-1xx) header block parsed */
  unsigned interim : 1;        /* the message being parsed is a 1xx */
  unsigned msg_done : 1;
  unsigned head_pending : 1;   /* streaming: llhttp paused at headers-complete */
  unsigned head_sent : 1;      /* streaming: on_head was called */
  unsigned paused : 1;         /* gw_client_pause() in effect */
  unsigned in_cb : 1;          /* inside on_head/on_body */
  unsigned cancelled : 1;      /* gw_client_cancel() from inside on_head/on_body */
  unsigned send_stopped : 1;   /* the upstream stopped reading our request (answered early) */
  unsigned upgrade : 1;        /* params.upgrade: a 101 goes to on_head (gw_client_detach) */
  const char *rest;            /* inside on_head: the bytes of this read past the head */
  size_t rest_len;
  /* a streamed request body (params.body_source) */
  unsigned body_complete : 1;  /* the caller has put all of it into body_src */
  unsigned body_taken : 1;     /* some of it left body_src: no retry */
  unsigned body_ended : 1;     /* all of it is in body_out (chunked: with the last chunk) */
  struct evbuffer *body_src;   /* borrowed from the caller */
  struct evbuffer *body_out;   /* owned: taken from body_src, framed, not yet written */
  long long body_left;         /* Content-Length bytes not taken yet; -1: chunked */
  void (*on_body_sent)(void *arg);
  struct event sent_ev;        /* calls on_body_sent from the loop */
  gw_client_response_t res;
  size_t wire_len, wire_off;
  char wire[];                 /* serialised request: head + body (unless streamed) */
};

struct gw_upstream_pool_s {
  struct event_base *base;
  gw_pool_t *conns;            /* the connections and the idle ones by address */
  gw_upstream_stats_t stats;   /* .idle is read from conns */
  unsigned long live_reqs;
  int cb_depth;                /* > 0 while a user callback runs */
  int free_pending;            /* gw_upstream_pool_free was called from a callback */
  struct evbuffer *spare_bodies[GW_UPSTREAM_SPARE_BODIES];
  int nspare;
  char rbuf[GW_UPSTREAM_READ_SIZE];
};

static void on_conn_read(gw_pool_conn_t *pc);
static void on_conn_write(gw_pool_conn_t *pc);
static void on_conn_timeout(gw_pool_conn_t *pc);
static void on_conn_free(gw_pool_conn_t *pc);
static void on_req_deferred(evutil_socket_t fd, short what, void *arg);
static void req_connect(gw_client_req_t *r);
static void conn_send(upstream_conn_t *c);

/* ---- connections (sockets, events and the idle pool: pool.c) ---- */

static void conn_set_timer(upstream_conn_t *c, int ms)
{
  gw_pool_conn_timer(&c->pc, ms);
}

static void conn_close(upstream_conn_t *c)
{
  gw_pool_close(&c->pc); /* on_conn_free releases ours */
}

static void on_conn_free(gw_pool_conn_t *pc)
{
  upstream_conn_t *c = (upstream_conn_t *)pc;
  gw_buf_dispose(&c->field);
  free(c->stash);
  if (c->tls != NULL) {
    if (pc->fd < 0) gw_tls_client_conn_forget_fd(c->tls); /* detached: not ours to write to */
    gw_tls_client_conn_free(c->tls); /* close_notify on the still open socket */
  }
}

/* An idle HTTPS connection got bytes: a session ticket is fine, anything
 * else (close_notify, data) drops it. Plain connections never have any. */
static int on_conn_idle_check(gw_pool_conn_t *pc)
{
  upstream_conn_t *c = (upstream_conn_t *)pc;
  return c->tls != NULL && gw_tls_client_idle_ok(c->tls);
}

/* The socket I/O, through TLS for an HTTPS upstream: as recv(2)/send(2). */
static ssize_t conn_recv(upstream_conn_t *c, void *buf, size_t n)
{
  if (c->tls != NULL) return gw_tls_client_read(c->tls, buf, n);
  return recv(c->pc.fd, buf, n, 0);
}

static ssize_t conn_write(upstream_conn_t *c, const void *buf, size_t n)
{
  if (c->tls != NULL) return gw_tls_client_write(c->tls, buf, n);
  return send(c->pc.fd, buf, n, MSG_NOSIGNAL);
}

/* As evbuffer_write(), for the streamed request body. TLS takes up to one
 * record's worth at a time (16 KiB, one write(2)). */
static int conn_write_buffer(upstream_conn_t *c, struct evbuffer *out)
{
  if (c->tls == NULL) return evbuffer_write(out, c->pc.fd);
  size_t len = evbuffer_get_length(out);
  if (len > 16384) len = 16384;
  unsigned char *p = evbuffer_pullup(out, (ssize_t)len);
  if (p == NULL) {
    errno = ENOMEM;
    return -1;
  }
  ssize_t n = gw_tls_client_write(c->tls, p, len);
  if (n > 0) evbuffer_drain(out, (size_t)n);
  return (int)n;
}

/* Streaming back-pressure: stop/start watching the socket for the response. */
static void conn_read_off(upstream_conn_t *c)
{
  gw_pool_conn_read(&c->pc, 0);
  gw_pool_conn_timer_stop(&c->pc);
}

static void conn_read_on(upstream_conn_t *c)
{
  gw_pool_conn_read(&c->pc, 1);
}

static void conn_want_write(upstream_conn_t *c, int on)
{
  gw_pool_conn_write(&c->pc, on);
}

/* Parks a connection that just finished a response; closes it instead when
 * the pool does not keep connections or is going away. */
static void conn_park(upstream_conn_t *c)
{
  gw_upstream_pool_t *pool = c->pool;
  if (gw_pool_keepalive_max(pool->conns) <= 0 || pool->free_pending) {
    conn_close(c);
    return;
  }
  free(c->stash);
  c->stash = NULL;
  c->stash_off = c->stash_len = c->stash_cap = 0;
  c->kick = 0;
  c->state = CONN_IDLE;
  c->served = 1;
  gw_pool_park(&c->pc); /* read event on (a paused streamed HEAD/204/304 may have turned it off) */
}

/* ---- requests ---- */

static void req_reset_response(gw_client_req_t *r)
{
  gw_headers_clear(&r->res.headers);
  evbuffer_drain(r->res.body, evbuffer_get_length(r->res.body));
  r->res.status = 0;
  r->res.http_minor = 0;
  r->body_bytes = r->hdr_bytes = 0;
  r->got_bytes = r->headers_done = r->interim = r->msg_done = 0;
  r->head_pending = r->head_sent = 0;
  r->span = NULL;
}

static void req_free(gw_client_req_t *r)
{
  gw_upstream_pool_t *pool = r->pool;
  gw_headers_dispose(&r->res.headers);
  if (r->body_out != NULL) {
    event_del(&r->sent_ev);
    evbuffer_free(r->body_out);
  }
  if (pool->nspare < GW_UPSTREAM_SPARE_BODIES && !pool->free_pending) {
    evbuffer_drain(r->res.body, evbuffer_get_length(r->res.body));
    pool->spare_bodies[pool->nspare++] = r->res.body;
  } else {
    evbuffer_free(r->res.body);
  }
  if (r->key != NULL) gw_pool_key_put(pool->conns, r->key);
  pool->live_reqs--;
  free(r);
}

static void pool_destroy(gw_upstream_pool_t *pool);

/* Detaches the connection (parking or closing it), runs the callback, frees
 * the request. Always the last thing its caller does. */
static void req_finish(gw_client_req_t *r, gw_err_t err, int keep)
{
  gw_upstream_pool_t *pool = r->pool;
  upstream_conn_t *c = r->conn;
  if (c != NULL) {
    r->conn = NULL;
    c->req = NULL;
    if (keep) conn_park(c); else conn_close(c);
  }
  pool->cb_depth++;
  r->cb(err, err.kind != GW_OK ? NULL : &r->res, r->arg);
  pool->cb_depth--;
  req_free(r);
  if (pool->free_pending && pool->cb_depth == 0) pool_destroy(pool);
}

static void req_fail(gw_client_req_t *r, gw_err_t err)
{
  if (!r->starting) {
    req_finish(r, err, 0);
    return;
  }
  if (r->conn != NULL) {
    upstream_conn_t *c = r->conn;
    r->conn = NULL;
    c->req = NULL;
    conn_close(c);
  }
  r->err = err;
  event_active(&r->dev, EV_TIMEOUT, 1);
}

/* Streamed request body: the caller may fill body_src again. */
static void on_body_taken(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_client_req_t *r = arg;
  r->on_body_sent(r->arg);
}

static void on_req_deferred(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_client_req_t *r = arg;
  req_finish(r, r->err, 0);
}

static gw_err_t errno_error(int e)
{
  switch (e) {
  case ECONNREFUSED: return ERR_REFUSED;
  case ECONNRESET:
  case EPIPE: return ERR_RESET;
  case EPROTO: return ERR_TLS_BROKEN; /* a TLS error after the handshake: something may have been sent */
  default: return ERR_CONNECT;
  }
}

/* A reused connection that died before any response byte: the upstream most
 * likely closed it while idle. Safe to resend once if the method is
 * idempotent or nothing of the request was sent. */
static int req_can_retry(const gw_client_req_t *r, const upstream_conn_t *c)
{
  return !r->upgrade && c->served && !r->retried && !r->got_bytes && !r->body_taken && (r->idempotent || r->wire_off == 0);
}

static void req_retry(gw_client_req_t *r)
{
  upstream_conn_t *c = r->conn;
  r->conn = NULL;
  c->req = NULL;
  conn_close(c);
  r->retried = 1;
  r->pool->stats.retried++;
  r->wire_off = 0;
  req_reset_response(r);
  req_connect(r);
}

/* Write or read failure (err: errno, or 0 for EOF) on an ACTIVE connection. */
static void conn_io_failed(upstream_conn_t *c, int err)
{
  gw_client_req_t *r = c->req;
  if (req_can_retry(r, c)) {
    req_retry(r);
    return;
  }
  req_fail(r, err == 0 ? ERR_PREMATURE : errno_error(err));
}

static void conn_attach(upstream_conn_t *c, gw_client_req_t *r)
{
  c->req = r;
  r->conn = c;
  c->state = CONN_ACTIVE;
  c->name_len = c->value_len = 0;
  llhttp_reset(&c->parser);
  if (r->paused) conn_read_off(c); /* a retry of a request paused early */
  else conn_set_timer(c, r->timeout_ms);
}

static void conn_ready(upstream_conn_t *c)
{
  conn_want_write(c, 0);
  if (!c->req->paused) conn_read_on(c);
  conn_attach(c, c->req);
  conn_send(c);
}

/* "name@address": whose sessions a TLS connection offers and keeps. */
static void session_key(const gw_pool_key_t *k, char *buf, size_t size)
{
  socklen_t len;
  const gw_sockaddr_t *a = gw_pool_key_addr(k, &len);
  char addr[128];
  gw_addr_format(&a->sa, len, addr, sizeof(addr));
  snprintf(buf, size, "%s@%s", gw_pool_key_name(k), addr);
}

/* Drives the TLS handshake of a new HTTPS connection; the connect timer
 * keeps running until it is done. */
static void conn_handshake(upstream_conn_t *c)
{
  char reason[256];
  int rc = gw_tls_client_handshake(c->tls, reason, sizeof(reason));
  if (rc == GW_TLS_WANT_READ || rc == GW_TLS_WANT_WRITE) {
    gw_pool_conn_read(&c->pc, 1);
    conn_want_write(c, rc == GW_TLS_WANT_WRITE);
    return;
  }
  if (rc == GW_TLS_FAILED) {
    char key[400];
    session_key(c->pc.key, key, sizeof(key));
    gw_log_error("upstream %s: TLS handshake failed: %s", key, reason);
    req_fail(c->req, ERR_TLS);
    return;
  }
  c->pool->stats.tls_handshakes++;
  if (gw_tls_client_resumed(c->tls)) c->pool->stats.tls_resumed++;
  c->state = CONN_ACTIVE;
  conn_ready(c);
}

static void conn_connected(upstream_conn_t *c)
{
  c->pool->stats.opened++;
  gw_tls_client_t *tls = (gw_tls_client_t *)gw_pool_key_tls(c->pc.key);
  if (tls == NULL) {
    conn_ready(c);
    return;
  }
  char key[400];
  session_key(c->pc.key, key, sizeof(key));
  c->tls = gw_tls_client_conn_new(tls, c->pc.fd, gw_pool_key_name(c->pc.key), key);
  if (c->tls == NULL) {
    req_fail(c->req, ERR_NOMEM);
    return;
  }
  c->state = CONN_HANDSHAKE;
  /* The handshake is part of connecting: the connect timer (running unless
   * connect(2) succeeded at once) covers both. */
  if (!event_pending(&c->pc.tev, EV_TIMEOUT, NULL)) conn_set_timer(c, c->req->connect_timeout_ms);
  conn_handshake(c);
}

static const llhttp_settings_t parser_settings;

static void req_connect(gw_client_req_t *r)
{
  gw_upstream_pool_t *pool = r->pool;
  gw_pool_conn_t *pc;
  int rc = gw_pool_connect(pool->conns, r->key, &pc);
  if (pc == NULL) { /* socket() (logged) or memory */
    req_fail(r, ERR_CONNECT);
    return;
  }
  upstream_conn_t *c = (upstream_conn_t *)pc;
  c->pool = pool;
  c->state = CONN_CONNECTING;
  c->req = r;
  r->conn = c;
  llhttp_init(&c->parser, HTTP_RESPONSE, &parser_settings);
  c->parser.data = c;

  if (rc == 0) {
    conn_connected(c);
  } else if (rc == EINPROGRESS) {
    conn_want_write(c, 1);
    conn_set_timer(c, r->connect_timeout_ms);
  } else {
    if (rc != ECONNREFUSED) gw_log_info("upstream: connect(): %s", strerror(rc));
    req_fail(r, rc == ECONNREFUSED ? ERR_REFUSED : ERR_CONNECT);
  }
}

/* The upstream stopped reading (EPIPE/ECONNRESET) and the request cannot be
 * resent: it may have answered early (e.g. a 413). Stop writing and let the
 * read side, which the error has made readable, deliver that response or the
 * error. */
static void conn_stop_sending(upstream_conn_t *c)
{
  gw_client_req_t *r = c->req;
  r->wire_off = r->wire_len;
  r->send_stopped = 1;
  r->no_keepalive = 1;
  conn_want_write(c, 0);
}

/* Streamed request body: moves what body_src holds into body_out, framed. */
static void body_take(gw_client_req_t *r)
{
  size_t n = evbuffer_get_length(r->body_src);
  if (r->body_left >= 0 && (unsigned long long)r->body_left < n) n = (size_t)r->body_left;
  if (n > 0) {
    if (r->body_left < 0) evbuffer_add_printf(r->body_out, "%zx\r\n", n);
    evbuffer_remove_buffer(r->body_src, r->body_out, n);
    if (r->body_left < 0) evbuffer_add(r->body_out, "\r\n", 2);
    else r->body_left -= (long long)n;
    r->body_taken = 1;
    if (r->on_body_sent != NULL) event_active(&r->sent_ev, EV_TIMEOUT, 1);
  }
  if (r->body_complete && evbuffer_get_length(r->body_src) == 0) {
    if (r->body_left < 0) evbuffer_add(r->body_out, "0\r\n\r\n", 5);
    r->body_ended = 1;
  }
}

/* Writes the streamed body after the head, as far as the socket and the
 * caller allow. */
static void body_send(upstream_conn_t *c)
{
  gw_client_req_t *r = c->req;
  for (int i = 0; i < 64; i++) {
    if (evbuffer_get_length(r->body_out) == 0 && !r->body_ended) body_take(r);
    if (evbuffer_get_length(r->body_out) == 0) break;
    int n = conn_write_buffer(c, r->body_out);
    if (n > 0) {
      if (!r->paused) conn_set_timer(c, r->timeout_ms); /* progress: a send timeout */
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      conn_want_write(c, 1);
      return;
    }
    int e = n < 0 ? errno : EPIPE;
    if (e == EPIPE || e == ECONNRESET) conn_stop_sending(c);
    else conn_io_failed(c, e);
    return;
  }
  conn_want_write(c, evbuffer_get_length(r->body_out) > 0);
}

/* 1 when every byte of the request went out. */
static int req_all_sent(const gw_client_req_t *r)
{
  return r->wire_off == r->wire_len && !r->send_stopped &&
         (r->body_src == NULL || (r->body_ended && evbuffer_get_length(r->body_out) == 0));
}

/* Writes what is left of the request; arms the write event on EAGAIN. */
static void conn_send(upstream_conn_t *c)
{
  gw_client_req_t *r = c->req;
  if (r->send_stopped) {
    conn_want_write(c, 0);
    return;
  }
  for (int i = 0; i < 64 && r->wire_off < r->wire_len; i++) {
    ssize_t n = conn_write(c, r->wire + r->wire_off, r->wire_len - r->wire_off);
    if (n > 0) {
      r->wire_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    int e = n < 0 ? errno : EPIPE;
    if ((e == EPIPE || e == ECONNRESET) && !req_can_retry(r, c)) {
      conn_stop_sending(c);
      return;
    }
    conn_io_failed(c, e);
    return;
  }
  if (r->wire_off < r->wire_len) conn_want_write(c, 1);
  else if (r->body_src != NULL) body_send(c);
  else conn_want_write(c, 0);
}

/* ---- response parsing ---- */

static int field_append(upstream_conn_t *c, const char *at, size_t len)
{
  c->field.len = c->name_len + c->value_len; /* the previous field is done with */
  return gw_buf_append(&c->field, at, len);
}

/* The header block (1xx blocks included) may not exceed 64 KiB. */
static int header_bytes_ok(upstream_conn_t *c, const char *at, size_t len)
{
  gw_client_req_t *r = c->req;
  if (r->hdr_bytes + (size_t)(at + len - c->chunk) <= GW_UPSTREAM_MAX_HEADER_BYTES) return 1;
  r->err = ERR_INVALID;
  return 0;
}

static int on_status(llhttp_t *p, const char *at, size_t len)
{
  return header_bytes_ok(p->data, at, len) ? 0 : -1;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
  upstream_conn_t *c = p->data;
  if (c->req->headers_done) return 0; /* trailers: ignored */
  if (!header_bytes_ok(c, at, len) || field_append(c, at, len) < 0) return -1;
  c->name_len += len;
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
  upstream_conn_t *c = p->data;
  if (c->req->headers_done) return 0;
  if (!header_bytes_ok(c, at, len) || field_append(c, at, len) < 0) return -1;
  c->value_len += len;
  return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
  upstream_conn_t *c = p->data;
  gw_client_req_t *r = c->req;
  if (r->headers_done) return 0;
  /* llhttp 8.1 accepts a line ": x": a field without a name is not HTTP. */
  if (c->name_len == 0) return -1;
  int rc = gw_headers_add(&r->res.headers, c->field.data, c->name_len, c->value_len ? c->field.data + c->name_len : "", c->value_len);
  c->name_len = c->value_len = 0;
  return rc;
}

static int on_headers_complete(llhttp_t *p)
{
  upstream_conn_t *c = p->data;
  gw_client_req_t *r = c->req;
  int status = llhttp_get_status_code(p);
  if (status == 101 && r->upgrade && r->on_head != NULL && llhttp_get_http_major(p) == 1) {
    r->res.status = status;
    r->res.http_minor = llhttp_get_http_minor(p);
    r->headers_done = 1;
    r->head_pending = 1; /* on_head from conn_parse, which takes the socket */
    return HPE_PAUSED;
  }
  if (llhttp_get_http_major(p) != 1 || status == 101) {
    r->err = ERR_INVALID; /* 101: only to an upgrade request */
    return -1;
  }
  if (status < 200) {
    r->interim = 1;
    return 1; /* 1xx has no body; llhttp only knows that for 102/103 */
  }
  if ((p->flags & F_CONTENT_LENGTH) && (p->flags & F_TRANSFER_ENCODING)) {
    r->err = ERR_INVALID;
    return -1;
  }
  if ((p->flags & F_CONTENT_LENGTH) && !r->is_head && status != 204 && status != 304 && r->on_head == NULL &&
      p->content_length > r->max_body) {
    r->err = ERR_TOO_LARGE;
    return -1;
  }
  r->res.status = status;
  r->res.http_minor = llhttp_get_http_minor(p);
  r->res.reused = r->conn->served;
  r->headers_done = 1;
  /* llhttp 8.1 would read a Content-Length body after a 304 (or 204). */
  if (r->is_head || status == 204 || status == 304) return 1;
  if (r->on_head != NULL) {
    r->head_pending = 1; /* on_head from conn_parse; a body-less one at message end */
    return HPE_PAUSED;
  }
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
  upstream_conn_t *c = p->data;
  gw_client_req_t *r = c->req;
  r->body_bytes += len;
  if (r->on_head != NULL) {
    /* llhttp may report empty spans (a span restarted at the end of a read) */
    if (len == 0 || r->on_body == NULL) return 0;
    r->span = at;
    r->span_len = len;
    return HPE_PAUSED; /* delivered by conn_parse once llhttp_execute returned */
  }
  if (r->body_bytes > r->max_body || evbuffer_add(r->res.body, at, len) < 0) {
    r->err = ERR_TOO_LARGE;
    return -1;
  }
  return 0;
}

static int on_message_complete(llhttp_t *p)
{
  upstream_conn_t *c = p->data;
  c->req->msg_done = 1;
  return HPE_PAUSED; /* stop right after the message so leftovers are visible */
}

static const llhttp_settings_t parser_settings = {
  .on_status = on_status,
  .on_header_field = on_header_field,
  .on_header_value = on_header_value,
  .on_header_value_complete = on_header_value_complete,
  .on_headers_complete = on_headers_complete,
  .on_body = on_body,
  .on_message_complete = on_message_complete,
};

enum { PARSE_MORE, PARSE_DONE, PARSE_ERROR, PARSE_PAUSED, PARSE_CANCELLED };

/* Streaming: calls on_head, or on_body with the span on_body stashed. */
static void stream_deliver(gw_client_req_t *r, int head)
{
  gw_upstream_pool_t *pool = r->pool;
  pool->cb_depth++;
  r->in_cb = 1;
  if (head) {
    r->head_sent = 1;
    r->on_head(&r->res, r->arg);
  } else {
    const char *at = r->span;
    r->span = NULL;
    r->on_body(at, r->span_len, r->arg);
  }
  r->in_cb = 0;
  pool->cb_depth--;
}

/* Feeds one read to the parser, skipping 1xx interim responses and, in
 * streaming mode, calling on_head/on_body whenever llhttp paused for them.
 * *leftover is the number of bytes not parsed: after the final response on
 * PARSE_DONE, the tail kept across a user pause on PARSE_PAUSED. */
static int conn_parse(upstream_conn_t *c, const char *data, size_t len, size_t *leftover)
{
  gw_client_req_t *r = c->req;
  /* Each interim round consumes a whole 1xx message; their total size is
   * bounded by the header limit, the round count bounds the loop regardless.
   * Each streaming pause consumes at least one byte (on_head happens once). */
  int rounds = 0;
  for (size_t guard = 0, max = len + 4; guard < max; guard++) {
    c->chunk = data;
    llhttp_errno_t e = llhttp_execute(&c->parser, data, len);
    if (e == HPE_OK) {
      if (!r->headers_done) {
        r->hdr_bytes += len;
        if (r->hdr_bytes > GW_UPSTREAM_MAX_HEADER_BYTES) break;
      }
      return PARSE_MORE;
    }
    if (e != HPE_PAUSED) break;
    size_t used = (size_t)(llhttp_get_error_pos(&c->parser) - data);
    if (r->head_pending || r->span != NULL) {
      int head = r->head_pending;
      r->head_pending = 0;
      llhttp_resume(&c->parser);
      data += used;
      len -= used;
      r->rest = data; /* gw_client_detach (a 101) takes these */
      r->rest_len = len;
      stream_deliver(r, head);
      r->rest = NULL;
      if (r->cancelled) return PARSE_CANCELLED;
      if (r->paused) {
        *leftover = len;
        return PARSE_PAUSED;
      }
      continue; /* even with len == 0: message-complete may be due */
    }
    if (!r->msg_done) break;
    if (!r->interim) {
      *leftover = len - used;
      if (r->on_head != NULL && !r->head_sent) { /* HEAD, 204, 304 */
        stream_deliver(r, 1);
        if (r->cancelled) return PARSE_CANCELLED;
      }
      return PARSE_DONE;
    }
    if (++rounds > 1024) break;
    r->hdr_bytes += used;
    gw_headers_clear(&r->res.headers);
    r->interim = r->msg_done = 0;
    c->name_len = c->value_len = 0;
    llhttp_reset(&c->parser);
    data += used;
    len -= used;
    if (len == 0) return PARSE_MORE;
  }
  if (r->err.kind == GW_OK) r->err = ERR_INVALID;
  return PARSE_ERROR;
}

/* Abandons the request: no callback, connection closed, memory freed. */
static void req_abandon(gw_client_req_t *r)
{
  gw_upstream_pool_t *pool = r->pool;
  if (r->conn != NULL) {
    upstream_conn_t *c = r->conn;
    r->conn = NULL;
    c->req = NULL;
    conn_close(c);
  }
  event_del(&r->dev);
  req_free(r);
  if (pool->free_pending && pool->cb_depth == 0) pool_destroy(pool);
}

/* Acts on a conn_parse() result; returns 1 if reading should go on. data/len
 * is what was parsed: the pool buffer, or (from_stash) the connection's stash. */
static int conn_parsed(upstream_conn_t *c, int rc, int from_stash, const char *data, size_t len, size_t leftover)
{
  gw_client_req_t *r = c->req;
  switch (rc) {
  case PARSE_DONE:
    req_finish(r, ERR_NONE,
               leftover == 0 && req_all_sent(r) && !r->no_keepalive && llhttp_should_keep_alive(&c->parser));
    return 0;
  case PARSE_ERROR:
    req_fail(r, r->err);
    return 0;
  case PARSE_CANCELLED:
    req_abandon(r);
    return 0;
  case PARSE_PAUSED:
    if (from_stash) {
      c->stash_off = c->stash_len - leftover;
    } else {
      /* the pool buffer is reused by the next read of any connection */
      if (leftover > c->stash_cap) {
        char *p = realloc(c->stash, leftover);
        if (p == NULL) {
          req_fail(r, ERR_NOMEM);
          return 0;
        }
        c->stash = p;
        c->stash_cap = leftover;
      }
      if (leftover > 0) memcpy(c->stash, data + len - leftover, leftover);
      c->stash_off = 0;
      c->stash_len = leftover;
    }
    c->kick = 1;
    return 0;
  default:
    return 1;
  }
}

static void conn_eof(upstream_conn_t *c)
{
  gw_client_req_t *r = c->req;
  if (req_can_retry(r, c)) {
    req_retry(r);
    return;
  }
  llhttp_errno_t e = llhttp_finish(&c->parser);
  if ((e == HPE_OK || e == HPE_PAUSED) && r->msg_done && !r->interim) {
    req_finish(r, ERR_NONE, 0);
    return;
  }
  if (r->err.kind != GW_OK) { /* an on_message_complete-time error */
    req_fail(r, r->err);
    return;
  }
  req_fail(r, ERR_PREMATURE);
}

static void conn_readable(upstream_conn_t *c)
{
  gw_client_req_t *r = c->req;
  if (c->kick) { /* resumed: what was read before the pause comes first */
    c->kick = 0;
    const char *data = c->stash_len > 0 ? c->stash + c->stash_off : "";
    size_t len = c->stash_len - c->stash_off, leftover = 0;
    int rc = conn_parse(c, data, len, &leftover);
    if (!conn_parsed(c, rc, 1, data, len, leftover)) return;
    c->stash_off = c->stash_len = 0;
  }
  char *buf = c->pool->rbuf;
  for (int i = 0; i < GW_UPSTREAM_READS_PER_EVENT; i++) {
    ssize_t n = conn_recv(c, buf, GW_UPSTREAM_READ_SIZE);
    if (n > 0) {
      size_t leftover = 0;
      r->got_bytes = 1;
      if (r->on_head != NULL) conn_set_timer(c, r->timeout_ms); /* a read timeout */
      int rc = conn_parse(c, buf, (size_t)n, &leftover);
      if (!conn_parsed(c, rc, 0, buf, (size_t)n, leftover)) return;
      if ((size_t)n < GW_UPSTREAM_READ_SIZE) break;
      continue;
    }
    if (n == 0) {
      conn_eof(c);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    conn_io_failed(c, errno);
    return;
  }
  /* TLS may hold decrypted bytes (or an end) that no socket event announces */
  if (c->tls != NULL && gw_tls_client_pending(c->tls)) gw_pool_conn_kick_read(&c->pc);
}

/* ---- libevent callbacks ---- */

static void on_conn_read(gw_pool_conn_t *pc)
{
  upstream_conn_t *c = (upstream_conn_t *)pc;
  if (c->state == CONN_HANDSHAKE) {
    conn_handshake(c);
    return;
  }
  conn_readable(c); /* never idle here: pool.c handles those */
}

static void on_conn_write(gw_pool_conn_t *pc)
{
  upstream_conn_t *c = (upstream_conn_t *)pc;
  if (c->state == CONN_HANDSHAKE) {
    conn_handshake(c);
    return;
  }
  if (c->state == CONN_ACTIVE) {
    conn_send(c);
    return;
  }
  int err = gw_pool_conn_error(pc);
  if (err == EINPROGRESS || err == EINTR) return;
  if (err != 0) {
    if (err != ECONNREFUSED) gw_log_info("upstream: connect: %s", strerror(err));
    req_fail(c->req, err == ECONNREFUSED ? ERR_REFUSED : ERR_CONNECT);
    return;
  }
  conn_connected(c);
}

static void on_conn_timeout(gw_pool_conn_t *pc)
{
  upstream_conn_t *c = (upstream_conn_t *)pc;
  switch (c->state) {
  case CONN_CONNECTING:
    req_fail(c->req, ERR_CONNECT_TIMEOUT);
    break;
  case CONN_HANDSHAKE: {
    char key[400];
    session_key(c->pc.key, key, sizeof(key));
    gw_log_error("upstream %s: TLS handshake timed out", key);
    req_fail(c->req, ERR_HANDSHAKE_TIMEOUT);
    break;
  }
  case CONN_ACTIVE:
    req_fail(c->req, ERR_TIMEOUT);
    break;
  case CONN_IDLE: /* pool.c closes idle ones itself */
    break;
  }
}

/* ---- public API ---- */

gw_upstream_pool_t *gw_upstream_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms)
{
  static const gw_pool_conn_ops_t ops = {.on_read = on_conn_read,
                                         .on_write = on_conn_write,
                                         .on_timeout = on_conn_timeout,
                                         .on_free = on_conn_free,
                                         .idle_check = on_conn_idle_check};
  gw_upstream_pool_t *pool = calloc(1, sizeof(*pool));
  if (pool == NULL) return NULL;
  pool->base = base;
  pool->conns = gw_pool_new(base, keepalive_max, idle_timeout_ms, &ops, sizeof(upstream_conn_t));
  if (pool->conns == NULL) {
    free(pool);
    return NULL;
  }
  return pool;
}

static void pool_destroy(gw_upstream_pool_t *pool)
{
  gw_pool_free(pool->conns);
  if (pool->live_reqs > 0)
    gw_log_error("upstream: pool freed with %lu requests in flight", pool->live_reqs);
  for (int i = 0; i < pool->nspare; i++) evbuffer_free(pool->spare_bodies[i]);
  free(pool);
}

void gw_upstream_pool_free(gw_upstream_pool_t *pool)
{
  if (pool == NULL) return;
  if (pool->cb_depth > 0) {
    pool->free_pending = 1; /* finished when the callback returns */
    return;
  }
  pool_destroy(pool);
}

void gw_upstream_pool_stats(const gw_upstream_pool_t *pool, gw_upstream_stats_t *out)
{
  *out = pool->stats;
  out->idle = gw_pool_idle_count(pool->conns);
}

static int method_is(const char *m, size_t len, const char *s)
{
  return len == strlen(s) && memcmp(m, s, len) == 0;
}

/* Fills addr from params; returns its length, or 0 if unusable. */
static socklen_t params_sockaddr(const gw_client_params_t *p, gw_sockaddr_t *addr)
{
  memset(addr, 0, sizeof(*addr));
  if (p->unix_path != NULL) return gw_addr_from_unix(p->unix_path, addr);
  if (p->addr != NULL) {
    if (p->addrlen == 0 || p->addrlen > sizeof(*addr)) return 0;
    memcpy(addr, p->addr, p->addrlen);
    return p->addrlen;
  }
  if (p->host == NULL) return 0;
  struct sockaddr_storage ss;
  socklen_t len = gw_addr_from_ip(p->host, p->port, &ss);
  if (len > sizeof(*addr)) return 0;
  memcpy(addr, &ss, len);
  return len;
}

/* The name an HTTPS connection is made for (SNI, certificate check, pool
 * key): the settings' server_name, else the host. */
static const char *tls_name(const gw_client_params_t *p)
{
  if (p->tls == NULL) return NULL;
  const char *n = gw_tls_client_server_name(p->tls);
  if (n == NULL) n = p->host;
  return n ? n : "";
}

static int header_is(const gw_header_t *h, const char *name)
{
  size_t n = strlen(name);
  return h->name_len == n && strncasecmp(h->name, name, n) == 0;
}

static int sendable_header(const gw_header_t *h)
{
  /* We frame the body ourselves: Content-Length, or chunked for a streamed
   * body of unknown length. (The lengths spare the common case two compares.) */
  if ((h->name_len == 14 && header_is(h, "content-length")) || (h->name_len == 17 && header_is(h, "transfer-encoding")))
    return 0;
  return gw_header_field_is_safe(h->name, h->name_len, h->value, h->value_len);
}

static char *put(char *p, const char *s, size_t n)
{
  memcpy(p, s, n);
  return p + n;
}

gw_client_req_t *gw_client_request(gw_upstream_pool_t *pool, const gw_client_params_t *params,
                                   gw_client_done_cb cb, void *arg)
{
  const char *method = params->method ? params->method : "GET";
  const char *target = params->target ? params->target : "/";
  size_t mlen = strlen(method), tlen = strlen(target);
  const gw_headers_t *hs = params->headers;
  const char *bad = NULL;

  gw_sockaddr_t addr;
  socklen_t addrlen = params_sockaddr(params, &addr);
  if (addrlen == 0) bad = "bad upstream address";
  if (mlen == 0) bad = "empty method";
  else if (bad == NULL && !gw_is_token(method, mlen)) bad = "bad method";
  if (tlen == 0) bad = "empty request target";
  for (size_t i = 0; i < tlen && bad == NULL; i++)
    if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] == 0x7f) bad = "bad request target";

  int streamed = params->body_source != NULL;
  size_t body_len = streamed ? 0 : params->body_len;
  int has_cl = body_len > 0 || method_is(method, mlen, "POST") || method_is(method, mlen, "PUT") ||
               method_is(method, mlen, "PATCH");
  int add_close = gw_pool_keepalive_max(pool->conns) <= 0;
  int no_keepalive = add_close;
  char cl[48];
  size_t cl_len = 0;
  if (streamed && params->body_length < 0)
    cl_len = (size_t)snprintf(cl, sizeof(cl), "Transfer-Encoding: chunked\r\n");
  else if (streamed)
    cl_len = (size_t)snprintf(cl, sizeof(cl), "Content-Length: %lld\r\n", params->body_length);
  else if (has_cl)
    cl_len = (size_t)snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", body_len);

  size_t size = 0;
  uint64_t dropped = 0; /* fields 0..63 found unsendable here, not checked twice */
  if (bad == NULL) {
    size = mlen + 1 + tlen + sizeof(" HTTP/1.1\r\n") - 1 + cl_len + 2;
    for (size_t i = 0; hs != NULL && i < hs->count; i++) {
      const gw_header_t *h = &hs->items[i];
      if (!sendable_header(h)) {
        if (i < 64) dropped |= (uint64_t)1 << i;
        if (!header_is(h, "content-length") && !header_is(h, "transfer-encoding"))
          gw_log_warn("upstream: dropping unsafe header field \"%.*s\"", (int)h->name_len, h->name);
        continue;
      }
      if (header_is(h, "connection")) {
        add_close = 0;
        if (strcasestr(h->value, "close") != NULL) no_keepalive = 1;
      }
      size += h->name_len + h->value_len + 4;
    }
    if (add_close) size += sizeof("Connection: close\r\n") - 1;
    if (body_len > SIZE_MAX - sizeof(gw_client_req_t) - size) return NULL;
    size += body_len;
  }

  gw_client_req_t *r = malloc(sizeof(*r) + size);
  if (r == NULL) return NULL;
  memset(r, 0, sizeof(*r));
  r->pool = pool;
  r->cb = cb;
  r->arg = arg;
  r->connect_timeout_ms = params->connect_timeout_ms > 0 ? params->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
  r->timeout_ms = params->timeout_ms > 0 ? params->timeout_ms : DEFAULT_TIMEOUT_MS;
  r->max_body = params->max_response_body > 0 ? params->max_response_body : DEFAULT_MAX_RESPONSE_BODY;
  r->is_head = method_is(method, mlen, "HEAD");
  r->idempotent = r->is_head || method_is(method, mlen, "GET") || method_is(method, mlen, "OPTIONS") ||
                  method_is(method, mlen, "PUT") || method_is(method, mlen, "DELETE") ||
                  method_is(method, mlen, "TRACE");
  r->no_keepalive = no_keepalive;
  r->on_head = params->on_head;
  r->on_body = params->on_body;
  r->upgrade = params->upgrade != 0 && params->on_head != NULL;
  if (r->upgrade) r->no_keepalive = 1;
  gw_headers_init(&r->res.headers);
  r->res.body = pool->nspare > 0 ? pool->spare_bodies[--pool->nspare] : evbuffer_new();
  if (r->res.body == NULL) {
    free(r);
    return NULL;
  }
  if (streamed) {
    r->body_out = evbuffer_new();
    r->body_src = params->body_source;
    r->body_left = params->body_length;
    r->body_complete = params->body_complete != 0;
    r->on_body_sent = params->on_body_sent;
    event_assign(&r->sent_ev, pool->base, -1, 0, on_body_taken, r);
  }
  if (bad == NULL && (!streamed || r->body_out != NULL)) r->key = gw_pool_key_get(pool->conns, &addr, addrlen, params->tls, tls_name(params));
  if (bad == NULL && r->key == NULL) {
    if (r->body_out != NULL) evbuffer_free(r->body_out);
    evbuffer_free(r->res.body);
    free(r);
    return NULL;
  }
  pool->live_reqs++;
  event_assign(&r->dev, pool->base, -1, 0, on_req_deferred, r);
  r->starting = 1;

  if (bad != NULL) {
    gw_log_error("upstream: %s (%s %s)", bad, method, params->unix_path ? params->unix_path : params->host ? params->host : "-");
    req_fail(r, ERR_CONNECT);
    r->starting = 0;
    return r;
  }

  char *p = r->wire;
  p = put(p, method, mlen);
  *p++ = ' ';
  p = put(p, target, tlen);
  p = put(p, " HTTP/1.1\r\n", sizeof(" HTTP/1.1\r\n") - 1);
  for (size_t i = 0; hs != NULL && i < hs->count; i++) {
    const gw_header_t *h = &hs->items[i];
    if (i < 64 ? (dropped >> i) & 1 : !sendable_header(h)) continue;
    p = put(p, h->name, h->name_len);
    p = put(p, ": ", 2);
    p = put(p, h->value, h->value_len);
    p = put(p, "\r\n", 2);
  }
  if (add_close) p = put(p, "Connection: close\r\n", sizeof("Connection: close\r\n") - 1);
  p = put(p, cl, cl_len);
  p = put(p, "\r\n", 2);
  if (body_len > 0) p = put(p, params->body, body_len);
  r->wire_len = (size_t)(p - r->wire);

  /* Most recently parked first; a request that cannot be retried (not
   * idempotent, or a streamed body taken once) checks for a connection that
   * died unnoticed before trusting it. */
  upstream_conn_t *c = NULL;
  while (!r->upgrade && (c = (upstream_conn_t *)gw_pool_take(pool->conns, r->key)) != NULL) {
    c->state = CONN_ACTIVE;
    if ((!r->idempotent || streamed) && gw_pool_conn_is_stale(&c->pc)) {
      conn_close(c);
      continue;
    }
    break;
  }
  if (c != NULL) {
    pool->stats.reused++;
    conn_attach(c, r);
    conn_send(c);
  } else {
    req_connect(r);
  }
  r->starting = 0;
  return r;
}

void gw_client_cancel(gw_client_req_t *r)
{
  if (r == NULL) return;
  if (r->in_cb) {
    r->cancelled = 1; /* conn_parse() abandons it once the callback returned */
    return;
  }
  req_abandon(r);
}

int gw_client_detach(gw_client_req_t *r, struct evbuffer *rest, gw_tls_client_conn_t **tls)
{
  if (r == NULL || !r->in_cb || r->cancelled || !r->upgrade || r->res.status != 101 || r->conn == NULL) return -1;
  if (r->conn->tls != NULL && tls == NULL) return -1; /* the caller relays plain sockets only */
  r->cancelled = 1; /* conn_parse() abandons it once on_head returned */
  if (r->rest_len > 0 && evbuffer_add(rest, r->rest, r->rest_len) < 0) return -1;
  upstream_conn_t *c = r->conn;
  int fd = c->pc.fd;
  c->pc.fd = -1; /* gw_pool_close() now closes nothing */
  if (tls != NULL) *tls = c->tls; /* its state goes with the socket (NULL: plain) */
  c->tls = NULL;
  gw_pool_conn_read(&c->pc, 0);
  gw_pool_conn_write(&c->pc, 0);
  gw_pool_conn_timer_stop(&c->pc);
  return fd;
}

void gw_client_body_more(gw_client_req_t *r, int complete)
{
  if (r == NULL || r->body_src == NULL || r->cancelled) return;
  if (complete) r->body_complete = 1;
  upstream_conn_t *c = r->conn;
  if (c == NULL || c->state != CONN_ACTIVE || c->pc.wev_added) return; /* sent when it can be */
  r->starting = 1; /* a failure now is reported from the loop */
  conn_send(c);
  r->starting = 0;
}

void gw_client_pause(gw_client_req_t *r)
{
  if (r == NULL || r->paused || r->cancelled) return;
  r->paused = 1;
  /* While connecting the connect timer keeps running; conn_connected() and
   * conn_attach() leave reading off. */
  if (r->conn != NULL && r->conn->state == CONN_ACTIVE) conn_read_off(r->conn);
}

void gw_client_resume(gw_client_req_t *r)
{
  if (r == NULL || !r->paused || r->cancelled) return;
  r->paused = 0;
  upstream_conn_t *c = r->conn;
  if (c == NULL || c->state != CONN_ACTIVE) return;
  conn_read_on(c);
  conn_set_timer(c, r->timeout_ms);
  /* Inside on_head/on_body conn_parse() just goes on; otherwise parse what
   * was kept (or what TLS holds) from the loop, never from inside this call. */
  if ((c->kick || (c->tls != NULL && gw_tls_client_pending(c->tls))) && !r->in_cb) gw_pool_conn_kick_read(&c->pc);
}
