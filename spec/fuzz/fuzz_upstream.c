/* fuzz_upstream.c - libFuzzer target for the upstream client's response side
 * (http1_client.c): llhttp in response mode, 1xx skipping, framing checks, the
 * buffered and streaming deliveries with pause/resume/cancel, keep-alive
 * parking and reuse, the stale-connection retry.
 *
 * A gw_pool_t runs on an event_base; gw_client_request() goes to a
 * unix socket whose listening end the harness owns (/tmp/gw-fuzz-upstream-
 * PID.sock). The harness accepts, discards the request bytes and writes the
 * fuzz input back as the response, in slices, running the loop in between;
 * finally it half-closes (EOF) and runs the loop until every request is
 * settled. Checked on every input:
 *
 *   - the done callback fires exactly once per request, never after
 *     gw_client_cancel(), never with a timeout kind (no timer can expire here);
 *   - streaming: on_head at most once and before any on_body, on_body only
 *     with len > 0 and never after done, a success always had its on_head;
 *     res->body stays empty; status is final (>= 200, not 101);
 *   - every request settles once the upstream sent EOF and nothing is paused;
 *   - idle pooled connections are dropped once the upstream closed them;
 *   - differential: the first response, when not cancelled, gives the same
 *     outcome (error or status, version, header count, body bytes) as a plain
 *     buffered run of the same bytes written in one piece;
 *   - no leak once the pool is freed (LSan), no memory error (ASan/UBSan).
 *
 * Input layout (see README.md): 10 control bytes, then the response bytes.
 *   [0] bit 0: streaming (on_head/on_body); bits 1-2: method GET, HEAD, POST
 *       (with a body: not idempotent), DELETE; bits 3-4: slicing (one write,
 *       two, three, one byte per write for the first 512); bit 5: a second
 *       request after the first (the input is split at [8..9]); bit 6: the
 *       upstream closes the first connection before the second request (a
 *       stale pooled connection); bit 7: pool keepalive 0 (no reuse).
 *   [1] streaming: pause in on_body #i when bit (i % 8) is set.
 *   [2] bits 0-1: cancel: none, in on_head, in on_body #k, from outside after
 *       loop round k (k: bits 2-4); bit 5: pause in on_head; bit 6: resume
 *       right after pausing, inside the callback; bit 7: on_body NULL.
 *   [3] bits 0-3: loop rounds a pause lasts before the harness resumes; bit 4:
 *       max_response_body 16 (buffered); bit 5: pause from outside right after
 *       the request starts.
 *   [4..5], [6..7]: little-endian slice cuts (mod length+1); [8..9]: where the
 *       second response starts (mod length+1). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "log.h"
#include "http1_client.h"

#define HDR 10
#define MAX_FDS 16
#define MAX_BYTE_SLICES 512

#define FUZZ_NAME "fuzz_upstream"
#include "fuzz_common.h"

static struct event_base *base;
static int listen_fd = -1;
static char sock_path[108];
static int verbose;
static int strict; /* FUZZ_STRICT=1: known findings are fatal too */

static void remove_socket(void)
{
  if (sock_path[0]) unlink(sock_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  signal(SIGPIPE, SIG_IGN);
  verbose = getenv("FUZZ_VERBOSE") && *getenv("FUZZ_VERBOSE") == '1';
  strict = getenv("FUZZ_STRICT") && *getenv("FUZZ_STRICT") == '1';
  base = event_base_new();
  if (base == NULL) FAIL("event_base_new");
  /* The client only logs at info and above (connect errors, unsafe headers). */
  gw_log_min_level = GW_LOG_CRIT;
  snprintf(sock_path, sizeof(sock_path), "/tmp/gw-fuzz-upstream-%d.sock", (int)getpid());
  unlink(sock_path);
  listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  memcpy(sun.sun_path, sock_path, strlen(sock_path));
  if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(listen_fd, 64) < 0)
    FAIL("cannot listen on %s: %s", sock_path, strerror(errno));
  atexit(remove_socket);
  return 0;
}

/* -- the configuration an input selects ------------------------------------ */

typedef struct {
  int streaming;
  const char *method;
  int slicing;
  int two_requests, stale, no_keepalive;
  uint8_t pause_pattern;
  int cancel_mode, cancel_k, pause_on_head, resume_inside, no_on_body;
  int resume_delay, small_max, pause_outside;
} cfg_t;

/* -- one client request ----------------------------------------------------- */

typedef struct {
  const cfg_t *cfg;
  int id;
  gw_client_req_t *req;    /* NULL once done or cancelled */
  int done, cancelled, head_calls, body_calls;
  int paused, paused_round;
  /* outcome */
  const char *err;
  int status, http_minor, reused;
  size_t nheaders;
  char *body;
  size_t body_len, body_cap;
} creq_t;

static int round_no; /* loop rounds of the current exchange */

static void body_append(creq_t *q, const char *p, size_t n)
{
  if (q->body_len + n > q->body_cap) {
    q->body_cap = (q->body_len + n) * 2;
    q->body = realloc(q->body, q->body_cap);
  }
  memcpy(q->body + q->body_len, p, n);
  q->body_len += n;
}

static void do_pause(creq_t *q)
{
  gw_client_pause(q->req);
  q->paused = 1;
  q->paused_round = round_no;
}

static void do_resume(creq_t *q)
{
  gw_client_resume(q->req);
  q->paused = 0;
}

static void do_cancel(creq_t *q)
{
  gw_client_cancel(q->req);
  q->cancelled = 1;
  q->req = NULL;
  q->paused = 0;
}

static void check_res(creq_t *q, const gw_client_response_t *res, const char *where)
{
  if (res->status < 200 || res->status > 999 || res->status == 101)
    FAIL("req %d: %s with status %d", q->id, where, res->status);
  if (res->http_minor != 0 && res->http_minor != 1) FAIL("req %d: %s with HTTP/1.%d", q->id, where, res->http_minor);
  for (size_t i = 0; i < res->headers.count; i++) {
    const gw_header_t *h = &res->headers.items[i];
    if (strlen(h->name) != h->name_len || h->name + h->name_len + 1 != h->value || h->value[h->value_len] != '\0')
      FAIL("req %d: malformed header entry %zu", q->id, i);
    /* proxy.c's take_head() copies every field into the client's response
     * as is: each must be writable (a token name; no CR, LF, NUL in the value).
     * Known finding (README.md): llhttp 8.1 accepts an empty field name, and
     * the client hands it over; tolerated unless FUZZ_STRICT=1. */
    if (!gw_header_field_is_safe(h->name, h->name_len, h->value, h->value_len) && (h->name_len > 0 || strict))
      FAIL("req %d: %s hands over a field unsafe to forward: \"%s: %s\"", q->id, where, h->name, h->value);
  }
}

static void on_done(gw_err_t e, gw_client_response_t *res, void *arg)
{
  creq_t *q = arg;
  const char *err = e.msg;
  if (q->cancelled) FAIL("req %d: done callback after cancel", q->id);
  if (q->done++) FAIL("req %d: done callback twice", q->id);
  if (gw_err_is_timeout(e.kind)) FAIL("req %d: timed out (%s) although no timer can expire", q->id, err);
  if ((e.kind == GW_OK) != (err == NULL)) FAIL("req %d: error kind %s with message %s", q->id, gw_err_name(e.kind), err ? err : "(none)");
  if (verbose) fprintf(stderr, "req %d: done: %s, status %d\n", q->id, err ? err : "ok", res ? res->status : 0);
  q->err = err;
  q->req = NULL;
  q->paused = 0;
  if (err != NULL) {
    if (res != NULL) FAIL("req %d: error with a response", q->id);
    return;
  }
  if (res == NULL) FAIL("req %d: success without a response", q->id);
  check_res(q, res, "done");
  if (q->cfg->streaming) {
    if (q->head_calls != 1) FAIL("req %d: streaming success after %d on_head calls", q->id, q->head_calls);
    if (evbuffer_get_length(res->body) != 0) FAIL("req %d: streaming response with a collected body", q->id);
    if (res->status != q->status) FAIL("req %d: status changed after on_head", q->id);
  }
  q->status = res->status;
  q->http_minor = res->http_minor;
  q->reused = res->reused;
  q->nheaders = res->headers.count;
  size_t n = evbuffer_get_length(res->body);
  if (n > 0) {
    char *tmp = malloc(n);
    if (evbuffer_remove(res->body, tmp, n) != (int)n) FAIL("evbuffer_remove");
    body_append(q, tmp, n);
    free(tmp);
  }
}

static void on_head(gw_client_response_t *res, void *arg)
{
  creq_t *q = arg;
  const cfg_t *c = q->cfg;
  if (!c->streaming) FAIL("req %d: on_head in buffered mode", q->id);
  if (q->cancelled || q->done) FAIL("req %d: on_head after %s", q->id, q->done ? "done" : "cancel");
  if (q->head_calls++) FAIL("req %d: on_head twice", q->id);
  if (q->body_calls) FAIL("req %d: on_head after on_body", q->id);
  check_res(q, res, "on_head");
  if (evbuffer_get_length(res->body) != 0) FAIL("req %d: on_head with a body", q->id);
  q->status = res->status;
  if (verbose) fprintf(stderr, "req %d: on_head %d\n", q->id, res->status);
  if (c->cancel_mode == 1) {
    do_cancel(q);
    return;
  }
  if (c->pause_on_head) {
    do_pause(q);
    if (c->resume_inside) do_resume(q);
  }
}

static void on_body(const char *data, size_t len, void *arg)
{
  creq_t *q = arg;
  const cfg_t *c = q->cfg;
  if (!c->streaming || c->no_on_body) FAIL("req %d: unexpected on_body", q->id);
  if (q->cancelled || q->done) FAIL("req %d: on_body after %s", q->id, q->done ? "done" : "cancel");
  if (q->head_calls != 1) FAIL("req %d: on_body before on_head", q->id);
  if (len == 0) FAIL("req %d: empty on_body", q->id);
  if (q->paused) FAIL("req %d: on_body while paused", q->id);
  body_append(q, data, len); /* ASan: data must be readable for len bytes */
  int i = q->body_calls++;
  if (c->cancel_mode == 2 && i == c->cancel_k) {
    do_cancel(q);
    return;
  }
  if (c->pause_pattern & (1u << (i % 8))) {
    do_pause(q);
    if (c->resume_inside) do_resume(q);
  }
}

static void start(creq_t *q, gw_pool_t *pool, const cfg_t *c, int id)
{
  memset(q, 0, sizeof(*q));
  q->cfg = c;
  q->id = id;
  gw_headers_t hs;
  gw_headers_init(&hs);
  gw_headers_add(&hs, "Host", 4, "upstream", 8);
  gw_client_params_t p = {0};
  p.unix_path = sock_path;
  p.method = c->method;
  p.target = "/fuzz?x=1";
  p.headers = &hs;
  if (strcmp(c->method, "POST") == 0) {
    p.body = "a=1";
    p.body_len = 3;
  }
  p.connect_timeout_ms = 600000;
  p.timeout_ms = 600000;
  p.max_response_body = c->small_max ? 16 : 0;
  if (c->streaming) {
    p.on_head = on_head;
    p.on_body = c->no_on_body ? NULL : on_body;
  }
  q->req = gw_client_request(pool, &p, on_done, q);
  gw_headers_dispose(&hs);
  if (q->req == NULL) FAIL("gw_client_request returned NULL");
  if (q->done) FAIL("req %d: done callback from inside gw_client_request", id);
  if (c->pause_outside) do_pause(q);
}

/* -- the upstream side ------------------------------------------------------- */

typedef struct {
  int fd[MAX_FDS];
  int n;
  int eof;   /* settling: every connection, also one accepted from now on
                (a retry), is half-closed at once */
} upstream_t;

static void accept_all(upstream_t *u)
{
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (u->n == MAX_FDS) FAIL("more than %d upstream connections", MAX_FDS);
    u->fd[u->n++] = fd;
    if (u->eof) shutdown(fd, SHUT_WR);
  }
}

/* Discards the request bytes (unread bytes would turn our close into a reset). */
static void drain_requests(upstream_t *u)
{
  char buf[4096];
  for (int i = 0; i < u->n; i++)
    while (u->fd[i] >= 0 && recv(u->fd[i], buf, sizeof(buf), MSG_DONTWAIT) > 0) {}
}

static int newest_fd(const upstream_t *u)
{
  for (int i = u->n - 1; i >= 0; i--)
    if (u->fd[i] >= 0) return u->fd[i];
  return -1;
}

static void close_all(upstream_t *u)
{
  for (int i = 0; i < u->n; i++)
    if (u->fd[i] >= 0) {
      drain_requests(u);
      close(u->fd[i]);
      u->fd[i] = -1;
    }
}

/* One loop round plus what the harness does between rounds. */
static void round_once(upstream_t *u, creq_t *qs, int nq)
{
  event_base_loop(base, EVLOOP_NONBLOCK);
  round_no++;
  accept_all(u);
  drain_requests(u);
  for (int i = 0; i < nq; i++) {
    creq_t *q = &qs[i];
    if (q->req == NULL) continue;
    if (q->cfg->cancel_mode == 3 && round_no == q->cfg->cancel_k + 1) {
      do_cancel(q);
      continue;
    }
    if (q->paused && round_no - q->paused_round >= q->cfg->resume_delay) do_resume(q);
  }
}

static void pump(upstream_t *u, creq_t *qs, int nq, int rounds)
{
  for (int i = 0; i < rounds; i++) round_once(u, qs, nq);
}

static void write_all(upstream_t *u, creq_t *qs, int nq, int fd, const uint8_t *p, size_t n)
{
  int stalls = 0;
  while (n > 0 && fd >= 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && ++stalls < 64) {
      pump(u, qs, nq, 1); /* a paused client stops reading; resumes come from rounds */
      continue;
    }
    return; /* the client closed the connection (error, cancel, done) */
  }
  pump(u, qs, nq, 2);
}

static void write_sliced(upstream_t *u, creq_t *qs, int nq, const uint8_t *data, size_t len, const cfg_t *c,
                         const uint8_t *ctl)
{
  size_t cuts[MAX_BYTE_SLICES], ncuts = 0;
  size_t a = (size_t)(ctl[4] | ctl[5] << 8) % (len + 1), b = (size_t)(ctl[6] | ctl[7] << 8) % (len + 1);
  switch (c->slicing) {
  case 1: cuts[ncuts++] = a; break;
  case 2:
    cuts[ncuts++] = a < b ? a : b;
    cuts[ncuts++] = a < b ? b : a;
    break;
  case 3:
    for (size_t i = 1; i < len && i < MAX_BYTE_SLICES; i++) cuts[ncuts++] = i;
    break;
  }
  size_t at = 0;
  for (size_t i = 0; i <= ncuts; i++) {
    size_t end = i < ncuts ? cuts[i] : len;
    if (end < at) continue;
    /* the newest connection: a retry or a second request may have opened one */
    accept_all(u);
    write_all(u, qs, nq, newest_fd(u), data + at, end - at);
    at = end;
  }
}

/* Runs one exchange (one or two requests); results in qs[]. */
static int run(const cfg_t *c, const uint8_t *data, size_t len, size_t split, const uint8_t *ctl, creq_t *qs,
               int *cb1_before_part2)
{
  upstream_t u = {.n = 0};
  round_no = 0;
  gw_pool_t *pool = gw_upstream_pool_new(base, c->no_keepalive ? 0 : 4, 600000);
  int nq = 1;
  start(&qs[0], pool, c, 1);
  accept_all(&u);
  pump(&u, qs, nq, 1);
  size_t part1 = c->two_requests ? split : len;
  write_sliced(&u, qs, nq, data, part1, c, ctl);
  *cb1_before_part2 = qs[0].done;
  if (c->two_requests) {
    if (c->stale && u.n > 0 && u.fd[0] >= 0) {
      drain_requests(&u);
      close(u.fd[0]);
      u.fd[0] = -1;
    }
    nq = 2;
    start(&qs[1], pool, c, 2);
    accept_all(&u);
    pump(&u, qs, nq, 1);
    write_all(&u, qs, nq, newest_fd(&u), data + part1, len - part1);
  }
  /* EOF from the upstream, then everything must settle. */
  u.eof = 1;
  for (int i = 0; i < u.n; i++)
    if (u.fd[i] >= 0) shutdown(u.fd[i], SHUT_WR);
  for (int i = 0; i < 512; i++) {
    int open = 0;
    for (int j = 0; j < nq; j++) open |= qs[j].req != NULL;
    if (!open) break;
    round_once(&u, qs, nq);
  }
  for (int j = 0; j < nq; j++) {
    creq_t *q = &qs[j];
    if (q->req != NULL)
      FAIL("req %d never settled after the upstream's EOF (paused %d, on_head %d, on_body %d)", q->id, q->paused,
           q->head_calls, q->body_calls);
    if (!q->cancelled && q->done != 1) FAIL("req %d: %d done callbacks", q->id, q->done);
  }
  close_all(&u);
  pump(&u, qs, nq, 3);
  gw_upstream_stats_t st;
  gw_upstream_pool_stats(pool, &st);
  if (st.idle != 0) FAIL("%lu idle connections kept after the upstream closed them", st.idle);
  gw_upstream_pool_free(pool);
  return nq;
}

static void compare(const creq_t *q, const creq_t *r, int bodies, const char *what)
{
  if ((q->err == NULL) != (r->err == NULL) || (q->err && strcmp(q->err, r->err) != 0))
    FAIL("outcome differs from %s: %s vs %s", what, q->err ? q->err : "ok", r->err ? r->err : "ok");
  if (q->err != NULL) return;
  if (q->status != r->status || q->http_minor != r->http_minor || q->nheaders != r->nheaders)
    FAIL("response differs from %s: %d/1.%d/%zu headers vs %d/1.%d/%zu headers", what, q->status, q->http_minor,
         q->nheaders, r->status, r->http_minor, r->nheaders);
  if (bodies && (q->body_len != r->body_len || (q->body_len && memcmp(q->body, r->body, q->body_len) != 0)))
    FAIL("body differs from %s: %zu vs %zu bytes", what, q->body_len, r->body_len);
}

static void creq_free(creq_t *q)
{
  free(q->body);
  q->body = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
  if (size < HDR) return 0;
  static const char *const methods[] = {"GET", "HEAD", "POST", "DELETE"};
  cfg_t c = {
    .streaming = in[0] & 1,
    .method = methods[(in[0] >> 1) & 3],
    .slicing = (in[0] >> 3) & 3,
    .two_requests = (in[0] >> 5) & 1,
    .stale = (in[0] >> 6) & 1,
    .no_keepalive = (in[0] >> 7) & 1,
    .pause_pattern = in[1],
    .cancel_mode = in[2] & 3,
    .cancel_k = (in[2] >> 2) & 7,
    .pause_on_head = (in[2] >> 5) & 1,
    .resume_inside = (in[2] >> 6) & 1,
    .no_on_body = (in[2] >> 7) & 1,
    .resume_delay = in[3] & 15,
    .small_max = (in[3] >> 4) & 1,
    .pause_outside = (in[3] >> 5) & 1,
  };
  if (!c.streaming) c.pause_pattern = 0, c.pause_on_head = 0, c.no_on_body = 0;
  if (!c.streaming && (c.cancel_mode == 1 || c.cancel_mode == 2)) c.cancel_mode = 0;
  if (c.streaming) c.small_max = 0; /* max_response_body is a buffered limit */
  const uint8_t *data = in + HDR;
  size_t len = size - HDR;
  size_t split = (size_t)(in[8] | in[9] << 8) % (len + 1);

  creq_t qs[2];
  int cb1_before_part2;
  int nq = run(&c, data, len, split, in, qs, &cb1_before_part2);

  /* References: one write, one request, nothing paused or cancelled; in the
   * same mode, and for a streamed input also buffered (the same outcome unless
   * the buffered one hit max_response_body, which streaming ignores). */
  creq_t *q = &qs[0];
  int comparable = !q->cancelled && !c.small_max && (!c.two_requests || cb1_before_part2);
  size_t rlen = c.two_requests ? split : len;
  if (comparable) {
    cfg_t rc = {.method = c.method, .no_keepalive = c.no_keepalive, .streaming = c.streaming};
    creq_t rq[2];
    int dummy;
    run(&rc, data, rlen, 0, in, rq, &dummy);
    compare(q, &rq[0], !(c.streaming && c.no_on_body), "a one-write run in the same mode");
    creq_free(&rq[0]);
    if (c.streaming) {
      rc.streaming = 0;
      run(&rc, data, rlen, 0, in, rq, &dummy);
      if (!(rq[0].err != NULL && strcmp(rq[0].err, "upstream response too large") == 0))
        compare(q, &rq[0], !c.no_on_body, "a buffered one-write run");
      creq_free(&rq[0]);
    }
  }
  for (int i = 0; i < nq; i++) creq_free(&qs[i]);
  return 0;
}
