/* http2_server.c - the HTTP/2 server side of one client connection, on nghttp2.
 *
 * nghttp2 does the frames, HPACK and flow control; this file feeds it the
 * bytes read (plain or through tls_server.c), turns each request stream into a
 * gw_request_t whose protocol is the stream, and writes what nghttp2 has to
 * send into `out`, then to the socket.
 *
 * Back-pressure, each way:
 *  - Responses: a stream's body waits in its own `out` until nghttp2's data
 *    provider takes it, as the stream's and the connection's flow-control
 *    windows allow (a stream with nothing to give is deferred, and resumed
 *    when a piece comes). A producer is told to pause (stream_body returns
 *    1) above STREAM_HIGH_WATER and resumed (on_drain) below the low mark,
 *    so a slow reader of one stream costs at most that much and does not
 *    hold up the others. nghttp2 is asked for frames only while the
 *    connection's `out` is below OUT_HIGH_WATER; above it reading stops too
 *    (a client that floods PINGs without reading the answers stalls itself).
 *  - Request bodies: bytes go into req->in.body. The connection window is given
 *    back at once; a stream's window only as its consumer takes the bytes
 *    (body_taken) when the body streams to proxy_pass, so an upload waits
 *    for a slow upstream without the gateway buffering more than a window.
 *
 * Nothing is sent from inside a request's own call (send, stream_*): those
 * schedule a flush from the write event, so a stream never closes (and is
 * never freed) under the request code that answered it. Streams closed by
 * nghttp2 are freed when the connection's callback unwinds.
 *
 * WebSockets (RFC 8441): SETTINGS_ENABLE_CONNECT_PROTOCOL is advertised; an
 * extended CONNECT with `:protocol websocket` is a request that a handler
 * may upgrade (proxy.c, ws_handler.c): the stream then becomes a socketless
 * byte end (byte_end.h, h2_pipe_t below) for tunnel.c or websocket.c. Its
 * DATA is given to the pipe's reader and the stream window reopened only as
 * the reader takes the bytes; what the reader writes waits in the stream's
 * `out` (at most STREAM_HIGH_WATER) for the flow-control windows. END_STREAM
 * each way is the half-close; RST_STREAM (or the connection's end) is lost.
 * A plain CONNECT gets 405, another :protocol 501. A graceful stop resets
 * these streams after its GOAWAY (they would never finish by themselves).
 *
 * Defences: max concurrent streams, header list size (431), body limits
 * (413, or RST_STREAM once the request has started), rapid reset
 * (CVE-2023-44487: a budget of client resets that completed responses
 * refill; spent: GOAWAY), CONTINUATION floods (nghttp2's max_continuations
 * plus a bound on a header block's decoded size), SETTINGS/PING/PRIORITY
 * floods (a rate per second; over it: GOAWAY), zero-window stalls (a stream
 * whose queued output makes no progress for send_timeout closes the
 * connection), idle timeout (keepalive_timeout with no stream open). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <llhttp.h>
#include <nghttp2/nghttp2.h>

#include "access_log.h"
#include "buf.h"
#include "http2_server.h"
#include "log.h"
#include "request.h"
#include "http1_response.h"
#include "router.h"
#include "stats.h"
#include "timeutil.h"

#define READ_BUF_SIZE (64 * 1024)
#define OUT_HIGH_WATER (64 * 1024)      /* stop asking nghttp2 for frames / stop reading */
#define STREAM_HIGH_WATER (128 * 1024)  /* a streamed response body queued: pause its producer */
#define STREAM_LOW_WATER (32 * 1024)
#define MAX_CONCURRENT_STREAMS 100
#define RESET_BUDGET 200                /* client resets before GOAWAY, refilled by completed responses */
#define CONTROL_FRAMES_PER_SEC 1000     /* SETTINGS, PING, PRIORITY, empty DATA per second */
#define HEADER_BLOCK_FATAL_FACTOR 4     /* a header block this many times max_header_size: GOAWAY */
#define TICK_MS 1000
#define SPARE_STREAMS 16                /* closed streams kept for reuse while the connection is busy */
#define WHOLE_BODY_MAX (16 * 1024)      /* a whole body up to this is copied flat (h2_stream_t.whole) */
#define STREAM_BUCKETS 16               /* a power of two; a client's ids are odd */

typedef struct h2_stream_s h2_stream_t;
typedef struct h2_pipe_s h2_pipe_t;

struct gw_h2_conn_s {
  gw_context_t *ctx;
  int fd;
  gw_tls_conn_t *tls;       /* owned, or NULL */
  nghttp2_session *session;
  struct event read_ev, write_ev, tick_ev;
  struct evbuffer *out;     /* frames not written yet */
  char remote_addr[46];
  char balancer_addr[46];   /* the socket peer when a PROXY header named the client; "": none */
  h2_stream_t *streams;     /* live streams */
  size_t nstreams;
  h2_stream_t *closed;      /* closed by nghttp2, freed at leave() */
  h2_stream_t *spare;       /* freed streams kept with their buffers for the next ones */
  size_t nspare;
  h2_stream_t *last_stream; /* stream_of()'s last answer: a live stream, or NULL */
  h2_stream_t *by_id[STREAM_BUCKETS]; /* live streams by id (chained on idnext) */
  int in_callback, dead, reading, writing, flush_soon, stopping;
  int feeding;              /* in nghttp2_session_mem_recv: feed() flushes after it */
  int64_t last_progress_ms; /* output written, or nothing waited */
  int64_t idle_since_ms;    /* no stream open since */
  int resets_left;          /* rapid reset budget */
  int64_t ctrl_second;      /* the second control frames are counted in */
  int nctrl;
  int upgrade_waiting;      /* h2c upgrade: stream 1 starts at the client's SETTINGS */
  size_t max_header_size, max_fields; /* a request head's limits (on_header): over them, 431 */
  gw_h2_conn_t *next, *prev; /* the worker's h2 connections */
};

struct h2_stream_s {
  gw_request_t req;         /* first */
  struct evbuffer *out;     /* response body queued for nghttp2 (kept with a spare stream) */
  gw_buf_t whole;           /* ... or h2_send's small body, flat (kept, emptied) */
  gw_h2_conn_t *conn;       /* stream_new clears from here */
  int32_t id;
  size_t header_bytes, nheaders;
  int error_status;         /* set while the head is read: answer it */
  int started, answered, ended_remote, closed, logged, paused, deferred, out_eof, has_host;
  size_t max_body, body_in, body_consumed;
  size_t body_off, body_end; /* what is sent of `whole`, its end */
  gw_headers_t *trailers;   /* owned: sent after the body's last byte (gRPC), or NULL */
  size_t resp_bytes, head_bytes;
  char status_text[4], length_text[24]; /* the head's values, sent without a copy */
  int protocol;             /* :protocol was sent: 1 websocket, 2 another */
  h2_pipe_t *pipe;          /* an upgraded stream's byte end, or NULL */
  h2_stream_t *next, *prev;
  h2_stream_t *idnext;      /* in conn->by_id */
};

/* An upgraded stream as a byte end: shared by the stream and its reader (a
 * tunnel, a WebSocket), freed by the reader (gw_io_t.free); the stream only
 * forgets it when it goes (s NULL, lost set). */
struct h2_pipe_s {
  h2_stream_t *s;           /* NULL once the stream is gone */
  struct evbuffer *in;      /* owned: DATA received, not read yet */
  struct event *rev, *wev;  /* the reader's, woken here; NULL: none */
  unsigned eof : 1;         /* END_STREAM received */
  unsigned lost : 1;        /* reset, or the connection ended */
  unsigned want_write : 1;  /* a write found the stream's queue full */
};

static const gw_protocol_t h2_protocol;
static void h2_flush(gw_h2_conn_t *h);
static void h2_close(gw_h2_conn_t *h);
static void flush_soon(gw_h2_conn_t *h);

static gw_h2_conn_t *all_h2; /* this worker's connections, for shutdown */

/* A pipe's reader (tunnel.c, websocket.c) runs from the loop, never from here. */
static void pipe_wake(struct event *ev, short what)
{
  if (ev) event_active(ev, what, 0);
}

/* -- I/O ---------------------------------------------------------------------- */

static ssize_t io_read(gw_h2_conn_t *h, void *buf, size_t n)
{
  return h->tls ? gw_tls_read(h->tls, buf, n) : read(h->fd, buf, n);
}

static int io_write(gw_h2_conn_t *h)
{
  return h->tls ? gw_tls_write(h->tls, h->out) : evbuffer_write(h->out, h->fd);
}

static void set_reading(gw_h2_conn_t *h, int on)
{
  if (h->dead || on == h->reading) return;
  h->reading = on;
  if (on) {
    event_add(&h->read_ev, NULL);
    if (h->tls && gw_tls_pending(h->tls)) event_active(&h->read_ev, EV_READ, 1);
  } else {
    event_del(&h->read_ev);
  }
}

static void enter(gw_h2_conn_t *h) { h->in_callback++; }

static void stream_dispose(h2_stream_t *s)
{
  gw_request_dispose(&s->req);
  evbuffer_free(s->out);
  gw_buf_dispose(&s->whole);
  free(s);
}

static void stream_free(h2_stream_t *s)
{
  gw_h2_conn_t *h = s->conn;
  if (s->trailers) {
    gw_headers_dispose(s->trailers);
    free(s->trailers);
    s->trailers = NULL;
  }
  /* a busy connection's next streams reuse this one's allocations, as an
   * HTTP/1.1 connection reuses its request (the pipe is its reader's) */
  if (!h->dead && h->nspare < SPARE_STREAMS) {
    gw_request_recycle(&s->req);
    size_t n = evbuffer_get_length(s->out);
    if (n > 0) evbuffer_drain(s->out, n);
    s->whole.len = 0;
    s->next = h->spare;
    h->spare = s;
    h->nspare++;
    return;
  }
  stream_dispose(s);
}

/* Spare streams go (the connection idles or ends). */
static void spares_free(gw_h2_conn_t *h)
{
  while (h->spare) {
    h2_stream_t *s = h->spare;
    h->spare = s->next;
    stream_dispose(s);
  }
  h->nspare = 0;
}

static void conn_free(gw_h2_conn_t *h)
{
  gw_context_t *ctx = h->ctx;
  while (h->closed) {
    h2_stream_t *s = h->closed;
    h->closed = s->next;
    stream_free(s);
  }
  spares_free(h);
  if (h->prev) h->prev->next = h->next;
  else all_h2 = h->next;
  if (h->next) h->next->prev = h->prev;
  event_del(&h->tick_ev);
  evbuffer_free(h->out);
  free(h);
  ctx->nconns--;
  ctx->on_conn_closed(ctx);
}

static void leave(gw_h2_conn_t *h)
{
  if (--h->in_callback > 0) return;
  while (h->closed) { /* streams nghttp2 closed meanwhile */
    h2_stream_t *s = h->closed;
    h->closed = s->next;
    stream_free(s);
  }
  if (h->dead) {
    event_del(&h->write_ev);
    event_active(&h->tick_ev, EV_TIMEOUT, 0); /* conn_free from a fresh event */
  }
}

/* -- streams -------------------------------------------------------------------- */

static void stream_unlink(gw_h2_conn_t *h, h2_stream_t *s)
{
  if (s->prev) s->prev->next = s->next;
  else h->streams = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = h->closed;
  s->prev = NULL;
  h->closed = s;
  if (h->last_stream == s) h->last_stream = NULL;
  h2_stream_t **p = &h->by_id[((uint32_t)s->id >> 1) & (STREAM_BUCKETS - 1)];
  while (*p && *p != s) p = &(*p)->idnext;
  if (*p) *p = s->idnext;
  if (--h->nstreams == 0) h->idle_since_ms = gw_coarse_ms();
}

static h2_stream_t *stream_new(gw_h2_conn_t *h, int32_t id)
{
  h2_stream_t *s = h->spare;
  if (s) { /* its request recycled (stream_free): as gw_request_init leaves it */
    h->spare = s->next;
    h->nspare--;
  } else {
    /* not calloc: gw_request_init clears the request, the bulk of it */
    s = malloc(sizeof(*s));
    if (s == NULL) return NULL;
    struct evbuffer *out = evbuffer_new();
    if (out == NULL) {
      free(s);
      return NULL;
    }
    gw_request_init(&s->req, h->ctx, h->ctx->server, &h2_protocol, s);
    s->out = out;
    s->whole = (gw_buf_t)GW_BUF_INIT;
  }
  memset((char *)s + offsetof(h2_stream_t, conn), 0, sizeof(*s) - offsetof(h2_stream_t, conn));
  s->conn = h;
  s->id = id;
  gw_request_t *r = &s->req;
  r->in.http_major = 2;
  r->in.http_minor = 1; /* code that tells HTTP/1.0 from later versions sees a modern client */
  r->in.stream_id = id;
  r->in.keepalive = 1;
  r->in.method = NULL;
  r->client.remote_addr = h->remote_addr;
  r->client.balancer_addr = h->balancer_addr[0] ? h->balancer_addr : NULL;
  r->client.proxy_protocol_addr = h->balancer_addr[0] ? h->remote_addr : NULL;
  r->client.tls = h->tls ? gw_tls_info(h->tls) : NULL;
  r->in.start_ms = gw_now_ms();
  s->max_body = h->ctx->server->limits.max_body;
  s->next = h->streams;
  if (h->streams) h->streams->prev = s;
  h->streams = s;
  h2_stream_t **b = &h->by_id[((uint32_t)id >> 1) & (STREAM_BUCKETS - 1)];
  s->idnext = *b;
  *b = s;
  h->nstreams++;
  return s;
}

/* The stream of id, or NULL once closed (our own map: nghttp2's stream
 * user data would cost a lookup of its own to set and each time to get).
 * The last one found is kept: a request's header fields come one callback
 * each, all on one stream. */
static h2_stream_t *stream_of(gw_h2_conn_t *h, int32_t id)
{
  if (h->last_stream && h->last_stream->id == id) return h->last_stream;
  h2_stream_t *s = h->by_id[((uint32_t)id >> 1) & (STREAM_BUCKETS - 1)];
  while (s && s->id != id) s = s->idnext;
  if (s) h->last_stream = s;
  return s;
}

/* Counts and logs a response that is complete (whole, or its last piece). */
static void stream_log(h2_stream_t *s, int status)
{
  if (s->logged) return;
  s->logged = 1;
  gw_stats_self->responses[status >= 100 && status < 600 ? status / 100 : 0]++;
  gw_access_log_write(&s->req, status, s->resp_bytes + s->head_bytes, s->resp_bytes);
  if (s->req.in.method && s->req.in.target_len) gw_request_logged(&s->req);
}

/* -- responses ------------------------------------------------------------------ */

static void submit_trailers(h2_stream_t *s);

static ssize_t data_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *source, void *user)
{
  h2_stream_t *s = source->ptr;
  (void)session;
  (void)id;
  (void)user;
  size_t whole = s->body_end - s->body_off; /* h2_send's body in `whole`, else `out` */
  size_t have = whole ? whole : evbuffer_get_length(s->out);
  size_t n = have < length ? have : length;
  if (whole) {
    memcpy(buf, s->whole.data + s->body_off, n);
    s->body_off += n;
  } else if (n > 0) {
    evbuffer_remove(s->out, buf, n);
  }
  if (n == have && s->out_eof) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (s->trailers) { /* the stream ends with their HEADERS frame instead */
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      submit_trailers(s);
    }
  } else if (n == 0) {
    s->deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
  }
  s->conn->last_progress_ms = gw_coarse_ms();
  if (s->pipe && s->pipe->want_write && have - n < STREAM_LOW_WATER) {
    s->pipe->want_write = 0;
    pipe_wake(s->pipe->wev, EV_WRITE); /* the reader writes on from the loop */
  }
  if (s->paused && have - n < STREAM_LOW_WATER) {
    s->paused = 0;
    flush_soon(s->conn); /* on_drain runs from the flush, outside nghttp2 */
  }
  return (ssize_t)n;
}

/* Response field names met often, as nghttp2 wants them (lower case): a
 * field of one of these names, in any case, is submitted with the constant
 * name, which nghttp2 neither copies nor lower-cases. A name is found by a
 * hash of its length and first and last letters (known_slots), then matched
 * a word at a time: its bytes ORed with 0x20 where the known name has a
 * letter, against the known name's bytes (both filled in by known_fields_init). */
enum { FIELD_SEND, FIELD_HOP, FIELD_DATE, FIELD_SERVER };

typedef struct {
  const char *lower;
  unsigned len, kind;
  uint64_t head, head_mask, tail, tail_mask; /* the first and the last 8 bytes (4 to 7 bytes: 4) */
  uint64_t mid[2], mid_mask[2];              /* bytes 8-15 and 16-23 of a longer name */
} known_field_t;

#define KF(nm, k) {.lower = nm, .len = sizeof(nm) - 1, .kind = k}
static known_field_t known_fields[] = {
  KF("te", FIELD_HOP),
  KF("date", FIELD_DATE), KF("etag", FIELD_SEND), KF("vary", FIELD_SEND), KF("link", FIELD_SEND),
  KF("server", FIELD_SERVER),
  KF("upgrade", FIELD_HOP), KF("expires", FIELD_SEND), KF("alt-svc", FIELD_SEND),
  KF("location", FIELD_SEND),
  KF("connection", FIELD_HOP), KF("keep-alive", FIELD_HOP), KF("set-cookie", FIELD_SEND),
  KF("retry-after", FIELD_SEND), KF("grpc-status", FIELD_SEND),
  KF("content-type", FIELD_SEND), KF("grpc-message", FIELD_SEND),
  KF("last-modified", FIELD_SEND), KF("accept-ranges", FIELD_SEND), KF("cache-control", FIELD_SEND),
  KF("content-range", FIELD_SEND),
  KF("content-length", FIELD_HOP), /* submit_head writes its own */
  KF("x-frame-options", FIELD_SEND),
  KF("proxy-connection", FIELD_HOP), KF("content-encoding", FIELD_SEND), KF("content-language", FIELD_SEND),
  KF("www-authenticate", FIELD_SEND),
  KF("transfer-encoding", FIELD_HOP),
  KF("content-disposition", FIELD_SEND),
  KF("x-content-type-options", FIELD_SEND),
  KF("strict-transport-security", FIELD_SEND),
  KF("access-control-allow-origin", FIELD_SEND),
};
#undef KF

#define NKNOWN (sizeof(known_fields) / sizeof(known_fields[0]))
#define KNOWN_MAX_LEN 27
#define KNOWN_SLOTS 128 /* a power of two; no two known names share a slot */

static unsigned char known_slots[KNOWN_SLOTS]; /* index + 1 into known_fields, or 0 */

static unsigned known_hash(const char *name, size_t len)
{
  return ((unsigned)((unsigned char)name[0] | 0x20) + ((unsigned char)name[len - 1] | 0x20) + (unsigned)len * 25) &
         (KNOWN_SLOTS - 1);
}

static uint64_t load64(const char *p)
{
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static uint32_t load32(const char *p)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* n (4 or 8) bytes of a known name, and their letters' 0x20 mask, as
 * load32/load64 read a name's bytes. */
static void known_bytes(const char *lower, size_t n, uint64_t *word, uint64_t *mask)
{
  unsigned char w[8], m[8];
  for (size_t i = 0; i < n; i++) {
    w[i] = (unsigned char)lower[i];
    m[i] = lower[i] >= 'a' && lower[i] <= 'z' ? 0x20 : 0;
  }
  if (n == 4) {
    uint32_t w4, m4;
    memcpy(&w4, w, 4);
    memcpy(&m4, m, 4);
    *word = w4;
    *mask = m4;
  } else {
    memcpy(word, w, 8);
    memcpy(mask, m, 8);
  }
}

static void known_fields_init(void)
{
  for (size_t k = 0; k < NKNOWN; k++) {
    known_field_t *f = &known_fields[k];
    unsigned i = known_hash(f->lower, f->len);
    while (known_slots[i]) i = (i + 1) & (KNOWN_SLOTS - 1);
    known_slots[i] = (unsigned char)(k + 1);
    size_t w = f->len >= 8 ? 8 : 4;
    if (f->len < 4) continue;
    known_bytes(f->lower, w, &f->head, &f->head_mask);
    known_bytes(f->lower + f->len - w, w, &f->tail, &f->tail_mask);
    for (size_t m = 0; m < 2 && 16 + 8 * m < f->len; m++)
      known_bytes(f->lower + 8 + 8 * m, 8, &f->mid[m], &f->mid_mask[m]);
  }
}

/* name (len bytes, len == f->len) is f's name in any case; reads only name[0..len). */
static int known_is(const known_field_t *f, const char *name, size_t len)
{
  if (len < 4) return strncasecmp(name, f->lower, len) == 0;
  if (len < 8)
    return (load32(name) | (uint32_t)f->head_mask) == (uint32_t)f->head &&
           (load32(name + len - 4) | (uint32_t)f->tail_mask) == (uint32_t)f->tail;
  return (load64(name) | f->head_mask) == f->head && (load64(name + len - 8) | f->tail_mask) == f->tail &&
         (len <= 16 || (load64(name + 8) | f->mid_mask[0]) == f->mid[0]) &&
         (len <= 24 || (load64(name + 16) | f->mid_mask[1]) == f->mid[1]);
}

/* The known field named name (any case), or NULL. */
static inline const known_field_t *known_field(const char *name, size_t len)
{
  if (len < 2 || len > KNOWN_MAX_LEN) return NULL;
  for (unsigned i = known_hash(name, len);; i = (i + 1) & (KNOWN_SLOTS - 1)) {
    unsigned k = known_slots[i];
    if (k == 0) return NULL;
    if (known_fields[k - 1].len == len && known_is(&known_fields[k - 1], name, len)) return &known_fields[k - 1];
  }
}

/* Fields HTTP/2 does not carry (and content-length, which submit_head
 * writes itself). */
static int is_connection_specific(const char *name, size_t len)
{
  const known_field_t *f = known_field(name, len);
  return f && f->kind == FIELD_HOP;
}

#define MAX_NV 128

/* v in decimal at buf (room for 20 digits); returns its length. */
static size_t format_decimal(char *buf, unsigned long long v)
{
  if (v < 100) { /* a small body's length, the common case */
    buf[0] = (char)('0' + (v < 10 ? v : v / 10));
    if (v < 10) return 1;
    buf[1] = (char)('0' + v % 10);
    return 2;
  }
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
  return n;
}

/* Submits the response head of s; content_length < 0: unknown; with_body 0:
 * the HEADERS frame ends the stream. nghttp2 copies (and lower-cases) each
 * name and value unless told not to: constant strings (and a known field's
 * name, known_field), the worker's Date (rewritten only as a same-length
 * later date) and the stream's own status and length text, which outlive
 * the frame, are passed without a copy. */
static int submit_head(h2_stream_t *s, long long content_length, int with_body)
{
  gw_request_t *r = &s->req;
  gw_h2_conn_t *h = s->conn;
  nghttp2_nv nv[MAX_NV];
  size_t n = 0, hb = 0;
  char copy_status[4], copy_length[24];
  /* a second head on the stream (never expected) must not rewrite the first's */
  char *status = s->answered ? copy_status : s->status_text, *length = s->answered ? copy_length : s->length_text;
  uint8_t own = s->answered ? NGHTTP2_NV_FLAG_NONE : NGHTTP2_NV_FLAG_NO_COPY_VALUE;
  const uint8_t fixed = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
  unsigned st = r->resp.status >= 100 && r->resp.status <= 999 ? (unsigned)r->resp.status : 200;
  status[0] = (char)('0' + st / 100);
  status[1] = (char)('0' + st / 10 % 10);
  status[2] = (char)('0' + st % 10);
  status[3] = '\0';
  /* hb: the head's size before compression, what the access log counts */
#define NV(nm, nl, v, vl, fl) \
  do { \
    nv[n].name = (uint8_t *)(nm); nv[n].namelen = (nl); nv[n].value = (uint8_t *)(v); nv[n].valuelen = (vl); \
    nv[n].flags = (fl); hb += nv[n].namelen + nv[n].valuelen + 4; n++; \
  } while (0)
  NV(":status", 7, status, 3, own | NGHTTP2_NV_FLAG_NO_COPY_NAME);
  int has_server = 0;
  for (size_t i = 0; i < r->resp.headers.count && n < MAX_NV - 5; i++) {
    const gw_header_t *hd = &r->resp.headers.items[i];
    const known_field_t *f = known_field(hd->name, hd->name_len);
    if (f == NULL) {
      NV(hd->name, hd->name_len, hd->value, hd->value_len, NGHTTP2_NV_FLAG_NONE); /* copied, name lower-cased */
      continue;
    }
    if (f->kind != FIELD_SEND) {
      if (f->kind != FIELD_SERVER) continue; /* not HTTP/2's, or our own (date) */
      has_server = 1;
    }
    NV(f->lower, f->len, hd->value, hd->value_len, NGHTTP2_NV_FLAG_NO_COPY_NAME);
  }
  if (!has_server) NV("server", 6, "gateway", 7, fixed);
  if (r->resp.text_plain) NV("content-type", 12, "text/plain; charset=utf-8", 25, fixed);
  const char *date = gw_response_date_line(h->ctx); /* "Date: " IMF-fixdate (29 bytes) "\r\n" */
  NV("date", 4, date + 6, date[35] == '\r' ? 29 : strcspn(date + 6, "\r"), fixed);
  if (content_length >= 0 && !gw_request_bodyless(r))
    NV("content-length", 14, length, format_decimal(length, (unsigned long long)content_length),
       own | NGHTTP2_NV_FLAG_NO_COPY_NAME);
#undef NV
  s->head_bytes = hb;
  nghttp2_data_provider prd = {.source = {.ptr = s}, .read_callback = data_read};
  int rv = nghttp2_submit_response(h->session, s->id, nv, n, with_body ? &prd : NULL);
  s->answered = 1;
  flush_soon(h);
  return rv;
}

/* The whole response (request.h): head and body now. */
static void h2_send(gw_request_t *req)
{
  h2_stream_t *s = req->proto_ctx;
  if (s->closed) return;
  int bodyless = gw_request_bodyless(req);
  size_t body_len = req->resp.inline_body ? req->resp.inline_len : evbuffer_get_length(req->resp.body);
  long long length = bodyless ? -1 : req->in.head && req->resp.head_length >= 0 ? req->resp.head_length : (long long)body_len;
  if (!bodyless && !req->in.head) {
    /* a small whole body is copied flat (the request's may not outlive this
     * call: a Ruby string), and read from there by data_read */
    size_t at = s->whole.len;
    if (req->resp.inline_body && body_len <= WHOLE_BODY_MAX && gw_buf_append(&s->whole, req->resp.inline_body, body_len) == 0) {
      s->body_off = at;
      s->body_end = s->whole.len;
    } else if (req->resp.inline_body) evbuffer_add(s->out, req->resp.inline_body, body_len);
    else evbuffer_add_buffer(s->out, req->resp.body);
    s->resp_bytes = body_len;
  }
  s->out_eof = 1;
  submit_head(s, length, !bodyless && !req->in.head && body_len > 0);
  stream_log(s, req->resp.status ? req->resp.status : 200);
}

static void h2_stream_head(gw_request_t *req, long long content_length)
{
  h2_stream_t *s = req->proto_ctx;
  if (s->closed) return;
  req->resp.streaming = 1;
  s->out_eof = 0;
  int with_body = !req->in.head && !gw_request_bodyless(req);
  if (!with_body) s->out_eof = 1;
  submit_head(s, content_length, with_body);
}

static int h2_stream_body(gw_request_t *req, const char *data, size_t len)
{
  h2_stream_t *s = req->proto_ctx;
  if (s->closed || s->conn->dead) return -1;
  if (req->in.head || gw_request_bodyless(req)) return 0;
  evbuffer_add(s->out, data, len);
  s->resp_bytes += len;
  if (s->deferred) {
    s->deferred = 0;
    nghttp2_session_resume_data(s->conn->session, s->id);
  }
  flush_soon(s->conn);
  if (evbuffer_get_length(s->out) > STREAM_HIGH_WATER) {
    s->paused = 1;
    return 1;
  }
  return 0;
}

static void h2_stream_end(gw_request_t *req, int complete)
{
  h2_stream_t *s = req->proto_ctx;
  req->resp.streaming = 0;
  req->handler.on_drain = NULL;
  if (s->closed || s->conn->dead) return;
  if (complete) {
    s->out_eof = 1;
    if (s->deferred) {
      s->deferred = 0;
      nghttp2_session_resume_data(s->conn->session, s->id);
    }
  } else { /* cut short: never a fake complete response */
    nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
  }
  flush_soon(s->conn);
  stream_log(s, req->resp.status ? req->resp.status : 200);
}

/* The trailer fields of s (lower-cased names: HTTP/2), as its last frame. */
static void submit_trailers(h2_stream_t *s)
{
  nghttp2_nv nv[MAX_NV];
  char names[4096];
  size_t n = 0, used = 0;
  for (size_t i = 0; i < s->trailers->count && n < MAX_NV; i++) {
    const gw_header_t *t = &s->trailers->items[i];
    if (is_connection_specific(t->name, t->name_len) || used + t->name_len > sizeof(names)) continue;
    char *lower = names + used;
    for (size_t j = 0; j < t->name_len; j++) {
      char ch = t->name[j];
      lower[j] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
    }
    used += t->name_len;
    nv[n++] = (nghttp2_nv){(uint8_t *)lower, (uint8_t *)t->value, t->name_len, t->value_len, NGHTTP2_NV_FLAG_NONE};
  }
  nghttp2_submit_trailer(s->conn->session, s->id, nv, n);
}

/* The body is complete; trailer fields follow it (copied now, sent by
 * data_read once the queued body is out). */
static void h2_stream_trailers(gw_request_t *req, const gw_headers_t *trailers)
{
  h2_stream_t *s = req->proto_ctx;
  if (!s->closed && !s->conn->dead && !req->in.head && !gw_request_bodyless(req) && trailers->count > 0 &&
      s->trailers == NULL) {
    s->trailers = malloc(sizeof(*s->trailers));
    if (s->trailers) {
      gw_headers_init(s->trailers);
      if (gw_headers_copy(s->trailers, trailers) != 0) {
        gw_headers_dispose(s->trailers);
        free(s->trailers);
        s->trailers = NULL;
      }
    }
  }
  h2_stream_end(req, 1);
}

/* The consumer took bytes of a streamed request body: open the window. */
static void h2_body_taken(gw_request_t *req)
{
  h2_stream_t *s = req->proto_ctx;
  if (s->closed || s->conn->dead) return;
  size_t taken = s->body_in - evbuffer_get_length(req->in.body);
  if (taken > s->body_consumed) {
    nghttp2_session_consume_stream(s->conn->session, s->id, taken - s->body_consumed);
    s->body_consumed = taken;
    flush_soon(s->conn);
  }
}

/* -- an upgraded stream as a byte end (RFC 8441) --------------------------------- */

/* The stream goes (reset, closed, the connection ended): its reader hears it. */
static void pipe_lost(h2_stream_t *s)
{
  h2_pipe_t *p = s->pipe;
  if (p == NULL) return;
  s->pipe = NULL;
  p->s = NULL;
  p->lost = 1;
  pipe_wake(p->rev, EV_READ);
  pipe_wake(p->wev, EV_WRITE);
}

static int pipe_read(void *ioc, struct evbuffer *into, size_t max)
{
  h2_pipe_t *p = ioc;
  size_t have = evbuffer_get_length(p->in);
  if (have > 0) {
    size_t n = have < max ? have : max;
    evbuffer_remove_buffer(p->in, into, n);
    if (p->s) { /* taken: the client may send that much more */
      nghttp2_session_consume_stream(p->s->conn->session, p->s->id, n);
      flush_soon(p->s->conn);
    }
    return (int)n;
  }
  if (p->lost) {
    errno = ECONNRESET;
    return -1;
  }
  if (p->eof) return 0;
  errno = EAGAIN;
  return -1;
}

static void pipe_resume(h2_stream_t *s)
{
  if (s->deferred) {
    s->deferred = 0;
    nghttp2_session_resume_data(s->conn->session, s->id);
  }
  flush_soon(s->conn);
}

/* Into the stream's queue, up to STREAM_HIGH_WATER; the windows do the rest. */
static int pipe_write(void *ioc, struct evbuffer *out)
{
  h2_pipe_t *p = ioc;
  h2_stream_t *s = p->s;
  if (s == NULL || s->out_eof) {
    errno = EPIPE;
    return -1;
  }
  size_t queued = evbuffer_get_length(s->out);
  size_t room = queued < STREAM_HIGH_WATER ? STREAM_HIGH_WATER - queued : 0;
  size_t n = evbuffer_get_length(out);
  if (n > room) n = room;
  if (n == 0) {
    p->want_write = 1;
    errno = EAGAIN;
    return -1;
  }
  evbuffer_remove_buffer(out, s->out, n);
  s->resp_bytes += n;
  pipe_resume(s);
  return (int)n;
}

static int pipe_pending(void *ioc)
{
  h2_pipe_t *p = ioc;
  return evbuffer_get_length(p->in) > 0 || p->eof || p->lost;
}

static void pipe_shutdown(void *ioc)
{
  h2_pipe_t *p = ioc;
  if (p->s == NULL || p->s->out_eof) return;
  p->s->out_eof = 1; /* END_STREAM once the queue is out */
  pipe_resume(p->s);
}

/* The reader is done. What it wrote still goes out, then END_STREAM (a
 * WebSocket's close frame, a tunnel's last bytes); with nothing pending
 * and the client still sending, it was cut short: RST_STREAM. Later DATA
 * is dropped (on_data_chunk: the stream is answered). */
static void pipe_free(void *ioc)
{
  h2_pipe_t *p = ioc;
  h2_stream_t *s = p->s;
  if (s) {
    s->pipe = NULL;
    if (!s->closed && !p->eof && !s->out_eof && evbuffer_get_length(s->out) == 0) {
      nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
    } else if (!s->closed && !s->out_eof) {
      s->out_eof = 1;
      pipe_resume(s);
    }
    flush_soon(s->conn);
  }
  evbuffer_free(p->in);
  free(p);
}

static void pipe_watch(void *ioc, struct event *rev, struct event *wev)
{
  h2_pipe_t *p = ioc;
  p->rev = rev;
  p->wev = wev;
  if (rev && pipe_pending(p)) pipe_wake(rev, EV_READ); /* DATA that came with the handshake */
}

static const gw_io_t pipe_io = {pipe_read, pipe_write, pipe_pending, pipe_shutdown, pipe_free, pipe_watch};

static int h2_can_upgrade(const gw_request_t *req)
{
  const h2_stream_t *s = req->proto_ctx;
  return req->in.websocket_connect && !s->closed && !s->answered && !s->conn->dead;
}

/* The handler accepted the extended CONNECT: a 200 head goes out (no
 * END_STREAM) with the handler's fields but those HTTP/2 forbids
 * (submit_head) or RFC 8441 §5 drops (no Sec-WebSocket-Accept: there was no
 * key), and the stream becomes a pipe. */
static int h2_upgrade(gw_request_t *req, struct evbuffer *to_client, struct evbuffer *from_client, gw_byte_end_t *end)
{
  h2_stream_t *s = req->proto_ctx;
  (void)to_client;
  *end = (gw_byte_end_t){-1, NULL, NULL};
  if (!h2_can_upgrade(req)) return -1;
  h2_pipe_t *p = calloc(1, sizeof(*p));
  if (p == NULL || (p->in = evbuffer_new()) == NULL) {
    free(p);
    nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    flush_soon(s->conn);
    return -1;
  }
  evbuffer_add_buffer(from_client, req->in.body); /* DATA that came before the answer */
  p->s = s;
  p->eof = s->ended_remote;
  s->pipe = p;
  s->out_eof = 0;
  int status = req->resp.status >= 200 && req->resp.status < 300 ? req->resp.status : 200; /* a 101 too */
  req->resp.status = status;
  gw_headers_remove(&req->resp.headers, "sec-websocket-accept");
  if (submit_head(s, -1, 1) != 0) {
    s->pipe = NULL;
    p->s = NULL;
    pipe_free(p);
    nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    flush_soon(s->conn);
    return -1;
  }
  stream_log(s, status);
  *end = (gw_byte_end_t){-1, &pipe_io, p};
  return 0;
}

static const gw_protocol_t h2_protocol = {
  .can_upgrade = h2_can_upgrade,
  .upgrade = h2_upgrade,
  .send = h2_send,
  .stream_head = h2_stream_head,
  .stream_body = h2_stream_body,
  .stream_end = h2_stream_end,
  .stream_trailers = h2_stream_trailers,
  .body_taken = h2_body_taken,
};

/* An error found while reading the request: answer it (the request never ran). */
static void answer_error(h2_stream_t *s, int status)
{
  gw_request_t *r = &s->req;
  gw_log_info("%s: HTTP/2 stream %d: %d %s", s->conn->remote_addr, s->id, status, gw_http_reason(status));
  if (r->in.target_len) gw_request_split_target(r);
  gw_request_simple_response(r, status, NULL);
  h2_send(r);
}

/* -- nghttp2 callbacks ---------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
  gw_h2_conn_t *h = user;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  (void)session;
  return stream_new(h, frame->hd.stream_id) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static const struct {
  const char *name;
  size_t len;
  int id;
} methods[] = {
  {"GET", 3, HTTP_GET}, {"HEAD", 4, HTTP_HEAD}, {"POST", 4, HTTP_POST}, {"PUT", 3, HTTP_PUT},
  {"DELETE", 6, HTTP_DELETE}, {"OPTIONS", 7, HTTP_OPTIONS}, {"PATCH", 5, HTTP_PATCH}, {"TRACE", 5, HTTP_TRACE},
  {"CONNECT", 7, HTTP_CONNECT},
};

/* A header field on_header does not just take: a limit passed (431, or
 * GOAWAY far past it), a request already answered, or trailers. */
static int header_unusual(gw_h2_conn_t *h, h2_stream_t *s, const nghttp2_frame *frame, const uint8_t *name,
                          size_t namelen, const uint8_t *value, size_t valuelen)
{
  const gw_limits_t *lim = &h->ctx->server->limits;
  if (s->header_bytes > lim->max_header_size * HEADER_BLOCK_FATAL_FACTOR) return NGHTTP2_ERR_CALLBACK_FAILURE;
  if (s->started) { /* trailers: kept for a body that streams on (gRPC), else dropped */
    gw_request_t *r = &s->req;
    if (!r->in.body_streaming || frame->headers.cat != NGHTTP2_HCAT_HEADERS || namelen == 0 || name[0] == ':' ||
        !gw_header_field_is_safe((const char *)name, namelen, (const char *)value, valuelen))
      return 0;
    if (r->in.trailers == NULL && (r->in.trailers = malloc(sizeof(*r->in.trailers))) != NULL) gw_headers_init(r->in.trailers);
    if (r->in.trailers) gw_headers_add(r->in.trailers, (const char *)name, namelen, (const char *)value, valuelen);
    return 0;
  }
  if (!s->error_status) s->error_status = 431; /* or the error found before */
  return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user)
{
  gw_h2_conn_t *h = user;
  (void)session;
  (void)flags;
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  h2_stream_t *s = stream_of(h, frame->hd.stream_id);
  if (s == NULL) return 0;
  s->header_bytes += namelen + valuelen + 32; /* RFC 9113 §6.5.2's accounting */
  if (s->header_bytes > h->max_header_size || ++s->nheaders > h->max_fields || s->started || s->error_status)
    return header_unusual(h, s, frame, name, namelen, value, valuelen);
  gw_request_t *r = &s->req;
  const char *n = (const char *)name, *v = (const char *)value;
  if (namelen > 0 && n[0] == ':') {
    if (namelen == 7 && memcmp(n, ":method", 7) == 0) {
      if (valuelen == 3 && memcmp(v, "GET", 3) == 0) {
        r->in.method = methods[0].name;
        r->in.method_id = methods[0].id;
        return 0;
      }
      for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (methods[i].len == valuelen && memcmp(methods[i].name, v, valuelen) == 0) {
          r->in.method = methods[i].name;
          r->in.method_id = methods[i].id;
          break;
        }
      if (r->in.method == NULL) s->error_status = 501;
    } else if (namelen == 5 && memcmp(n, ":path", 5) == 0) {
      if (valuelen > h->ctx->server->limits.max_request_line) {
        s->error_status = 414;
        return 0;
      }
      gw_buf_t b = {r->in.target, 0, r->in.target_cap};
      if (gw_buf_reserve(&b, valuelen + 1) < 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      r->in.target = b.data;
      r->in.target_cap = b.cap;
      memcpy(r->in.target, v, valuelen);
      r->in.target[valuelen] = '\0';
      r->in.target_len = valuelen;
    } else if (namelen == 9 && memcmp(n, ":protocol", 9) == 0) { /* RFC 8441 (nghttp2 checked it is a CONNECT) */
      s->protocol = valuelen == 9 && strncasecmp(v, "websocket", 9) == 0 ? 1 : 2;
    } else if (namelen == 10 && memcmp(n, ":authority", 10) == 0) {
      if (!s->has_host && gw_headers_add(&r->in.headers, "host", 4, v, valuelen) == 0) s->has_host = 1;
    }
    return 0;
  }
  if (namelen == 4 && memcmp(n, "host", 4) == 0) {
    if (s->has_host) return 0; /* :authority wins */
    s->has_host = 1;
  }
  if (gw_headers_add(&r->in.headers, n, namelen, v, valuelen) != 0) s->error_status = 500;
  return 0;
}

/* The request is complete, or (streaming its body) its head is: run it. */
static void stream_start(h2_stream_t *s)
{
  s->started = 1;
  gw_stats_self->requests++;
  gw_stats_self->h2_streams++;
  gw_request_start(&s->req);
}

static void head_complete(gw_h2_conn_t *h, h2_stream_t *s, int end_stream)
{
  gw_request_t *r = &s->req;
  if (s->error_status) {
    answer_error(s, s->error_status);
    return;
  }
  if (r->in.method_id == HTTP_CONNECT && s->protocol != 1) {
    answer_error(s, s->protocol ? 501 : 405); /* not a forward proxy; only WebSocket is spoken over CONNECT */
    return;
  }
  if (r->in.method == NULL || r->in.target_len == 0) {
    answer_error(s, 400);
    return;
  }
  if (r->in.target[0] != '/' && !(r->in.target_len == 1 && r->in.target[0] == '*')) {
    answer_error(s, 400);
    return;
  }
  gw_request_split_target(r);
  r->in.head = r->in.method_id == HTTP_HEAD;
  if (r->in.method_id == HTTP_CONNECT) { /* a WebSocket: runs now, its DATA is the connection's */
    if (end_stream) {
      answer_error(s, 400);
      return;
    }
    r->in.websocket_connect = 1;
    r->handler.location = gw_router_match(h->ctx->server, r->in.target, r->in.path_len);
    stream_start(s);
    return;
  }
  if (end_stream) {
    s->ended_remote = 1;
    stream_start(s);
    return;
  }
  const gw_location_t *loc = r->handler.location = gw_router_match(h->ctx->server, r->in.target, r->in.path_len);
  if (loc == &gw_router_refused) {
    gw_request_log_refused(r);
    answer_error(s, 400);
    return;
  }
  s->max_body = loc ? loc->max_body : h->ctx->server->limits.max_body;
  const gw_header_t *cl = gw_headers_find(&r->in.headers, "content-length");
  long long length = cl ? strtoll(cl->value, NULL, 10) : -1;
  if (length > 0 && (size_t)length > s->max_body) {
    answer_error(s, 413);
    return;
  }
  if (loc && loc->stream_body) {
    r->in.body_streaming = 1;
    r->in.body_length = length;
    stream_start(s);
  }
}

/* Control frames per second over the limit: the client floods. */
static int control_flood(gw_h2_conn_t *h)
{
  int64_t sec = gw_coarse_ms() / 1000;
  if (sec != h->ctrl_second) {
    h->ctrl_second = sec;
    h->nctrl = 0;
  }
  return ++h->nctrl > CONTROL_FRAMES_PER_SEC;
}

static void go_away(gw_h2_conn_t *h, uint32_t code, const char *why)
{
  gw_log_info("%s: HTTP/2: %s; sending GOAWAY", h->remote_addr, why);
  nghttp2_session_terminate_session(h->session, code);
  h->stopping = 1;
  flush_soon(h);
}

/* Full duplex (gRPC bidirectional streaming): a response already under way
 * while its request body still streams to the upstream that answers it. */
static int body_still_wanted(const h2_stream_t *s)
{
  return s->started && s->req.handler.running && s->req.in.body_streaming;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
  gw_h2_conn_t *h = user;
  (void)session;
  switch (frame->hd.type) {
  case NGHTTP2_HEADERS: {
    h2_stream_t *s = stream_of(h, frame->hd.stream_id);
    if (s == NULL || s->closed) return 0;
    int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      head_complete(h, s, end);
    } else if (end && !s->ended_remote) { /* trailers end the body */
      s->ended_remote = 1;
      if (s->pipe) {
        s->pipe->eof = 1;
        pipe_wake(s->pipe->rev, EV_READ);
      } else if (!s->started && !s->answered) stream_start(s);
      else if (s->req.in.body_streaming) {
        s->req.in.body_streaming = 0;
        if (s->req.handler.on_body_more) s->req.handler.on_body_more(&s->req);
      }
    }
    break;
  }
  case NGHTTP2_DATA: {
    h2_stream_t *s = stream_of(h, frame->hd.stream_id);
    if (frame->hd.length == 0 && !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && control_flood(h)) {
      go_away(h, NGHTTP2_ENHANCE_YOUR_CALM, "a flood of empty DATA frames");
      return 0;
    }
    if (s == NULL || s->closed || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) break;
    s->ended_remote = 1;
    if (s->pipe) { /* the client's half-close */
      s->pipe->eof = 1;
      pipe_wake(s->pipe->rev, EV_READ);
      break;
    }
    if (s->answered && !body_still_wanted(s)) break;
    if (!s->started) {
      stream_start(s);
    } else if (s->req.in.body_streaming) {
      s->req.in.body_streaming = 0;
      if (s->req.handler.on_body_more) s->req.handler.on_body_more(&s->req);
    }
    break;
  }
  case NGHTTP2_RST_STREAM: {
    h2_stream_t *s = stream_of(h, frame->hd.stream_id);
    if (s && !s->closed && --h->resets_left <= 0)
      go_away(h, NGHTTP2_ENHANCE_YOUR_CALM, "too many streams reset by the client (rapid reset)");
    break;
  }
  case NGHTTP2_SETTINGS:
    if (h->upgrade_waiting && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
      h->upgrade_waiting = 0;
      h2_stream_t *s = stream_of(h, 1);
      if (s && !s->closed && !s->started) stream_start(s);
    }
    /* fall through */
  case NGHTTP2_PING:
  case NGHTTP2_PRIORITY:
    if (control_flood(h)) go_away(h, NGHTTP2_ENHANCE_YOUR_CALM, "a flood of SETTINGS/PING/PRIORITY frames");
    break;
  default:
    break;
  }
  return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                         void *user)
{
  gw_h2_conn_t *h = user;
  (void)flags;
  nghttp2_session_consume_connection(session, len); /* the connection window: at once */
  h2_stream_t *s = stream_of(h, id);
  if (s && s->pipe) { /* the stream window reopens as the pipe's reader takes it */
    evbuffer_add(s->pipe->in, data, len);
    pipe_wake(s->pipe->rev, EV_READ);
    return 0;
  }
  if (s == NULL || s->closed || (s->answered && !body_still_wanted(s)) || s->error_status) {
    nghttp2_session_consume_stream(session, id, len);
    return 0;
  }
  gw_request_t *r = &s->req;
  if (s->body_in + len > s->max_body) {
    if (!s->started) {
      answer_error(s, 413);
    } else { /* the request runs with a streamed body: it cannot answer now */
      gw_log_info("%s: HTTP/2 stream %d: request body over %zu bytes; resetting it", h->remote_addr, id, s->max_body);
      gw_request_abort(r);
      stream_log(s, 413);
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
    }
    nghttp2_session_consume_stream(session, id, len);
    return 0;
  }
  evbuffer_add(r->in.body, data, len);
  s->body_in += len;
  if (!r->in.body_streaming) { /* read whole: the body limit bounds it */
    nghttp2_session_consume_stream(session, id, len);
    s->body_consumed += len;
  } else if (r->handler.on_body_more) {
    r->handler.on_body_more(r);
  }
  return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code, void *user)
{
  gw_h2_conn_t *h = user;
  (void)session;
  h2_stream_t *s = stream_of(h, id);
  if (s == NULL || s->closed) return 0;
  s->closed = 1;
  pipe_lost(s);
  if (error_code == NGHTTP2_NO_ERROR && s->logged && h->resets_left < RESET_BUDGET) h->resets_left++;
  /* no user data to clear: nghttp2 frees the stream after this (no_closed_streams) */
  if (s->req.handler.running) {
    if (!s->logged) {
      gw_log_info("%s: HTTP/2 stream %d closed while %s %.*s was in progress", h->remote_addr, id,
                  s->req.in.method ? s->req.in.method : "-", (int)s->req.in.path_len, s->req.in.target ? s->req.in.target : "");
      gw_access_log_write(&s->req, 499, 0, 0);
      s->logged = 1;
    }
    gw_request_abort(&s->req);
  }
  stream_unlink(h, s);
  return 0;
}

static nghttp2_session_callbacks *callbacks;
static nghttp2_option *options;

static int h2_setup(void)
{
  if (callbacks) return 0;
  known_fields_init();
  if (nghttp2_session_callbacks_new(&callbacks) != 0) return -1;
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
  if (nghttp2_option_new(&options) != 0) return -1;
  nghttp2_option_set_no_auto_window_update(options, 1);
  nghttp2_option_set_no_closed_streams(options, 1); /* no priority tree to keep them for (RFC 9218) */
  nghttp2_option_set_max_outbound_ack(options, 1000);
  nghttp2_option_set_max_settings(options, 32);
  nghttp2_option_set_max_continuations(options, 8);
  nghttp2_option_set_stream_reset_rate_limit(options, 1000, 33);
  nghttp2_option_set_max_deflate_dynamic_table_size(options, 4096);
  return 0;
}

/* -- the connection's events ---------------------------------------------------- */

static char read_buf[READ_BUF_SIZE];

static void feed(gw_h2_conn_t *h, const char *data, size_t len)
{
  h->feeding = 1;
  ssize_t rv = nghttp2_session_mem_recv(h->session, (const uint8_t *)data, len);
  h->feeding = 0;
  if (rv < 0) {
    if (rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC) {
      gw_log_info("%s: HTTP/2: bad connection preface; closing", h->remote_addr);
      h2_close(h);
      return;
    }
    gw_log_info("%s: HTTP/2 protocol error: %s", h->remote_addr, nghttp2_strerror((int)rv));
    nghttp2_session_terminate_session(h->session,
                                      rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_CALLBACK_FAILURE
                                        ? NGHTTP2_ENHANCE_YOUR_CALM
                                        : NGHTTP2_PROTOCOL_ERROR);
    h->stopping = 1;
  }
  h2_flush(h);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
  gw_h2_conn_t *h = arg;
  (void)fd;
  (void)what;
  enter(h);
  ssize_t n = io_read(h, read_buf, sizeof(read_buf));
  if (n > 0) {
    feed(h, read_buf, (size_t)n);
    if (!h->dead && h->reading && h->tls && gw_tls_pending(h->tls)) event_active(&h->read_ev, EV_READ, 1);
  } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    h2_close(h);
  }
  leave(h);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
  gw_h2_conn_t *h = arg;
  (void)fd;
  (void)what;
  enter(h);
  h->writing = 0;
  h->flush_soon = 0;
  h2_flush(h);
  leave(h);
}

static void flush_soon(gw_h2_conn_t *h)
{
  if (h->dead || h->flush_soon || h->writing || h->feeding) return;
  h->flush_soon = 1;
  event_active(&h->write_ev, EV_WRITE, 1);
}

/* Producers paused on a stream whose queue fell below the low mark go on. */
static void run_drains(gw_h2_conn_t *h)
{
  for (h2_stream_t *s = h->streams; s && !h->dead; s = s->next)
    if (!s->paused && s->req.resp.streaming && s->req.handler.on_drain && evbuffer_get_length(s->out) < STREAM_LOW_WATER) {
      void (*cb)(gw_request_t *) = s->req.handler.on_drain;
      cb(&s->req);
    }
}

static uint8_t send_buf[OUT_HIGH_WATER]; /* frames of one pass, gathered for one write */

/* What nghttp2 has to send, up to OUT_HIGH_WATER queued: its frames are
 * gathered in send_buf (one copy each, not a callback and an evbuffer chain
 * each), then written at once when nothing waits before them (plain), or
 * queued in `out`. Returns 0, an nghttp2 error, or -1 (errno: the write's). */
static int take_frames(gw_h2_conn_t *h)
{
  size_t n = 0, queued = evbuffer_get_length(h->out);
  while (queued + n < OUT_HIGH_WATER) {
    const uint8_t *data;
    ssize_t len = nghttp2_session_mem_send(h->session, &data); /* valid until the next call */
    if (len < 0) return (int)len;
    if (len == 0) break;
    if (n + (size_t)len > sizeof(send_buf)) {
      evbuffer_add(h->out, send_buf, n);
      queued += n;
      n = 0;
      if ((size_t)len > sizeof(send_buf)) {
        evbuffer_add(h->out, data, (size_t)len);
        queued += (size_t)len;
        continue;
      }
    }
    memcpy(send_buf + n, data, (size_t)len);
    n += (size_t)len;
  }
  if (n == 0) return 0;
  if (h->tls || queued > 0) return evbuffer_add(h->out, send_buf, n);
  ssize_t w = write(h->fd, send_buf, n);
  if (w < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    w = 0;
  }
  if (w > 0) h->last_progress_ms = gw_coarse_ms();
  return (size_t)w < n ? evbuffer_add(h->out, send_buf + w, n - (size_t)w) : 0;
}

/* Frames from nghttp2 into `out`, `out` to the socket, until either blocks. */
static void h2_flush(gw_h2_conn_t *h)
{
  if (h->dead) return;
  for (;;) {
    if (evbuffer_get_length(h->out) < OUT_HIGH_WATER && nghttp2_session_want_write(h->session)) {
      int rv = take_frames(h);
      if (rv != 0) {
        if (rv != -1) gw_log_info("%s: HTTP/2: %s", h->remote_addr, nghttp2_strerror(rv));
        h2_close(h);
        return;
      }
    }
    if (evbuffer_get_length(h->out) == 0) break;
    int n = io_write(h);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      h2_close(h);
      return;
    }
    if (n > 0) h->last_progress_ms = gw_coarse_ms();
  }
  int blocked = evbuffer_get_length(h->out) > 0;
  if (blocked && !h->writing) {
    h->writing = 1;
    event_add(&h->write_ev, NULL);
  }
  /* Stop reading while the client leaves our output unread. */
  set_reading(h, !blocked || evbuffer_get_length(h->out) < OUT_HIGH_WATER);
  if (!blocked) run_drains(h);
  if (h->dead) return;
  if (!blocked && !nghttp2_session_want_read(h->session) && !nghttp2_session_want_write(h->session)) {
    h2_close(h); /* GOAWAY sent and every stream done */
    return;
  }
  if (h->stopping && h->nstreams == 0 && !blocked && !nghttp2_session_want_write(h->session)) h2_close(h);
}

/* Once a second: idle, send and zero-window timeouts. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
  gw_h2_conn_t *h = arg;
  (void)fd;
  (void)what;
  if (h->dead) {
    if (h->in_callback == 0) conn_free(h);
    return;
  }
  enter(h);
  const gw_limits_t *lim = &h->ctx->server->limits;
  int64_t now = gw_coarse_ms();
  int waiting = evbuffer_get_length(h->out) > 0;
  for (h2_stream_t *s = h->streams; s && !waiting; s = s->next)
    if (evbuffer_get_length(s->out) > 0 || s->body_off < s->body_end) waiting = 1;
  if (!waiting) h->last_progress_ms = now;
  if (h->spare && h->nstreams == 0 && now - h->idle_since_ms >= TICK_MS) spares_free(h); /* idle: memory back */
  if (waiting && now - h->last_progress_ms > lim->send_timeout_ms) {
    gw_log_info("%s: HTTP/2: send timed out (the client reads nothing or keeps a zero window); closing",
                h->remote_addr);
    h2_close(h);
  } else if (h->upgrade_waiting && now - h->idle_since_ms > lim->header_timeout_ms) {
    /* Upgrade: h2c answered, but the client's preface never came */
    gw_log_info("%s: HTTP/2: no connection preface after the h2c upgrade within header_timeout; closing",
                h->remote_addr);
    h2_close(h);
  } else if (h->nstreams == 0 && now - h->idle_since_ms > (h->stopping ? 1000 : lim->keepalive_timeout_ms)) {
    nghttp2_submit_goaway(h->session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->session),
                          NGHTTP2_NO_ERROR, NULL, 0);
    if (take_frames(h) == 0) io_write(h);
    h2_close(h);
  }
  leave(h);
}

static void h2_close(gw_h2_conn_t *h)
{
  if (h->dead) return;
  h->dead = 1;
  for (h2_stream_t *s = h->streams; s; s = s->next)
    if (s->req.handler.running) {
      if (!s->logged) {
        gw_access_log_write(&s->req, 499, 0, 0);
        s->logged = 1;
      }
      gw_request_abort(&s->req);
    }
  while (h->streams) {
    h2_stream_t *s = h->streams;
    pipe_lost(s);
    s->closed = 1;
    stream_unlink(h, s);
  }
  nghttp2_session_del(h->session);
  h->session = NULL;
  event_del(&h->read_ev);
  event_del(&h->write_ev);
  if (h->tls) {
    gw_tls_conn_free(h->tls);
    h->tls = NULL;
  }
  close(h->fd);
  h->fd = -1;
  if (h->in_callback == 0) {
    event_del(&h->tick_ev);
    event_active(&h->tick_ev, EV_TIMEOUT, 0);
  }
}

/* A session with our SETTINGS queued, not yet on the loop (h2_conn_run). */
static gw_h2_conn_t *h2_conn_alloc(gw_context_t *ctx, int fd, gw_tls_conn_t *tls, const char *remote_addr,
                                   const char *balancer_addr)
{
  if (h2_setup() < 0) return NULL;
  gw_h2_conn_t *h = calloc(1, sizeof(*h));
  if (h == NULL) return NULL;
  h->out = evbuffer_new();
  if (h->out == NULL || nghttp2_session_server_new2(&h->session, callbacks, h, options) != 0) {
    if (h->out) evbuffer_free(h->out);
    free(h);
    return NULL;
  }
  const gw_limits_t *lim = &ctx->server->limits;
  h->ctx = ctx;
  h->fd = fd;
  h->tls = tls;
  snprintf(h->remote_addr, sizeof(h->remote_addr), "%s", remote_addr);
  if (balancer_addr) snprintf(h->balancer_addr, sizeof(h->balancer_addr), "%s", balancer_addr);
  h->resets_left = RESET_BUDGET;
  h->max_header_size = lim->max_header_size;
  h->max_fields = lim->max_headers + 4; /* and the pseudo-header fields */
  h->last_progress_ms = h->idle_since_ms = gw_coarse_ms();
  nghttp2_settings_entry settings[] = {
    {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, MAX_CONCURRENT_STREAMS},
    {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)lim->max_header_size},
    {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    {NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1}, /* RFC 8441: WebSockets over streams */
    /* RFC 9218: no RFC 7540 priority tree to keep per stream (nghttp2 falls
     * back to it only for a client that does not send this setting too) */
    {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, settings, sizeof(settings) / sizeof(settings[0]));
  /* A larger connection window: it is given back as bytes arrive. */
  nghttp2_session_set_local_window_size(h->session, NGHTTP2_FLAG_NONE, 0, 1 << 20);
  return h;
}

/* Puts h on the loop and in the worker's list (it owns fd and tls from now on). */
static void h2_conn_run(gw_h2_conn_t *h)
{
  gw_context_t *ctx = h->ctx;
  if (h->tls) gw_tls_conn_set_peer(h->tls, h->remote_addr);
  event_assign(&h->read_ev, ctx->base, h->fd, EV_READ | EV_PERSIST, on_read, h);
  event_assign(&h->write_ev, ctx->base, h->fd, EV_WRITE, on_write, h);
  event_assign(&h->tick_ev, ctx->base, -1, EV_PERSIST, on_tick, h);
  struct timeval tick = gw_timeval_from_ms(TICK_MS);
  event_add(&h->tick_ev, &tick);
  h->next = all_h2;
  if (all_h2) all_h2->prev = h;
  all_h2 = h;
  ctx->nconns++;
  gw_stats_self->h2_connections++;
  set_reading(h, 1);
  if (ctx->stopping) gw_h2_conn_shutdown(h, 1);
}

gw_h2_conn_t *gw_h2_conn_new(gw_context_t *ctx, int fd, gw_tls_conn_t *tls, const char *remote_addr, const char *balancer_addr,
                             const char *data, size_t len)
{
  gw_h2_conn_t *h = h2_conn_alloc(ctx, fd, tls, remote_addr, balancer_addr);
  if (h == NULL) return NULL;
  h2_conn_run(h);
  enter(h);
  feed(h, data, len);
  leave(h);
  return h;
}

/* Hop-by-hop fields of the HTTP/1.1 request that do not become stream 1's. */
static int upgrade_only(const gw_header_t *f)
{
  return is_connection_specific(f->name, f->name_len) ||
         (f->name_len == 14 && strncasecmp(f->name, "http2-settings", 14) == 0);
}

gw_h2_conn_t *gw_h2_conn_upgrade(gw_context_t *ctx, int fd, const char *remote_addr, const char *balancer_addr,
                                 const unsigned char *settings, size_t settings_len, const gw_request_t *req,
                                 struct evbuffer *head, const char *data, size_t len)
{
  gw_h2_conn_t *h = h2_conn_alloc(ctx, fd, NULL, remote_addr, balancer_addr);
  if (h == NULL) return NULL;
  h2_stream_t *s = NULL;
  /* Stream 1 is the request, half-closed (remote): its answer comes on it. */
  if (nghttp2_session_upgrade2(h->session, settings, settings_len, req->in.method_id == HTTP_HEAD, NULL) != 0 ||
      (s = stream_new(h, 1)) == NULL)
    goto fail;
  gw_request_t *r = &s->req;
  r->in.method = req->in.method;
  r->in.method_id = req->in.method_id;
  r->in.head = req->in.head;
  gw_buf_t b = {NULL, 0, 0};
  if (gw_buf_reserve(&b, req->in.target_len + 1) < 0) goto fail;
  memcpy(b.data, req->in.target, req->in.target_len + 1);
  r->in.target = b.data;
  r->in.target_cap = b.cap;
  r->in.target_len = req->in.target_len;
  gw_request_split_target(r);
  for (size_t i = 0; i < req->in.headers.count; i++) {
    const gw_header_t *f = &req->in.headers.items[i];
    if (upgrade_only(f)) continue;
    if (gw_headers_add(&r->in.headers, f->name, f->name_len, f->value, f->value_len) != 0) goto fail;
  }
  s->ended_remote = 1;
  /* The 101 goes first, then our SETTINGS and the response as HTTP/2. */
  if (evbuffer_add_buffer(h->out, head) != 0) goto fail;
  /* Stream 1 runs once the client's preface is in (its SETTINGS frame): a
   * response sent right behind the 101 would reach a client still reading
   * HTTP/1.1 (curl 7.88 keeps only 32 KiB of it and fails). */
  h->upgrade_waiting = 1;
  h2_conn_run(h);
  enter(h);
  feed(h, data, len);
  leave(h);
  return h;
fail:
  if (s) {
    s->prev = s->next = NULL;
    stream_free(s);
  }
  nghttp2_session_del(h->session);
  evbuffer_free(h->out);
  free(h);
  return NULL;
}

void gw_h2_conn_shutdown(gw_h2_conn_t *h, int graceful)
{
  if (h->dead) return;
  enter(h);
  if (!graceful) {
    h2_close(h);
  } else {
    h->stopping = 1;
    nghttp2_submit_goaway(h->session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->session),
                          NGHTTP2_NO_ERROR, NULL, 0);
    /* WebSocket streams never finish by themselves: as HTTP/1.1 tunnels, they
     * end with the stop (reset; their readers hear it from the loop). */
    for (h2_stream_t *s = h->streams; s; s = s->next)
      if (s->pipe) {
        pipe_lost(s);
        nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
      }
    h2_flush(h);
  }
  leave(h);
}

void gw_h2_count(uint32_t *conns, uint32_t *streams)
{
  *conns = *streams = 0;
  for (gw_h2_conn_t *h = all_h2; h; h = h->next) {
    if (h->dead) continue;
    (*conns)++;
    *streams += (uint32_t)h->nstreams;
  }
}

void gw_h2_shutdown_all(int graceful)
{
  gw_h2_conn_t *next;
  for (gw_h2_conn_t *h = all_h2; h; h = next) {
    next = h->next;
    gw_h2_conn_shutdown(h, graceful);
  }
}
