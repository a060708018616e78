/* fcgi_client.c - the non-blocking FastCGI client (fcgi_client.h): the
 * FastCGI parts of a pooled exchange (pooled_exchange.c owns connecting,
 * sending, pausing, retrying and parking; the record format is fcgi_record.c's).
 *
 * A request is serialised once (BEGIN_REQUEST, PARAMS, the end of PARAMS,
 * and a whole body as STDIN records with their end) into a buffer allocated
 * with it, so a retry can resend it; a streamed body is framed as STDIN
 * records from the caller's evbuffer when the core asks. Input is read into
 * the connection's evbuffer and decoded from there; whatever a pause leaves
 * unparsed stays in it. on_head and on_body run between
 * gw_px_enter_cb/gw_px_leave_cb, so a cancel from inside them is safe. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>

#include "addr.h"
#include "buf.h"
#include "byte_end.h"
#include "fcgi_record.h"
#include "fcgi_client.h"
#include "log.h"
#include "pooled_exchange.h"
#include "str.h"

/* Most responses are a few records in one segment: the first read of an
 * event reserves a small chain for them, the reads after it large ones. */
#define FIRST_READ_SIZE 4096
#define READ_SIZE (64 * 1024)
#define READS_PER_EVENT 4
#define REQUEST_ID 1
#define DEFAULT_CONNECT_TIMEOUT_MS 5000
#define DEFAULT_TIMEOUT_MS 60000
#define STDERR_LINE_MAX 2048

static const gw_err_t ERR_CONNECT = {GW_ERR_CONNECT, "cannot connect to upstream"};
static const gw_err_t ERR_NOMEM = {GW_ERR_NOMEM, "out of memory"};
static const gw_err_t ERR_NONE = {GW_OK, NULL};
#define ERR_PREMATURE {GW_ERR_CLOSED, "FastCGI server closed the connection prematurely"}

typedef struct {
  gw_px_conn_t xc;            /* first: the pooled connection (pooled_exchange.h) */
  struct evbuffer *in;        /* owned: read and not decoded yet */
} fcgi_conn_t;

struct gw_fcgi_req_s {
  gw_px_t x;                  /* first: the exchange (pooled_exchange.h) */
  gw_fcgi_done_cb cb;
  void (*on_head)(gw_fcgi_response_t *res, void *arg);
  void (*on_body)(const char *data, size_t len, void *arg);
  char label[128];
  gw_fcgi_decoder_t dec;
  gw_buf_t head;              /* STDOUT gathered until the CGI head is complete */
  size_t rest_off, rest_len;  /* body bytes that came with the head, in `head`, not delivered yet */
  gw_buf_t errline;           /* an FCGI_STDERR line not ended yet */
  gw_fcgi_response_t res;
  unsigned head_done : 1;
  unsigned char wire[];
};

static gw_fcgi_req_t *req_of(gw_px_conn_t *c)
{
  return (gw_fcgi_req_t *)c->x;
}

/* ---- the protocol's parts for the core ---- */

static int conn_init(gw_px_conn_t *xc)
{
  fcgi_conn_t *c = (fcgi_conn_t *)xc;
  c->in = evbuffer_new();
  return c->in ? 0 : -1;
}

static void conn_free(gw_px_conn_t *xc)
{
  fcgi_conn_t *c = (fcgi_conn_t *)xc;
  if (c->in) evbuffer_free(c->in);
  c->in = NULL;
}

static int conn_kept(gw_px_conn_t *xc)
{
  fcgi_conn_t *c = (fcgi_conn_t *)xc;
  return evbuffer_get_length(c->in) > 0 || req_of(xc)->rest_len > 0;
}

/* Streamed body: frames what body_src holds as STDIN records, and the end. */
static size_t frame_body(gw_px_t *x)
{
  size_t n = evbuffer_get_length(x->body_src), taken = n;
  while (n > 0) {
    size_t k = n > GW_FCGI_MAX_CONTENT ? GW_FCGI_MAX_CONTENT : n;
    unsigned char hdr[GW_FCGI_HEADER_LEN];
    gw_fcgi_put_header(hdr, GW_FCGI_STDIN, REQUEST_ID, k, 0);
    evbuffer_add(x->body_out, hdr, sizeof(hdr));
    evbuffer_remove_buffer(x->body_src, x->body_out, k);
    n -= k;
  }
  if (x->body_complete) {
    gw_fcgi_add_records(x->body_out, GW_FCGI_STDIN, REQUEST_ID, NULL, 0);
    x->body_ended = 1;
  }
  return taken;
}

static void req_done(gw_px_t *x, gw_err_t err)
{
  gw_fcgi_req_t *r = (gw_fcgi_req_t *)x;
  r->cb(err, x->arg);
}

static void req_free(gw_px_t *x)
{
  gw_fcgi_req_t *r = (gw_fcgi_req_t *)x;
  gw_buf_dispose(&r->head);
  gw_buf_dispose(&r->errline);
  gw_headers_dispose(&r->res.headers);
  free(r);
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
  gw_px_enter_cb(&r->x);
  if (head) r->on_head(&r->res, r->x.arg);
  else if (r->on_body) r->on_body(data, len, r->x.arg);
  if (gw_px_leave_cb(&r->x)) return GONE;
  return r->x.paused ? PAUSED : GO_ON;
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
    gw_px_fail(&r->x, ERR_NOMEM);
    return GONE;
  }
  /* Only look where a blank line can newly end (3 bytes back). */
  long end = gw_cgi_head_end(r->head.data, r->head.len, before > 3 ? before - 3 : 0);
  if (end < 0) {
    gw_log_error("FastCGI %s: response head too large", r->label);
    gw_px_fail(&r->x, gw_err(GW_ERR_BAD_RESPONSE, "invalid FastCGI response"));
    return GONE;
  }
  if (end == 0) return GO_ON;
  const char *err;
  if (gw_cgi_head_parse(r->head.data, (size_t)end, &r->res.status, &r->res.headers, &err) < 0) {
    gw_log_error("FastCGI %s: %s", r->label, err);
    gw_px_fail(&r->x, gw_err(GW_ERR_BAD_RESPONSE, "invalid FastCGI response"));
    return GONE;
  }
  r->head_done = 1;
  r->res.reused = r->x.conn->served;
  r->rest_off = (size_t)end;
  r->rest_len = r->head.len - (size_t)end;
  int rc = deliver(r, NULL, 0, 1);
  return rc == GO_ON ? deliver_rest(r) : rc;
}

/* Decodes what the connection holds. Returns GO_ON to read more. */
static int conn_process(fcgi_conn_t *c)
{
  gw_fcgi_req_t *r = req_of(&c->xc);
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
        gw_px_fail(&r->x, gw_err(GW_ERR_BAD_RESPONSE, "FastCGI server refused the request"));
        return GONE;
      }
      if (!r->head_done) {
        gw_log_error("FastCGI %s: the response ended without a complete head", r->label);
        gw_px_fail(&r->x, gw_err(GW_ERR_BAD_RESPONSE, "invalid FastCGI response"));
        return GONE;
      }
      /* parked only when the end was the last of what was read */
      gw_px_finish(&r->x, ERR_NONE, gw_px_all_sent(&r->x) && evbuffer_get_length(c->in) == 0);
      return GONE;
    case GW_FCGI_OUT_ERROR:
      gw_log_error("FastCGI %s: %s", r->label, r->dec.err);
      gw_px_fail(&r->x, gw_err(GW_ERR_BAD_RESPONSE, "invalid FastCGI response"));
      return GONE;
    }
  }
}

static void conn_readable(gw_px_conn_t *xc)
{
  fcgi_conn_t *c = (fcgi_conn_t *)xc;
  gw_fcgi_req_t *r = req_of(xc);
  if (conn_process(c) != GO_ON) return;
  for (int i = 0; i < READS_PER_EVENT; i++) {
    int want = i == 0 ? FIRST_READ_SIZE : READ_SIZE;
    int n = gw_byte_end_read_fd(c->in, xc->pc.fd, (size_t)want);
    if (n > 0) {
      gw_px_got_bytes(xc);
      if (conn_process(c) != GO_ON) return;
      if (n < want) return;
      continue;
    }
    if (n == 0) {
      if (gw_px_retry_on_eof(xc)) return;
      stderr_flush(r);
      gw_px_fail(&r->x, (gw_err_t)ERR_PREMATURE);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    gw_px_io_failed(xc, errno);
    return;
  }
}

/* ---- public API ---- */

static const gw_px_ops_t fcgi_ops = {
  .name = "FastCGI",
  .err_reset = {GW_ERR_RESET, "connection reset by FastCGI server"},
  .err_premature = ERR_PREMATURE,
  .err_timeout = {GW_ERR_TIMEOUT, "FastCGI server timed out"},
  .conn_init = conn_init,
  .conn_free = conn_free,
  .readable = conn_readable,
  .kept = conn_kept,
  .frame_body = frame_body,
  .done = req_done,
  .free = req_free,
};

gw_pool_t *gw_fcgi_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms)
{
  return gw_px_pool_new(base, keepalive_max, idle_timeout_ms, &fcgi_ops, sizeof(fcgi_conn_t), NULL);
}

void gw_fcgi_pool_free(gw_pool_t *pool)
{
  gw_px_pool_release(pool);
}

/* BEGIN_REQUEST, PARAMS records, the empty PARAMS, STDIN + its end (unless
 * streamed) into w; returns the end. */
static unsigned char *put_request(unsigned char *w, const gw_fcgi_params_t *p, int streamed)
{
  size_t plen = p->params_len;
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
  if (streamed) return w;
  off = 0;
  while (off < p->body_len) {
    size_t n = p->body_len - off > GW_FCGI_MAX_CONTENT ? GW_FCGI_MAX_CONTENT : p->body_len - off;
    gw_fcgi_put_header(w, GW_FCGI_STDIN, REQUEST_ID, n, 0);
    w += GW_FCGI_HEADER_LEN;
    memcpy(w, p->body + off, n);
    w += n;
    off += n;
  }
  gw_fcgi_put_header(w, GW_FCGI_STDIN, REQUEST_ID, 0, 0);
  return w + GW_FCGI_HEADER_LEN;
}

gw_fcgi_req_t *gw_fcgi_request(gw_pool_t *pool, const gw_fcgi_params_t *p, gw_fcgi_done_cb cb, void *arg)
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
  gw_px_t *x = &r->x;
  if (gw_px_init(x, pool, arg, p->body_source, p->on_body_sent) < 0) {
    free(r);
    return NULL;
  }
  r->cb = cb;
  r->on_head = p->on_head;
  r->on_body = p->on_body;
  x->idempotent = p->idempotent != 0;
  x->read_timer = 1;
  x->body_complete = p->body_complete != 0;
  x->connect_timeout_ms = p->connect_timeout_ms > 0 ? p->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
  x->timeout_ms = p->timeout_ms > 0 ? p->timeout_ms : DEFAULT_TIMEOUT_MS;
  gw_copy_cstr(r->label, sizeof(r->label), p->label ? p->label : "-");
  x->label = r->label;
  gw_fcgi_decoder_init(&r->dec, REQUEST_ID);
  gw_headers_init(&r->res.headers);
  x->wire = (const char *)r->wire;
  x->wire_len = (size_t)(put_request(r->wire, p, streamed) - r->wire);

  gw_sockaddr_t addr;
  memset(&addr, 0, sizeof(addr));
  if (p->addr == NULL || p->addrlen == 0 || p->addrlen > sizeof(addr)) {
    gw_log_error("FastCGI %s: bad address", r->label);
    gw_px_start(x, NULL, ERR_CONNECT); /* fails from the loop */
    return r;
  }
  memcpy(&addr, p->addr, p->addrlen);
  gw_pool_key_t *key = gw_pool_key_get(pool, &addr, p->addrlen, NULL, NULL, NULL, 0);
  if (key == NULL) {
    if (x->body_out) evbuffer_free(x->body_out);
    free(r);
    return NULL;
  }
  gw_px_start(x, key, ERR_NONE);
  return r;
}

void gw_fcgi_cancel(gw_fcgi_req_t *r)
{
  if (r) gw_px_cancel(&r->x);
}

void gw_fcgi_pause(gw_fcgi_req_t *r)
{
  if (r) gw_px_pause(&r->x);
}

void gw_fcgi_resume(gw_fcgi_req_t *r)
{
  if (r) gw_px_resume(&r->x);
}

void gw_fcgi_body_more(gw_fcgi_req_t *r, int complete)
{
  if (r) gw_px_body_more(&r->x, complete);
}
