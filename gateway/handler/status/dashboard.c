/* dashboard.c - the live view (`location "/dashboard", dashboard: true`):
 *
 *   GET /dashboard          one self-contained page (dashboard.html, built
 *                           into the binary: no CDN, no build step) that
 *                           polls the next URL and draws the last minutes
 *   GET /dashboard/stats    every worker's stats (the status page's JSON)
 *                           with response-time histograms
 *   GET /dashboard/timeline?ms=2000&cols=600
 *                           what each worker's loop did over the last ms
 *                           (idle, C, a fiber, blocked), in columns
 *                           (timeline.h); recorded only while a page polls
 *                           the stats
 *   GET /dashboard/note?text=...
 *                           sets the note every page shows (`rake lesson`
 *                           announces its phases); an empty text clears it
 *   GET /dashboard/trace?path=/x
 *                           runs GET /x as a sub-request, records its life
 *                           (fiber starts, waits and their causes, resumes,
 *                           upstream exchanges, the response) with µs
 *                           timestamps, and answers them as JSON (the
 *                           page's waterfall)
 *
 * Only for the addresses of `allow:` (default: the loopback addresses); it
 * never shows request bodies or header values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "dashboard.h"
#include "log.h"
#include "request.h"
#include "status.h"
#include "stats.h"
#include "subrequest.h"
#include "timeline.h"
#include "trace.h"

/* dashboard.html, linked in as it is (the assembler reads it at build time). */
__asm__(".section .rodata\n"
        ".global gw_dashboard_html\n"
        "gw_dashboard_html:\n"
        ".incbin \"gateway/handler/status/dashboard.html\"\n"
        ".global gw_dashboard_html_end\n"
        "gw_dashboard_html_end:\n"
        ".byte 0\n"
        ".previous\n");
extern const char gw_dashboard_html[], gw_dashboard_html_end[];

typedef struct {
  gw_handler_t super;
  char **allow;             /* owned: client addresses (text) allowed in */
  size_t nallow;
} dashboard_t;

/* A trace in progress: the sub-request and the events it records. */
typedef struct {
  gw_pending_t pending;     /* on the dashboard's request: an abort cancels it */
  gw_request_t *req;
  gw_subreq_t *sub;
  struct evbuffer *events;  /* owned: JSON objects, comma-separated */
  char path[1024];
} trace_op_t;

static int allowed(const dashboard_t *d, const char *addr)
{
  for (size_t i = 0; i < d->nallow; i++)
    if (strcmp(d->allow[i], addr) == 0) return 1;
  return 0;
}

static void answer(gw_request_t *req, int status, const char *type, const char *body, size_t len)
{
  req->resp.status = status;
  gw_headers_add(&req->resp.headers, "Content-Type", 12, type, strlen(type));
  gw_headers_add(&req->resp.headers, "Cache-Control", 13, "no-store", 8);
  evbuffer_add(req->resp.body, body, len);
  gw_request_finish(req);
}

static void trace_free(trace_op_t *op)
{
  op->req->trace.out = NULL;
  gw_trace_record_end();
  evbuffer_free(op->events);
  free(op);
}

static void trace_cancel(gw_pending_t *p)
{
  trace_op_t *op = (trace_op_t *)p;
  gw_subrequest_cancel(op->sub);
  trace_free(op);
}

static void on_traced(int status, gw_headers_t *headers, struct evbuffer *body, gw_err_t err, void *arg)
{
  trace_op_t *op = arg;
  gw_request_t *req = op->req;
  (void)headers;
  gw_request_pending_remove(&op->pending);
  struct evbuffer *out = req->resp.body;
  evbuffer_add(out, "{\"path\":", 8);
  /* the path was checked for quotes and control bytes on the way in */
  evbuffer_add_printf(out, "\"%s\",\"status\":%d,\"bytes\":%zu,\"pid\":%d,\"t0_ms\":%.3f,\"error\":", op->path,
                      err.kind == GW_OK ? status : 0, evbuffer_get_length(body), (int)getpid(), req->trace.t0);
  if (err.kind == GW_OK)
    evbuffer_add(out, "null", 4);
  else
    evbuffer_add_printf(out, "\"%s\"", err.msg);
  evbuffer_add(out, ",\"events\":[", 11);
  evbuffer_add_buffer(out, op->events);
  evbuffer_add(out, "]}\n", 3);
  trace_free(op);
  req->resp.status = 200;
  gw_headers_add(&req->resp.headers, "Content-Type", 12, "application/json", 16);
  gw_headers_add(&req->resp.headers, "Cache-Control", 13, "no-store", 8);
  gw_request_finish(req);
}

/* The value of `name=` in a query, percent-decoded into buf; 0 when absent
 * or unfit for a request-target (no quotes, spaces or control bytes), or
 * with text set, for a line of text (no control bytes). */
static int query_param(const char *q, size_t qlen, const char *name, char *buf, size_t size, int text)
{
  size_t nlen = strlen(name);
  for (size_t i = 0; i < qlen;) {
    size_t end = i;
    while (end < qlen && q[end] != '&') end++;
    if (end - i > nlen && memcmp(q + i, name, nlen) == 0 && q[i + nlen] == '=') {
      size_t n = 0;
      for (size_t j = i + nlen + 1; j < end; j++) {
        int c = (unsigned char)q[j];
        if (c == '%' && j + 2 < end) {
          char hex[3] = {q[j + 1], q[j + 2], 0};
          char *stop;
          long v = strtol(hex, &stop, 16);
          if (*stop) return 0;
          c = (int)v;
          j += 2;
        } else if (c == '+') {
          c = ' ';
        }
        if (c < 0x20 || c == 0x7f || n + 1 >= size) return 0;
        if (!text && (c == ' ' || c == '"' || c == '\\')) return 0;
        buf[n++] = (char)c;
      }
      buf[n] = '\0';
      return n > 0 || text;
    }
    i = end + 1;
  }
  return 0;
}

static void start_trace(gw_request_t *req)
{
  trace_op_t *op = calloc(1, sizeof(*op));
  if (op == NULL || (op->events = evbuffer_new()) == NULL) {
    free(op);
    gw_request_simple_response(req, 500, NULL);
    gw_request_finish(req);
    return;
  }
  const char *q = req->in.target + req->in.path_len + 1;
  if (!query_param(q, gw_request_query_len(req), "path", op->path, sizeof(op->path), 0) || op->path[0] != '/') {
    evbuffer_free(op->events);
    free(op);
    static const char usage[] = "{\"error\":\"give ?path=/a/location (URL-encoded)\"}\n";
    answer(req, 400, "application/json", usage, sizeof(usage) - 1);
    return;
  }
  op->req = req;
  gw_trace_record(req, op->events);
  gw_subreq_params_t params = {.method = "GET", .target = op->path, .timeout_ms = 60000};
  op->sub = gw_subrequest_start(req, &params, on_traced, op);
  if (op->sub == NULL) {
    trace_free(op);
    gw_request_simple_response(req, 500, NULL);
    gw_request_finish(req);
    return;
  }
  gw_request_pending_add(req, &op->pending, trace_cancel);
}

/* A number query parameter within [lo, hi], else def. */
static int query_int(gw_request_t *req, const char *name, int def, int lo, int hi)
{
  char buf[16];
  if (!query_param(req->in.target + req->in.path_len + 1, gw_request_query_len(req), name, buf, sizeof(buf), 0)) return def;
  char *end;
  long v = strtol(buf, &end, 10);
  return *end || v < lo || v > hi ? def : (int)v;
}

static void set_note(gw_request_t *req)
{
  char text[GW_STATS_NOTE_MAX + 1];
  if (!query_param(req->in.target + req->in.path_len + 1, gw_request_query_len(req), "text", text, sizeof(text), 1)) {
    static const char usage[] = "{\"error\":\"give ?text=... (URL-encoded, at most 200 bytes, no control bytes)\"}\n";
    answer(req, 400, "application/json", usage, sizeof(usage) - 1);
    return;
  }
  gw_stats_set_note(text, strlen(text), gw_now_ms());
  answer(req, 200, "application/json", "{\"ok\":true}\n", 12);
}

static void on_req(gw_handler_t *self, gw_request_t *req)
{
  dashboard_t *d = (dashboard_t *)self;
  if (!allowed(d, req->client.remote_addr ? req->client.remote_addr : "")) {
    gw_request_simple_response(req, 403, NULL);
    gw_request_finish(req);
    return;
  }
  const char *rest = req->in.target + req->handler.location->path_len;
  size_t rlen = req->in.path_len > req->handler.location->path_len ? req->in.path_len - req->handler.location->path_len : 0;
  if (rlen == 0 || (rlen == 1 && rest[0] == '/')) {
    answer(req, 200, "text/html; charset=utf-8", gw_dashboard_html, (size_t)(gw_dashboard_html_end - gw_dashboard_html));
  } else if (rlen == 6 && memcmp(rest, "/stats", 6) == 0) {
    gw_timeline_watch(); /* a page is open: the loops record their timelines */
    req->ctx->publish_stats(req->ctx);
    gw_status_render_json(req->resp.body, req->ctx->config, 1);
    answer(req, 200, "application/json", "", 0);
  } else if (rlen == 9 && memcmp(rest, "/timeline", 9) == 0) {
    gw_timeline_watch();
    gw_timeline_render_json(req->resp.body, query_int(req, "ms", 2000, 100, GW_TIMELINE_MAX_MS),
                            query_int(req, "cols", 600, 10, 2000));
    answer(req, 200, "application/json", "", 0);
  } else if (rlen == 5 && memcmp(rest, "/note", 5) == 0) {
    set_note(req);
  } else if (rlen == 6 && memcmp(rest, "/trace", 6) == 0) {
    start_trace(req);
  } else {
    gw_request_simple_response(req, 404, NULL);
    gw_request_finish(req);
  }
}

static void dispose(gw_handler_t *self)
{
  dashboard_t *d = (dashboard_t *)self;
  for (size_t i = 0; i < d->nallow; i++) free(d->allow[i]);
  free(d->allow);
  free(d);
}

gw_handler_t *gw_dashboard_handler_new(const char *const *allow, size_t nallow)
{
  static const char *const loopback[] = {"127.0.0.1", "::1"};
  if (nallow == 0) {
    allow = loopback;
    nallow = 2;
  }
  dashboard_t *d = calloc(1, sizeof(*d));
  if (d == NULL || (d->allow = calloc(nallow, sizeof(char *))) == NULL) {
    free(d);
    return NULL;
  }
  d->super = (gw_handler_t){.name = "dashboard", .on_req = on_req, .dispose = dispose};
  for (; d->nallow < nallow; d->nallow++)
    if ((d->allow[d->nallow] = strdup(allow[d->nallow])) == NULL) {
      dispose(&d->super);
      return NULL;
    }
  return &d->super;
}
