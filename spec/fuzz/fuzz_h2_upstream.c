/* fuzz_h2_upstream.c - libFuzzer target for the HTTP/2 upstream client
 * (http2_client.c): the bytes an h2c upstream sends (SETTINGS, HEADERS with
 * HPACK, CONTINUATION, DATA, trailers, RST_STREAM, GOAWAY, PING,
 * WINDOW_UPDATE, garbage) fed to its nghttp2 client session, with calls
 * that stream or collect, pause and resume, cancel, and send bodies.
 *
 * A gw_h2_client_t runs on an event_base; its calls go to a unix socket
 * whose listening end the harness owns (/tmp/gw-fuzz-h2-upstream-PID.sock).
 * The harness accepts, discards what the client writes and writes the fuzz
 * input back in slices, running the loop in between; then it half-closes
 * (EOF) and runs the loop until every call is settled (any further
 * connection, a retry after GOAWAY/REFUSED_STREAM, is accepted and closed at
 * once). Checked on every input:
 *
 *   - the done callback fires exactly once per call, never after
 *     gw_h2_call_cancel(), never with a timeout kind (no timer expires here);
 *   - streaming: on_head at most once and before any on_body; on_body with
 *     len > 0 only, never after done; a success had its head (or was a
 *     head-only response, delivered whole); trailers only before done;
 *   - every call settles once the upstream sent EOF;
 *   - no leak once the client is freed (LSan), no memory error (ASan/UBSan).
 *
 * Input layout: 4 control bytes, then the upstream's bytes.
 *   [0] bits 0-1: calls - 1 (1..4); bit 2: streaming; bit 3: pause in on_head
 *       (resumed after 2 loop rounds); bit 4: cancel call 0 in its second
 *       on_body; bit 5: POST with a 20-byte body; bit 6: a streamed body
 *       (body_source, completed after the first slice); bit 7: cancel the
 *       last call from outside after the first slice.
 *   [1..2] little-endian slice cut (mod length+1); [3] bytes per write for
 *       the first 64 bytes when non-zero (small writes: frame boundaries). */
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

#include "http2_client.h"
#include "log.h"

#define HDR 4
#define MAX_CALLS 4
#define MAX_FDS 16

#define FUZZ_NAME "fuzz_h2_upstream"
#include "fuzz_common.h"

static struct event_base *base;
static int listen_fd = -1;
static char sock_path[108];

static void remove_socket(void)
{
  if (sock_path[0]) unlink(sock_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  signal(SIGPIPE, SIG_IGN);
  base = event_base_new();
  if (base == NULL) FAIL("event_base_new");
  gw_log_min_level = GW_LOG_CRIT;
  snprintf(sock_path, sizeof(sock_path), "/tmp/gw-fuzz-h2-upstream-%d.sock", (int)getpid());
  unlink(sock_path);
  listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  memcpy(sun.sun_path, sock_path, strlen(sock_path));
  if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(listen_fd, 64) < 0)
    FAIL("cannot listen on %s: %s", sock_path, strerror(errno));
  atexit(remove_socket);
  return 0;
}

typedef struct {
  gw_h2_call_t *call;       /* NULL once done or cancelled */
  int id, done, cancelled, heads, bodies, trailers, paused, paused_round;
  int cancel_in_body;
} fcall_t;

static int round_no;

static void on_head(gw_client_response_t *res, void *arg)
{
  fcall_t *f = arg;
  if (f->done) FAIL("call %d: on_head after done", f->id);
  if (f->heads++) FAIL("call %d: on_head twice", f->id);
  if (f->bodies) FAIL("call %d: on_head after on_body", f->id);
  if (res->status < 200 || res->status > 999) FAIL("call %d: status %d in on_head", f->id, res->status);
  if (f->paused) {
    gw_h2_call_pause(f->call);
    f->paused_round = round_no;
  }
}

static void on_body(const char *data, size_t len, void *arg)
{
  fcall_t *f = arg;
  (void)data;
  if (f->done) FAIL("call %d: on_body after done", f->id);
  if (!f->heads) FAIL("call %d: on_body before on_head", f->id);
  if (len == 0) FAIL("call %d: empty on_body", f->id);
  if (++f->bodies == 2 && f->cancel_in_body) {
    gw_h2_call_cancel(f->call);
    f->call = NULL;
    f->cancelled = 1;
  }
}

static void on_trailers(const gw_headers_t *t, void *arg)
{
  fcall_t *f = arg;
  if (f->done) FAIL("call %d: trailers after done", f->id);
  if (t->count == 0) FAIL("call %d: empty trailers", f->id);
  f->trailers++;
}

static void on_done(gw_err_t err, gw_client_response_t *res, void *arg)
{
  fcall_t *f = arg;
  if (f->cancelled) FAIL("call %d: done after cancel", f->id);
  if (f->done++) FAIL("call %d: done twice", f->id);
  if (gw_err_is_timeout(err.kind)) FAIL("call %d: a timeout (%s) with no timer due", f->id, err.msg);
  if (err.kind == GW_OK && res == NULL) FAIL("call %d: success without a response", f->id);
  if (err.kind != GW_OK && res != NULL) FAIL("call %d: failure with a response", f->id);
  f->call = NULL;
}

static int fds[MAX_FDS];
static int nfds;

/* Accepts what connected: the first connection gets the input, later ones
 * (retries) are closed at once. */
static void accept_all(void)
{
  int fd;
  while ((fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
    if (nfds < MAX_FDS && nfds == 0) fds[nfds++] = fd;
    else close(fd);
  }
}

static void drain_client_bytes(void)
{
  char buf[65536];
  for (int i = 0; i < nfds; i++)
    while (read(fds[i], buf, sizeof(buf)) > 0) {
    }
}

static void run_rounds(int n, fcall_t *calls, int ncalls)
{
  for (int i = 0; i < n; i++) {
    round_no++;
    event_base_loop(base, EVLOOP_NONBLOCK);
    accept_all();
    drain_client_bytes();
    for (int k = 0; k < ncalls; k++)
      if (calls[k].call && calls[k].paused && round_no - calls[k].paused_round >= 2) {
        calls[k].paused = 0;
        gw_h2_call_resume(calls[k].call);
      }
  }
}

static void write_all(int fd, const uint8_t *p, size_t n, fcall_t *calls, int ncalls)
{
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EAGAIN) {
      run_rounds(1, calls, ncalls);
      continue;
    }
    if (w <= 0) return; /* the client closed: fine */
    p += w;
    n -= (size_t)w;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < HDR) return 0;
  uint8_t c0 = data[0];
  size_t cut = (size_t)(data[1] | data[2] << 8);
  size_t small = data[3];
  const uint8_t *in = data + HDR;
  size_t len = size - HDR;
  cut %= len + 1;

  gw_h2_client_t *cl = gw_h2_client_new(base, 60000);
  if (cl == NULL) FAIL("gw_h2_client_new");
  int ncalls = (c0 & 3) + 1;
  fcall_t calls[MAX_CALLS];
  memset(calls, 0, sizeof(calls));
  gw_headers_t hs;
  gw_headers_init(&hs);
  gw_headers_add(&hs, "Host", 4, "upstream", 8);
  gw_headers_add(&hs, "content-type", 12, "application/grpc", 16);
  struct evbuffer *source = evbuffer_new();
  evbuffer_add(source, "streamed-body-part-1", 20);
  static const char body[] = "0123456789abcdefghij";
  for (int k = 0; k < ncalls; k++) {
    fcall_t *f = &calls[k];
    f->id = k;
    f->paused = (c0 & 8) != 0;
    f->cancel_in_body = k == 0 && (c0 & 16);
    gw_h2_params_t p = {.on_trailers = on_trailers};
    p.http.unix_path = sock_path;
    p.http.method = (c0 & 32) ? "POST" : "GET";
    p.http.target = "/pkg.Svc/Method";
    p.http.headers = &hs;
    if (c0 & 64 && k == 0) {
      p.http.body_source = source;
      p.http.body_length = -1;
    } else if (c0 & 32) {
      p.http.body = body;
      p.http.body_len = 20;
    }
    if (c0 & 4) {
      p.http.on_head = on_head;
      p.http.on_body = on_body;
    }
    f->call = gw_h2_call_start(cl, &p, on_done, f);
    if (f->call == NULL) FAIL("gw_h2_call_start");
  }

  nfds = 0;
  run_rounds(3, calls, ncalls);
  if (nfds == 0) { /* nothing connected: every call must have failed or wait */
    run_rounds(3, calls, ncalls);
  }
  int fd = nfds ? fds[0] : -1;
  if (fd >= 0) {
    size_t off = 0;
    if (small) { /* the first bytes a few at a time */
      while (off < len && off < 64) {
        size_t n = len - off < small ? len - off : small;
        write_all(fd, in + off, n, calls, ncalls);
        off += n;
        run_rounds(1, calls, ncalls);
      }
    }
    if (cut > off) {
      write_all(fd, in + off, cut - off, calls, ncalls);
      off = cut;
    }
    run_rounds(2, calls, ncalls);
    if (c0 & 64 && calls[0].call) {
      evbuffer_add(source, "-end", 4);
      gw_h2_call_body_more(calls[0].call, 1);
    }
    if (c0 & 128 && calls[ncalls - 1].call) {
      gw_h2_call_cancel(calls[ncalls - 1].call);
      calls[ncalls - 1].call = NULL;
      calls[ncalls - 1].cancelled = 1;
    }
    if (off < len) write_all(fd, in + off, len - off, calls, ncalls);
    run_rounds(2, calls, ncalls);
    shutdown(fd, SHUT_WR);
  }
  /* Everything settles: EOF kills the connection, retries find theirs closed. */
  for (int i = 0; i < 200; i++) {
    int open = 0;
    for (int k = 0; k < ncalls; k++) open += calls[k].call != NULL;
    if (!open) break;
    run_rounds(1, calls, ncalls);
  }
  for (int k = 0; k < ncalls; k++) {
    if (calls[k].call) FAIL("call %d never settled", k);
    if (!calls[k].cancelled && !calls[k].done) FAIL("call %d: no done callback", k);
  }
  for (int i = 0; i < nfds; i++) close(fds[i]);
  run_rounds(2, calls, ncalls);
  gw_h2_client_free(cl);
  event_base_loop(base, EVLOOP_NONBLOCK);
  gw_headers_dispose(&hs);
  evbuffer_free(source);
  return 0;
}
