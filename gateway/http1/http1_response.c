/* http1_response.c - writes a response head and body into an output buffer. One
 * evbuffer_add per piece of the head, the body moved (not copied) behind it. */
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "str.h"
#include "http_status.h"
#include "http1_response.h"

/* The "Date: ...\r\n" line, formatted once per second per worker. */
static const char *date_line(gw_context_t *w)
{
  time_t now = time(NULL);
  if (now != w->date_time) {
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(w->date, sizeof(w->date), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    w->date_time = now;
  }
  return w->date;
}


const char *gw_response_date_line(gw_context_t *w)
{
  return date_line(w);
}

/* Headers the core computes itself; a script's own values are not sent. */
static int is_managed(const gw_header_t *h)
{
  switch (h->name_len) {
  case 4: return strcasecmp(h->name, "date") == 0;
  case 10: return strcasecmp(h->name, "connection") == 0 || strcasecmp(h->name, "keep-alive") == 0;
  case 14: return strcasecmp(h->name, "content-length") == 0;
  case 17: return strcasecmp(h->name, "transfer-encoding") == 0;
  default: return 0;
  }
}

/* Appends len bytes to the head being built in buf (flushing it to out when
 * full, which only very large header sets do). */
typedef struct {
  char buf[4096];
  size_t len;
  struct evbuffer *out;
} head_t;

static void put(head_t *h, const char *s, size_t len)
{
  if (h->len + len > sizeof(h->buf)) {
    evbuffer_add(h->out, h->buf, h->len);
    h->len = 0;
    if (len > sizeof(h->buf)) {
      evbuffer_add(h->out, s, len);
      return;
    }
  }
  memcpy(h->buf + h->len, s, len);
  h->len += len;
}

#define PUT_LIT(h, s) put(h, s, sizeof(s) - 1)

static void put_uint(head_t *h, size_t v)
{
  char tmp[24];
  char *first = gw_format_uint(tmp + sizeof(tmp), v);
  put(h, first, (size_t)(tmp + sizeof(tmp) - first));
}

#define HEAD_200 "HTTP/1.1 200 OK\r\nServer: gateway\r\n"

/* HEAD_200 and the Date line: how most heads start, remade once a second. */
static struct {
  char text[sizeof(HEAD_200) - 1 + sizeof(((gw_context_t *)0)->date)];
  size_t len;
  time_t at;
} head_200;

/* Status line and headers into head; `length` is the Content-Length to
 * announce, or GW_LENGTH_CHUNKED / GW_LENGTH_CLOSE. */
static void put_head(head_t *head, gw_request_t *req, gw_context_t *w, int keepalive, long long length)
{
  int status = req->resp.status ? req->resp.status : 200;
  /* nginx's order: its own fields, then those the handler or upstream set
   * (a Server set there replaces "gateway" and comes with them). */
  int has_server = 0;
  for (size_t i = 0; i < req->resp.headers.count && !has_server; i++) {
    const gw_header_t *h = &req->resp.headers.items[i];
    has_server = h->name_len == 6 && strcasecmp(h->name, "server") == 0;
  }
  const char *date = date_line(w);
  if (status == 200 && !has_server) {
    if (head_200.at != w->date_time || head_200.len == 0) {
      size_t n = strlen(date);
      memcpy(head_200.text, HEAD_200, sizeof(HEAD_200) - 1);
      memcpy(head_200.text + sizeof(HEAD_200) - 1, date, n);
      head_200.len = sizeof(HEAD_200) - 1 + n;
      head_200.at = w->date_time;
    }
    put(head, head_200.text, head_200.len);
  } else {
    PUT_LIT(head, "HTTP/1.1 ");
    put_uint(head, (size_t)status);
    PUT_LIT(head, " ");
    const char *reason = gw_http_reason(status);
    put(head, reason, strlen(reason));
    PUT_LIT(head, "\r\n");
    if (!has_server) PUT_LIT(head, "Server: gateway\r\n");
    put(head, date, strlen(date));
  }
  if (req->resp.text_plain) PUT_LIT(head, "Content-Type: text/plain; charset=utf-8\r\n");
  if (length == GW_LENGTH_CHUNKED) {
    PUT_LIT(head, "Transfer-Encoding: chunked\r\n");
  } else if (length >= 0) {
    PUT_LIT(head, "Content-Length: ");
    put_uint(head, (size_t)length);
    PUT_LIT(head, "\r\n");
  }
  if (!keepalive)
    PUT_LIT(head, "Connection: close\r\n");
  else if (req->in.http_minor == 0)
    PUT_LIT(head, "Connection: keep-alive\r\n");
  for (size_t i = 0; i < req->resp.headers.count; i++) {
    const gw_header_t *h = &req->resp.headers.items[i];
    if (is_managed(h)) continue;
    put(head, h->name, h->name_len);
    PUT_LIT(head, ": ");
    put(head, h->value, h->value_len);
    PUT_LIT(head, "\r\n");
  }
  PUT_LIT(head, "\r\n");
}


size_t gw_response_write_switching(const gw_headers_t *fields, struct evbuffer *out)
{
  size_t before = evbuffer_get_length(out);
  head_t head;
  head.len = 0;
  head.out = out;
  /* No Server, Date or framing: the bytes after it are the new protocol's. */
  PUT_LIT(&head, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n");
  for (size_t i = 0; i < fields->count; i++) {
    const gw_header_t *h = &fields->items[i];
    if (is_managed(h)) continue;
    put(&head, h->name, h->name_len);
    PUT_LIT(&head, ": ");
    put(&head, h->value, h->value_len);
    PUT_LIT(&head, "\r\n");
  }
  PUT_LIT(&head, "\r\n");
  evbuffer_add(out, head.buf, head.len);
  return evbuffer_get_length(out) - before;
}

size_t gw_response_write_head(gw_request_t *req, struct evbuffer *out, gw_context_t *w, int keepalive, long long length)
{
  size_t before = evbuffer_get_length(out);
  head_t head;
  head.len = 0;
  head.out = out;
  put_head(&head, req, w, keepalive, gw_request_bodyless(req) ? GW_LENGTH_CLOSE : length);
  evbuffer_add(out, head.buf, head.len);
  return evbuffer_get_length(out) - before;
}

/* The last piece of a response: with fd >= 0 and nothing queued before it,
 * straight to the socket (one write(2), no copy into out); what the socket
 * does not take (or any error, which the next flush of out meets again) is
 * appended to out. */
static void put_last(struct evbuffer *out, int fd, const char *p, size_t n)
{
  if (fd >= 0 && evbuffer_get_length(out) == 0) {
    ssize_t sent = write(fd, p, n);
    if (sent > 0) {
      p += sent;
      n -= (size_t)sent;
    }
  }
  if (n > 0) evbuffer_add(out, p, n);
}

size_t gw_response_write(gw_request_t *req, struct evbuffer *out, gw_context_t *w, int keepalive, int fd,
                         size_t *total)
{
  size_t before = evbuffer_get_length(out);
  head_t head;
  head.len = 0;
  head.out = out;
  int bodyless = gw_request_bodyless(req);
  size_t body_len = req->resp.inline_body ? req->resp.inline_len : evbuffer_get_length(req->resp.body);
  long long length = bodyless ? GW_LENGTH_CLOSE
                     : req->in.head && req->resp.head_length >= 0 ? req->resp.head_length
                                                          : (long long)body_len;
  put_head(&head, req, w, keepalive, length);
  size_t head_size = evbuffer_get_length(out) - before + head.len; /* head.buf may have been flushed to out */
  *total = head_size;
  if (bodyless || req->in.head) {
    put_last(out, fd, head.buf, head.len);
    if (!req->resp.inline_body) evbuffer_drain(req->resp.body, body_len);
    return head_size;
  }
  *total += body_len;
  if (req->resp.inline_body) {
    put(&head, req->resp.inline_body, body_len);
    put_last(out, fd, head.buf, head.len);
  } else if (body_len <= sizeof(head.buf) - head.len) { /* small body: one piece */
    evbuffer_remove(req->resp.body, head.buf + head.len, body_len);
    put_last(out, fd, head.buf, head.len + body_len);
  } else {
    evbuffer_add(out, head.buf, head.len);
    evbuffer_add_buffer(out, req->resp.body);
  }
  return head_size;
}
