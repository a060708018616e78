/* test_response.c - reason phrases, bodyless statuses and the head writer
 * (gateway/http1/http1_response.c) with the 101 of a protocol upgrade, and the status codes' table (http_status.c). The
 * worker's context is only read for its cached Date line, so a zeroed
 * gw_context_t stands in for it.
 * unit: http1_response http_status log access_log headers */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/buffer.h>

#include "http1_response.h"
#include "context.h"
#include "http_status.h"
#include "request.h"
#include "unit.h"

static void test_reason(void)
{
  static const struct {
    int status;
    const char *reason;
  } named[] = {
    {100, "Continue"}, {101, "Switching Protocols"}, {200, "OK"}, {201, "Created"}, {202, "Accepted"},
    {204, "No Content"}, {206, "Partial Content"}, {301, "Moved Permanently"}, {302, "Found"},
    {303, "See Other"}, {304, "Not Modified"}, {307, "Temporary Redirect"}, {308, "Permanent Redirect"},
    {400, "Bad Request"}, {401, "Unauthorized"}, {403, "Forbidden"}, {404, "Not Found"},
    {405, "Method Not Allowed"}, {408, "Request Timeout"}, {409, "Conflict"}, {411, "Length Required"},
    {413, "Content Too Large"}, {414, "URI Too Long"}, {415, "Unsupported Media Type"},
    {417, "Expectation Failed"}, {429, "Too Many Requests"}, {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"}, {501, "Not Implemented"}, {502, "Bad Gateway"},
    {503, "Service Unavailable"}, {504, "Gateway Timeout"}, {505, "HTTP Version Not Supported"},
  };
  for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
    if (!CHECK_EQ_STR(gw_http_reason(named[i].status), named[i].reason)) unit_note("status %d", named[i].status);
  int unknown[] = {0, -1, 1, 99, 199, 299, 418, 599, 600, 1000, 2000000000};
  for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
    if (!CHECK_EQ_STR(gw_http_reason(unknown[i]), "Unknown")) unit_note("status %d", unknown[i]);
  /* a non-empty phrase of token-ish text for every status a client can see */
  int bad = 0;
  for (int s = 100; s < 600; s++) {
    const char *r = gw_http_reason(s);
    if (r == NULL || *r == '\0' || strpbrk(r, "\r\n") != NULL) bad++;
  }
  CHECK_EQ_INT(bad, 0);
}

static int bodyless(int status)
{
  gw_request_t req;
  memset(&req, 0, sizeof(req));
  req.resp.status = status;
  return gw_request_bodyless(&req);
}

static void test_bodyless(void)
{
  CHECK(!bodyless(0)); /* unset: 200 */
  CHECK(!bodyless(200));
  CHECK(!bodyless(205));
  CHECK(!bodyless(404));
  CHECK(!bodyless(500));
  CHECK(!bodyless(99));
  CHECK(bodyless(100));
  CHECK(bodyless(101));
  CHECK(bodyless(103));
  CHECK(bodyless(199));
  CHECK(bodyless(204));
  CHECK(bodyless(304));
  CHECK(!bodyless(203));
  CHECK(!bodyless(305));
}

typedef struct {
  gw_request_t req;
  gw_context_t w;
  struct evbuffer *out;
} fixture_t;

static void setup(fixture_t *f, int status)
{
  memset(f, 0, sizeof(*f));
  f->req.resp.status = status;
  f->req.in.http_minor = 1;
  gw_headers_init(&f->req.resp.headers);
  f->out = evbuffer_new();
}

static void teardown(fixture_t *f)
{
  gw_headers_dispose(&f->req.resp.headers);
  evbuffer_free(f->out);
}

/* The head written (NUL-terminated, caller frees); checks the returned size. */
static char *head(fixture_t *f, int keepalive, long long length)
{
  size_t n = gw_response_write_head(&f->req, f->out, &f->w, keepalive, length);
  size_t len = evbuffer_get_length(f->out);
  CHECK_EQ_UINT(n, len);
  char *s = malloc(len + 1);
  evbuffer_remove(f->out, s, len);
  s[len] = '\0';
  return s;
}

static int starts(const char *s, const char *prefix)
{
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int has_line(const char *head, const char *line)
{
  return strstr(head, line) != NULL;
}

static void test_write_head(void)
{
  fixture_t f;
  setup(&f, 404);
  gw_headers_add(&f.req.resp.headers, "X-A", 3, "1", 1);
  gw_headers_add(&f.req.resp.headers, "content-length", 14, "99", 2);  /* computed by the core: dropped */
  gw_headers_add(&f.req.resp.headers, "Connection", 10, "upgrade", 7); /* dropped */
  gw_headers_add(&f.req.resp.headers, "Transfer-Encoding", 17, "gzip", 4); /* dropped */
  gw_headers_add(&f.req.resp.headers, "Date", 4, "yesterday", 9);       /* dropped */
  char *h = head(&f, 1, 12);
  /* nginx's order: the core's own fields, then the handler's */
  CHECK(starts(h, "HTTP/1.1 404 Not Found\r\nServer: gateway\r\nDate: "));
  CHECK(has_line(h, "\r\nContent-Length: 12\r\nX-A: 1\r\n\r\n"));
  CHECK(!has_line(h, "99"));
  CHECK(!has_line(h, "upgrade"));
  CHECK(!has_line(h, "gzip"));
  CHECK(!has_line(h, "yesterday"));
  CHECK(!has_line(h, "Connection"));
  CHECK(strstr(h, "\r\n\r\n") == h + strlen(h) - 4); /* one blank line, at the end */
  CHECK(strlen(f.w.date) > 0 && has_line(h, f.w.date)); /* the context's cached Date line */
  free(h);

  /* no keep-alive; chunked */
  h = head(&f, 0, GW_LENGTH_CHUNKED);
  CHECK(has_line(h, "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nX-A: 1\r\n\r\n"));
  CHECK(!has_line(h, "Content-Length"));
  free(h);
  /* no length at all */
  h = head(&f, 0, GW_LENGTH_CLOSE);
  CHECK(!has_line(h, "Content-Length") && !has_line(h, "Transfer-Encoding"));
  free(h);
  /* an HTTP/1.0 client kept alive is told so */
  f.req.in.http_minor = 0;
  h = head(&f, 1, 0);
  CHECK(has_line(h, "\r\nContent-Length: 0\r\nConnection: keep-alive\r\nX-A: 1\r\n\r\n"));
  free(h);
  teardown(&f);

  /* status 0 is 200; a script's own Server header replaces ours (and comes
   * with the handler's fields); text_plain */
  setup(&f, 0);
  f.req.resp.text_plain = 1;
  gw_headers_add(&f.req.resp.headers, "server", 6, "mine", 4);
  h = head(&f, 1, 5);
  CHECK(starts(h, "HTTP/1.1 200 OK\r\nDate: "));
  CHECK(has_line(h, "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\nserver: mine\r\n\r\n"));
  CHECK(!has_line(h, "gateway"));
  free(h);
  teardown(&f);

  /* a bodyless status announces no length, whatever it is given */
  int statuses[] = {204, 304, 101};
  for (size_t i = 0; i < 3; i++) {
    setup(&f, statuses[i]);
    h = head(&f, 1, 10);
    if (!CHECK(!has_line(h, "Content-Length") && !has_line(h, "Transfer-Encoding"))) unit_note("%d", statuses[i]);
    free(h);
    h = head(&f, 1, GW_LENGTH_CHUNKED);
    CHECK(!has_line(h, "Transfer-Encoding"));
    free(h);
    teardown(&f);
  }

  /* a head bigger than the writer's 4 KB staging buffer, with one field
   * bigger than it too */
  setup(&f, 200);
  char name[16], *big = malloc(10000);
  memset(big, 'v', 10000);
  for (int i = 0; i < 300; i++) {
    snprintf(name, sizeof(name), "X-%03d", i);
    gw_headers_add(&f.req.resp.headers, name, 5, "0123456789", 10);
  }
  gw_headers_add(&f.req.resp.headers, "X-Big", 5, big, 10000);
  h = head(&f, 1, 1);
  CHECK(starts(h, "HTTP/1.1 200 OK\r\nServer: gateway\r\n"));
  CHECK(has_line(h, "\r\nContent-Length: 1\r\nX-000: 0123456789\r\n"));
  CHECK(has_line(h, "\r\nX-299: 0123456789\r\nX-Big: vvvv"));
  CHECK(has_line(h, "vvvv\r\n\r\n"));
  CHECK(strlen(h) > 300 * 18 + 10000);
  free(h);
  free(big);
  teardown(&f);
}

static void test_write_inline(void)
{
  fixture_t f;
  setup(&f, 201);
  f.req.resp.inline_body = "hello";
  f.req.resp.inline_len = 5;
  size_t total;
  size_t head_size = gw_response_write(&f.req, f.out, &f.w, 1, -1, &total);
  size_t len = evbuffer_get_length(f.out);
  char *s = malloc(len + 1);
  evbuffer_remove(f.out, s, len);
  s[len] = '\0';
  CHECK_EQ_UINT(head_size + 5, len);
  CHECK_EQ_UINT(total, len);
  CHECK(starts(s, "HTTP/1.1 201 Created\r\n"));
  CHECK(has_line(s, "\r\nContent-Length: 5\r\n\r\nhello"));
  CHECK(strcmp(s + len - 9, "\r\n\r\nhello") == 0);
  free(s);
  teardown(&f);
}

/* With a socket and nothing queued, a one-piece response is written to the
 * socket at once and out stays empty; with bytes queued (a pipelined
 * answer before it) it goes behind them in out, as without a socket. */
static void test_write_direct(void)
{
  fixture_t f;
  int sv[2];
  CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  setup(&f, 200);
  f.req.resp.inline_body = "hello";
  f.req.resp.inline_len = 5;
  size_t total;
  size_t head_size = gw_response_write(&f.req, f.out, &f.w, 1, sv[0], &total);
  CHECK_EQ_UINT(evbuffer_get_length(f.out), 0);
  char got[1024];
  ssize_t n = read(sv[1], got, sizeof(got) - 1);
  CHECK(n > 0);
  got[n > 0 ? n : 0] = '\0';
  CHECK_EQ_UINT((size_t)n, total);
  CHECK_EQ_UINT(head_size + 5, total);
  CHECK(starts(got, "HTTP/1.1 200 OK\r\nServer: gateway\r\nDate: "));
  CHECK(strcmp(got + n - 9, "\r\n\r\nhello") == 0);
  teardown(&f);
  setup(&f, 200);
  f.req.resp.inline_body = "again";
  f.req.resp.inline_len = 5;
  evbuffer_add(f.out, "queued", 6);
  gw_response_write(&f.req, f.out, &f.w, 1, sv[0], &total);
  CHECK_EQ_UINT(evbuffer_get_length(f.out), 6 + total);
  teardown(&f);
  close(sv[0]);
  close(sv[1]);
}

/* A protocol upgrade's 101 (request.h: upgrade): the handler's fields as
 * given, Connection: Upgrade, none of the core's own (framing, Date,
 * Server), appended behind what out holds. */
static void test_write_switching(void)
{
  fixture_t f;
  setup(&f, 101);
  evbuffer_add(f.out, "queued", 6);
  gw_headers_add(&f.req.resp.headers, "Upgrade", 7, "websocket", 9);
  gw_headers_add(&f.req.resp.headers, "Sec-WebSocket-Protocol", 22, "chat", 4);
  gw_headers_add(&f.req.resp.headers, "Content-Length", 14, "0", 1);      /* an upstream's: no body to frame */
  gw_headers_add(&f.req.resp.headers, "connection", 10, "upgrade", 7);    /* ours, once */
  gw_headers_add(&f.req.resp.headers, "Transfer-Encoding", 17, "chunked", 7);
  gw_headers_add(&f.req.resp.headers, "X-Upstream", 10, "one", 3);
  size_t n = gw_response_write_switching(&f.req.resp.headers, f.out);
  size_t len = evbuffer_get_length(f.out);
  char *s = malloc(len + 1);
  evbuffer_remove(f.out, s, len);
  s[len] = '\0';
  static const char want[] = "queuedHTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                             "Sec-WebSocket-Protocol: chat\r\nX-Upstream: one\r\n\r\n";
  CHECK_EQ_STR(s, want);
  CHECK_EQ_UINT(n, len - 6);
  free(s);
  /* h2c's (http1_server.c): exactly what RFC 7540 §3.2 shows */
  gw_headers_clear(&f.req.resp.headers);
  gw_headers_add(&f.req.resp.headers, "Upgrade", 7, "h2c", 3);
  n = gw_response_write_switching(&f.req.resp.headers, f.out);
  len = evbuffer_get_length(f.out);
  s = malloc(len + 1);
  evbuffer_remove(f.out, s, len);
  s[len] = '\0';
  CHECK_EQ_STR(s, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n");
  CHECK_EQ_UINT(n, len);
  free(s);
  teardown(&f);
}

int main(void)
{
  test_reason();
  test_bodyless();
  test_write_head();
  test_write_inline();
  test_write_direct();
  test_write_switching();
  return unit_done();
}
