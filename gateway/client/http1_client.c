/* http1_client.c - the non-blocking HTTP/1.1 client: the HTTP/1 parts of a
 * pooled exchange (pooled_exchange.c owns connecting, sending, pausing,
 * retrying and parking; sockets and the idle pool are pool.c's).
 *
 * A request is serialised once into a single buffer allocated with the
 * request (so a retry can resend it); a streamed request body is framed
 * (Content-Length or chunked) from the caller's evbuffer when the core asks.
 * The response is read into one per-pool buffer and fed to the connection's
 * llhttp parser; nothing else is buffered on the input side because a
 * connection is only ever reused when the response ended exactly at the end
 * of what was read. The one exception is a streamed response paused from
 * inside on_head/on_body: the bytes of that read not parsed yet are copied
 * into the connection (the "stash") and parsed first once resumed.
 *
 * Buffered mode collects the body into an evbuffer. Streaming mode (on_head
 * set) pauses llhttp (HPE_PAUSED) at the end of the header block and at the
 * end of every body span, calls the user back after llhttp_execute() has
 * returned, then resumes the parser and continues from where it stopped; a
 * pause requested by the user leaves the rest in the stash.
 *
 * HTTPS upstreams: a TLS client connection (tls_client.c) between the
 * socket and the parser, its handshake part of connecting; the core writes
 * through it (conn->io).
 *
 * Re-entrancy: on_head/on_body run from conn_parse() between two
 * llhttp_execute() calls, inside gw_px_enter_cb/gw_px_leave_cb; a cancel
 * there abandons the request once the callback returned, and conn_parse()
 * reports PARSE_CANCELLED without touching it again; the pool read buffer
 * stays valid during them because nothing reads synchronously (resume
 * defers to the loop). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <llhttp.h>

#include "addr.h"
#include "buf.h"
#include "error.h"
#include "headers.h"
#include "log.h"
#include "pooled_exchange.h"
#include "tls_client.h"
#include "http1_client.h"

#define GW_UPSTREAM_READ_SIZE (64 * 1024)
#define GW_UPSTREAM_MAX_HEADER_BYTES (64 * 1024)
#define GW_UPSTREAM_SPARE_BODIES 8
#define GW_UPSTREAM_READS_PER_EVENT 4

#define DEFAULT_CONNECT_TIMEOUT_MS 5000
#define DEFAULT_TIMEOUT_MS 60000
#define DEFAULT_MAX_RESPONSE_BODY ((size_t)64 * 1024 * 1024)

/* The failures found here: their kind and log text (pooled_exchange.c has
 * the connection ones). */
#define ERR_PREMATURE_INIT {GW_ERR_CLOSED, "upstream closed connection prematurely"}
static const gw_err_t ERR_PREMATURE = ERR_PREMATURE_INIT;
static const gw_err_t ERR_HANDSHAKE_TIMEOUT = {GW_ERR_CONNECT_TIMEOUT, "upstream TLS handshake timed out"};
static const gw_err_t ERR_TLS = {GW_ERR_TLS, "upstream TLS handshake failed"};
static const gw_err_t ERR_INVALID = {GW_ERR_BAD_RESPONSE, "invalid upstream response"};
static const gw_err_t ERR_TOO_LARGE = {GW_ERR_TOO_LARGE, "upstream response too large"};
static const gw_err_t ERR_CONNECT = {GW_ERR_CONNECT, "cannot connect to upstream"};
static const gw_err_t ERR_NOMEM = {GW_ERR_NOMEM, "out of memory"};
static const gw_err_t ERR_NONE = {GW_OK, NULL};

typedef struct upstream_conn_s {
  gw_px_conn_t xc;             /* first: the pooled connection (pooled_exchange.h) */
  gw_tls_client_conn_t *tls;   /* owned; an HTTPS upstream (the key has TLS settings) */
  unsigned kick : 1;           /* streaming, paused mid-read: parse the stash (maybe
                                  empty: the parser may still owe message-complete) */
  llhttp_t parser;
  const char *chunk;           /* start of the data given to llhttp_execute */
  gw_buf_t field;              /* header name then value, accumulated across reads */
  size_t name_len, value_len;  /* of them in field */
  char *stash;                 /* unparsed bytes kept across a pause: [stash_off, stash_len) */
  size_t stash_off, stash_len, stash_cap;
} upstream_conn_t;

struct gw_client_req_s {
  gw_px_t x;                   /* first: the exchange (pooled_exchange.h) */
  gw_client_done_cb cb;
  gw_client_head_cb on_head;   /* non-NULL: streaming mode */
  gw_client_body_cb on_body;
  const char *span;            /* streaming: body span stashed by on_body for delivery */
  size_t span_len;
  size_t max_body;
  size_t body_bytes;
  size_t hdr_bytes;            /* response bytes before the final header block ended */
  unsigned is_head : 1;
  unsigned headers_done : 1;   /* final (non-1xx) header block parsed */
  unsigned interim : 1;        /* the message being parsed is a 1xx */
  unsigned msg_done : 1;
  unsigned head_pending : 1;   /* streaming: llhttp paused at headers-complete */
  unsigned head_sent : 1;      /* streaming: on_head was called */
  unsigned upgrade : 1;        /* params.upgrade: a 101 goes to on_head (gw_client_detach) */
  const char *rest;            /* inside on_head: the bytes of this read past the head */
  size_t rest_len;
  long long body_left;         /* a streamed body: Content-Length bytes not taken yet; -1: chunked */
  gw_client_response_t res;
  char wire[];                 /* serialised request: head + body (unless streamed) */
};

/* The pool's proto state: response buffers kept for reuse, the read buffer. */
typedef struct {
  struct evbuffer *spare_bodies[GW_UPSTREAM_SPARE_BODIES];
  int nspare;
  char rbuf[GW_UPSTREAM_READ_SIZE];
} http1_state_t;

static gw_client_req_t *req_of(upstream_conn_t *c)
{
  return (gw_client_req_t *)c->xc.x;
}

static http1_state_t *state_of(gw_pool_t *pool)
{
  return pool->proto;
}

/* ---- connections ---- */

static const llhttp_settings_t parser_settings;

static int conn_init(gw_px_conn_t *xc)
{
  upstream_conn_t *c = (upstream_conn_t *)xc;
  c->tls = NULL;
  llhttp_init(&c->parser, HTTP_RESPONSE, &parser_settings);
  c->parser.data = c;
  return 0;
}

static void conn_attach(gw_px_conn_t *xc)
{
  upstream_conn_t *c = (upstream_conn_t *)xc;
  c->name_len = c->value_len = 0;
  llhttp_reset(&c->parser);
}

/* Going idle: a pause's leftovers are done with. */
static void conn_park(gw_px_conn_t *xc)
{
  upstream_conn_t *c = (upstream_conn_t *)xc;
  free(c->stash);
  c->stash = NULL;
  c->stash_off = c->stash_len = c->stash_cap = 0;
  c->kick = 0;
}

static void conn_free(gw_px_conn_t *xc)
{
  upstream_conn_t *c = (upstream_conn_t *)xc;
  gw_buf_dispose(&c->field);
  free(c->stash);
  c->stash = NULL;
  if (c->tls != NULL) {
    if (xc->pc.fd < 0) gw_tls_client_conn_forget_fd(c->tls); /* detached: not ours to write to */
    gw_tls_client_conn_free(c->tls); /* close_notify on the still open socket */
    c->tls = NULL;
  }
}

/* An idle HTTPS connection got bytes: a session ticket is fine, anything
 * else (close_notify, data) drops it. Plain connections never have any. */
static int conn_idle_check(gw_pool_conn_t *pc)
{
  upstream_conn_t *c = (upstream_conn_t *)pc;
  return c->tls != NULL && gw_tls_client_idle_ok(c->tls);
}

/* Bytes the parser still owes the user after a pause, or TLS holds. */
static int conn_kept(gw_px_conn_t *xc)
{
  upstream_conn_t *c = (upstream_conn_t *)xc;
  return c->kick || (c->tls != NULL && gw_tls_client_pending(c->tls));
}

/* The socket I/O, through TLS for an HTTPS upstream: as recv(2)/send(2). */
static ssize_t conn_recv(upstream_conn_t *c, void *buf, size_t n)
{
  if (c->tls != NULL) return gw_tls_client_read(c->tls, buf, n);
  return recv(c->xc.pc.fd, buf, n, 0);
}

static ssize_t tls_write(gw_px_conn_t *xc, const void *buf, size_t n)
{
  return gw_tls_client_write(((upstream_conn_t *)xc)->tls, buf, n);
}

/* As evbuffer_write(), for the streamed request body: up to one record's
 * worth at a time (16 KiB, one write(2)). */
static int tls_write_buffer(gw_px_conn_t *xc, struct evbuffer *out)
{
  size_t len = evbuffer_get_length(out);
  if (len > 16384) len = 16384;
  unsigned char *p = evbuffer_pullup(out, (ssize_t)len);
  if (p == NULL) {
    errno = ENOMEM;
    return -1;
  }
  ssize_t n = gw_tls_client_write(((upstream_conn_t *)xc)->tls, p, len);
  if (n > 0) evbuffer_drain(out, (size_t)n);
  return (int)n;
}

static const gw_px_io_t tls_io = {.write = tls_write, .write_buffer = tls_write_buffer};

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
static void conn_handshake(gw_px_conn_t *xc)
{
  upstream_conn_t *c = (upstream_conn_t *)xc;
  char reason[256];
  int rc = gw_tls_client_handshake(c->tls, reason, sizeof(reason));
  if (rc == GW_TLS_WANT_READ || rc == GW_TLS_WANT_WRITE) {
    gw_pool_conn_read(&xc->pc, 1);
    gw_pool_conn_write(&xc->pc, rc == GW_TLS_WANT_WRITE);
    return;
  }
  if (rc == GW_TLS_FAILED) {
    char key[400];
    session_key(xc->pc.key, key, sizeof(key));
    gw_log_error("upstream %s: TLS handshake failed: %s", key, reason);
    gw_px_fail(xc->x, ERR_TLS);
    return;
  }
  gw_pool_t *pool = xc->pc.pool;
  pool->tls_handshakes++;
  if (gw_tls_client_resumed(c->tls)) pool->tls_resumed++;
  gw_px_conn_ready(xc);
}

static void conn_handshake_timeout(gw_px_conn_t *xc)
{
  char key[400];
  session_key(xc->pc.key, key, sizeof(key));
  gw_log_error("upstream %s: TLS handshake timed out", key);
  gw_px_fail(xc->x, ERR_HANDSHAKE_TIMEOUT);
}

/* connect(2) done: an HTTPS upstream shakes hands first. */
static int conn_connected(gw_px_conn_t *xc)
{
  upstream_conn_t *c = (upstream_conn_t *)xc;
  gw_tls_client_t *tls = (gw_tls_client_t *)gw_pool_key_tls(xc->pc.key);
  if (tls == NULL) return 0;
  char key[400];
  session_key(xc->pc.key, key, sizeof(key));
  c->tls = gw_tls_client_conn_new(tls, xc->pc.fd, gw_pool_key_name(xc->pc.key), key);
  if (c->tls == NULL) {
    gw_px_fail(xc->x, ERR_NOMEM);
    return 1;
  }
  xc->io = &tls_io;
  xc->state = GW_PX_HANDSHAKE;
  /* The handshake is part of connecting: the connect timer (running unless
   * connect(2) succeeded at once) covers both. */
  if (!event_pending(&xc->pc.tev, EV_TIMEOUT, NULL)) gw_pool_conn_timer(&xc->pc, xc->x->connect_timeout_ms);
  conn_handshake(xc);
  return 1;
}

/* ---- requests ---- */

static void req_reset(gw_px_t *x)
{
  gw_client_req_t *r = (gw_client_req_t *)x;
  gw_headers_clear(&r->res.headers);
  evbuffer_drain(r->res.body, evbuffer_get_length(r->res.body));
  r->res.status = 0;
  r->res.http_minor = 0;
  r->body_bytes = r->hdr_bytes = 0;
  r->headers_done = r->interim = r->msg_done = 0;
  r->head_pending = r->head_sent = 0;
  r->span = NULL;
}

static void req_done(gw_px_t *x, gw_err_t err)
{
  gw_client_req_t *r = (gw_client_req_t *)x;
  r->cb(err, err.kind != GW_OK ? NULL : &r->res, x->arg);
}

static void req_free(gw_px_t *x)
{
  gw_client_req_t *r = (gw_client_req_t *)x;
  http1_state_t *st = state_of(x->pool);
  gw_headers_dispose(&r->res.headers);
  if (st->nspare < GW_UPSTREAM_SPARE_BODIES && !x->pool->free_pending) {
    evbuffer_drain(r->res.body, evbuffer_get_length(r->res.body));
    st->spare_bodies[st->nspare++] = r->res.body;
  } else {
    evbuffer_free(r->res.body);
  }
  free(r);
}

/* Streamed request body: moves what body_src holds into body_out, framed. */
static size_t frame_body(gw_px_t *x)
{
  gw_client_req_t *r = (gw_client_req_t *)x;
  size_t n = evbuffer_get_length(x->body_src);
  if (r->body_left >= 0 && (unsigned long long)r->body_left < n) n = (size_t)r->body_left;
  if (n > 0) {
    if (r->body_left < 0) evbuffer_add_printf(x->body_out, "%zx\r\n", n);
    evbuffer_remove_buffer(x->body_src, x->body_out, n);
    if (r->body_left < 0) evbuffer_add(x->body_out, "\r\n", 2);
    else r->body_left -= (long long)n;
  }
  if (x->body_complete && evbuffer_get_length(x->body_src) == 0) {
    if (r->body_left < 0) evbuffer_add(x->body_out, "0\r\n\r\n", 5);
    x->body_ended = 1;
  }
  return n;
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
  gw_client_req_t *r = req_of(c);
  if (r->hdr_bytes + (size_t)(at + len - c->chunk) <= GW_UPSTREAM_MAX_HEADER_BYTES) return 1;
  r->x.err = ERR_INVALID;
  return 0;
}

static int on_status(llhttp_t *p, const char *at, size_t len)
{
  return header_bytes_ok(p->data, at, len) ? 0 : -1;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
  upstream_conn_t *c = p->data;
  if (req_of(c)->headers_done) return 0; /* trailers: ignored */
  if (!header_bytes_ok(c, at, len) || field_append(c, at, len) < 0) return -1;
  c->name_len += len;
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
  upstream_conn_t *c = p->data;
  if (req_of(c)->headers_done) return 0;
  if (!header_bytes_ok(c, at, len) || field_append(c, at, len) < 0) return -1;
  c->value_len += len;
  return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
  upstream_conn_t *c = p->data;
  gw_client_req_t *r = req_of(c);
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
  gw_client_req_t *r = req_of(c);
  int status = llhttp_get_status_code(p);
  if (status == 101 && r->upgrade && r->on_head != NULL && llhttp_get_http_major(p) == 1) {
    r->res.status = status;
    r->res.http_minor = llhttp_get_http_minor(p);
    r->headers_done = 1;
    r->head_pending = 1; /* on_head from conn_parse, which takes the socket */
    return HPE_PAUSED;
  }
  if (llhttp_get_http_major(p) != 1 || status == 101) {
    r->x.err = ERR_INVALID; /* 101: only to an upgrade request */
    return -1;
  }
  if (status < 200) {
    r->interim = 1;
    return 1; /* 1xx has no body; llhttp only knows that for 102/103 */
  }
  if ((p->flags & F_CONTENT_LENGTH) && (p->flags & F_TRANSFER_ENCODING)) {
    r->x.err = ERR_INVALID;
    return -1;
  }
  if ((p->flags & F_CONTENT_LENGTH) && !r->is_head && status != 204 && status != 304 && r->on_head == NULL &&
      p->content_length > r->max_body) {
    r->x.err = ERR_TOO_LARGE;
    return -1;
  }
  r->res.status = status;
  r->res.http_minor = llhttp_get_http_minor(p);
  r->res.reused = r->x.conn->served;
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
  gw_client_req_t *r = req_of(c);
  r->body_bytes += len;
  if (r->on_head != NULL) {
    /* llhttp may report empty spans (a span restarted at the end of a read) */
    if (len == 0 || r->on_body == NULL) return 0;
    r->span = at;
    r->span_len = len;
    return HPE_PAUSED; /* delivered by conn_parse once llhttp_execute returned */
  }
  if (r->body_bytes > r->max_body || evbuffer_add(r->res.body, at, len) < 0) {
    r->x.err = ERR_TOO_LARGE;
    return -1;
  }
  return 0;
}

static int on_message_complete(llhttp_t *p)
{
  upstream_conn_t *c = p->data;
  req_of(c)->msg_done = 1;
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
/* Returns 1 when the request was cancelled meanwhile (it is gone). */
static int stream_deliver(gw_client_req_t *r, int head)
{
  gw_px_enter_cb(&r->x);
  if (head) {
    r->head_sent = 1;
    r->on_head(&r->res, r->x.arg);
  } else {
    const char *at = r->span;
    r->span = NULL;
    r->on_body(at, r->span_len, r->x.arg);
  }
  return gw_px_leave_cb(&r->x);
}

/* Feeds one read to the parser, skipping 1xx interim responses and, in
 * streaming mode, calling on_head/on_body whenever llhttp paused for them.
 * *leftover is the number of bytes not parsed: after the final response on
 * PARSE_DONE, the tail kept across a user pause on PARSE_PAUSED. */
static int conn_parse(upstream_conn_t *c, const char *data, size_t len, size_t *leftover)
{
  gw_client_req_t *r = req_of(c);
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
      if (stream_deliver(r, head)) return PARSE_CANCELLED;
      r->rest = NULL;
      if (r->x.paused) {
        *leftover = len;
        return PARSE_PAUSED;
      }
      continue; /* even with len == 0: message-complete may be due */
    }
    if (!r->msg_done) break;
    if (!r->interim) {
      *leftover = len - used;
      if (r->on_head != NULL && !r->head_sent) { /* HEAD, 204, 304 */
        if (stream_deliver(r, 1)) return PARSE_CANCELLED;
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
  if (r->x.err.kind == GW_OK) r->x.err = ERR_INVALID;
  return PARSE_ERROR;
}

/* Acts on a conn_parse() result; returns 1 if reading should go on. data/len
 * is what was parsed: the pool buffer, or (from_stash) the connection's stash. */
static int conn_parsed(upstream_conn_t *c, int rc, int from_stash, const char *data, size_t len, size_t leftover)
{
  if (rc == PARSE_CANCELLED) return 0; /* abandoned already: c is gone too */
  gw_client_req_t *r = req_of(c);
  switch (rc) {
  case PARSE_DONE:
    gw_px_finish(&r->x, ERR_NONE,
                 leftover == 0 && gw_px_all_sent(&r->x) && !r->x.no_keepalive && llhttp_should_keep_alive(&c->parser));
    return 0;
  case PARSE_ERROR:
    gw_px_fail(&r->x, r->x.err);
    return 0;
  case PARSE_PAUSED:
    if (from_stash) {
      c->stash_off = c->stash_len - leftover;
    } else {
      /* the pool buffer is reused by the next read of any connection */
      if (leftover > c->stash_cap) {
        char *p = realloc(c->stash, leftover);
        if (p == NULL) {
          gw_px_fail(&r->x, ERR_NOMEM);
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
  gw_client_req_t *r = req_of(c);
  if (gw_px_retry_on_eof(&c->xc)) return;
  llhttp_errno_t e = llhttp_finish(&c->parser);
  if ((e == HPE_OK || e == HPE_PAUSED) && r->msg_done && !r->interim) {
    gw_px_finish(&r->x, ERR_NONE, 0);
    return;
  }
  if (r->x.err.kind != GW_OK) { /* an on_message_complete-time error */
    gw_px_fail(&r->x, r->x.err);
    return;
  }
  gw_px_fail(&r->x, ERR_PREMATURE);
}

static void conn_readable(gw_px_conn_t *xc)
{
  upstream_conn_t *c = (upstream_conn_t *)xc;
  if (c->kick) { /* resumed: what was read before the pause comes first */
    c->kick = 0;
    const char *data = c->stash_len > 0 ? c->stash + c->stash_off : "";
    size_t len = c->stash_len - c->stash_off, leftover = 0;
    int rc = conn_parse(c, data, len, &leftover);
    if (!conn_parsed(c, rc, 1, data, len, leftover)) return;
    c->stash_off = c->stash_len = 0;
  }
  char *buf = state_of(xc->pc.pool)->rbuf;
  for (int i = 0; i < GW_UPSTREAM_READS_PER_EVENT; i++) {
    ssize_t n = conn_recv(c, buf, GW_UPSTREAM_READ_SIZE);
    if (n > 0) {
      size_t leftover = 0;
      gw_px_got_bytes(xc); /* streaming: a read timeout */
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
    gw_px_io_failed(xc, errno);
    return;
  }
  /* TLS may hold decrypted bytes (or an end) that no socket event announces */
  if (c->tls != NULL && gw_tls_client_pending(c->tls)) gw_pool_conn_kick_read(&xc->pc);
}

/* ---- public API ---- */

static void state_free(void *proto)
{
  http1_state_t *st = proto;
  for (int i = 0; i < st->nspare; i++) evbuffer_free(st->spare_bodies[i]);
  free(st);
}

static const gw_px_ops_t http1_ops = {
  .name = "upstream",
  .err_reset = {GW_ERR_RESET, "connection reset by upstream"},
  .err_premature = ERR_PREMATURE_INIT,
  .err_timeout = {GW_ERR_TIMEOUT, "upstream timed out"},
  .conn_init = conn_init,
  .connected = conn_connected,
  .handshake = conn_handshake,
  .handshake_timeout = conn_handshake_timeout,
  .attach = conn_attach,
  .conn_park = conn_park,
  .conn_free = conn_free,
  .idle_check = conn_idle_check,
  .readable = conn_readable,
  .kept = conn_kept,
  .frame_body = frame_body,
  .reset = req_reset,
  .done = req_done,
  .free = req_free,
  .proto_free = state_free,
};

gw_pool_t *gw_upstream_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms)
{
  http1_state_t *st = calloc(1, sizeof(*st));
  if (st == NULL) return NULL;
  gw_pool_t *pool = gw_px_pool_new(base, keepalive_max, idle_timeout_ms, &http1_ops, sizeof(upstream_conn_t), st);
  if (pool == NULL) free(st);
  return pool;
}

void gw_upstream_pool_free(gw_pool_t *pool)
{
  gw_px_pool_release(pool);
}

void gw_upstream_pool_stats(const gw_pool_t *pool, gw_upstream_stats_t *out)
{
  memset(out, 0, sizeof(*out));
  out->opened = pool->opened;
  out->reused = pool->reused;
  out->retried = pool->retried;
  out->idle = gw_pool_idle_count(pool);
  out->tls_handshakes = pool->tls_handshakes;
  out->tls_resumed = pool->tls_resumed;
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

gw_client_req_t *gw_client_request(gw_pool_t *pool, const gw_client_params_t *params,
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
  int add_close = gw_pool_keepalive_max(pool) <= 0;
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
  memset(r, 0, sizeof(*r)); /* not the wire bytes */
  gw_px_t *x = &r->x;
  http1_state_t *st = state_of(pool);
  r->res.body = st->nspare > 0 ? st->spare_bodies[--st->nspare] : evbuffer_new();
  if (r->res.body == NULL) {
    free(r);
    return NULL;
  }
  if (gw_px_init(x, pool, arg, params->body_source, params->on_body_sent) < 0) {
    evbuffer_free(r->res.body);
    free(r);
    return NULL;
  }
  r->cb = cb;
  x->connect_timeout_ms = params->connect_timeout_ms > 0 ? params->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
  x->timeout_ms = params->timeout_ms > 0 ? params->timeout_ms : DEFAULT_TIMEOUT_MS;
  r->max_body = params->max_response_body > 0 ? params->max_response_body : DEFAULT_MAX_RESPONSE_BODY;
  r->is_head = method_is(method, mlen, "HEAD");
  x->idempotent = r->is_head || method_is(method, mlen, "GET") || method_is(method, mlen, "OPTIONS") ||
                  method_is(method, mlen, "PUT") || method_is(method, mlen, "DELETE") ||
                  method_is(method, mlen, "TRACE");
  x->no_keepalive = no_keepalive;
  r->on_head = params->on_head;
  r->on_body = params->on_body;
  x->read_timer = params->on_head != NULL; /* buffered: the timeout covers the whole exchange */
  r->upgrade = params->upgrade != 0 && params->on_head != NULL;
  if (r->upgrade) x->no_keepalive = x->no_retry = 1; /* a fresh connection, never pooled */
  gw_headers_init(&r->res.headers);
  if (streamed) {
    r->body_left = params->body_length;
    x->body_complete = params->body_complete != 0;
  }
  if (bad != NULL) {
    gw_log_error("upstream: %s (%s %s)", bad, method, params->unix_path ? params->unix_path : params->host ? params->host : "-");
    gw_px_start(x, NULL, ERR_CONNECT); /* fails from the loop */
    return r;
  }
  gw_pool_key_t *key = gw_pool_key_get(pool, &addr, addrlen, params->tls, tls_name(params),
                                       params->proxy_header, params->proxy_header_len);
  if (key == NULL) {
    if (x->body_out != NULL) evbuffer_free(x->body_out);
    evbuffer_free(r->res.body);
    free(r);
    return NULL;
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
  x->wire = r->wire;
  x->wire_len = (size_t)(p - r->wire);
  gw_px_start(x, key, ERR_NONE);
  return r;
}

void gw_client_cancel(gw_client_req_t *r)
{
  if (r != NULL) gw_px_cancel(&r->x);
}

int gw_client_detach(gw_client_req_t *r, struct evbuffer *rest, gw_tls_client_conn_t **tls)
{
  if (r == NULL || !r->x.in_cb || r->x.cancelled || !r->upgrade || r->res.status != 101 || r->x.conn == NULL) return -1;
  upstream_conn_t *c = (upstream_conn_t *)r->x.conn;
  if (c->tls != NULL && tls == NULL) return -1; /* the caller relays plain sockets only */
  r->x.cancelled = 1; /* abandoned once on_head returned */
  if (r->rest_len > 0 && evbuffer_add(rest, r->rest, r->rest_len) < 0) return -1;
  int fd = c->xc.pc.fd;
  c->xc.pc.fd = -1; /* gw_pool_close() now closes nothing */
  if (tls != NULL) *tls = c->tls; /* its state goes with the socket (NULL: plain) */
  c->tls = NULL;
  gw_pool_conn_read(&c->xc.pc, 0);
  gw_pool_conn_write(&c->xc.pc, 0);
  gw_pool_conn_timer_stop(&c->xc.pc);
  return fd;
}

void gw_client_body_more(gw_client_req_t *r, int complete)
{
  if (r != NULL) gw_px_body_more(&r->x, complete);
}

void gw_client_pause(gw_client_req_t *r)
{
  if (r != NULL) gw_px_pause(&r->x);
}

void gw_client_resume(gw_client_req_t *r)
{
  if (r != NULL) gw_px_resume(&r->x);
}
