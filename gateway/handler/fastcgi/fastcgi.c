/* fastcgi.c - the fastcgi handler (fastcgi.h): builds the CGI/1.1 params of
 * a request (nginx's fastcgi_params), picks a server of the target's group
 * (balancer.c: the same round robin, least_conn, hash and passive health as
 * proxy_pass), sends it with the FastCGI client (fcgi_client.c) on the
 * worker's FastCGI keep-alive pool, and streams the answer to the client
 * with back-pressure (or collects it for a sub-request).
 *
 * A connect failure sent nothing: the next live server of the group is
 * tried. Anything else is answered: 504 for timeouts, 502 otherwise; after
 * the head went out, an error cuts the response short.
 *
 * Request bodies: one the client sent whole goes as it is; one streaming in
 * with a Content-Length goes as FCGI_STDIN as it comes (back-pressure through
 * gw_request_body_taken); a chunked one is gathered first, because
 * CONTENT_LENGTH must be known before the script starts (as nginx does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "addr.h"
#include "balancer.h"
#include "buf.h"
#include "error.h"
#include "fastcgi.h"
#include "fcgi_record.h"
#include "fcgi_client.h"
#include "log.h"
#include "stats.h"
#include "str.h"
#include "uri_path.h"

#define SERVER_SOFTWARE "gateway"
#define MAX_COLLECTED ((size_t)64 * 1024 * 1024) /* a sub-request's body */

typedef struct fastcgi_handler_s {
  gw_handler_t super;
  char *target;             /* owned: group name, "unix:/path" or "IP:port" */
  char *script_filename;    /* owned, or NULL */
  gw_regex_t *split;        /* split_path_info: a reference of ours, or NULL */
  char **params;            /* owned: 2 * nparams strings, name then value */
  size_t nparams;
} fastcgi_handler_t;

typedef struct {
  gw_pending_t pending;     /* registered with req: an abort cancels us */
  gw_request_t *req;
  gw_fcgi_req_t *client;    /* in flight, or NULL */
  gw_upstream_group_t *group; /* NULL for a single address */
  gw_balancer_walk_t walk;  /* a group's servers (balancer.h) */
  gw_sockaddr_t addr;       /* single address */
  socklen_t addrlen;
  char label[128];
  const struct fastcgi_handler_s *h; /* the location's (its params), or NULL */
  char *script;             /* owned SCRIPT_FILENAME, or NULL */
  char *uri;                /* split_path_info: the decoded path (owned), or NULL: the path as received */
  size_t script_off, script_len; /* the script's part of uri (SCRIPT_NAME) */
  size_t info_off, info_len;     /* PATH_INFO's part of uri; info_len 0: none */
  gw_buf_t params;          /* encoded name-value pairs */
  struct evbuffer *gathered;/* a chunked request body gathered whole (owned), or NULL */
  int streaming;            /* the head went to the client */
  int collecting;           /* no streaming protocol (a sub-request): the body goes to resp.body */
  int discard;              /* HEAD, 204, 304: no body to the client */
  int overflow;             /* more body than the Content-Length the script announced */
  long long left;           /* bytes the announced Content-Length still owes; -1 none */
  double sent_ms;
} fcgi_op_t;

/* ---- the worker's pool ---- */

static gw_pool_t *worker_pool(gw_context_t *ctx)
{
  if (ctx->fcgi_pool) return ctx->fcgi_pool;
  int keepalive = 0, groups = 0;
  for (size_t i = 0; i < ctx->config->ngroups; i++)
    if (ctx->config->groups[i].fastcgi) {
      groups++;
      if (ctx->config->groups[i].keepalive > keepalive) keepalive = ctx->config->groups[i].keepalive;
    }
  if (!groups) keepalive = GW_FASTCGI_DEFAULT_KEEPALIVE;
  ctx->fcgi_pool = gw_fcgi_pool_new(ctx->base, keepalive, 60000);
  return ctx->fcgi_pool;
}

void gw_fastcgi_worker_dispose(gw_context_t *ctx)
{
  gw_fcgi_pool_free(ctx->fcgi_pool);
  ctx->fcgi_pool = NULL;
}

/* ---- params ---- */

static void add_pair(gw_buf_t *b, const char *name, size_t nlen, const char *value, size_t vlen)
{
  size_t n = gw_fcgi_pair_size(nlen, vlen);
  if (n == 0 || gw_buf_reserve(b, n) < 0) return;
  b->len += gw_fcgi_put_pair((unsigned char *)b->data + b->len, name, nlen, value, vlen);
}

static int user_has(const fastcgi_handler_t *h, const char *name)
{
  for (size_t i = 0; h && i < h->nparams; i++)
    if (strcmp(h->params[2 * i], name) == 0) return 1;
  return 0;
}

static void add_std(gw_buf_t *b, const fastcgi_handler_t *h, const char *name, const char *value, size_t vlen)
{
  if (!user_has(h, name)) add_pair(b, name, strlen(name), value, vlen);
}

static void add_std_s(gw_buf_t *b, const fastcgi_handler_t *h, const char *name, const char *value)
{
  add_std(b, h, name, value, strlen(value));
}

static const char *user_param(const fastcgi_handler_t *h, const char *name)
{
  for (size_t i = 0; h && i < h->nparams; i++)
    if (strcmp(h->params[2 * i], name) == 0) return h->params[2 * i + 1];
  return NULL;
}

/* root + part, as one param (nginx's $document_root$fastcgi_script_name). */
static void add_rooted(gw_buf_t *b, const char *name, const char *root, const char *part, size_t len)
{
  gw_buf_t s = GW_BUF_INIT;
  if (root) gw_buf_append(&s, root, strlen(root));
  gw_buf_append(&s, part, len);
  add_pair(b, name, strlen(name), s.data ? s.data : "", s.len);
  gw_buf_dispose(&s);
}

/* The params of nginx's fastcgi_params, then every request header as
 * HTTP_NAME (Proxy dropped: httpoxy), then the location's own. The script's
 * path is the one split_path_info: left (op->uri), else the path as received. */
static void build_params(gw_buf_t *b, const gw_request_t *req, const fcgi_op_t *op, long long content_length)
{
  char num[32];
  const fastcgi_handler_t *h = op->h;
  const char *script = op->script;
  const char *path = op->uri ? op->uri + op->script_off : req->in.target;
  size_t plen = op->uri ? op->script_len : req->in.path_len;
  size_t qlen = gw_request_query_len(req);
  const char *query = qlen ? req->in.target + req->in.path_len + 1 : "";
  add_std_s(b, h, "GATEWAY_INTERFACE", "CGI/1.1");
  add_std_s(b, h, "SERVER_SOFTWARE", SERVER_SOFTWARE);
  add_std_s(b, h, "REQUEST_METHOD", req->in.method);
  add_std(b, h, "QUERY_STRING", query, qlen);
  add_std(b, h, "REQUEST_URI", req->in.target, req->in.target_len);
  add_std(b, h, "DOCUMENT_URI", path, plen);
  add_std(b, h, "SCRIPT_NAME", path, plen);
  const char *root = user_param(h, "DOCUMENT_ROOT");
  if (script == NULL) script = user_param(h, "SCRIPT_FILENAME");
  if (script)
    add_pair(b, "SCRIPT_FILENAME", 15, script, strlen(script));
  else
    add_rooted(b, "SCRIPT_FILENAME", root, path, plen);
  add_std_s(b, h, "DOCUMENT_ROOT", root ? root : "");
  if (op->info_len) { /* nginx's snippets/fastcgi-php.conf sends PATH_INFO; PATH_TRANSLATED as RFC 3875 4.1.6 */
    add_std(b, h, "PATH_INFO", op->uri + op->info_off, op->info_len);
    if (!user_has(h, "PATH_TRANSLATED")) add_rooted(b, "PATH_TRANSLATED", root, op->uri + op->info_off, op->info_len);
  }
  add_std_s(b, h, "SERVER_PROTOCOL", req->in.http_minor ? "HTTP/1.1" : "HTTP/1.0");
  add_std_s(b, h, "REMOTE_ADDR", req->client.remote_addr ? req->client.remote_addr : "");
  add_std_s(b, h, "REMOTE_PORT", gw_uint_cstr(num, sizeof(num), (unsigned)req->client.remote_port));
  add_std_s(b, h, "SERVER_ADDR", req->server ? req->server->host : "");
  add_std_s(b, h, "SERVER_PORT", gw_uint_cstr(num, sizeof(num), req->server ? (unsigned)req->server->port : 0));
  const gw_header_t *host = gw_headers_find(&req->in.headers, "host");
  if (host) { /* SERVER_NAME: the Host without its port */
    size_t n = host->value_len;
    const char *v = host->value;
    const char *end = v[0] == '[' ? memchr(v, ']', n) : NULL;
    const char *colon = memchr(end ? end : v, ':', n - (size_t)((end ? end : v) - v));
    if (colon) n = (size_t)(colon - v);
    add_std(b, h, "SERVER_NAME", v, n);
  } else {
    add_std_s(b, h, "SERVER_NAME", req->server ? req->server->host : "");
  }
  add_std_s(b, h, "REDIRECT_STATUS", "200"); /* php-fpm's cgi.force_redirect */
  add_std_s(b, h, "REQUEST_SCHEME", req->client.tls ? "https" : "http");
  if (req->client.tls) add_std_s(b, h, "HTTPS", "on"); /* nginx: $https if_not_empty */
  const gw_header_t *ct = gw_headers_find(&req->in.headers, "content-type");
  add_std(b, h, "CONTENT_TYPE", ct ? ct->value : "", ct ? ct->value_len : 0);
  add_std_s(b, h, "CONTENT_LENGTH",
            content_length > 0 || ct ? gw_uint_cstr(num, sizeof(num), (unsigned long long)content_length) : "");
  gw_buf_t name = GW_BUF_INIT;
  for (size_t i = 0; i < req->in.headers.count; i++) {
    const gw_header_t *f = &req->in.headers.items[i];
    if ((f->name_len == 5 && strcasecmp(f->name, "proxy") == 0) ||
        (f->name_len == 12 && strcasecmp(f->name, "content-type") == 0) ||
        (f->name_len == 14 && strcasecmp(f->name, "content-length") == 0))
      continue;
    name.len = 0;
    if (gw_buf_append(&name, "HTTP_", 5) < 0 || gw_buf_reserve(&name, f->name_len) < 0) break;
    for (size_t k = 0; k < f->name_len; k++) {
      char c = f->name[k];
      name.data[name.len++] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
    }
    add_pair(b, name.data, name.len, f->value, f->value_len);
  }
  gw_buf_dispose(&name);
  for (size_t i = 0; h && i < h->nparams; i++) {
    if (strcmp(h->params[2 * i], "SCRIPT_FILENAME") == 0) continue; /* sent above */
    add_pair(b, h->params[2 * i], strlen(h->params[2 * i]), h->params[2 * i + 1], strlen(h->params[2 * i + 1]));
  }
}

/* ---- the exchange ---- */

static void op_free(fcgi_op_t *op)
{
  gw_request_t *req = op->req;
  if (req->handler.body_arg == op) {
    req->handler.on_body_more = NULL;
    req->handler.body_arg = NULL;
  }
  if (op->gathered) evbuffer_free(op->gathered);
  free(op->script);
  free(op->uri);
  gw_buf_dispose(&op->params);
  free(op);
}

static void cancel_op(gw_pending_t *p)
{
  fcgi_op_t *op = (fcgi_op_t *)p;
  if (op->client) {
    gw_fcgi_cancel(op->client);
    gw_balancer_walk_drop(&op->walk);
  }
  op_free(op);
}

static void on_client_drain(gw_request_t *req)
{
  fcgi_op_t *op = req->handler.drain_arg;
  if (op->client) gw_fcgi_resume(op->client);
}

/* The head goes out (through the location's filters: request.c). */
static void begin_stream(fcgi_op_t *op, long long length)
{
  gw_request_t *req = op->req;
  op->discard = req->in.head || gw_request_bodyless(req);
  req->handler.on_drain = on_client_drain;
  req->handler.drain_arg = op;
  op->streaming = 1;
  gw_request_stream_begin(req, op->discard && !req->in.head ? 0 : length);
}

static void on_head(gw_fcgi_response_t *res, void *arg)
{
  fcgi_op_t *op = arg;
  gw_request_t *req = op->req;
  req->upstream.status = res->status;
  req->upstream.reused = res->reused;
  req->resp.status = res->status;
  gw_request_head_replace(req);
  long long length = -1;
  for (size_t i = 0; i < res->headers.count; i++) {
    const gw_header_t *h = &res->headers.items[i];
    if (h->name_len == 14 && strcasecmp(h->name, "content-length") == 0) { /* the gateway frames the body */
      char *end;
      long long v = strtoll(h->value, &end, 10);
      if (end != h->value && *end == '\0' && v >= 0 && h->value[0] >= '0' && h->value[0] <= '9') length = v;
      continue;
    }
    if (gw_header_is_hop_by_hop(h->name, h->name_len)) continue;
    gw_headers_add(&req->resp.headers, h->name, h->name_len, h->value, h->value_len);
  }
  req->resp.inline_body = NULL;
  req->resp.text_plain = 0;
  op->discard = req->in.head || gw_request_bodyless(req);
  op->left = length;
  if (op->collecting) return;
  if (req->in.head) req->resp.head_length = length;
  begin_stream(op, length);
}

static void on_body(const char *data, size_t len, void *arg)
{
  fcgi_op_t *op = arg;
  gw_request_t *req = op->req;
  if (op->discard || op->overflow) return;
  if (op->left >= 0) {
    if ((unsigned long long)len > (unsigned long long)op->left) {
      op->overflow = 1; /* the script sent more than it announced: cut */
      len = (size_t)op->left;
    }
    op->left -= (long long)len;
  }
  if (len == 0) return;
  if (op->collecting) {
    if (evbuffer_get_length(req->resp.body) + len > MAX_COLLECTED) {
      op->overflow = 2;
      return;
    }
    evbuffer_add(req->resp.body, data, len);
    return;
  }
  int full = gw_request_stream_data(req, data, len);
  if (full < 0) return; /* the client left: op was freed with the request */
  if (full) gw_fcgi_pause(op->client);
}

static void on_body_sent(void *arg)
{
  fcgi_op_t *op = arg;
  gw_request_body_taken(op->req);
}

static void on_done(gw_err_t err, void *arg);

static int send_op(fcgi_op_t *op)
{
  gw_request_t *req = op->req;
  const struct sockaddr *addr = (const struct sockaddr *)&op->addr;
  socklen_t addrlen = op->addrlen;
  gw_sockaddr_t un;
  if (op->group) {
    gw_upstream_server_t *s = op->walk.server;
    if (s->unix_path) {
      addrlen = gw_addr_from_unix(s->unix_path, &un);
      addr = &un.sa;
    } else {
      addr = (const struct sockaddr *)&s->addr;
      addrlen = s->addrlen;
    }
    gw_copy_cstr(op->label, sizeof(op->label), s->label);
    gw_balancer_walk_use(&op->walk);
  }
  gw_copy_cstr(req->upstream.addr, sizeof(req->upstream.addr), op->label);
  struct evbuffer *body = op->gathered ? op->gathered : req->in.body;
  int streamed = req->in.body_streaming && !op->gathered;
  size_t blen = streamed ? 0 : evbuffer_get_length(body);
  gw_fcgi_params_t p = {
    .addr = addr,
    .addrlen = addrlen,
    .label = op->label,
    .params = (const unsigned char *)op->params.data,
    .params_len = op->params.len,
    .body = blen ? (const char *)evbuffer_pullup(body, -1) : NULL,
    .body_len = blen,
    .body_source = streamed ? req->in.body : NULL,
    .body_complete = !req->in.body_streaming,
    .on_body_sent = streamed ? on_body_sent : NULL,
    .idempotent = strcmp(req->in.method, "GET") == 0 || strcmp(req->in.method, "HEAD") == 0,
    .connect_timeout_ms = op->group ? op->group->connect_timeout_ms : 0,
    .timeout_ms = op->group ? op->group->timeout_ms : 0,
    .on_head = on_head,
    .on_body = on_body,
  };
  op->sent_ms = gw_now_ms();
  op->client = gw_fcgi_request(worker_pool(req->ctx), &p, on_done, op);
  if (op->client == NULL) gw_balancer_walk_drop(&op->walk);
  return op->client ? 0 : -1;
}

static void on_done(gw_err_t err, void *arg)
{
  fcgi_op_t *op = arg;
  gw_request_t *req = op->req;
  op->client = NULL;
  req->upstream.ms = gw_now_ms() - op->sent_ms;
  int connect_failed = gw_err_is_connect_failure(err.kind);
  gw_balancer_walk_done(&op->walk, connect_failed || gw_err_is_timeout(err.kind));
  gw_upstream_server_t *next;
  if (connect_failed && op->group && !op->streaming && (next = gw_balancer_walk_next(&op->walk)) != NULL) {
    gw_log_warn("fastcgi %s %.*s: %s: %s, trying %s", req->in.method, (int)req->in.path_len, req->in.target, op->label, err.msg,
                next->label);
    if (send_op(op) == 0) return;
  }
  gw_request_pending_remove(&op->pending);
  if (err.kind) {
    gw_stats_self->upstream_failures++;
    gw_log_error("fastcgi %s %.*s to %s: %s%s", req->in.method, (int)req->in.path_len, req->in.target, op->label, err.msg,
                 op->streaming ? " after the response began; closing the client connection" : "");
  }
  int streaming = op->streaming;
  int complete = err.kind == GW_OK && !op->overflow && (op->left <= 0 || op->discard);
  if (err.kind == GW_OK && !complete)
    gw_log_error("fastcgi %s %.*s to %s: the body does not match its Content-Length%s", req->in.method, (int)req->in.path_len,
                 req->in.target, op->label, streaming ? "; closing the client connection" : "");
  op_free(op);
  if (streaming) {
    gw_request_stream_end(req, complete);
    return;
  }
  if (err.kind || !complete) {
    gw_request_simple_response(req, err.kind ? gw_err_status(err.kind) : 502, NULL);
    gw_request_finish(req);
    return;
  }
  gw_request_finish(req);
}

/* The group called name, or NULL. */
static gw_upstream_group_t *find_group(const gw_config_t *cfg, const char *name)
{
  for (size_t i = 0; i < cfg->ngroups; i++)
    if (strcmp(cfg->groups[i].name, name) == 0) return &cfg->groups[i];
  return NULL;
}

/* A single address target: its length; 0 for a group name or a bad one. */
static socklen_t target_addr(const char *target, gw_sockaddr_t *out)
{
  int n = gw_fcgi_target_parse(target, out);
  return n > 0 ? (socklen_t)n : 0;
}

int gw_fastcgi_target_ok(const char *target)
{
  gw_sockaddr_t a;
  return gw_fcgi_target_parse(target, &a) < 0 ? -1 : 0;
}

static void fail_now(gw_request_t *req, int status)
{
  gw_request_simple_response(req, status, NULL);
  gw_request_finish(req);
}

/* A streamed request body: more arrived, or its end. */
static void on_stream_more(gw_request_t *req)
{
  fcgi_op_t *op = req->handler.body_arg;
  if (op->client) gw_fcgi_body_more(op->client, !req->in.body_streaming);
}

/* Builds the params and sends; answers 500 when that cannot start. */
static void start_op(fcgi_op_t *op)
{
  gw_request_t *req = op->req;
  long long clen = op->gathered            ? (long long)evbuffer_get_length(op->gathered)
                   : req->in.body_streaming ? req->in.body_length
                                         : (long long)evbuffer_get_length(req->in.body);
  gw_buf_reserve(&op->params, 1024); /* the usual params in one block, not doubled into */
  build_params(&op->params, req, op, clen);
  if (req->in.body_streaming && !op->gathered) {
    req->handler.on_body_more = on_stream_more;
    req->handler.body_arg = op;
  }
  if (send_op(op) < 0) {
    gw_request_pending_remove(&op->pending);
    op_free(op);
    fail_now(req, 500);
  }
}

/* A chunked request body: gathered whole (taking it frees the client's
 * side to read more; max_body bounds it), then the request starts. */
static void on_gather_more(gw_request_t *req)
{
  fcgi_op_t *op = req->handler.body_arg;
  evbuffer_add_buffer(op->gathered, req->in.body);
  gw_request_body_taken(req);
  if (req->in.body_streaming) return;
  req->handler.on_body_more = NULL;
  req->handler.body_arg = NULL;
  start_op(op);
}

/* split_path_info: the path percent-decoded and normalised (nginx's $uri)
 * into op->uri, then split by the pattern's two groups into the script and
 * PATH_INFO; without a match (or without group 2) the whole path is the
 * script, as nginx. Returns 0, -1 out of memory, -2 for a path that does
 * not decode (a bad %XX, %00, %2F, a ".." above the root: 400). */
static int split_path(fcgi_op_t *op, const gw_request_t *req, const gw_regex_t *re)
{
  size_t cap = req->in.path_len + 2;
  if ((op->uri = malloc(cap)) == NULL) return -1;
  ssize_t n = gw_uri_path_decode(req->in.target, req->in.path_len, op->uri, cap);
  if (n < 0) return -2;
  op->script_off = 0;
  op->script_len = (size_t)n;
  const size_t *ov;
  int rc = gw_regex_exec(re, op->uri, (size_t)n, 0, 0, &ov);
  if (rc < 0)
    gw_log_warn("fastcgi %s %.*s: split_path_info: %s; the whole path is the script", req->in.method, (int)req->in.path_len,
                req->in.target, gw_regex_last_error());
  int groups = gw_regex_groups(re); /* two, as the config and fastcgi_pass check */
  if (rc == 1 && groups >= 1 && ov[2] != GW_RE_UNSET) {
    op->script_off = ov[2];
    op->script_len = ov[3] - ov[2];
    if (groups >= 2 && ov[4] != GW_RE_UNSET) {
      op->info_off = ov[4];
      op->info_len = ov[5] - ov[4];
    }
  }
  return 0;
}

static void start(gw_request_t *req, const char *target, const fastcgi_handler_t *h, const char *script,
                  const gw_regex_t *split)
{
  fcgi_op_t *op = calloc(1, sizeof(*op));
  if (op == NULL) {
    fail_now(req, 500);
    return;
  }
  op->req = req;
  op->left = -1;
  op->h = h;
  op->collecting = !gw_request_can_stream(req);
  op->addrlen = target_addr(target, &op->addr);
  if (script && (op->script = strdup(script)) == NULL) {
    op_free(op);
    fail_now(req, 500);
    return;
  }
  int split_rc = split ? split_path(op, req, split) : 0;
  if (split_rc < 0) {
    op_free(op);
    fail_now(req, split_rc == -2 ? 400 : 500);
    return;
  }
  if (op->addrlen) {
    gw_copy_cstr(op->label, sizeof(op->label), target);
  } else {
    op->group = find_group(req->ctx->config, target);
    if (op->group == NULL || !op->group->fastcgi) {
      gw_log_error("fastcgi %s: not a FastCGI upstream group or address", target);
      op_free(op);
      fail_now(req, 502);
      return;
    }
    if (gw_balancer_walk_first(&op->walk, op->group, NULL) == NULL) {
      gw_log_error("fastcgi %s: no live upstreams", target);
      op_free(op);
      fail_now(req, 502);
      return;
    }
  }
  gw_request_pending_add(req, &op->pending, cancel_op);
  if (req->in.body_streaming && req->in.body_length < 0) {
    op->gathered = evbuffer_new();
    if (op->gathered == NULL) {
      gw_request_pending_remove(&op->pending);
      op_free(op);
      fail_now(req, 500);
      return;
    }
    req->handler.on_body_more = on_gather_more;
    req->handler.body_arg = op;
    on_gather_more(req); /* what arrived with the head */
    return;
  }
  start_op(op);
}

void gw_fastcgi_start(gw_request_t *req, const char *target, const char *script_filename, const gw_regex_t *split)
{
  const fastcgi_handler_t *h = NULL;
  if (req->handler.location && req->handler.location->handler && strcmp(req->handler.location->handler->name, "fastcgi") == 0)
    h = (const fastcgi_handler_t *)req->handler.location->handler;
  if (gw_fastcgi_target_ok(target) < 0) {
    gw_log_error("fastcgi_pass %s: not a FastCGI target (\"unix:/path\", \"IP:port\" or a group)", target);
    fail_now(req, 502);
    return;
  }
  start(req, target, h, script_filename ? script_filename : h ? h->script_filename : NULL,
        split ? split : h ? h->split : NULL);
}

/* ---- the location handler ---- */

static void on_req(gw_handler_t *self, gw_request_t *req)
{
  fastcgi_handler_t *h = (fastcgi_handler_t *)self;
  start(req, h->target, h, h->script_filename, h->split);
}

static void dispose(gw_handler_t *self)
{
  fastcgi_handler_t *h = (fastcgi_handler_t *)self;
  free(h->target);
  free(h->script_filename);
  gw_regex_unref(h->split);
  for (size_t i = 0; h->params && i < 2 * h->nparams; i++) free(h->params[i]);
  free(h->params);
  free(h);
}

gw_handler_t *gw_fastcgi_handler_new(const char *target, const char *script_filename, gw_regex_t *split,
                                     const char *const *params, size_t nparams)
{
  if (gw_fastcgi_target_ok(target) < 0) return NULL;
  fastcgi_handler_t *h = calloc(1, sizeof(*h));
  if (h == NULL) return NULL;
  h->super = (gw_handler_t){.name = "fastcgi", .on_req = on_req, .dispose = dispose};
  h->target = strdup(target);
  h->split = split ? gw_regex_ref(split) : NULL;
  int oom = h->target == NULL;
  if (script_filename && !oom) oom = (h->script_filename = strdup(script_filename)) == NULL;
  if (nparams && !oom) {
    h->params = calloc(2 * nparams, sizeof(char *));
    oom = h->params == NULL;
    for (size_t i = 0; !oom && i < 2 * nparams; i++)
      oom = (h->params[i] = strdup(params[i])) == NULL;
    if (!oom) h->nparams = nparams;
  }
  if (oom) {
    h->nparams = nparams; /* dispose frees what was copied (calloc'd NULLs) */
    dispose(&h->super);
    return NULL;
  }
  return &h->super;
}
