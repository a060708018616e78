/* proxy.c - proxy_pass: rewrites a request for an upstream, sends it with the
 * upstream client (upstream.c) and turns the answer into the response.
 *
 * URL mapping follows nginx: with a path in the URL, the matched location
 * prefix is replaced by it ("/sub" + proxy_pass "http://h:1/mruby": "/sub/x"
 * -> "/mruby/x"); without one, the request-target is passed unchanged. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gw_mruby.h"
#include "handler.h"
#include "log.h"
#include "proxy.h"
#include "upstream.h"
#include "worker.h"

typedef struct {
  gw_pending_t pending;   /* registered with req: an abort cancels us */
  gw_request_t *req;
  gw_client_req_t *client;
  double sent_ms;
} proxy_op_t;

/* Hop-by-hop fields (RFC 9110 §7.6.1) never cross the proxy. */
static int is_hop_by_hop(const gw_header_t *h)
{
  if (h->name_len < 2 || h->name_len > 19) return 0;
  static const char *const names[] = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
                                      "transfer-encoding", "upgrade", "proxy-authenticate", "proxy-authorization"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcasecmp(h->name, names[i]) == 0) return 1;
  return 0;
}

/* Also hop-by-hop: any field the Connection header names. */
static int named_in_connection(const gw_header_t *conn, const gw_header_t *h)
{
  if (conn == NULL) return 0;
  const char *p = conn->value;
  while (*p) {
    while (*p == ' ' || *p == ',' || *p == '\t') p++;
    const char *e = p;
    while (*e && *e != ',' && *e != ' ' && *e != '\t') e++;
    if ((size_t)(e - p) == h->name_len && strncasecmp(p, h->name, h->name_len) == 0) return 1;
    p = e;
  }
  return 0;
}

static void on_upstream_done(const char *err, int timed_out, gw_client_response_t *res, void *arg)
{
  proxy_op_t *op = arg;
  gw_request_t *req = op->req;
  double sent_ms = op->sent_ms;
  gw_request_pending_remove(&op->pending);
  free(op);
  if (gw_trace) {
    char ev[128];
    if (err)
      snprintf(ev, sizeof(ev), "upstream failed: %s", err);
    else
      snprintf(ev, sizeof(ev), "upstream answered with status %d", res->status);
    gw_trace_event(req, ev);
  }
  req->upstream_ms = gw_now_ms() - sent_ms;
  if (err) {
    gw_log_error("proxy %s %.*s to %s: %s", req->method, (int)req->path_len, req->target, req->upstream_addr, err);
    gw_request_simple_response(req, timed_out ? 504 : 502, NULL);
  } else {
    req->upstream_status = res->status;
    req->upstream_reused = res->reused;
    req->status = res->status;
    const gw_header_t *conn = gw_headers_find(&res->headers, "connection");
    for (size_t i = 0; i < res->headers.count; i++) {
      const gw_header_t *h = &res->headers.items[i];
      if (is_hop_by_hop(h) || named_in_connection(conn, h)) continue;
      gw_headers_add(&req->resp_headers, h->name, h->name_len, h->value, h->value_len);
    }
    evbuffer_add_buffer(req->resp_body, res->body);
    if (req->location && mrb_test(req->location->body_filter)) {
      gw_handler_filter_body(req, req->location->body_filter);
      return;
    }
  }
  gw_request_finish(req);
}

static void cancel_op(gw_pending_t *p)
{
  proxy_op_t *op = (proxy_op_t *)p;
  gw_client_cancel(op->client);
  free(op);
}

int gw_proxy_parse_url(const char *url, gw_proxy_url_t *u)
{
  if (strncmp(url, "http://", 7) != 0) return -1;
  const char *h = url + 7;
  const char *end = h + strcspn(h, "/?");
  const char *host_end, *port = NULL;
  if (*h == '[') { /* [v6]:port */
    h++;
    host_end = memchr(h, ']', (size_t)(end - h));
    if (host_end == NULL) return -1;
    if (host_end[1] == ':') port = host_end + 2;
  } else {
    host_end = memchr(h, ':', (size_t)(end - h));
    if (host_end) port = host_end + 1;
    else host_end = end;
  }
  size_t hl = (size_t)(host_end - h);
  if (hl == 0 || hl >= sizeof(u->host)) return -1;
  memcpy(u->host, h, hl);
  u->host[hl] = '\0';
  u->port = port ? atoi(port) : 80;
  if (u->port <= 0 || u->port > 65535) return -1;
  u->path = end;
  snprintf(u->hostport, sizeof(u->hostport), u->port == 80 ? "%s" : "%s:%d", u->host, u->port);
  struct in6_addr probe;
  u->is_ip = inet_pton(AF_INET, u->host, &probe) == 1 || inet_pton(AF_INET6, u->host, &probe) == 1;
  return 0;
}

void gw_proxy_start(gw_request_t *req, const char *url)
{
  gw_worker_t *w = req->worker;
  gw_proxy_url_t u;
  const char *unix_path = NULL;
  if (gw_proxy_parse_url(url, &u) < 0) {
    gw_log_error("proxy_pass %s: not a valid http:// URL", url);
    gw_request_simple_response(req, 502, NULL);
    gw_request_finish(req);
    return;
  }
  if (!u.is_ip) { /* a named upstream group: round robin over its servers */
    gw_upstream_group_t *g = gw_config_group(w->config, u.host, strlen(u.host));
    if (g == NULL || g->nservers == 0) {
      gw_log_error("proxy_pass %s: no upstream group named \"%s\" (and host names are not resolved)", url, u.host);
      gw_request_simple_response(req, 502, NULL);
      gw_request_finish(req);
      return;
    }
    const gw_upstream_server_t *us = &g->servers[g->next++ % g->nservers];
    if (us->unix_path) {
      unix_path = us->unix_path;
    } else {
      snprintf(u.host, sizeof(u.host), "%s", us->host);
      u.port = us->port;
    }
  }

  /* The target: the location prefix replaced by the URL's path. */
  size_t prefix = (req->location && *u.path) ? req->location->path_len : 0;
  if (prefix > req->path_len) prefix = req->path_len;
  size_t plen = strlen(u.path);
  size_t tlen = plen + req->target_len - prefix;
  char *target = malloc(tlen + 2);
  if (target == NULL) {
    gw_request_simple_response(req, 500, NULL);
    gw_request_finish(req);
    return;
  }
  memcpy(target, u.path, plen);
  memcpy(target + plen, req->target + prefix, req->target_len - prefix);
  target[tlen] = '\0';
  if (tlen == 0 || target[0] != '/') { /* "?q" alone, or nothing: root */
    memmove(target + 1, target, tlen + 1);
    target[0] = '/';
  }

  gw_headers_t hs;
  gw_headers_init(&hs);
  gw_headers_add(&hs, "Host", 4, u.hostport, strlen(u.hostport));
  const gw_header_t *xff = NULL;
  const gw_header_t *conn = gw_headers_find(&req->headers, "connection");
  for (size_t i = 0; i < req->headers.count; i++) {
    const gw_header_t *h = &req->headers.items[i];
    if (is_hop_by_hop(h) || named_in_connection(conn, h)) continue;
    if (strcasecmp(h->name, "host") == 0 || strcasecmp(h->name, "content-length") == 0) continue;
    if (strcasecmp(h->name, "x-forwarded-for") == 0) {
      xff = h;
      continue;
    }
    gw_headers_add(&hs, h->name, h->name_len, h->value, h->value_len);
  }
  if (req->remote_addr[0]) {
    char v[1024];
    int n = xff ? snprintf(v, sizeof(v), "%s, %s", xff->value, req->remote_addr) : snprintf(v, sizeof(v), "%s", req->remote_addr);
    gw_headers_add(&hs, "X-Forwarded-For", 15, v, (size_t)n < sizeof(v) ? (size_t)n : sizeof(v) - 1);
    gw_headers_add(&hs, "X-Forwarded-Proto", 17, "http", 4);
    const gw_header_t *host = gw_headers_find(&req->headers, "host");
    if (host) gw_headers_add(&hs, "X-Forwarded-Host", 16, host->value, host->value_len);
  }

  size_t body_len = evbuffer_get_length(req->body);
  gw_client_params_t params = {
    .host = unix_path ? NULL : u.host,
    .port = u.port,
    .unix_path = unix_path,
    .method = req->method,
    .target = target,
    .headers = &hs,
    .body = body_len ? (const char *)evbuffer_pullup(req->body, -1) : NULL,
    .body_len = body_len,
  };
  proxy_op_t *op = calloc(1, sizeof(*op));
  snprintf(req->upstream_addr, sizeof(req->upstream_addr), "%s", unix_path ? unix_path : u.hostport);
  if (op) {
    op->req = req;
    op->sent_ms = gw_now_ms();
    op->client = gw_client_request(w->pool, &params, on_upstream_done, op);
  }
  free(target);
  gw_headers_dispose(&hs);
  if (op == NULL || op->client == NULL) {
    free(op);
    gw_request_simple_response(req, 500, NULL);
    gw_request_finish(req);
    return;
  }
  gw_request_pending_add(req, &op->pending, cancel_op);
  if (gw_trace) {
    char ev[400];
    snprintf(ev, sizeof(ev), "request sent to upstream %s", unix_path ? unix_path : u.hostport);
    gw_trace_event(req, ev);
  }
}
