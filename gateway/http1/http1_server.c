/* http1_server.c - the HTTP/1.1 server side of one client connection.
 *
 * Reads with read(2) into the worker's shared buffer and parses with llhttp;
 * callbacks copy what they need into the request, so the buffer is free again
 * once a request is parsed. Only bytes left over (a partial request, or
 * pipelined requests behind a busy one) are copied into a buffer owned by the
 * connection, which is freed again when it empties: idle connections hold no
 * input buffer.
 *
 * One request at a time: the parser pauses at the end of each message, the
 * request runs, its response is appended to `out`, and parsing resumes. So
 * pipelined responses leave in order, and a burst of pipelined requests is
 * answered with one write. A request to a proxy_pass location that has a
 * body is the exception: the parser also pauses at the end of its head, the
 * request starts, and the body is parsed into req.in.body as it arrives while
 * the upstream takes it (reading stops while too much waits: back-pressure).
 *
 * Limits and the framing checks llhttp 8.1 leaves to us (obs-fold, duplicate
 * Content-Length, Transfer-Encoding in HTTP/1.0, missing Host) are enforced in
 * the parser callbacks; each rejection sets error_status, and the connection
 * answers it with `Connection: close` and a lingering close. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "access_log.h"
#include "addr.h"
#include "buf.h"
#include "chunked.h"
#include "http1_server.h"
#include "http2_server.h"
#include "h2c_upgrade.h"
#include "head_scan.h"
#include "log.h"
#include "http1_response.h"
#include "router.h"
#include "stats.h"
#include "timeutil.h"
#include "tls_server.h"

#define SHARED_BUF_SIZE (64 * 1024)
#define OWN_BUF_MIN (16 * 1024)
#define OUT_HIGH_WATER (256 * 1024) /* stop taking pipelined requests / pause a stream above this */
#define OUT_LOW_WATER (64 * 1024)   /* a paused stream goes on below this */
#define BODY_HIGH_WATER (256 * 1024) /* a streamed request body not taken yet: stop reading */
#define BODY_LOW_WATER (64 * 1024)   /* ... and read again below this */
#define LINGER_MS 2000
#define GW_DRAIN_IDLE_MS 1000 /* graceful stop: idle keep-alive connections get this long */
#define FILE_SLICE (4 << 20)   /* sendfile bytes per turn of the loop for one connection */
#define TLS_FILE_CHUNK (64 * 1024) /* TLS: file bytes read into `out` at a time (no sendfile) */

enum { CB_NONE, CB_FIELD, CB_VALUE, CB_VALUE_DONE };

static char shared_buf[SHARED_BUF_SIZE];

static void on_read(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);
static void on_timer(evutil_socket_t fd, short what, void *arg);
static void conn_process(gw_conn_t *c);
static void conn_close(gw_conn_t *c);
static const gw_protocol_t http1_protocol;
static void set_timer(gw_conn_t *c, int ms);

/* -- I/O: plain, or through the connection's TLS state ---------------------- */

/* A TLS connection: the connection, and its TLS state allocated apart (an
 * idle plain connection stays a bare gw_conn_t). */
typedef struct {
  gw_conn_t c;
  gw_tls_conn_t *tls; /* owned */
} gw_conn_tls_t;

static inline gw_tls_conn_t *conn_tls(const gw_conn_t *c)
{
  return c->tls ? ((const gw_conn_tls_t *)c)->tls : NULL;
}

static inline ssize_t io_read(gw_conn_t *c, void *buf, size_t n)
{
  return c->tls ? gw_tls_read(conn_tls(c), buf, n) : read(c->fd, buf, n);
}

static inline int io_write(gw_conn_t *c, struct evbuffer *out)
{
  return c->tls ? gw_tls_write(conn_tls(c), out) : evbuffer_write(out, c->fd);
}

/* -- parser callbacks ------------------------------------------------------- */

static int reject(gw_conn_t *c, int status)
{
  if (c->a->error_status == 0) c->a->error_status = status;
  return -1;
}

/* Appends n bytes to a NUL-terminated growable string (buf.c grows it). */
static int append(char **buf, size_t *len, size_t *cap, const char *at, size_t n)
{
  if (*len + n + 1 > *cap) {
    gw_buf_t b = {*buf, *len, *cap};
    if (gw_buf_reserve(&b, n + 1) < 0) return -1;
    *buf = b.data;
    *cap = b.cap;
  }
  memcpy(*buf + *len, at, n);
  *len += n;
  (*buf)[*len] = '\0';
  return 0;
}

static int on_message_begin(llhttp_t *p)
{
  gw_conn_t *c = p->data;
  gw_conn_active_t *a = c->a;
  a->head_bytes = a->nheaders = a->ncontent_length = a->ntransfer_encoding = a->nhost = 0;
  a->last_cb = CB_NONE;
  a->hname_len = a->hvalue_len = 0;
  a->req.in.target_len = 0;
  a->req.in.start_ms = gw_now_ms();
  a->body_bytes = 0;
  a->req.in.method = NULL; /* known once the request-target starts (on_url) */
  if (c->state == GW_CONN_IDLE) {
    c->state = GW_CONN_HEAD;
    if (c->served) set_timer(c, c->ctx->server->limits.header_timeout_ms);
  }
  return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
  gw_conn_t *c = p->data;
  gw_conn_active_t *a = c->a;
  gw_request_t *r = &a->req;
  if (r->in.target_len == 0) r->in.method = llhttp_method_name(p->method); /* for the access log of a rejected head */
  if (r->in.target_len + n > c->ctx->server->limits.max_request_line) return reject(c, 414);
  a->head_bytes += n;
  return append(&r->in.target, &r->in.target_len, &r->in.target_cap, at, n) ? reject(c, 500) : 0;
}

static int commit_header(gw_conn_t *c)
{
  gw_conn_active_t *a = c->a;
  const gw_limits_t *lim = &c->ctx->server->limits;
  if (++a->nheaders > lim->max_headers) return reject(c, 431);
  if (a->hname_len == 0) return reject(c, 400); /* llhttp 8.1 accepts ": x" */
  if (a->hname_len == 14 && strncasecmp(a->hname, "content-length", 14) == 0) a->ncontent_length++;
  if (a->hname_len == 17 && strncasecmp(a->hname, "transfer-encoding", 17) == 0) a->ntransfer_encoding++;
  if (a->hname_len == 4 && strncasecmp(a->hname, "host", 4) == 0) {
    a->nhost++;
    a->host_index = a->req.in.headers.count; /* where it is about to be added */
  }
  /* llhttp accepts CR, LF and NUL in a value; nothing upstream should ever
   * see them. The copy is NUL-terminated: strcspn stops at the first of the
   * three, before its end if the value holds one. */
  if (a->hvalue_len > 0 && strcspn(a->hvalue, "\r\n") != a->hvalue_len) return reject(c, 400);
  /* Trailing whitespace is not part of the value (RFC 9110 §5.5). */
  while (a->hvalue_len > 0 && (a->hvalue[a->hvalue_len - 1] == ' ' || a->hvalue[a->hvalue_len - 1] == '\t'))
    a->hvalue_len--;
  if (gw_headers_add(&a->req.in.headers, a->hname, a->hname_len, a->hvalue ? a->hvalue : "", a->hvalue_len))
    return reject(c, 500);
  a->hname_len = a->hvalue_len = 0;
  return 0;
}

static int count_head(gw_conn_t *c, size_t n)
{
  gw_conn_active_t *a = c->a;
  a->head_bytes += n;
  return a->head_bytes > c->ctx->server->limits.max_header_size ? reject(c, 431) : 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
  gw_conn_t *c = p->data;
  gw_conn_active_t *a = c->a;
  a->last_cb = CB_FIELD;
  if (count_head(c, n)) return -1;
  return append(&a->hname, &a->hname_len, &a->hname_cap, at, n) ? reject(c, 500) : 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
  gw_conn_t *c = p->data;
  gw_conn_active_t *a = c->a;
  /* llhttp 8.1 folds an obs-fold continuation line into the previous value,
   * as a second value span. A value split across two reads also comes in two
   * spans, but then the first one ends exactly where that read's data ended;
   * otherwise a CRLF was skipped in between: obs-fold. RFC 9112 §5.2: reject. */
  if (a->last_cb == CB_VALUE && !a->value_at_data_end) return reject(c, 400);
  a->last_cb = CB_VALUE;
  a->value_at_data_end = at + n == a->data_end;
  if (count_head(c, n + 4)) return -1;
  return append(&a->hvalue, &a->hvalue_len, &a->hvalue_cap, at, n) ? reject(c, 500) : 0;
}

static int on_header_value_complete(llhttp_t *p)
{
  gw_conn_t *c = p->data;
  gw_conn_active_t *a = c->a;
  if (count_head(c, 4)) return -1; /* ": " and CRLF, once per field however it was split */
  a->last_cb = CB_VALUE_DONE;
  return commit_header(c);
}

/* The bytes of a uri-host [ ":" port ] (RFC 3986 reg-name or IP literal),
 * as a table filled on first use: every request's Host is checked. */
static unsigned char host_char[256];

static void host_char_init(void)
{
  for (int ch = 0; ch < 256; ch++)
    host_char[ch] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
  for (const char *p = "-._~%!$&'()*+,;=:[]"; *p; p++) host_char[(unsigned char)*p] = 1;
}

/* uri-host [ ":" port ], or empty. */
static int valid_host(const char *v, size_t len)
{
  if (!host_char['a']) host_char_init();
  for (size_t i = 0; i < len; i++)
    if (!host_char[(unsigned char)v[i]]) return 0;
  return 1;
}

/* RFC 9112 §3.2.2: a server MUST accept the absolute-form ("http://a/p?q");
 * the target's authority replaces any Host field, and its path ("/" when it
 * has none) and query are what is routed. Rewritten in place (it only
 * shrinks). 0, or -1 for a bad authority (userinfo is an error, RFC 9110
 * §4.2.4); other targets are left alone. */
static int absolute_to_origin_form(gw_request_t *r)
{
  size_t skip = 0;
  if (r->in.target_len > 7 && strncasecmp(r->in.target, "http://", 7) == 0) skip = 7;
  else if (r->in.target_len > 8 && strncasecmp(r->in.target, "https://", 8) == 0) skip = 8;
  if (skip == 0) return 0;
  const char *auth = r->in.target + skip;
  size_t alen = 0, rest = r->in.target_len - skip;
  while (alen < rest && auth[alen] != '/' && auth[alen] != '?') alen++;
  if (alen == 0 || memchr(auth, '@', alen) || !valid_host(auth, alen)) return -1;
  gw_headers_remove(&r->in.headers, "host");
  if (gw_headers_add(&r->in.headers, "Host", 4, auth, alen) < 0) return -1;
  const char *path = auth + alen;
  size_t plen = rest - alen, off = 0;
  if (plen == 0 || path[0] == '?') r->in.target[off++] = '/';
  memmove(r->in.target + off, path, plen);
  r->in.target_len = off + plen;
  r->in.target[r->in.target_len] = '\0';
  gw_request_split_target(r);
  return 0;
}

static int on_headers_complete(llhttp_t *p)
{
  gw_conn_t *c = p->data;
  gw_conn_active_t *a = c->a;
  gw_request_t *r = &a->req;
  if (p->http_major != 1) return reject(c, 505);
  r->in.http_minor = p->http_minor;
  r->in.method_id = p->method;
  r->in.method = llhttp_method_name(p->method);
  r->in.head = p->method == HTTP_HEAD;
  if (r->in.target_len == 0) return reject(c, 400);
  gw_request_split_target(r);
  int chunked = (p->flags & F_CHUNKED) != 0;
  if (a->ncontent_length > 1) return reject(c, 400);
  if (a->ntransfer_encoding > 0 && (r->in.http_minor == 0 || a->ncontent_length > 0)) return reject(c, 400);
  /* RFC 9112 §3.2: exactly one valid Host in HTTP/1.1, at most one in 1.0. */
  if (a->nhost > 1 || (r->in.http_minor == 1 && a->nhost == 0)) return reject(c, 400);
  const gw_header_t *host = a->nhost ? &r->in.headers.items[a->host_index] : NULL; /* the one Host */
  if (host && !valid_host(host->value, host->value_len)) return reject(c, 400);
  if (absolute_to_origin_form(r) < 0) return reject(c, 400);
  /* The only transfer coding we decode is a lone "chunked"; anything else
   * (gzip, chunked) would reach an upstream re-framed and mislabelled. */
  if (chunked) {
    const gw_header_t *te = gw_headers_find(&r->in.headers, "transfer-encoding");
    if (te == NULL || strcasecmp(te->value, "chunked") != 0) return reject(c, 501);
  }
  if (p->method == HTTP_CONNECT) return reject(c, 405);
  /* Only origin-form ("/...") is left, or asterisk-form for OPTIONS (RFC
   * 9112 §3.2.4); any other target is an invalid request-line: 400 (§3). */
  if (r->in.target[0] != '/' && !(p->method == HTTP_OPTIONS && r->in.target_len == 1 && r->in.target[0] == '*'))
    return reject(c, 400);
  r->in.keepalive = llhttp_should_keep_alive(p);
  /* Routed now: a path refused by the router is rejected as a bad head;
   * the location decides the body limit, and whether the body streams. */
  const gw_location_t *loc = r->handler.location = gw_router_match(c->ctx->server, r->in.target, r->in.path_len);
  if (loc == &gw_router_refused) {
    gw_request_log_refused(r);
    return reject(c, 400);
  }
  int has_body = chunked || ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0);
  if (!has_body) return 0;
  a->max_body = loc ? loc->max_body : c->ctx->server->limits.max_body;
  if (!chunked && p->content_length > a->max_body) return reject(c, 413);
  gw_header_t *expect = gw_headers_find(&r->in.headers, "expect");
  if (expect && r->in.http_minor == 1) {
    if (strcasecmp(expect->value, "100-continue") != 0) return reject(c, 417);
    evbuffer_add(a->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
  }
  c->state = GW_CONN_BODY;
  set_timer(c, c->ctx->server->limits.body_timeout_ms);
  if (loc && loc->stream_body) { /* start now; conn_process() feeds the body as it comes */
    r->in.body_streaming = 1;
    r->in.body_length = chunked ? -1 : (long long)p->content_length;
    return HPE_PAUSED;
  }
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
  gw_conn_t *c = p->data;
  gw_conn_active_t *a = c->a;
  gw_request_t *r = &a->req;
  a->body_bytes += n;
  if (a->body_bytes > a->max_body) return reject(c, 413);
  set_timer(c, c->ctx->server->limits.body_timeout_ms); /* a gap between reads */
  return evbuffer_add(r->in.body, at, n) ? reject(c, 500) : 0;
}

static int on_message_complete(llhttp_t *p)
{
  gw_conn_t *c = p->data;
  gw_conn_active_t *a = c->a;
  a->req_ready = 1;
  return HPE_PAUSED;
}

static llhttp_settings_t parser_settings = {
  .on_message_begin = on_message_begin,
  .on_url = on_url,
  .on_header_field = on_header_field,
  .on_header_value = on_header_value,
  .on_header_value_complete = on_header_value_complete,
  .on_headers_complete = on_headers_complete,
  .on_body = on_body,
  .on_message_complete = on_message_complete,
};

/* -- timers, reading, writing ----------------------------------------------- */

static void arm_timer(gw_conn_t *c, int64_t now, int64_t at)
{
  int64_t ms = at - now;
  struct timeval tv = gw_timeval_from_ms(ms);
  c->timer_at = at;
  event_add(&c->timer_ev, &tv);
}

/* Connection timeouts are lazy, as nginx's: moving the deadline costs a
 * coarse clock read; the timer event is re-armed only when the deadline moves
 * earlier than the armed expiry, and a timer that fires before the deadline
 * re-arms itself for the rest (on_timer). ms <= 0: no timeout. */
static void set_timer(gw_conn_t *c, int ms)
{
  if (ms <= 0) {
    c->deadline = 0;
    return;
  }
  int64_t now = gw_coarse_ms();
  c->deadline = now + ms;
  if (c->timer_at == 0 || c->timer_at > c->deadline) arm_timer(c, now, c->deadline);
}

static void set_reading(gw_conn_t *c, int on)
{
  if (on == c->reading) return;
  c->reading = on;
  if (on) {
    event_add(&c->read_ev, NULL);
    if (c->tls && gw_tls_pending(conn_tls(c))) event_active(&c->read_ev, EV_READ, 1);
  } else {
    event_del(&c->read_ev);
  }
}

/* -- the active part: taken when bytes arrive, given back when idle ---------- */

#define SPARE_ACTIVE_MAX 64 /* kept for reuse by this worker, buffers and all */

static gw_conn_active_t *spare_active;
static int nspare_active;

static void active_free(gw_conn_active_t *a)
{
  gw_request_dispose(&a->req);
  evbuffer_free(a->out);
  free(a->hname);
  free(a->hvalue);
  free(a);
}

/* Gives c an active part (a spare one, or new). Returns 0, or -1 when out
 * of memory. */
static int take_active(gw_conn_t *c)
{
  gw_conn_active_t *a = spare_active;
  if (a != NULL) {
    spare_active = a->next_spare;
    nspare_active--;
  } else {
    a = calloc(1, sizeof(*a));
    if (a == NULL) return -1;
    a->out = evbuffer_new();
    if (a->out == NULL) {
      free(a);
      return -1;
    }
    gw_request_init(&a->req, c->ctx, c->ctx->server, &http1_protocol, NULL);
    /* A spare one comes back between two messages (give_active), its parser
     * and scanner ready for the next head: only new ones need this. */
    llhttp_init(&a->parser, HTTP_REQUEST, &parser_settings);
    gw_head_scan_init(&a->head_scan);
  }
  a->parser.data = c;
  a->req.proto_ctx = c;
  a->req.client.remote_addr = c->remote_addr;
  a->req.client.remote_port = c->remote_port;
  a->req.client.balancer_addr = c->balancer_addr;
  a->req.client.proxy_protocol_addr = c->balancer_addr ? c->remote_addr : NULL;
  a->req.client.tls = c->tls ? gw_tls_info(conn_tls(c)) : NULL;
  a->req.client.fd = c->fd;
  c->a = a;
  return 0;
}

/* The write event, assigned to this connection on first use: most
 * responses leave in one write(2) and never need it. */
static struct event *write_event(gw_conn_t *c)
{
  gw_conn_active_t *a = c->a;
  if (a->write_owner != c) {
    event_assign(&a->write_ev, c->ctx->base, c->fd, EV_WRITE, on_write, c);
    a->write_owner = c;
  }
  return &a->write_ev;
}

/* An idle connection with nothing left to send gives its active part back
 * (its request was reset when its response was queued). */
static void give_active(gw_conn_t *c)
{
  gw_conn_active_t *a = c->a;
  c->a = NULL;
  a->write_owner = NULL; /* its event is not pending: may_give_active(), or conn_close() */
  a->writing = a->flush_soon = 0;
  if (c->dead || a->parser.upgrade) { /* it may have died mid-message: its parser is not reusable */
    active_free(a);
    return;
  }
  if (nspare_active >= SPARE_ACTIVE_MAX) {
    active_free(a);
    return;
  }
  a->next_spare = spare_active;
  spare_active = a;
  nspare_active++;
}

static int may_give_active(const gw_conn_t *c)
{
  const gw_conn_active_t *a = c->a;
  return a != NULL && c->state == GW_CONN_IDLE && !a->writing && !a->flush_soon && !a->req.handler.running && !a->mid_message &&
         !a->has_file && c->pos == c->len && evbuffer_get_length(a->out) == 0;
}

gw_conn_t *gw_conn_new(gw_context_t *ctx, int fd, const struct sockaddr *peer, const struct sockaddr *balancer)
{
  gw_tls_ctx_t *tls = ctx->server->tls;
  gw_conn_t *c = calloc(1, tls ? sizeof(gw_conn_tls_t) : sizeof(gw_conn_t));
  if (c == NULL) return NULL;
  c->ctx = ctx;
  c->fd = fd;
  c->state = GW_CONN_IDLE;
  gw_addr_to_string(peer, c->remote_addr, sizeof(c->remote_addr));
  if (peer->sa_family == AF_INET) c->remote_port = ntohs(((const struct sockaddr_in *)peer)->sin_port);
  else if (peer->sa_family == AF_INET6) c->remote_port = ntohs(((const struct sockaddr_in6 *)peer)->sin6_port);
  if (balancer) {
    char b[INET6_ADDRSTRLEN];
    if (gw_addr_to_string(balancer, b, sizeof(b)) < 0) snprintf(b, sizeof(b), "-");
    c->balancer_addr = strdup(b);
    if (c->balancer_addr == NULL) {
      free(c);
      return NULL;
    }
  }
  if (tls) {
    gw_conn_tls_t *ct = (gw_conn_tls_t *)c;
    ct->tls = gw_tls_conn_new(tls, fd, c->remote_addr);
    if (ct->tls == NULL) {
      free(c->balancer_addr);
      free(c);
      return NULL;
    }
    c->tls = 1;
  }
  event_assign(&c->read_ev, ctx->base, fd, EV_READ | EV_PERSIST, on_read, c);
  evtimer_assign(&c->timer_ev, ctx->base, on_timer, c);
  set_reading(c, 1);
  /* The first request gets the header timeout from the moment of accept. */
  set_timer(c, c->ctx->server->limits.header_timeout_ms);
  c->next = ctx->http1_conns;
  if (ctx->http1_conns) ctx->http1_conns->prev = c;
  ctx->http1_conns = c;
  ctx->nconns++;
  return c;
}

static void conn_free(gw_conn_t *c)
{
  gw_context_t *ctx = c->ctx;
  if (c->prev) c->prev->next = c->next;
  else ctx->http1_conns = c->next;
  if (c->next) c->next->prev = c->prev;
  ctx->nconns--;
  event_del(&c->timer_ev);
  if (c->a) give_active(c);
  if (c->buf != shared_buf) free(c->buf);
  free(c->balancer_addr);
  free(c);
  ctx->on_conn_closed(ctx);
}

/* Closes the socket now; the struct is freed from its own timer event, so no
 * caller up the stack (a request finishing, a callback) touches freed memory. */
static void conn_close(gw_conn_t *c)
{
  if (c->dead) return;
  c->dead = 1;
  if (c->a && c->a->req.handler.running) gw_request_abort(&c->a->req);
  if (c->a && c->a->has_file) {
    close(c->a->file_fd);
    c->a->has_file = 0;
  }
  event_del(&c->read_ev);
  if (c->a && c->a->write_owner == c) event_del(&c->a->write_ev);
  if (c->tls) { /* close_notify while the socket is open, then its state goes */
    gw_tls_conn_free(conn_tls(c));
    ((gw_conn_tls_t *)c)->tls = NULL;
    c->tls = 0;
  }
  close(c->fd);
  c->fd = -1;
  event_del(&c->timer_ev);
  event_active(&c->timer_ev, EV_TIMEOUT, 0);
}

/* Final response queued: after flushing, half-close and drain what the client
 * still sends, so a response to a rejected request is not lost to a reset. */
static void start_lingering(gw_conn_t *c)
{
  c->state = GW_CONN_CLOSING;
  if (c->tls) gw_tls_shutdown(conn_tls(c));
  shutdown(c->fd, SHUT_WR);
  set_reading(c, 1);
  set_timer(c, LINGER_MS);
}

/* The head before a file range: one send() with MSG_MORE, so that the head
 * and the first bytes of the file leave in one segment. Returns as
 * evbuffer_write. */
static int write_head_more(gw_conn_t *c)
{
  size_t n = evbuffer_get_length(c->a->out);
  unsigned char *p = evbuffer_pullup(c->a->out, (ev_ssize_t)n);
  if (p == NULL) return evbuffer_write(c->a->out, c->fd);
  ssize_t w = send(c->fd, p, n, MSG_MORE | MSG_NOSIGNAL);
  if (w > 0) evbuffer_drain(c->a->out, (size_t)w);
  return (int)w;
}

static void file_ended_early(gw_conn_t *c)
{
  gw_log_warn("%s: the file being sent ended %lld bytes early (truncated while sent?); closing", c->remote_addr,
              c->a->file_left);
}

/* TLS: the bytes must be encrypted, so no sendfile(2): the range goes
 * through `out` one TLS_FILE_CHUNK at a time (read when `out` is empty, so
 * a slow reader costs one chunk). Returns as flush_file(). */
static int flush_file_tls(gw_conn_t *c)
{
  gw_conn_active_t *a = c->a;
  long long budget = FILE_SLICE;
  while (a->file_left > 0 || evbuffer_get_length(a->out) > 0) {
    if (evbuffer_get_length(a->out) == 0) {
      if (budget <= 0) return 1;
      size_t n = a->file_left < TLS_FILE_CHUNK ? (size_t)a->file_left : TLS_FILE_CHUNK;
      struct evbuffer_iovec v;
      if (evbuffer_reserve_space(a->out, (ev_ssize_t)n, &v, 1) < 1) {
        conn_close(c);
        return -1;
      }
      ssize_t r = pread(a->file_fd, v.iov_base, n, (off_t)a->file_off);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        if (r == 0) file_ended_early(c);
        conn_close(c);
        return -1;
      }
      v.iov_len = (size_t)r;
      evbuffer_commit_space(a->out, &v, 1);
      a->file_off += r;
      a->file_left -= r;
      budget -= r;
    }
    int w = io_write(c, a->out);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
      if (errno == EINTR) continue;
      conn_close(c);
      return -1;
    }
  }
  close(a->file_fd);
  a->has_file = 0;
  return 0;
}

/* Sends the queued file range. Returns 0 when it is all sent, 1 when the
 * rest waits (socket full, or this connection had its slice of the loop),
 * -1 when the connection was closed (an error, or the file got shorter). */
static int flush_file(gw_conn_t *c)
{
  if (c->tls) return flush_file_tls(c);
  gw_conn_active_t *a = c->a;
  long long budget = FILE_SLICE;
  while (a->file_left > 0) {
    if (budget <= 0) return 1;
    size_t n = a->file_left < budget ? (size_t)a->file_left : (size_t)budget;
    off_t off = (off_t)a->file_off;
    ssize_t w = sendfile(c->fd, a->file_fd, &off, n);
    if (w > 0) {
      a->file_off += w;
      a->file_left -= w;
      budget -= w;
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) file_ended_early(c);
    conn_close(c);
    return -1;
  }
  close(a->file_fd);
  a->has_file = 0;
  return 0;
}

/* Writes what is queued. Returns 0 when all is written, 1 when the rest waits
 * for the socket, -1 when the connection was closed. */
static int conn_flush(gw_conn_t *c)
{
  if (c->a == NULL) return 0; /* idle: nothing was queued */
  while (c->a->has_file && !c->tls && evbuffer_get_length(c->a->out) > 0) { /* TLS: io_write below */
    int n = write_head_more(c);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      conn_close(c);
      return -1;
    }
  }
  while (evbuffer_get_length(c->a->out) > 0) {
    int n = io_write(c, c->a->out);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      conn_close(c);
      return -1;
    }
  }
  int more = evbuffer_get_length(c->a->out) > 0;
  if (!more && c->a->has_file) {
    more = flush_file(c);
    if (more < 0) return -1;
  }
  if (more) {
    if (!c->a->writing) {
      c->a->writing = 1;
      struct timeval tv = gw_timeval_from_ms(c->ctx->server->limits.send_timeout_ms);
      event_add(write_event(c), &tv);
    }
    return 1;
  }
  if (c->close_after && c->state != GW_CONN_CLOSING) {
    /* Nothing unread (the request read whole, no byte after it): close now,
     * as nginx does; else drain what the client still sends. */
    if (c->read_whole && c->pos == c->len && !(c->tls && gw_tls_pending(conn_tls(c)))) {
      conn_close(c);
      return -1;
    }
    start_lingering(c);
  }
  return 0;
}

/* A streamed response: write once the current event is handled, so a head
 * and the body that came in the same upstream read leave in one write. */
static void conn_flush_soon(gw_conn_t *c)
{
  if (c->a->writing || c->a->flush_soon) return;
  c->a->flush_soon = 1;
  event_active(write_event(c), EV_WRITE, 1);
}

static const char *status_reason_for_log(int status)
{
  switch (status) {
  case 400: return "malformed request";
  case 405: return "method not allowed";
  case 413: return "request body too large";
  case 414: return "request line too long";
  case 417: return "unsupported Expect";
  case 501: return "unsupported transfer coding";
  case 431: return "request header block too large";
  case 505: return "unsupported HTTP version";
  default: return "cannot serve request";
  }
}

/* Answers a request that failed to parse, then closes. */
static void reject_request(gw_conn_t *c, int status)
{
  if (c->a->req.handler.running) { /* a streamed body went wrong while its request ran */
    gw_request_abort(&c->a->req);
    if (c->a->req.resp.streaming) { /* the response has begun: all we can do is close */
      gw_log_info("%s: %d %s in a streamed request body; closing", c->remote_addr, status,
                  status_reason_for_log(status));
      conn_close(c);
      return;
    }
  }
  gw_log_info("%s: %d %s (%s)", c->remote_addr, status, status_reason_for_log(status),
              llhttp_get_error_reason(&c->a->parser) ? llhttp_get_error_reason(&c->a->parser) : "");
  gw_request_t *r = &c->a->req;
  r->in.keepalive = 0;
  r->in.head = 0;
  r->in.http_minor = 1;
  if (r->in.target_len) gw_request_split_target(r); /* for the access log's $uri and $args */
  gw_request_simple_response(r, status, NULL);
  size_t sent;
  size_t head = gw_response_write(r, c->a->out, c->ctx, 0, -1, &sent);
  gw_stats_self->responses[status / 100]++;
  gw_access_log_write(r, status, sent, sent - head);
  gw_request_reset(r);
  c->close_after = 1;
  c->read_whole = 0; /* the rest of the rejected request is drained */
  c->state = GW_CONN_BUSY; /* stop parsing */
  set_reading(c, 0);
  set_timer(c, 0);
}

static int body_full(const gw_conn_t *c)
{
  return c->a->req.in.body_streaming && evbuffer_get_length(c->a->req.in.body) >= BODY_HIGH_WATER;
}

/* A streamed request body grew or ended: tell its consumer. */
static void body_arrived(gw_conn_t *c)
{
  if (c->a->req.handler.on_body_more != NULL) c->a->req.handler.on_body_more(&c->a->req);
}

static int take_h2c(gw_conn_t *c);

/* Parses and runs buffered requests until input runs out or a request waits;
 * also parses the body of a running request that streams it. */
static void conn_process(gw_conn_t *c)
{
  while (!c->dead && !c->close_after && (c->state != GW_CONN_BUSY || c->a->req.in.body_streaming)) {
    if (c->pos == c->len || body_full(c)) break;
    if (evbuffer_get_length(c->a->out) > OUT_HIGH_WATER || c->a->has_file) break;
    /* llhttp 8.1 takes "\r\n\n" as the end of a head: head_scan.c checks
     * every line ends in CRLF before the parser sees it (smuggling). */
    if ((c->state == GW_CONN_IDLE || c->state == GW_CONN_HEAD) &&
        gw_head_scan(&c->a->head_scan, c->buf + c->pos, c->len - c->pos) < 0) {
      reject_request(c, 400);
      break;
    }
    const char *start = c->buf + c->pos;
    c->a->data_end = c->buf + c->len;
    size_t body_before = c->a->body_bytes;
    c->a->mid_message = 1; /* until response_done(): the parser may hold a partial line */
    llhttp_errno_t err = llhttp_execute(&c->a->parser, start, c->len - c->pos);
    if (err == HPE_OK) {
      c->pos = c->len;
      if (c->a->req.in.body_streaming && c->a->body_bytes > body_before) body_arrived(c);
      break;
    }
    if (err == HPE_PAUSED) {
      c->pos = (size_t)(llhttp_get_error_pos(&c->a->parser) - c->buf);
      llhttp_resume(&c->a->parser);
      if (c->a->req_ready && c->a->req.in.body_streaming) { /* the last of a streamed body */
        c->a->req_ready = 0;
        c->a->req.in.body_streaming = 0;
        set_timer(c, 0);
        body_arrived(c);
        continue;
      }
      /* The request is complete, or (streaming its body) its head is. */
      c->a->req_ready = 0;
      if (c->a->parser.upgrade && c->ctx->server->http2 && take_h2c(c)) return;
      c->state = GW_CONN_BUSY;
      set_timer(c, c->a->req.in.body_streaming ? c->ctx->server->limits.body_timeout_ms : 0);
      gw_stats_self->requests++;
      gw_request_start(&c->a->req); /* may finish (http1_send) before returning */
      continue;
    }
    int status = c->a->error_status ? c->a->error_status : (err == HPE_INVALID_VERSION ? 505 : 400);
    reject_request(c, status);
    break;
  }
  if (c->dead) return;
  if (c->pos == c->len) {
    c->pos = c->len = 0;
    if (c->buf != shared_buf) {
      free(c->buf); /* idle connections keep no input buffer */
    }
    c->buf = NULL;
  }
  if (conn_flush(c) < 0) return;
  if (c->state == GW_CONN_CLOSING) return;
  /* Read more unless the unparsed backlog is already large, or a streamed
   * body waits for its consumer (back-pressure: no body timeout meanwhile). */
  if (body_full(c)) {
    set_timer(c, 0);
    set_reading(c, 0);
    return;
  }
  set_reading(c, !(c->state == GW_CONN_BUSY && !c->a->req.in.body_streaming && c->len - c->pos >= OWN_BUF_MIN));
}

/* Detach: http2_server.c owns the socket (and the TLS state) now; c is freed from its timer. */
static void hand_over(gw_conn_t *c)
{
  c->dead = 1;
  if (c->tls) {
    ((gw_conn_tls_t *)c)->tls = NULL;
    c->tls = 0;
  }
  event_del(&c->read_ev);
  if (c->a && c->a->write_owner == c) event_del(&c->a->write_ev);
  c->fd = -1;
  c->pos = c->len = 0;
  if (c->buf == shared_buf) c->buf = NULL;
  event_del(&c->timer_ev);
  event_active(&c->timer_ev, EV_TIMEOUT, 0);
}

/* HTTP/2 on an `http2` server's connection before its first request: ALPN
 * chose h2, or (plain) the bytes are the prior-knowledge preface. Returns 1
 * when the connection went to http2_server.c (c is dead: its socket, TLS state and
 * bytes moved), -1 while a partial preface waits for the rest, else 0. */
static int take_h2(gw_conn_t *c)
{
  const char *p = c->buf + c->pos;
  size_t n = c->len - c->pos;
  if (c->tls) {
    if (!gw_tls_alpn_h2(conn_tls(c))) return 0;
  } else {
    if (memcmp(p, GW_H2_PREFACE, n < GW_H2_PREFACE_LEN ? n : GW_H2_PREFACE_LEN) != 0) return 0;
    if (n < GW_H2_PREFACE_LEN) return -1;
  }
  gw_h2_conn_t *h = gw_h2_conn_new(c->ctx, c->fd, conn_tls(c), c->remote_addr, c->balancer_addr, p, n);
  if (h == NULL) {
    gw_log_error("out of memory for an HTTP/2 connection from %s", c->remote_addr);
    conn_close(c);
    return 1;
  }
  hand_over(c);
  return 1;
}

/* `Upgrade: h2c` (RFC 7540 §3.2) on a plain `http2` listener: a request
 * without a body, with nothing queued before it, continues as HTTP/2 (it
 * is stream 1). 1: gone to http2_server.c (c is dead); 0: serve it as HTTP/1.1. */
static int take_h2c(gw_conn_t *c)
{
  gw_conn_active_t *a = c->a;
  if (c->tls || a->req.in.http_minor != 1 || a->body_bytes > 0 || a->req.in.body_streaming ||
      evbuffer_get_length(a->out) > 0 || a->has_file)
    return 0;
  unsigned char settings[GW_H2C_SETTINGS_MAX];
  int n = gw_h2c_upgrade_settings(&a->req.in.headers, settings);
  if (n < 0) return 0;
  /* The 101 is HTTP/1.1's: written here, sent by http2_server.c ahead of its SETTINGS. */
  gw_header_t h2c = {"Upgrade", 7, "h2c", 3};
  const gw_headers_t fields = {&h2c, 1, 1, NULL};
  gw_response_write_switching(&fields, a->out);
  if (gw_h2_conn_upgrade(c->ctx, c->fd, c->remote_addr, c->balancer_addr, settings, (size_t)n, &a->req, a->out,
                         c->buf + c->pos, c->len - c->pos) == NULL) {
    evbuffer_drain(a->out, evbuffer_get_length(a->out)); /* it was empty: served as HTTP/1.1 */
    return 0;
  }
  hand_over(c);
  return 1;
}

/* Moves unparsed bytes out of the shared buffer before it is reused. */
static int keep_leftover(gw_conn_t *c)
{
  if (c->buf != shared_buf) return 0;
  size_t left = c->len - c->pos;
  if (left == 0) {
    c->buf = NULL;
    c->pos = c->len = 0;
    return 0;
  }
  size_t cap = left > OWN_BUF_MIN ? left : OWN_BUF_MIN;
  char *own = malloc(cap);
  if (own == NULL) return -1;
  memcpy(own, shared_buf + c->pos, left);
  c->buf = own;
  c->cap = cap;
  c->len = left;
  c->pos = 0;
  return 0;
}

static void conn_enter(gw_conn_t *c) { c->in_callback++; }

static void conn_leave(gw_conn_t *c)
{
  if (--c->in_callback == 0 && !c->dead) {
    if (keep_leftover(c) < 0) conn_close(c);
    else if (may_give_active(c)) give_active(c); /* idle again: wait in little memory */
  }
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
  gw_conn_t *c = arg;
  (void)what;
  conn_enter(c);
  char *dst;
  size_t room;
  if (c->buf == NULL) {
    c->buf = shared_buf;
    c->cap = SHARED_BUF_SIZE;
    c->pos = c->len = 0;
  } else if (c->pos > 0 && c->len == c->cap) {
    memmove(c->buf, c->buf + c->pos, c->len - c->pos);
    c->len -= c->pos;
    c->pos = 0;
  }
  dst = c->buf + c->len;
  room = c->cap - c->len;
  if (c->state == GW_CONN_CLOSING) { /* lingering: discard */
    char sink[4096];
    ssize_t n = read(fd, sink, sizeof(sink));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) conn_close(c);
    if (c->buf == shared_buf) c->buf = NULL;
    conn_leave(c);
    return;
  }
  if (room == 0) { /* own buffer full while a request is busy: wait */
    set_reading(c, 0);
    conn_leave(c);
    return;
  }
  ssize_t n = io_read(c, dst, room);
  if (n <= 0) {
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (c->buf == shared_buf && c->len == 0) c->buf = NULL;
      conn_leave(c);
      return;
    }
    /* EOF or error. A client that leaves mid-request is logged (nginx's 499). */
    if (c->state == GW_CONN_BUSY && c->a->req.handler.running) {
      gw_log_info("%s: client closed the connection while %s %.*s was in progress", c->remote_addr,
                  c->a->req.in.method, (int)c->a->req.in.path_len, c->a->req.in.target);
      gw_access_log_write(&c->a->req, 499, 0, 0); /* nginx's 499: nothing was sent */
    }
    conn_close(c);
    conn_leave(c);
    return;
  }
  c->len += (size_t)n;
  if (c->a == NULL && !c->served && c->ctx->server->http2) {
    int h2 = take_h2(c);
    if (h2 != 0) { /* gone to http2_server.c, or a partial preface kept for the next read */
      conn_leave(c);
      return;
    }
  }
  if (c->a == NULL && take_active(c) < 0) { /* bytes of a new request: parse them */
    gw_log_error("out of memory for a request on %s's connection", c->remote_addr);
    conn_close(c);
    conn_leave(c);
    return;
  }
  if (c->state != GW_CONN_BUSY || c->a->req.in.body_streaming) conn_process(c);
  else if (c->buf == shared_buf) keep_leftover(c);
  /* Decrypted bytes left inside OpenSSL: no socket event will come for them. */
  if (c->tls && !c->dead && c->reading && gw_tls_pending(conn_tls(c))) event_active(&c->read_ev, EV_READ, 1);
  conn_leave(c);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
  gw_conn_t *c = arg;
  (void)fd;
  conn_enter(c);
  c->a->writing = 0;
  c->a->flush_soon = 0;
  if (what & EV_TIMEOUT) {
    gw_log_info("%s: send timed out, closing", c->remote_addr);
    conn_close(c);
  } else if (conn_flush(c) == 0 && c->state != GW_CONN_CLOSING && c->state != GW_CONN_BUSY) {
    conn_process(c); /* pipelined requests waiting for output room */
  } else if (!c->dead && c->a->req.resp.streaming && c->a->req.handler.on_drain && evbuffer_get_length(c->a->out) < OUT_LOW_WATER) {
    c->a->req.handler.on_drain(&c->a->req); /* room again: the producer may go on */
  }
  conn_leave(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
  gw_conn_t *c = arg;
  (void)fd;
  (void)what;
  if (c->dead) {
    if (c->in_callback == 0) conn_free(c);
    else event_active(&c->timer_ev, EV_TIMEOUT, 0);
    return;
  }
  c->timer_at = 0;
  if (c->deadline == 0) return; /* the timeout was cancelled meanwhile */
  int64_t now = gw_coarse_ms();
  if (now < c->deadline) { /* the deadline moved on */
    arm_timer(c, now, c->deadline);
    return;
  }
  c->deadline = 0;
  conn_enter(c);
  if (c->state == GW_CONN_BUSY && c->a->req.in.body_streaming) c->state = GW_CONN_BODY; /* still reading it */
  switch (c->state) {
  case GW_CONN_HEAD:
  case GW_CONN_BODY:
    /* 408 with a lingering close: the client may still be sending. */
    gw_log_info("%s: %s timed out", c->remote_addr, c->state == GW_CONN_HEAD ? "request head" : "request body");
    c->a->error_status = 408;
    reject_request(c, 408);
    conn_flush(c);
    break;
  case GW_CONN_IDLE:
    if (c->a && c->a->has_file) { /* still sending a file: send_timeout guards it */
      set_timer(c, c->ctx->server->limits.keepalive_timeout_ms);
      break;
    }
    conn_close(c); /* idle keep-alive (or nothing sent at all): silent close, as nginx */
    break;
  default:
    conn_close(c);
    break;
  }
  conn_leave(c);
}

/* Whether the response may announce keep-alive. Not while the worker stops,
 * nor when it comes before the request's streamed body ended: the rest of
 * that body is drained by the lingering close. */
static int may_keep_alive(const gw_conn_t *c)
{
  /* Not after an Upgrade request that was not upgraded either: llhttp takes
   * what follows for the other protocol (and a parser in that state must
   * not go back to the spares). */
  return c->a->req.in.keepalive && !c->ctx->stopping && !c->a->req.in.body_streaming && !c->a->parser.upgrade;
}

/* A response is queued whole (or its last piece): count and log it, then get
 * ready for the next request on this connection. */
static void response_done(gw_conn_t *c, int keepalive, size_t bytes_sent, size_t head_bytes)
{
  gw_request_t *req = &c->a->req;
  int status = req->resp.status ? req->resp.status : 200;
  gw_stats_self->responses[status >= 100 && status < 600 ? status / 100 : 0]++;
  gw_access_log_write(req, status, bytes_sent, bytes_sent - head_bytes);
  if (c->ctx->server->latency_histogram && !(req->handler.location && req->handler.location->no_latency)) {
    double now = gw_now_ms();
    gw_stats_latency(now, now - req->in.start_ms);
  }
  gw_request_logged(req); /* the location's log phase */
  c->served = 1;
  c->read_whole = !req->in.body_streaming && !c->a->parser.upgrade;
  gw_request_reset(req);
  llhttp_resume(&c->a->parser);
  c->a->mid_message = 0; /* between two messages: a spare part may keep this parser */
  c->state = GW_CONN_IDLE;
  gw_head_scan_init(&c->a->head_scan);
  c->a->error_status = 0;
  if (!keepalive) c->close_after = 1;
  set_timer(c, c->ctx->server->limits.keepalive_timeout_ms);
  if (c->in_callback == 0) { /* finished later, from some other event */
    conn_enter(c);
    conn_process(c);
    conn_leave(c);
  }
}

/* The request's response is complete: queue it, then go on with the next. */
static void http1_send(gw_request_t *req)
{
  gw_conn_t *c = req->proto_ctx;
  int keepalive = may_keep_alive(c);
  /* No pipelined request waits behind this one (their answers leave together
   * in one write) and nothing is being sent: a plain socket takes it now,
   * without a copy into `out` and the flush after. */
  int fd = !c->tls && !c->dead && !c->a->has_file && !c->a->writing && c->pos == c->len ? c->fd : -1;
  size_t sent;
  size_t head = gw_response_write(req, c->a->out, c->ctx, keepalive, fd, &sent);
  response_done(c, keepalive, sent, head);
}

/* -- streamed request bodies (proxy_pass) -- */

/* A streamed request body was taken from req.in.body: read more if paused. */
static void http1_body_taken(gw_request_t *req)
{
  gw_conn_t *c = req->proto_ctx;
  if (c->dead || !c->a->req.in.body_streaming || c->reading) return;
  if (evbuffer_get_length(c->a->req.in.body) >= BODY_LOW_WATER) return;
  conn_enter(c);
  set_timer(c, c->ctx->server->limits.body_timeout_ms);
  conn_process(c);
  conn_leave(c);
}

/* -- streamed responses (proxy_pass): the head first, the body as it comes -- */

/* The head, announcing content_length or, when it is < 0, chunked (HTTP/1.1
 * clients) or close-delimited (HTTP/1.0) framing. */
static void http1_stream_head(gw_request_t *req, long long content_length)
{
  gw_conn_t *c = req->proto_ctx;
  int keepalive = may_keep_alive(c);
  long long length = content_length;
  c->a->stream_chunked = 0;
  if (!req->in.head && !gw_request_bodyless(req) && length < 0) {
    if (req->in.http_minor >= 1) {
      length = GW_LENGTH_CHUNKED;
      c->a->stream_chunked = 1;
    } else { /* an HTTP/1.0 client: the body ends when we close */
      length = GW_LENGTH_CLOSE;
      keepalive = 0;
    }
  }
  c->a->stream_keepalive = keepalive;
  c->a->stream_head_bytes = gw_response_write_head(req, c->a->out, c->ctx, keepalive, length);
  c->a->stream_bytes = c->a->stream_head_bytes;
  req->resp.streaming = 1;
  conn_flush_soon(c); /* with the body if it came in the same read, else alone */
}

/* Queues a piece of the body: 0, 1 when the output is over its high water
 * mark (the producer pauses until req->handler.on_drain), -1 when the connection
 * closed (the request was aborted). */
static int http1_stream_body(gw_request_t *req, const char *data, size_t len)
{
  gw_conn_t *c = req->proto_ctx;
  if (c->dead) return -1;
  if (c->a->stream_chunked) {
    c->a->stream_bytes += gw_chunked_add(c->a->out, data, len);
  } else {
    evbuffer_add(c->a->out, data, len);
    c->a->stream_bytes += len;
  }
  conn_flush_soon(c); /* each piece goes out as it comes */
  return evbuffer_get_length(c->a->out) > OUT_HIGH_WATER;
}

/* The last piece: complete, or cut short (then the connection closes). */
static void http1_stream_end(gw_request_t *req, int complete)
{
  gw_conn_t *c = req->proto_ctx;
  if (c->dead) return;
  req->resp.streaming = 0;
  req->handler.on_drain = NULL;
  if (complete && c->a->stream_chunked) c->a->stream_bytes += gw_chunked_end(c->a->out);
  /* Cut short: close after what was sent, so the client sees the body end
   * early (before its length, or without the last chunk), never a fake
   * complete response. */
  response_done(c, complete && c->a->stream_keepalive, c->a->stream_bytes, c->a->stream_head_bytes);
}

/* 1 when the client's TE field lists "trailers" (RFC 9110 §10.1.4). */
static int accepts_trailers(const gw_request_t *req)
{
  const gw_header_t *te = gw_headers_find(&req->in.headers, "te");
  if (te == NULL) return 0;
  for (const char *p = te->value; (p = strcasestr(p, "trailers")) != NULL; p += 8) {
    int starts = p == te->value || p[-1] == ',' || p[-1] == ' ' || p[-1] == '\t';
    char after = p[8];
    if (starts && (after == '\0' || after == ',' || after == ' ' || after == '\t' || after == ';')) return 1;
  }
  return 0;
}

/* The body is complete and ends with trailer fields: in the last chunk when
 * the response is chunked and the client said "TE: trailers", else dropped
 * (RFC 9110 §6.5.1: a recipient may discard them). */
static void http1_stream_trailers(gw_request_t *req, const gw_headers_t *trailers)
{
  gw_conn_t *c = req->proto_ctx;
  if (c->dead) return;
  if (!c->a->stream_chunked || trailers->count == 0 || !accepts_trailers(req)) {
    http1_stream_end(req, 1);
    return;
  }
  req->resp.streaming = 0;
  req->handler.on_drain = NULL;
  size_t before = evbuffer_get_length(c->a->out);
  evbuffer_add(c->a->out, "0\r\n", 3);
  for (size_t i = 0; i < trailers->count; i++) {
    const gw_header_t *h = &trailers->items[i];
    if (!gw_header_field_is_safe(h->name, h->name_len, h->value, h->value_len)) continue;
    evbuffer_add(c->a->out, h->name, h->name_len);
    evbuffer_add(c->a->out, ": ", 2);
    evbuffer_add(c->a->out, h->value, h->value_len);
    evbuffer_add(c->a->out, "\r\n", 2);
  }
  evbuffer_add(c->a->out, "\r\n", 2);
  c->a->stream_bytes += evbuffer_get_length(c->a->out) - before;
  response_done(c, c->a->stream_keepalive, c->a->stream_bytes, c->a->stream_head_bytes);
}

/* The rest of the body is a file range (after http1_stream_head): queued
 * behind `out` and sent by flush_file(); the response is done now. */
static void http1_stream_file(gw_request_t *req, int fd, long long offset, long long len)
{
  gw_conn_t *c = req->proto_ctx;
  if (c->dead) {
    close(fd);
    return;
  }
  req->resp.streaming = 0;
  req->handler.on_drain = NULL;
  if (len > 0 && !req->in.head) {
    c->a->has_file = 1;
    c->a->file_fd = fd;
    c->a->file_off = offset;
    c->a->file_left = len;
    c->a->stream_bytes += (size_t)len;
  } else {
    close(fd);
  }
  response_done(c, c->a->stream_keepalive, c->a->stream_bytes, c->a->stream_head_bytes);
}

/* -- protocol upgrades (a WebSocket): the socket and its TLS state leave for
 * tunnel.c or websocket.c -- */

static int http1_can_upgrade(const gw_request_t *req)
{
  const gw_conn_t *c = req->proto_ctx;
  return !c->dead && !req->in.body_streaming && req->in.http_minor == 1;
}

static int http1_upgrade(gw_request_t *req, struct evbuffer *to_client, struct evbuffer *from_client,
                         gw_byte_end_t *end)
{
  gw_conn_t *c = req->proto_ctx;
  *end = (gw_byte_end_t){-1, NULL, NULL};
  if (c->dead) return -1;
  /* What was queued, then the 101 from the handler's fields, then what the
   * caller put in to_client (a proxied upgrade: the upstream's first bytes). */
  size_t head = gw_response_write_switching(&req->resp.headers, c->a->out) + evbuffer_get_length(to_client);
  evbuffer_prepend_buffer(to_client, c->a->out);
  if (c->len > c->pos) evbuffer_add(from_client, c->buf + c->pos, c->len - c->pos);
  int status = 101;
  req->resp.status = status;
  gw_stats_self->responses[1]++;
  gw_access_log_write(req, status, head, 0);
  gw_request_logged(req);
  gw_request_reset(req);
  /* Detach as take_h2() does: the caller owns the socket now. */
  int fd = c->fd;
  c->dead = 1;
  event_del(&c->read_ev);
  if (c->a->write_owner == c) event_del(&c->a->write_ev);
  c->fd = -1;
  end->fd = fd;
  if (c->tls) { /* as take_h2() does: the state goes with the socket */
    end->io = &gw_tls_io;
    end->ioc = conn_tls(c);
    ((gw_conn_tls_t *)c)->tls = NULL;
    c->tls = 0;
  }
  c->pos = c->len = 0;
  if (c->buf == shared_buf) c->buf = NULL;
  event_del(&c->timer_ev);
  event_active(&c->timer_ev, EV_TIMEOUT, 0);
  return 0;
}

static const gw_protocol_t http1_protocol = {
  .can_upgrade = http1_can_upgrade,
  .upgrade = http1_upgrade,
  .send = http1_send,
  .stream_head = http1_stream_head,
  .stream_body = http1_stream_body,
  .stream_end = http1_stream_end,
  .stream_trailers = http1_stream_trailers,
  .body_taken = http1_body_taken,
  .stream_file = http1_stream_file,
};

void gw_conn_shutdown(gw_conn_t *c, int graceful)
{
  if (!graceful) {
    conn_close(c);
  } else if (c->state == GW_CONN_IDLE) {
    /* Closing an idle keep-alive connection now races with a request the
     * client may be sending this instant (it would see a reset). Give it a
     * moment instead: a request that comes is answered with Connection:
     * close (the worker is stopping), an idle client is closed after it. */
    int ms = c->ctx->server->limits.keepalive_timeout_ms;
    set_timer(c, ms < GW_DRAIN_IDLE_MS ? ms : GW_DRAIN_IDLE_MS);
  } else {
    c->close_after = 1; /* answered, then closed */
  }
}
