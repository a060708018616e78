/* compress.c - compression on the fly between handler and protocol (see
 * compress.h for what is compressed and how a stream flows). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "compress.h"
#include "compress_http.h"
#include "encoder.h"
#include "log.h"

#define TURN_BUDGET (1024 * 1024) /* input compressed per loop turn before the producer is paused */

typedef struct {
  gw_request_t *req;
  gw_encoder_t *enc;        /* owned */
  struct event turn;        /* a 0 s timer: the next loop turn (flush, resume) */
  int armed;                /* turn is pending */
  int dirty;                /* input since the last flush */
  int fresh;                /* input came after turn was armed: not quiet yet */
  int paused;               /* we told the producer to pause (the budget): resume it */
  int broken;               /* the encoder failed: the body ends cut short */
  int finished;             /* the whole announced length came: the stream is ended */
  size_t turn_in;           /* input this turn */
  long long length;         /* the producer's announced length, -1: unknown */
  long long in_total;       /* input so far */
} gw_compress_t;

/* A whole response's compressed body before it replaces resp.body; always
 * left empty. */
static struct evbuffer *scratch;

/* A streamed body's compressed bytes on their way to the protocol (which
 * copies them). */
static unsigned char outbuf[32 * 1024];

static const gw_compress_conf_t *conf_of(const gw_request_t *req)
{
  return req->handler.location && req->parent == NULL ? req->handler.location->compress : NULL;
}

/* 1 when the response may be compressed at all (then Vary is due); length
 * is the body's, -1 when unknown. */
static int eligible(const gw_request_t *req, const gw_compress_conf_t *cf, long long length)
{
  if (req->in.head) return 0;
  int st = req->resp.status ? req->resp.status : 200;
  if (st < 200 || st == 204 || st == 206 || st == 304) return 0;
  if (length >= 0 && length < cf->min_length) return 0;
  const gw_header_t *ce = gw_headers_find(&req->resp.headers, "content-encoding");
  if (ce && ce->value_len > 0) return 0;
  if (gw_headers_find(&req->resp.headers, "cache-control") &&
      gw_headers_have_token(&req->resp.headers, "cache-control", "no-transform"))
    return 0;
  const gw_header_t *ct = gw_headers_find(&req->resp.headers, "content-type");
  if (ct) return gw_compress_type_matches(ct->value, ct->value_len, cf->types, cf->ntypes);
  return req->resp.text_plain && gw_compress_type_matches("text/plain", 10, cf->types, cf->ntypes);
}

/* Replaces the (only) field name with prefix + its old value + suffix. */
static void rewrite_field(gw_request_t *req, const char *name, const char *prefix, const char *suffix)
{
  gw_header_t *h = gw_headers_find(&req->resp.headers, name);
  size_t pl = strlen(prefix), sl = strlen(suffix), n = pl + h->value_len + sl;
  char small[512];
  char *v = n <= sizeof(small) ? small : malloc(n);
  if (v == NULL) return;
  memcpy(v, prefix, pl);
  memcpy(v + pl, h->value, h->value_len);
  memcpy(v + pl + h->value_len, suffix, sl);
  char nm[32];
  size_t nl = h->name_len < sizeof(nm) ? h->name_len : sizeof(nm) - 1;
  memcpy(nm, h->name, nl); /* the field's own spelling */
  gw_headers_remove(&req->resp.headers, name);
  gw_headers_add(&req->resp.headers, nm, nl, v, n);
  if (v != small) free(v);
}

/* "Vary: Accept-Encoding", added to the Vary the response has (once). */
static void add_vary(gw_request_t *req)
{
  gw_headers_t *hs = &req->resp.headers;
  size_t nvary = 0;
  for (size_t i = 0; i < hs->count; i++)
    if (hs->items[i].name_len == 4 && strncasecmp(hs->items[i].name, "vary", 4) == 0) nvary++;
  /* the usual case, no Vary: no token lists to read */
  if (nvary > 0 &&
      (gw_headers_have_token(hs, "vary", "accept-encoding") || gw_headers_have_token(hs, "vary", "*")))
    return;
  if (nvary == 1)
    rewrite_field(req, "vary", "", ", Accept-Encoding");
  else /* none, or several lines (one list): a line of its own */
    gw_headers_add(hs, "Vary", 4, "Accept-Encoding", 15);
}

static gw_coding_t negotiate(const gw_request_t *req, const gw_compress_conf_t *cf)
{
  const gw_header_t *ae = gw_headers_find(&req->in.headers, "accept-encoding");
  if (ae == NULL) return GW_CODING_NONE;
  return gw_compress_negotiate(ae->value, ae->value_len, cf->encodings, cf->nencodings);
}

/* The head of a response that is compressed with coding c. */
static void apply_head(gw_request_t *req, gw_coding_t c)
{
  const char *name = gw_coding_name(c);
  gw_headers_remove(&req->resp.headers, "content-length");
  gw_headers_remove(&req->resp.headers, "accept-ranges"); /* ranges of the compressed bytes: none */
  gw_headers_add(&req->resp.headers, "Content-Encoding", 16, name, strlen(name));
  const gw_header_t *etag = gw_headers_find(&req->resp.headers, "etag");
  if (etag && !(etag->value_len >= 2 && etag->value[0] == 'W' && etag->value[1] == '/'))
    rewrite_field(req, "etag", "W/", ""); /* another representation: no longer byte-for-byte the same */
}

/* The coding for this response (head checked, Vary added), or NONE. */
static gw_coding_t decide(gw_request_t *req, long long length, const gw_compress_conf_t **cfp)
{
  const gw_compress_conf_t *cf = conf_of(req);
  if (cf == NULL || !eligible(req, cf, length)) return GW_CODING_NONE;
  add_vary(req);
  *cfp = cf;
  return negotiate(req, cf);
}

static struct evbuffer *get_scratch(void)
{
  if (scratch == NULL) scratch = evbuffer_new();
  return scratch;
}

/* -- whole responses ----------------------------------------------------------- */

static void compress_whole(gw_request_t *req)
{
  if (req->handler.location == NULL || req->handler.location->compress == NULL) return; /* the common case */
  size_t len = req->resp.inline_body ? req->resp.inline_len : evbuffer_get_length(req->resp.body);
  const gw_compress_conf_t *cf = NULL;
  gw_coding_t c = decide(req, (long long)len, &cf);
  if (c == GW_CODING_NONE) return;
  struct evbuffer *out = get_scratch();
  gw_encoder_t *e = out ? gw_encoder_new(c, cf->level[c], (long long)len) : NULL;
  int rc = e ? 0 : -1;
  if (e && req->resp.inline_body) {
    rc = gw_encoder_run(e, req->resp.inline_body, len, GW_ENC_FINISH, out);
  } else if (e) {
    struct evbuffer_iovec small[16], *v = small;
    int n = evbuffer_peek(req->resp.body, -1, NULL, NULL, 0);
    if (n > 16 && (v = malloc((size_t)n * sizeof(*v))) == NULL) rc = -1;
    if (rc == 0) evbuffer_peek(req->resp.body, -1, NULL, v, n);
    for (int i = 0; rc == 0 && i < n; i++) rc = gw_encoder_run(e, v[i].iov_base, v[i].iov_len, GW_ENC_CONTINUE, out);
    if (rc == 0) rc = gw_encoder_run(e, NULL, 0, GW_ENC_FINISH, out);
    if (v != small) free(v);
  }
  gw_encoder_free(e);
  if (rc < 0) { /* sent as it is */
    gw_log_error("%.*s: %s compression failed (out of memory?); sent uncompressed", (int)req->in.path_len, req->in.target,
                 gw_coding_name(c));
    if (out) evbuffer_drain(out, evbuffer_get_length(out));
    return;
  }
  apply_head(req, c);
  req->resp.inline_body = NULL;
  evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
  evbuffer_add_buffer(req->resp.body, out);
}

/* -- streamed responses --------------------------------------------------------- */

static void on_turn(evutil_socket_t fd, short what, void *arg);
static void compress_free(gw_request_t *req);

static void arm(gw_compress_t *st)
{
  static const struct timeval now = {0, 0};
  if (st->armed) {
    st->fresh = 1;
    return;
  }
  st->armed = 1;
  evtimer_add(&st->turn, &now);
}

/* Compresses in[0, len) as mode says, each buffer of output to the
 * protocol. Returns 0, 1 (the protocol is over its high water mark), -1
 * (the request was aborted: st is gone) or -2 (the encoder failed). */
static int encode_out(gw_compress_t *st, gw_request_t *req, const void *in, size_t len, gw_enc_mode_t mode)
{
  int full = 0;
  for (;;) {
    size_t n = sizeof(outbuf);
    int rc = gw_encoder_step(st->enc, &in, &len, mode, outbuf, &n);
    if (rc < 0) return -2;
    if (n > 0) {
      int r = req->proto->stream_body(req, (const char *)outbuf, n);
      if (r < 0) return -1;
      if (r > 0) full = 1;
    }
    if (rc == 0) return full;
  }
}

static void run_failed(gw_compress_t *st)
{
  gw_request_t *req = st->req;
  gw_log_error("%.*s: compression failed (out of memory?); the response is cut short", (int)req->in.path_len,
               req->in.target);
  st->broken = 1;
}

/* A loop turn later: resume a producer we paused, or flush once the
 * producer stayed quiet for a whole turn (the upstream paused). */
static void on_turn(evutil_socket_t fd, short what, void *arg)
{
  gw_compress_t *st = arg;
  gw_request_t *req = st->req;
  (void)fd;
  (void)what;
  st->armed = 0;
  st->turn_in = 0;
  if (st->paused) {
    st->paused = 0;
    if (st->dirty) arm(st);
    if (req->handler.on_drain) req->handler.on_drain(req); /* may end or abort the request: nothing after */
    return;
  }
  if (st->fresh) { /* more came since: not quiet yet */
    st->fresh = 0;
    arm(st);
    return;
  }
  if (!st->dirty || st->broken || st->finished) return;
  st->dirty = 0;
  if (encode_out(st, req, NULL, 0, GW_ENC_FLUSH) == -2) run_failed(st);
  /* over the mark: the producer hears it on its next piece */
}

static long long compress_begin(gw_request_t *req, long long length)
{
  if (req->handler.location == NULL || req->handler.location->compress == NULL) return length;
  const gw_compress_conf_t *cf = NULL;
  gw_coding_t c = decide(req, length, &cf);
  if (c == GW_CODING_NONE) return length;
  gw_compress_t *st = calloc(1, sizeof(*st));
  if (st == NULL || (st->enc = gw_encoder_new(c, cf->level[c], length)) == NULL) {
    free(st);
    gw_log_error("%.*s: out of memory for %s compression; sent uncompressed", (int)req->in.path_len, req->in.target,
                 gw_coding_name(c));
    return length;
  }
  st->req = req;
  st->length = length;
  evtimer_assign(&st->turn, req->ctx->base, on_turn, st);
  apply_head(req, c);
  req->resp.stage_state = st;
  return -1;
}

static int compress_data(gw_request_t *req, const char *data, size_t len)
{
  gw_compress_t *st = req->resp.stage_state;
  if (st->broken || st->finished) return 0;
  st->in_total += (long long)len;
  /* The whole announced body (often one piece): finish now, no flush to wait for. */
  int last = st->length >= 0 && st->in_total >= st->length;
  if (last) {
    st->finished = 1;
    if (st->armed) event_del(&st->turn);
    st->armed = 0;
  } else {
    st->turn_in += len;
    st->dirty = 1;
    arm(st);
  }
  int over_budget = st->turn_in >= TURN_BUDGET;
  int r = encode_out(st, req, data, len, last ? GW_ENC_FINISH : GW_ENC_CONTINUE);
  if (r == -1) return -1; /* st is gone with the request */
  if (r == -2) {
    run_failed(st);
    return 0;
  }
  if (r == 0 && over_budget && !last) {
    st->paused = 1; /* compressing is the work here: the next turn resumes it */
    return 1;
  }
  return r;
}

static int compress_end(gw_request_t *req)
{
  gw_compress_t *st = req->resp.stage_state;
  int rc = st->broken ? -2 : st->finished ? 0 : encode_out(st, req, NULL, 0, GW_ENC_FINISH);
  if (rc == -2 && !st->broken) run_failed(st);
  /* The request no longer runs, so a client gone meanwhile (-1) aborted
   * nothing: st is still ours to free. */
  if (req->resp.stage_state == st) compress_free(req);
  return rc < 0 ? -1 : 0;
}

static void compress_free(gw_request_t *req)
{
  gw_compress_t *st = req->resp.stage_state;
  if (st == NULL) return;
  req->resp.stage_state = NULL;
  event_del(&st->turn);
  gw_encoder_free(st->enc);
  free(st);
}

const gw_stage_t gw_compress_stage = {
  .whole = compress_whole, .begin = compress_begin, .data = compress_data, .end = compress_end, .free = compress_free};
