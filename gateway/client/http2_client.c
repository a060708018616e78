/* http2_client.c - the HTTP/2 upstream client (see http2_client.h).
 *
 * Ownership: the client owns its connections (list `conns`); a connection
 * owns its nghttp2 session and its output; each call is owned by its
 * caller's handle until done or cancelled, and is linked into the
 * connection carrying it (stream user data = the call). Nothing is sent
 * from inside nghttp2's callbacks or the caller's calls: they schedule the
 * connection's `kick` event, which sends, reports failures and frees what
 * died (so a callback never frees what the code under it still uses). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <nghttp2/nghttp2.h>

#include "addr.h"
#include "http2_client.h"
#include "log.h"
#include "pool.h"
#include "timeutil.h"
#include "tls_client.h"

#define STREAM_WINDOW (256 * 1024)        /* per stream: what a paused call may hold */
#define CONN_WINDOW (16 * 1024 * 1024)    /* per connection: many streams in flight */
#define OUT_HIGH_WATER (64 * 1024)        /* stop asking nghttp2 for frames */
#define READ_BUF_SIZE (64 * 1024)
#define MAX_RETRIES 2                     /* refused streams sent again */
#define MAX_HEADER_BYTES (64 * 1024)      /* a response head or trailers larger: the stream fails */

typedef struct h2c_conn_s h2c_conn_t;

struct gw_h2_client_s {
  struct event_base *base;
  gw_pool_t *pool;          /* sockets and events only: h2 connections are never parked */
  int idle_timeout_ms;
  h2c_conn_t *conns;
  gw_h2_client_stats_t stats;
};

struct h2c_conn_s {
  gw_pool_conn_t pc;        /* first: the pool's part (socket, events, key) */
  gw_h2_client_t *cl;
  gw_tls_client_conn_t *tls; /* owned; h2:// (the key has TLS settings): set while shaking hands and after */
  nghttp2_session *session;
  struct evbuffer *out;     /* frames not written yet */
  struct event kick;        /* send / fail / free, from the loop */
  gw_h2_call_t *calls;      /* every call assigned here, submitted or waiting to connect */
  size_t ncalls;
  int connected, goaway, dead, in_callback, kicked; /* connected: TCP up and, for h2://, TLS with ALPN h2 */
  int ready;                /* the server's first SETTINGS came: calls are submitted up to its limit */
  int ncalls_cap;           /* set while its overflow is placed elsewhere */
  int dispatch;             /* ... and the calls waiting for it are to be placed (from kick) */
  int ping_out;             /* a PING was sent and not answered yet */
  double idle_since_ms;
  gw_err_t fail;            /* why it died: the calls still on it fail with this */
  h2c_conn_t *next, *prev;
};

struct gw_h2_call_s {
  gw_h2_client_t *cl;
  h2c_conn_t *conn;         /* carrying it, or NULL (finished) */
  gw_h2_call_t *next, *prev;
  int32_t id;               /* 0: not submitted yet */
  gw_client_done_cb cb;
  gw_client_head_cb on_head;
  gw_client_body_cb on_body;
  void (*on_body_sent)(void *arg);
  void (*on_trailers)(const gw_headers_t *, void *);
  void *arg;
  /* the request, copied */
  char *method, *target, *authority, *host;
  int port;
  struct gw_tls_client_s *tls;  /* h2://: its settings (they outlive the call), else NULL */
  gw_sockaddr_t addr;
  socklen_t addrlen;
  gw_headers_t headers;
  struct evbuffer *body;        /* a body given whole (owned), or NULL */
  size_t body_off;              /* ... sent of it (a retry starts over) */
  struct evbuffer *body_source; /* the caller's streamed body, or NULL */
  long long body_length;
  int body_complete, body_taken, body_deferred, body_sent_pending;
  gw_headers_t *body_trailers;  /* owned: sent after the body's last byte, or NULL */
  int connect_timeout_ms, timeout_ms;
  double deadline_at;           /* gw_now_ms() time, or 0 */
  size_t max_body;
  /* the response */
  gw_client_response_t res;
  gw_headers_t trailers;
  size_t header_bytes;
  int got_head, in_trailers, paused, finished, cancelled, in_user, retries;
  int complete;                 /* the whole response came (END_STREAM) */
  size_t unconsumed;            /* DATA bytes delivered while paused: window not given back yet */
  struct event timer;           /* inactivity / deadline */
  struct event later;           /* a failure found before any connection (reported from the loop) */
  gw_err_t later_err;
};

static void kick(h2c_conn_t *c);
static void conn_kill(h2c_conn_t *c, gw_err_t why);
static void call_assign(gw_h2_call_t *call);
static void call_finish(gw_h2_call_t *call, gw_err_t err);

/* -- connection I/O: plain, or through TLS (h2://) ---------------------------- */

static ssize_t io_read(h2c_conn_t *c, void *buf, size_t n)
{
  if (c->tls) return gw_tls_client_read(c->tls, buf, n);
  return recv(c->pc.fd, buf, n, 0);
}

static int io_write(h2c_conn_t *c)
{
  if (c->tls == NULL) return evbuffer_write(c->out, c->pc.fd);
  size_t len = evbuffer_get_length(c->out);
  if (len > 16384) len = 16384; /* one record at a time */
  unsigned char *p = evbuffer_pullup(c->out, (ssize_t)len);
  if (p == NULL) {
    errno = ENOMEM;
    return -1;
  }
  ssize_t n = gw_tls_client_write(c->tls, p, len);
  if (n > 0) evbuffer_drain(c->out, (size_t)n);
  return (int)n;
}

/* -- calls ------------------------------------------------------------------- */

static void call_free(gw_h2_call_t *call)
{
  event_del(&call->timer);
  event_del(&call->later);
  free(call->method);
  free(call->target);
  free(call->authority);
  free(call->host);
  gw_headers_dispose(&call->headers);
  gw_headers_dispose(&call->res.headers);
  gw_headers_dispose(&call->trailers);
  if (call->body_trailers) {
    gw_headers_dispose(call->body_trailers);
    free(call->body_trailers);
  }
  if (call->res.body) evbuffer_free(call->res.body);
  if (call->body) evbuffer_free(call->body);
  free(call);
}

static void call_unlink(gw_h2_call_t *call)
{
  h2c_conn_t *c = call->conn;
  if (c == NULL) return;
  if (call->id && c->session) {
    nghttp2_session_set_stream_user_data(c->session, call->id, NULL);
    /* Cancelled or failed before the response ended: the upstream may stop
     * (CANCEL). Complete while the request still streams: it needs no more
     * of it (NO_ERROR, as gRPC servers expect). */
    if (!c->dead && nghttp2_session_find_stream(c->session, call->id)) {
      if (!call->complete)
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_CANCEL);
      else if (!nghttp2_session_get_stream_local_close(c->session, call->id))
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_NO_ERROR);
    }
  }
  if (call->unconsumed && c->session && !c->dead) /* the connection window it held */
    nghttp2_session_consume_connection(c->session, call->unconsumed);
  call->unconsumed = 0;
  if (call->prev) call->prev->next = call->next;
  else c->calls = call->next;
  if (call->next) call->next->prev = call->prev;
  call->next = call->prev = NULL;
  call->conn = NULL;
  if (--c->ncalls == 0) c->idle_since_ms = gw_now_ms();
  kick(c); /* a GOAWAY'd connection with no call left closes */
}

/* Restarts the call's timer: the inactivity timeout, cut to the deadline. */
static void call_timer(gw_h2_call_t *call)
{
  double ms = call->timeout_ms;
  if (call->deadline_at > 0) {
    double left = call->deadline_at - gw_now_ms();
    if (left < ms) ms = left < 1 ? 1 : left;
  }
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((long)ms % 1000) * 1000};
  evtimer_add(&call->timer, &tv);
}

/* The call ends: the caller's done callback, then it is freed (cancelled
 * meanwhile: nothing is called). */
static void call_finish(gw_h2_call_t *call, gw_err_t err)
{
  if (call->finished) return;
  call->finished = 1;
  call_unlink(call);
  event_del(&call->timer);
  if (!call->cancelled) call->cb(err, err.kind == GW_OK ? &call->res : NULL, call->arg);
  call_free(call);
}

static void on_call_timer(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_h2_call_t *call = arg;
  int deadline = call->deadline_at > 0 && gw_now_ms() >= call->deadline_at - 1;
  if (call->paused && !deadline) return; /* waiting for our client, not the upstream */
  h2c_conn_t *c = call->conn; /* call_finish resets its stream (CANCEL) */
  if (c && !c->connected) call_finish(call, gw_err(GW_ERR_CONNECT_TIMEOUT, "upstream connect timed out"));
  else call_finish(call, gw_err(GW_ERR_TIMEOUT, "upstream timed out"));
}

static void on_call_later(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_h2_call_t *call = arg;
  call_finish(call, call->later_err);
}

/* A failure before the call is on any connection: reported from the loop. */
static void call_fail_later(gw_h2_call_t *call, gw_err_t err)
{
  call->later_err = err;
  event_active(&call->later, EV_TIMEOUT, 0);
}

/* -- the request body ------------------------------------------------------- */

/* Fields an HTTP/2 request does not carry: the hop-by-hop ones, and Host
 * (its :authority). */
static int not_forwarded(const char *n, size_t len)
{
  return gw_header_is_hop_by_hop(n, len) || (len == 4 && strncasecmp(n, "host", 4) == 0);
}

/* The request trailers of call (lower-cased names) as its last frame. */
static void submit_body_trailers(nghttp2_session *session, gw_h2_call_t *call)
{
  nghttp2_nv nv[64];
  char lower[4096];
  size_t n = 0, used = 0;
  for (size_t i = 0; i < call->body_trailers->count && n < 64; i++) {
    const gw_header_t *h = &call->body_trailers->items[i];
    if (not_forwarded(h->name, h->name_len) || used + h->name_len > sizeof(lower)) continue;
    char *l = lower + used;
    for (size_t j = 0; j < h->name_len; j++) l[j] = h->name[j] >= 'A' && h->name[j] <= 'Z' ? (char)(h->name[j] + 32) : h->name[j];
    used += h->name_len;
    nv[n++] = (nghttp2_nv){(uint8_t *)l, (uint8_t *)h->value, h->name_len, h->value_len, NGHTTP2_NV_FLAG_NONE};
  }
  nghttp2_submit_trailer(session, call->id, nv, n);
}

static ssize_t body_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *source, void *user)
{
  (void)user;
  (void)source;
  /* By the stream's user data, not source->ptr: a call that ended while its
   * body still streamed is gone (its stream is being reset). */
  gw_h2_call_t *call = nghttp2_session_get_stream_user_data(session, id);
  if (call == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  struct evbuffer *b = call->body ? call->body : call->body_source;
  size_t n = 0;
  if (call->body) { /* kept whole for a retry: copy out from body_off */
    size_t have = evbuffer_get_length(b) - call->body_off;
    n = have < length ? have : length;
    if (n) {
      struct evbuffer_ptr pos;
      evbuffer_ptr_set(b, &pos, call->body_off, EVBUFFER_PTR_SET);
      evbuffer_copyout_from(b, &pos, buf, n);
      call->body_off += n;
    }
    if (call->body_off == evbuffer_get_length(b)) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
  }
  if (b) {
    size_t have = evbuffer_get_length(b);
    n = have < length ? have : length;
    if (n) {
      evbuffer_remove(b, buf, n);
      call->body_taken = 1;
      call->body_sent_pending = 1; /* told from kick, outside nghttp2 */
      kick(call->conn);
    }
    if (n == have && call->body_complete) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      if (call->body_trailers && call->body_trailers->count) { /* they end the stream instead */
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        submit_body_trailers(session, call);
      }
    }
  } else {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  if (n == 0 && !(*flags & NGHTTP2_DATA_FLAG_EOF)) {
    call->body_deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t)n;
}

/* -- submitting ----------------------------------------------------------------- */

#define MAX_NV 128

static void call_submit(gw_h2_call_t *call)
{
  h2c_conn_t *c = call->conn;
  nghttp2_nv nv[MAX_NV];
  char lower[8192], length[24];
  size_t n = 0, used = 0;
#define NV(nm, nl, v, vl) \
  nv[n++] = (nghttp2_nv){(uint8_t *)(nm), (uint8_t *)(v), (nl), (vl), NGHTTP2_NV_FLAG_NONE}
  NV(":method", 7, call->method, strlen(call->method));
  if (c->tls) NV(":scheme", 7, "https", 5);
  else NV(":scheme", 7, "http", 4);
  NV(":authority", 10, call->authority, strlen(call->authority));
  NV(":path", 5, call->target, strlen(call->target));
  NV("te", 2, "trailers", 8); /* we pass trailers on (gRPC servers insist) */
  long long len = call->body ? (long long)evbuffer_get_length(call->body) : call->body_source ? call->body_length : 0;
  int has_body = call->body || call->body_source;
  if (has_body && len >= 0) NV("content-length", 14, length, (size_t)snprintf(length, sizeof(length), "%lld", len));
  for (size_t i = 0; i < call->headers.count && n < MAX_NV; i++) {
    const gw_header_t *h = &call->headers.items[i];
    if (not_forwarded(h->name, h->name_len) || (h->name_len == 14 && strcasecmp(h->name, "content-length") == 0))
      continue;
    if (used + h->name_len > sizeof(lower)) break;
    char *l = lower + used; /* HTTP/2 field names are lower case */
    for (size_t j = 0; j < h->name_len; j++) {
      char ch = h->name[j];
      l[j] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
    }
    used += h->name_len;
    NV(l, h->name_len, h->value, h->value_len);
  }
#undef NV
  nghttp2_data_provider prd = {.source = {.ptr = call}, .read_callback = body_read};
  call->body_off = 0;
  call->body_deferred = 0;
  int32_t id = nghttp2_submit_request(c->session, NULL, nv, n, has_body ? &prd : NULL, call);
  if (id < 0) {
    call_unlink(call);
    call_fail_later(call, gw_err(GW_ERR_CONNECT, "cannot connect to upstream"));
    return;
  }
  call->id = id;
  c->cl->stats.streams++;
  kick(c);
}

/* -- nghttp2 callbacks ------------------------------------------------------------ */

static gw_h2_call_t *call_of(nghttp2_session *session, int32_t id)
{
  return nghttp2_session_get_stream_user_data(session, id);
}

static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t len, int flags, void *user)
{
  (void)session;
  (void)flags;
  h2c_conn_t *c = user;
  evbuffer_add(c->out, data, len);
  return (ssize_t)len;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
  (void)user;
  gw_h2_call_t *call = call_of(session, frame->hd.stream_id);
  if (call == NULL) return 0;
  call->header_bytes = 0;
  if (frame->headers.cat == NGHTTP2_HCAT_HEADERS && call->got_head) call->in_trailers = 1;
  return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user)
{
  (void)flags;
  (void)user;
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  gw_h2_call_t *call = call_of(session, frame->hd.stream_id);
  if (call == NULL) return 0;
  call->header_bytes += namelen + valuelen + 32;
  if (call->header_bytes > MAX_HEADER_BYTES) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
  if (call->in_trailers) {
    if (namelen && name[0] != ':') gw_headers_add(&call->trailers, (const char *)name, namelen, (const char *)value, valuelen);
    return 0;
  }
  if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
    call->res.status = valuelen == 3 ? (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0') : 0;
    gw_headers_clear(&call->res.headers); /* after a 1xx: the final head's fields only */
    return 0;
  }
  if (namelen && name[0] == ':') return 0;
  gw_headers_add(&call->res.headers, (const char *)name, namelen, (const char *)value, valuelen);
  return 0;
}

/* The call's response is complete (END_STREAM): trailers, then done. */
static void call_complete(gw_h2_call_t *call)
{
  call->complete = 1;
  if (call->on_trailers && call->trailers.count && !call->cancelled) call->on_trailers(&call->trailers, call->arg);
  call_finish(call, gw_err_none());
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
  h2c_conn_t *c = user;
  switch (frame->hd.type) {
  case NGHTTP2_GOAWAY:
    c->goaway = 1; /* nghttp2 closes the streams above last_stream_id (REFUSED_STREAM): retried */
    gw_log_info("h2c upstream: GOAWAY (error code %u)", frame->goaway.error_code);
    kick(c);
    return 0;
  case NGHTTP2_PING:
    if (frame->hd.flags & NGHTTP2_FLAG_ACK) c->ping_out = 0;
    return 0;
  case NGHTTP2_SETTINGS:
    if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) && !c->ready) { /* now its limit is known */
      c->ready = 1;
      c->dispatch = 1;
      kick(c);
    }
    return 0;
  case NGHTTP2_HEADERS:
  case NGHTTP2_DATA:
    break;
  default:
    return 0;
  }
  gw_h2_call_t *call = call_of(session, frame->hd.stream_id);
  if (call == NULL || call->finished) return 0;
  int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  call_timer(call);
  if (frame->hd.type == NGHTTP2_HEADERS && !call->in_trailers && !call->got_head) {
    if (call->res.status >= 100 && call->res.status < 200) return 0; /* interim: the real head follows */
    if (call->res.status < 200 || call->res.status > 999) {
      call_finish(call, gw_err(GW_ERR_BAD_RESPONSE, "invalid upstream response"));
      return 0;
    }
    call->got_head = 1;
    /* A head that ends the stream (gRPC's Trailers-Only) is the whole
     * response: done with it, so that it leaves as one HEADERS frame too. */
    if (call->on_head && !end) {
      call->in_user = 1;
      call->on_head(&call->res, call->arg);
      call->in_user = 0;
      if (call->cancelled) {
        call_finish(call, gw_err_none()); /* frees it: nothing is called */
        return 0;
      }
    }
  }
  if (end) call_complete(call);
  return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                         void *user)
{
  (void)flags;
  (void)user;
  gw_h2_call_t *call = call_of(session, id);
  if (call == NULL || call->finished) {
    nghttp2_session_consume(session, id, len); /* nobody wants it: give the window back */
    return 0;
  }
  if (!call->got_head) return NGHTTP2_ERR_CALLBACK_FAILURE; /* DATA before HEADERS is a protocol error */
  if (call->on_head) {
    if (call->on_body) {
      call->in_user = 1;
      call->on_body((const char *)data, len, call->arg);
      call->in_user = 0;
    }
  } else {
    if (evbuffer_get_length(call->res.body) + len > call->max_body) {
      call_finish(call, gw_err(GW_ERR_TOO_LARGE, "upstream response too large"));
      nghttp2_session_consume(session, id, len);
      return 0;
    }
    evbuffer_add(call->res.body, data, len);
  }
  if (call->cancelled) {
    nghttp2_session_consume(session, id, len);
    call_finish(call, gw_err_none());
    return 0;
  }
  /* Back-pressure: a paused call keeps its window until it resumes. */
  if (call->paused) call->unconsumed += len;
  else nghttp2_session_consume(session, id, len);
  return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code, void *user)
{
  (void)user;
  gw_h2_call_t *call = call_of(session, id);
  if (call == NULL || call->finished) return 0;
  nghttp2_session_set_stream_user_data(session, id, NULL);
  call->id = 0;
  /* Not processed by the peer (GOAWAY, REFUSED_STREAM): nothing of it
   * happened, so it may go again, unless its streamed body is partly gone. */
  if (error_code == NGHTTP2_REFUSED_STREAM && !call->got_head && !call->body_taken && call->retries < MAX_RETRIES) {
    call->retries++;
    call->cl->stats.retried++;
    call_unlink(call);
    call_assign(call);
    return 0;
  }
  if (error_code == NGHTTP2_NO_ERROR && call->got_head) { /* closed without END_STREAM seen? treat as truncated */
    call_finish(call, gw_err(GW_ERR_CLOSED, "upstream closed connection prematurely"));
    return 0;
  }
  call_finish(call, gw_err(GW_ERR_RESET, "upstream reset the stream"));
  return 0;
}

static nghttp2_session_callbacks *callbacks;

static int setup_callbacks(void)
{
  if (callbacks) return 0;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) return -1;
  nghttp2_session_callbacks_set_send_callback(callbacks, on_send);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
  return 0;
}

/* -- connections ------------------------------------------------------------------- */

static void kick(h2c_conn_t *c)
{
  if (c->kicked) return;
  c->kicked = 1;
  event_active(&c->kick, EV_TIMEOUT, 0);
}

/* The connection can carry no more: its calls fail with `why` (from kick). */
static void conn_kill(h2c_conn_t *c, gw_err_t why)
{
  if (c->dead) return;
  c->dead = 1;
  c->fail = why;
  kick(c);
}

/* Frames out: nghttp2's queue into `out`, then to the socket. 0, or -1 when
 * the connection failed (killed). */
static int conn_send(h2c_conn_t *c)
{
  while (nghttp2_session_want_write(c->session) && evbuffer_get_length(c->out) < OUT_HIGH_WATER) {
    size_t before = evbuffer_get_length(c->out);
    if (nghttp2_session_send(c->session) != 0) {
      conn_kill(c, gw_err(GW_ERR_BAD_RESPONSE, "invalid upstream response"));
      return -1;
    }
    if (evbuffer_get_length(c->out) == before) break;
  }
  while (evbuffer_get_length(c->out) > 0) {
    int n = io_write(c);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
    if (n <= 0) {
      conn_kill(c, gw_err(errno == ECONNRESET || errno == EPIPE ? GW_ERR_RESET : GW_ERR_CLOSED,
                          errno == ECONNRESET || errno == EPIPE ? "connection reset by upstream"
                                                                : "upstream closed connection prematurely"));
      return -1;
    }
  }
  int more = evbuffer_get_length(c->out) > 0 || nghttp2_session_want_write(c->session);
  gw_pool_conn_write(&c->pc, more);
  if (!more && !nghttp2_session_want_read(c->session)) { /* its GOAWAY is out: done */
    conn_kill(c, gw_err(GW_ERR_BAD_RESPONSE, "invalid upstream response"));
    return -1;
  }
  return 0;
}

static void conn_free(h2c_conn_t *c)
{
  gw_h2_client_t *cl = c->cl;
  if (c->prev) c->prev->next = c->next;
  else cl->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  cl->stats.open--;
  gw_pool_close(&c->pc); /* on_free releases the rest */
}

static void conn_on_free(gw_pool_conn_t *pc)
{
  h2c_conn_t *c = (h2c_conn_t *)pc;
  event_del(&c->kick);
  if (c->tls) { /* close_notify unless it failed; the pool closes the socket after */
    if (pc->fd < 0) gw_tls_client_conn_forget_fd(c->tls);
    gw_tls_client_conn_free(c->tls);
    c->tls = NULL;
  }
  if (c->session) nghttp2_session_del(c->session);
  c->session = NULL;
  if (c->out) evbuffer_free(c->out);
  c->out = NULL;
}

static int conn_has_room(h2c_conn_t *c);

/* The server's first SETTINGS came: the calls that waited for it are
 * submitted up to its SETTINGS_MAX_CONCURRENT_STREAMS; the others go to
 * another connection (one with room, or a new one). */
static void dispatch_waiting(h2c_conn_t *c)
{
  c->dispatch = 0;
  uint32_t max = nghttp2_session_get_remote_settings(c->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  size_t submitted = 0;
  for (gw_h2_call_t *call = c->calls; call; call = call->next) submitted += call->id != 0;
  gw_h2_call_t *waiting[256];
  size_t n = 0;
  for (gw_h2_call_t *call = c->calls; call && n < 256; call = call->next)
    if (call->id == 0) waiting[n++] = call;
  /* c->calls is newest first: the oldest waiting calls go first */
  for (size_t i = n; i-- > 0 && !c->dead;) {
    gw_h2_call_t *call = waiting[i];
    if (submitted < max) {
      call_submit(call);
      submitted++;
    } else {
      call_unlink(call);
      c->ncalls_cap = 1; /* full: call_assign must not pick it again */
      call_assign(call);
    }
  }
  c->ncalls_cap = 0;
  if (n == 256) { /* more waited: the next round */
    c->dispatch = 1;
    kick(c);
  }
}

/* From the loop: tell streamed-body producers, send, or fail and free. */
static void on_kick(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  h2c_conn_t *c = arg;
  c->kicked = 0;
  for (int n = 0; !c->dead && n < 1024; n++) { /* the callbacks may cancel calls: look again each time */
    gw_h2_call_t *call = c->calls;
    while (call && !(call->body_sent_pending && call->on_body_sent && !call->cancelled)) call = call->next;
    if (call == NULL) break;
    call->body_sent_pending = 0;
    call->on_body_sent(call->arg);
  }
  if (!c->dead && c->dispatch) dispatch_waiting(c);
  if (!c->dead && c->connected) conn_send(c);
  if (!c->dead && c->goaway && c->ncalls == 0) conn_kill(c, gw_err(GW_ERR_CLOSED, "upstream went away"));
  if (!c->dead) return;
  c->kicked = 1; /* nothing re-arms it while the calls are failed */
  while (c->calls) call_finish(c->calls, c->fail);
  conn_free(c);
}

static void conn_handshake(h2c_conn_t *c);

static void conn_on_read(gw_pool_conn_t *pc)
{
  h2c_conn_t *c = (h2c_conn_t *)pc;
  static uint8_t buf[READ_BUF_SIZE];
  if (!c->connected) { /* only an h2:// handshake reads before */
    if (c->tls && !c->dead) conn_handshake(c);
    return;
  }
  for (int rounds = 0; rounds < 16 && !c->dead; rounds++) {
    ssize_t n = io_read(c, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
    if (n <= 0) {
      int reset = n < 0 && errno == ECONNRESET;
      conn_kill(c, reset ? gw_err(GW_ERR_RESET, "connection reset by upstream")
                         : gw_err(GW_ERR_CLOSED, "upstream closed connection prematurely"));
      break;
    }
    ssize_t rv = nghttp2_session_mem_recv(c->session, buf, (size_t)n);
    if (rv < 0) {
      gw_log_error("h2c upstream: %s", nghttp2_strerror((int)rv));
      conn_kill(c, gw_err(GW_ERR_BAD_RESPONSE, "invalid upstream response"));
      break;
    }
    if ((size_t)n < sizeof(buf)) break;
  }
  /* nghttp2 ended the session (a connection error: it queued GOAWAY) */
  if (!c->dead && !nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session))
    conn_kill(c, gw_err(GW_ERR_BAD_RESPONSE, "invalid upstream response"));
  /* TLS holds decrypted bytes (or an end) no socket event will announce */
  if (!c->dead && c->tls && gw_tls_client_pending(c->tls)) gw_pool_conn_kick_read(&c->pc);
  if (!c->dead) kick(c); /* SETTINGS ACK, WINDOW_UPDATE, PING answers, GOAWAY */
}

/* TCP (and for h2:// TLS with ALPN h2) is up: the session starts. */
static void conn_ready(h2c_conn_t *c)
{
  c->connected = 1;
  gw_pool_conn_read(&c->pc, 1);
  gw_pool_conn_timer(&c->pc, c->cl->idle_timeout_ms);
  kick(c); /* its calls are submitted once the server's SETTINGS came */
}

/* "name@address": the upstream server in log lines. */
static void server_label(const h2c_conn_t *c, char *buf, size_t size)
{
  socklen_t len;
  const gw_sockaddr_t *a = gw_pool_key_addr(c->pc.key, &len);
  char addr[128];
  gw_addr_format(&a->sa, len, addr, sizeof(addr));
  snprintf(buf, size, "%s@%s", gw_pool_key_name(c->pc.key), addr);
}

/* Drives the TLS handshake of an h2:// connection; the connect timer keeps
 * running until it is done. The server must select h2 by ALPN. */
static void conn_handshake(h2c_conn_t *c)
{
  char reason[256], label[400];
  int rc = gw_tls_client_handshake(c->tls, reason, sizeof(reason));
  if (rc == GW_TLS_WANT_READ || rc == GW_TLS_WANT_WRITE) {
    gw_pool_conn_read(&c->pc, 1);
    gw_pool_conn_write(&c->pc, rc == GW_TLS_WANT_WRITE);
    return;
  }
  server_label(c, label, sizeof(label));
  gw_pool_conn_write(&c->pc, 0);
  if (rc == GW_TLS_FAILED) {
    gw_log_error("h2 upstream %s: TLS handshake failed: %s", label, reason);
    conn_kill(c, gw_err(GW_ERR_TLS, "upstream TLS handshake failed"));
    return;
  }
  char alpn[64];
  gw_tls_client_alpn(c->tls, alpn, sizeof(alpn));
  if (strcmp(alpn, "h2") != 0) {
    gw_log_error("h2 upstream %s: the server did not select h2 by ALPN (%s)", label,
                 alpn[0] ? alpn : "it selected no protocol");
    conn_kill(c, gw_err(GW_ERR_TLS, "upstream does not speak HTTP/2 over TLS (ALPN)"));
    return;
  }
  c->cl->stats.tls_handshakes++;
  if (gw_tls_client_resumed(c->tls)) c->cl->stats.tls_resumed++;
  conn_ready(c);
}

/* connect(2) done: an h2:// upstream shakes hands first. */
static void conn_connected(h2c_conn_t *c)
{
  gw_tls_client_t *tls = (gw_tls_client_t *)gw_pool_key_tls(c->pc.key);
  if (tls == NULL) {
    conn_ready(c);
    return;
  }
  /* sessions are kept per "h2 name@address", apart from HTTP/1.1 ones of the same settings */
  char label[400], key[410];
  server_label(c, label, sizeof(label));
  snprintf(key, sizeof(key), "h2 %s", label);
  c->tls = gw_tls_client_conn_new(tls, c->pc.fd, gw_pool_key_name(c->pc.key), key);
  if (c->tls == NULL || gw_tls_client_conn_offer_h2(c->tls) != 0) {
    conn_kill(c, gw_err(GW_ERR_NOMEM, "out of memory"));
    return;
  }
  conn_handshake(c);
}

static void conn_on_write(gw_pool_conn_t *pc)
{
  h2c_conn_t *c = (h2c_conn_t *)pc;
  if (c->dead) return;
  if (!c->connected && c->tls) {
    conn_handshake(c);
    return;
  }
  if (!c->connected) {
    int err = gw_pool_conn_error(pc);
    if (err == EINPROGRESS || err == EINTR) return;
    if (err != 0) {
      gw_pool_conn_write(pc, 0);
      conn_kill(c, err == ECONNREFUSED ? gw_err(GW_ERR_CONNECT_REFUSED, "connection refused")
                                       : gw_err(GW_ERR_CONNECT, "cannot connect to upstream"));
      return;
    }
    conn_connected(c);
    return;
  }
  conn_send(c);
}

/* The connection's timer: the connect timeout, then the idle/PING tick. */
static void conn_on_timeout(gw_pool_conn_t *pc)
{
  h2c_conn_t *c = (h2c_conn_t *)pc;
  if (!c->connected && c->tls) {
    char label[400];
    server_label(c, label, sizeof(label));
    gw_log_error("h2 upstream %s: TLS handshake timed out", label);
    conn_kill(c, gw_err(GW_ERR_CONNECT_TIMEOUT, "upstream TLS handshake timed out"));
    return;
  }
  if (!c->connected) {
    conn_kill(c, gw_err(GW_ERR_CONNECT_TIMEOUT, "upstream connect timed out"));
    return;
  }
  if (c->ncalls == 0 && gw_now_ms() - c->idle_since_ms >= c->cl->idle_timeout_ms - 1) {
    nghttp2_session_terminate_session(c->session, NGHTTP2_NO_ERROR);
    conn_send(c);
    conn_kill(c, gw_err(GW_ERR_CLOSED, "idle"));
    return;
  }
  if (c->ncalls > 0 && c->ping_out) { /* a whole interval without an answer */
    conn_kill(c, gw_err(GW_ERR_TIMEOUT, "upstream timed out"));
    return;
  }
  if (c->ncalls > 0) {
    c->ping_out = 1;
    nghttp2_submit_ping(c->session, NGHTTP2_FLAG_NONE, NULL);
    kick(c);
  }
  gw_pool_conn_timer(pc, c->cl->idle_timeout_ms);
}

static h2c_conn_t *conn_open(gw_h2_client_t *cl, gw_pool_key_t *key, int connect_timeout_ms)
{
  gw_pool_conn_t *pc;
  int rc = gw_pool_connect(cl->pool, key, &pc);
  if (pc == NULL) return NULL;
  h2c_conn_t *c = (h2c_conn_t *)pc;
  c->cl = cl;
  c->out = evbuffer_new();
  event_assign(&c->kick, cl->base, -1, 0, on_kick, c);
  nghttp2_option *opt = NULL;
  int bad = c->out == NULL || nghttp2_option_new(&opt) != 0;
  if (!bad) {
    nghttp2_option_set_no_auto_window_update(opt, 1); /* we give DATA back as our clients drain it */
    nghttp2_option_set_peer_max_concurrent_streams(opt, 100); /* until its SETTINGS say */
    bad = nghttp2_session_client_new2(&c->session, callbacks, c, opt) != 0;
    nghttp2_option_del(opt);
  }
  if (!bad) {
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                   {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
                                   {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_BYTES}};
    bad = nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
          nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0;
  }
  c->next = cl->conns;
  if (cl->conns) cl->conns->prev = c;
  cl->conns = c;
  cl->stats.open++;
  cl->stats.connections++;
  c->idle_since_ms = gw_now_ms();
  if (bad) {
    conn_kill(c, gw_err(GW_ERR_NOMEM, "out of memory"));
  } else if (rc == 0) {
    gw_pool_conn_timer(pc, connect_timeout_ms > 0 ? connect_timeout_ms : 5000); /* an h2:// handshake's */
    conn_connected(c);
  } else if (rc == EINPROGRESS) {
    gw_pool_conn_write(pc, 1);
    gw_pool_conn_timer(pc, connect_timeout_ms > 0 ? connect_timeout_ms : 5000); /* and the handshake's */
  } else {
    conn_kill(c, rc == ECONNREFUSED ? gw_err(GW_ERR_CONNECT_REFUSED, "connection refused")
                                    : gw_err(GW_ERR_CONNECT, "cannot connect to upstream"));
  }
  return c;
}

/* Room for one more stream under the peer's limit. */
static int conn_has_room(h2c_conn_t *c)
{
  if (c->dead || c->goaway || c->ncalls_cap) return 0;
  uint32_t max = nghttp2_session_get_remote_settings(c->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return c->ncalls < max;
}

/* Puts the call on a connection to its address (one with room, else a new
 * one) and submits it once that is connected. */
static void call_assign(gw_h2_call_t *call)
{
  gw_h2_client_t *cl = call->cl;
  call->got_head = 0;
  call->in_trailers = 0;
  gw_headers_clear(&call->res.headers);
  /* h2://: TLS settings and server name are part of the key (never shared) */
  const char *name = NULL;
  if (call->tls) name = gw_tls_client_server_name(call->tls) ? gw_tls_client_server_name(call->tls) : call->host;
  gw_pool_key_t *key = gw_pool_key_get(cl->pool, &call->addr, call->addrlen, call->tls, name, NULL, 0);
  if (key == NULL) {
    call_fail_later(call, gw_err(GW_ERR_NOMEM, "out of memory"));
    return;
  }
  h2c_conn_t *c = cl->conns;
  while (c && !(c->pc.key == key && conn_has_room(c))) c = c->next;
  if (c == NULL) c = conn_open(cl, key, call->connect_timeout_ms);
  gw_pool_key_put(cl->pool, key);
  if (c == NULL) {
    call_fail_later(call, gw_err(GW_ERR_CONNECT, "cannot connect to upstream"));
    return;
  }
  call->conn = c;
  call->next = c->calls;
  if (c->calls) c->calls->prev = call;
  c->calls = call;
  c->ncalls++;
  call_timer(call);
  if (c->ready && !c->dead) call_submit(call);
}

/* -- the interface ------------------------------------------------------------------ */

static const gw_pool_conn_ops_t conn_ops = {
  .on_read = conn_on_read,
  .on_write = conn_on_write,
  .on_timeout = conn_on_timeout,
  .on_free = conn_on_free,
};

gw_h2_client_t *gw_h2_client_new(struct event_base *base, int idle_timeout_ms)
{
  if (setup_callbacks() != 0) return NULL;
  gw_h2_client_t *cl = calloc(1, sizeof(*cl));
  if (cl == NULL) return NULL;
  cl->base = base;
  cl->idle_timeout_ms = idle_timeout_ms > 0 ? idle_timeout_ms : 60000;
  cl->pool = gw_pool_new(base, 0, cl->idle_timeout_ms, &conn_ops, sizeof(h2c_conn_t));
  if (cl->pool == NULL) {
    free(cl);
    return NULL;
  }
  return cl;
}

void gw_h2_client_free(gw_h2_client_t *cl)
{
  if (cl == NULL) return;
  while (cl->conns) {
    h2c_conn_t *c = cl->conns;
    while (c->calls) { /* none should be left: forget them without calling back */
      c->calls->cancelled = 1;
      call_finish(c->calls, gw_err(GW_ERR_CLOSED, "worker stopping"));
    }
    conn_free(c);
  }
  gw_pool_free(cl->pool);
  free(cl);
}

gw_h2_call_t *gw_h2_call_start(gw_h2_client_t *cl, const gw_h2_params_t *params,
                               gw_client_done_cb cb, void *arg)
{
  const gw_client_params_t *p = &params->http;
  gw_h2_call_t *call = calloc(1, sizeof(*call));
  if (call == NULL) return NULL;
  call->cl = cl;
  call->cb = cb;
  call->arg = arg;
  call->on_head = p->on_head;
  call->on_body = p->on_body;
  call->on_body_sent = p->on_body_sent;
  call->on_trailers = params->on_trailers;
  evtimer_assign(&call->timer, cl->base, on_call_timer, call);
  event_assign(&call->later, cl->base, -1, 0, on_call_later, call);
  gw_headers_init(&call->headers);
  gw_headers_init(&call->res.headers);
  gw_headers_init(&call->trailers);
  call->res.body = evbuffer_new();
  const gw_header_t *host = gw_headers_find(p->headers, "host");
  char hostport[300];
  snprintf(hostport, sizeof(hostport), "%s:%d", p->host ? p->host : "localhost", p->port);
  call->method = strdup(p->method);
  call->target = strdup(p->target);
  call->authority = strdup(host ? host->value : hostport);
  call->host = strdup(p->host ? p->host : "");
  call->port = p->port;
  call->tls = p->tls;
  int oom = !call->res.body || !call->method || !call->target || !call->authority || !call->host ||
            gw_headers_copy(&call->headers, p->headers) != 0;
  if (!oom && p->body_source) {
    call->body_source = p->body_source;
    call->body_length = p->body_length;
    call->body_complete = p->body_complete;
  } else if (!oom && p->body_len > 0) {
    call->body = evbuffer_new();
    oom = call->body == NULL || evbuffer_add(call->body, p->body, p->body_len) != 0;
  }
  if (oom) {
    call_free(call);
    return NULL;
  }
  call->connect_timeout_ms = p->connect_timeout_ms > 0 ? p->connect_timeout_ms : 5000;
  call->timeout_ms = p->timeout_ms > 0 ? p->timeout_ms : 60000;
  if (params->deadline_ms > 0) call->deadline_at = gw_now_ms() + params->deadline_ms;
  call->max_body = p->max_response_body ? p->max_response_body : 64u << 20;
  if (p->unix_path) {
    call->addrlen = gw_addr_from_unix(p->unix_path, &call->addr);
    if (call->addrlen == 0) call_fail_later(call, gw_err(GW_ERR_CONNECT, "cannot connect to upstream"));
    else call_assign(call);
    return call;
  }
  struct sockaddr_storage ip;
  socklen_t ip_len;
  if (p->addr) {
    call->addrlen = p->addrlen <= sizeof(call->addr) ? p->addrlen : sizeof(call->addr);
    memcpy(&call->addr, p->addr, call->addrlen);
  } else if (p->host && (ip_len = gw_addr_from_ip(p->host, p->port, &ip)) > 0 && ip_len <= sizeof(call->addr)) {
    /* an IP literal (through a sockaddr_storage: it is larger than gw_sockaddr_t, and cleared whole) */
    memcpy(&call->addr, &ip, ip_len);
    call->addrlen = ip_len;
  } else {
    call_fail_later(call, gw_err(GW_ERR_BAD_NAME, "invalid host name"));
    return call;
  }
  call_assign(call);
  return call;
}

void gw_h2_call_cancel(gw_h2_call_t *call)
{
  if (call == NULL || call->finished) return;
  call->cancelled = 1;
  if (call->in_user) return; /* freed (and its stream reset) when its callback returns */
  call_finish(call, gw_err_none());
}

void gw_h2_call_pause(gw_h2_call_t *call)
{
  call->paused = 1;
}

void gw_h2_call_resume(gw_h2_call_t *call)
{
  call->paused = 0;
  h2c_conn_t *c = call->conn;
  if (c && call->id && !c->dead && call->unconsumed) {
    nghttp2_session_consume(c->session, call->id, call->unconsumed);
    call->unconsumed = 0;
    kick(c);
  }
  if (call->id) call_timer(call);
}

void gw_h2_call_body_more(gw_h2_call_t *call, int complete)
{
  if (complete) call->body_complete = 1;
  h2c_conn_t *c = call->conn;
  if (c && call->id && !c->dead && call->body_deferred) {
    call->body_deferred = 0;
    nghttp2_session_resume_data(c->session, call->id);
    kick(c);
  }
}

void gw_h2_call_body_trailers(gw_h2_call_t *call, const gw_headers_t *trailers)
{
  if (call->body_trailers || trailers == NULL || trailers->count == 0) return;
  if ((call->body_trailers = malloc(sizeof(*call->body_trailers))) == NULL) return;
  gw_headers_init(call->body_trailers);
  gw_headers_copy(call->body_trailers, trailers);
}

void gw_h2_client_stats(const gw_h2_client_t *cl, gw_h2_client_stats_t *out)
{
  *out = cl->stats;
}
