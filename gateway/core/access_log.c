/* access_log.c - the access log: one line per answered client request.
 *
 * The format is a list of parts (literal text or a variable) compiled by the
 * config DSL; a line is built in a buffer that grows as needed and written
 * with one write(2), so lines of several workers appending to one file
 * (O_APPEND) never interleave. Values that come from the client or the
 * upstream are escaped as nginx does: '"', '\', control bytes and bytes
 * >= 0x7f become \xHH. A variable without a value is written as "-". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "access_log.h"
#include "log.h"
#include "str.h"

struct gw_access_log_s {
  int fd;                  /* STDERR_FILENO, or an owned file */
  char *path;              /* owned; NULL for stderr */
  gw_access_part_t *parts; /* owned copy of the format */
  size_t nparts;
};

static gw_access_log_t *current;

/* -- building a line ---------------------------------------------------------- */

static char *line;
static size_t line_len, line_cap;

static int reserve(size_t n)
{
  if (line_len + n <= line_cap) return 0;
  size_t cap = line_cap ? line_cap : 1024;
  while (cap < line_len + n) cap *= 2;
  char *p = realloc(line, cap);
  if (p == NULL) return -1;
  line = p;
  line_cap = cap;
  return 0;
}

static void put(const char *s, size_t n)
{
  if (reserve(n) < 0) return;
  memcpy(line + line_len, s, n);
  line_len += n;
}

static void put_dash(void)
{
  put("-", 1);
}

static void put_escaped(const char *s, size_t n)
{
  static const char hex[] = "0123456789ABCDEF";
  if (n == 0) {
    put_dash();
    return;
  }
  if (reserve(n * 4) < 0) return;
  char *o = line + line_len;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f) {
      *o++ = '\\';
      *o++ = 'x';
      *o++ = hex[c >> 4];
      *o++ = hex[c & 15];
    } else {
      *o++ = (char)c;
    }
  }
  line_len = (size_t)(o - line);
}

static void put_str(const char *s)
{
  put_escaped(s, s ? strlen(s) : 0);
}

static void put_uint(unsigned long long v)
{
  char tmp[24];
  char *first = gw_format_uint(tmp + sizeof(tmp), v);
  put(first, (size_t)(tmp + sizeof(tmp) - first));
}

/* Milliseconds as seconds with three decimals: 12.4 -> "0.012". */
static void put_seconds(double ms)
{
  if (ms < 0) ms = 0;
  unsigned long long m = (unsigned long long)(ms + 0.5);
  put_uint(m / 1000);
  char frac[4] = {'.', (char)('0' + m / 100 % 10), (char)('0' + m / 10 % 10), (char)('0' + m % 10)};
  put(frac, 4);
}

/* Local time, formatted once per second. */
static time_t cached_sec = -1;
static char time_local[40], time_iso[40];

static void update_time(time_t now)
{
  if (now == cached_sec) return;
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(time_local, sizeof(time_local), "%d/%b/%Y:%H:%M:%S %z", &tm);
  size_t n = strftime(time_iso, sizeof(time_iso), "%Y-%m-%dT%H:%M:%S%z", &tm);
  if (n >= 5) { /* +0200 -> +02:00 */
    memmove(time_iso + n - 1, time_iso + n - 2, 3);
    time_iso[n - 2] = ':';
  }
  cached_sec = now;
}

static void put_header(const gw_headers_t *h, const char *name)
{
  const gw_header_t *f = gw_headers_find(h, name);
  if (f) put_escaped(f->value, f->value_len);
  else put_dash();
}

void gw_access_log_write(const gw_request_t *req, int status, size_t bytes_sent, size_t body_bytes)
{
  const gw_access_log_t *al = current;
  if (al == NULL) return;
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  line_len = 0;
  for (size_t i = 0; i < al->nparts; i++) {
    const gw_access_part_t *p = &al->parts[i];
    switch (p->var) {
    case GW_ALV_LITERAL: put(p->text, p->len); break;
    case GW_ALV_REMOTE_ADDR: put_str(req->client.remote_addr); break;
    case GW_ALV_PROXY_PROTOCOL_ADDR:
      if (req->client.proxy_protocol_addr) put_str(req->client.proxy_protocol_addr);
      else put_dash();
      break;
    case GW_ALV_REALIP_REMOTE_ADDR: put_str(req->client.balancer_addr ? req->client.balancer_addr : req->client.remote_addr); break;
    case GW_ALV_TIME_LOCAL:
      update_time(wall.tv_sec);
      put(time_local, strlen(time_local));
      break;
    case GW_ALV_TIME_ISO8601:
      update_time(wall.tv_sec);
      put(time_iso, strlen(time_iso));
      break;
    case GW_ALV_MSEC:
      put_seconds((double)wall.tv_sec * 1000.0 + (double)(wall.tv_nsec / 1000000));
      break;
    case GW_ALV_PID: put_uint((unsigned long long)getpid()); break;
    case GW_ALV_REQUEST:
      if (req->in.method == NULL || req->in.target_len == 0) {
        put_dash();
        break;
      }
      put(req->in.method, strlen(req->in.method));
      put(" ", 1);
      put_escaped(req->in.target, req->in.target_len);
      put(" ", 1);
      put(gw_request_protocol(req), 8);
      break;
    case GW_ALV_METHOD: put_str(req->in.method); break;
    case GW_ALV_URI: put_escaped(req->in.target, req->in.target ? req->in.path_len : 0); break;
    case GW_ALV_REQUEST_URI: put_escaped(req->in.target, req->in.target ? req->in.target_len : 0); break;
    case GW_ALV_ARGS:
      if (req->in.target && gw_request_query_len(req)) put_escaped(req->in.target + req->in.path_len + 1, gw_request_query_len(req));
      else put_dash();
      break;
    case GW_ALV_SERVER_PROTOCOL: put(gw_request_protocol(req), 8); break;
    case GW_ALV_SERVER_PORT: put_uint((unsigned long long)req->server->port); break;
    case GW_ALV_STATUS: put_uint((unsigned long long)status); break;
    case GW_ALV_BYTES_SENT: put_uint(bytes_sent); break;
    case GW_ALV_BODY_BYTES_SENT: put_uint(body_bytes); break;
    case GW_ALV_REQUEST_TIME: put_seconds(gw_now_ms() - req->in.start_ms); break;
    case GW_ALV_UPSTREAM_ADDR: put_str(req->upstream.addr); break;
    case GW_ALV_UPSTREAM_STATUS:
      if (req->upstream.status) put_uint((unsigned long long)req->upstream.status);
      else put_dash();
      break;
    case GW_ALV_UPSTREAM_RESPONSE_TIME:
      if (req->upstream.addr[0]) put_seconds(req->upstream.ms);
      else put_dash();
      break;
    case GW_ALV_CACHE_STATUS:
      if (req->cache.status) put_str(req->cache.status);
      else put_dash();
      break;
    case GW_ALV_UPSTREAM_REUSED:
      if (req->upstream.addr[0]) put(req->upstream.reused ? "1" : "0", 1);
      else put_dash();
      break;
    case GW_ALV_HTTP2:
      if (req->in.http_major != 2) put_dash();
      else put_str(req->client.tls ? "h2" : "h2c");
      break;
    case GW_ALV_STREAM_ID:
      if (req->in.stream_id > 0) put_uint((unsigned long long)req->in.stream_id);
      else put_dash();
      break;
    case GW_ALV_HTTP: put_header(&req->in.headers, p->text); break;
    case GW_ALV_SENT_HTTP: put_header(&req->resp.headers, p->text); break;
    }
  }
  put("\n", 1);
  if (line == NULL) return;
  ssize_t w = write(al->fd, line, line_len);
  (void)w;
}

/* -- lifetime ------------------------------------------------------------------- */

int gw_access_log_new(const gw_settings_t *s, gw_access_log_t **out, char *err, size_t errlen)
{
  *out = NULL;
  if (s->access_log == GW_LOG_TO_OFF) return 0;
  gw_access_log_t *al = calloc(1, sizeof(*al));
  if (al == NULL) goto oom;
  al->fd = STDERR_FILENO;
  al->parts = calloc(s->access_nparts + 1, sizeof(gw_access_part_t));
  if (al->parts == NULL) goto oom;
  for (size_t i = 0; i < s->access_nparts; i++) {
    const gw_access_part_t *src = &s->access_format[i];
    gw_access_part_t *dst = &al->parts[i];
    al->nparts++;
    *dst = *src;
    if (src->text && (dst->text = strndup(src->text, src->len)) == NULL) goto oom;
  }
  if (s->access_log == GW_LOG_TO_FILE) {
    if ((al->path = strdup(s->access_log_path)) == NULL) goto oom;
    al->fd = gw_log_file_open(al->path, err, errlen);
    if (al->fd < 0) {
      gw_access_log_free(al);
      return -1;
    }
  }
  *out = al;
  return 0;
oom:
  snprintf(err, errlen, "access_log: out of memory");
  gw_access_log_free(al);
  return -1;
}

void gw_access_log_free(gw_access_log_t *al)
{
  if (al == NULL) return;
  if (al->path && al->fd >= 0) close(al->fd);
  for (size_t i = 0; i < al->nparts; i++) free(al->parts[i].text);
  free(al->parts);
  free(al->path);
  free(al);
}

void gw_access_log_use(gw_access_log_t *al)
{
  gw_access_log_free(current);
  current = al;
  if (al == NULL) {
    free(line);
    line = NULL;
    line_len = line_cap = 0;
  }
}

void gw_access_log_reopen(void)
{
  if (current == NULL || current->path == NULL) return;
  char err[512];
  int fd = gw_log_file_open(current->path, err, sizeof(err));
  if (fd < 0) {
    gw_log_error("reopening the access log: %s", err);
    return;
  }
  dup3(fd, current->fd, O_CLOEXEC); /* same descriptor number, new file */
  close(fd);
}
