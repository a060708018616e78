/* fuzz_h2.c - libFuzzer target for the HTTP/2 server session (http2_server.c over
 * nghttp2, with the real callbacks): the input is what a client sends after
 * the connection preface, fed to a real gw_h2_conn_t on one end of a
 * socketpair inside a minimal worker (a server with zero locations: every
 * request that completes is answered 404 by the router, no mruby code runs).
 *
 * Input layout: [0] flags: bit 0: split the input in two writes at the
 * position [1]; bit 1: the worker stops gracefully midway (GOAWAY); bit 2:
 * tiny limits. Then the client's bytes (the preface is prepended).
 *
 * Checks: no crash or sanitizer report; whatever the server sends starts with
 * a SETTINGS frame and is a sequence of well-formed frame headers; the
 * connection is freed once the client closes (no leak, no stuck connection). */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "context.h"
#include "http2_server.h"
#include "log.h"

#define FUZZ_NAME "fuzz_h2"
#include "fuzz_common.h"

static struct event_base *base;
static gw_server_t server;
static gw_context_t worker;

static void on_conn_closed(gw_context_t *ctx) { (void)ctx; }

static const gw_limits_t tiny_limits = {
  .max_request_line = 64, .max_header_size = 256, .max_headers = 6, .max_body = 32,
  .header_timeout_ms = 600000, .body_timeout_ms = 600000, .keepalive_timeout_ms = 600000, .send_timeout_ms = 600000,
};
static const gw_limits_t default_limits = {
  .max_request_line = 8192, .max_header_size = 16384, .max_headers = 100, .max_body = 1048576,
  .header_timeout_ms = 600000, .body_timeout_ms = 600000, .keepalive_timeout_ms = 600000, .send_timeout_ms = 600000,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  signal(SIGPIPE, SIG_IGN);
  base = event_base_new();
  if (base == NULL) FAIL("event_base_new");
  server.host = "127.0.0.1";
  server.port = 8080;
  server.workers = 1;
  server.fd = -1;
  server.cpu = -1;
  server.http2 = 1;
  worker.base = base;
  worker.server = &server;
  worker.on_conn_closed = on_conn_closed;
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  gw_log_use(devnull, "/dev/null", GW_LOG_DEBUG);
  return 0;
}

/* Reads what the server sent so far into out. */
static void drain(int fd, unsigned char **out, size_t *len, size_t *cap)
{
  for (;;) {
    if (*len + 65536 > *cap) {
      *cap = (*len + 65536) * 2;
      *out = realloc(*out, *cap);
    }
    ssize_t n = recv(fd, *out + *len, *cap - *len, MSG_DONTWAIT);
    if (n <= 0) return;
    *len += (size_t)n;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 2) return 0;
  uint8_t flags = data[0];
  size_t cut = data[1];
  data += 2;
  size -= 2;
  server.limits = (flags & 4) ? tiny_limits : default_limits;
  worker.stopping = 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0) FAIL("socketpair");
  int one = 1 << 20;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
  setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
  /* The preface arrives with the first read, as http1_server.c hands it over. */
  gw_h2_conn_t *h = gw_h2_conn_new(&worker, sv[0], NULL, "127.0.0.1", NULL, GW_H2_PREFACE, GW_H2_PREFACE_LEN);
  if (h == NULL) FAIL("gw_h2_conn_new");
  size_t first = (flags & 1) && cut < size ? cut : size;
  unsigned char *out = NULL;
  size_t out_len = 0, out_cap = 0;
  if (first > 0 && write(sv[1], data, first) < 0) { /* the server may have closed */ }
  for (int i = 0; i < 16; i++) event_base_loop(base, EVLOOP_NONBLOCK);
  drain(sv[1], &out, &out_len, &out_cap);
  if (flags & 2) {
    worker.stopping = 1;
    gw_h2_shutdown_all(1);
  }
  if (size > first && write(sv[1], data + first, size - first) < 0) { /* closed */ }
  for (int i = 0; i < 16; i++) {
    event_base_loop(base, EVLOOP_NONBLOCK);
    drain(sv[1], &out, &out_len, &out_cap);
  }
  close(sv[1]);
  for (int i = 0; i < 64 && worker.nconns > 0; i++) event_base_loop(base, EVLOOP_NONBLOCK);
  if (worker.nconns != 0) {
    gw_h2_shutdown_all(0);
    for (int i = 0; i < 8; i++) event_base_loop(base, EVLOOP_NONBLOCK);
    if (worker.nconns != 0) FAIL("the HTTP/2 connection was not freed after the client closed");
  }
  /* The server's bytes: a SETTINGS frame first, then well-formed frame headers. */
  size_t pos = 0;
  if (out_len >= 9 && out[3] != 0x4) FAIL("the first frame is type %d, not SETTINGS", out[3]);
  while (pos + 9 <= out_len) {
    size_t flen = ((size_t)out[pos] << 16) | ((size_t)out[pos + 1] << 8) | out[pos + 2];
    if (flen > 16384) FAIL("a frame of %zu bytes over the default max frame size", flen);
    pos += 9 + flen;
  }
  free(out);
  return 0;
}
