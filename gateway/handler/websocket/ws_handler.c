/* ws_handler.c - a `websocket:` location (see ws_handler.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "websocket.h"
#include "ws_frame.h"
#include "ws_handler.h"

typedef struct {
  gw_handler_t super;
  gw_handler_t *script;     /* owned: runs the Ruby block for the detached request */
  size_t max_message;
  int timeout_ms;
  char **protocols;         /* owned: the subprotocols offered, in the server's order */
  size_t nprotocols;
} ws_handler_t;

/* A scripted WebSocket: the request its handler fiber runs for, detached
 * from the client connection (whose socket went to `ws`). */
typedef struct session_s {
  gw_request_t req;         /* proto_ctx: this session */
  gw_ws_t *ws;              /* released when the handler ends */
  char remote_addr[48];
  gw_tls_info_t tls_info;   /* a copy of the connection's (req.scheme, req.tls_*), which goes with the socket */
  char *server_name;        /* owned: its SNI name, or NULL */
  struct session_s *next, *prev; /* every session, for gw_ws_handler_close_all */
} session_t;

static session_t *sessions;

static void unlink_session(session_t *s)
{
  if (s->prev) s->prev->next = s->next;
  else if (sessions == s) sessions = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
}

static void session_free(evutil_socket_t fd, short what, void *arg)
{
  session_t *s = arg;
  (void)fd;
  (void)what;
  unlink_session(s);
  gw_request_dispose(&s->req); /* aborts it first if it still runs */
  free(s->server_name);
  free(s);
}

/* The handler returned (or raised: status 500, already logged): the
 * connection closes with 1000 or 1011, and the session goes from a fresh
 * loop event (the fiber's code is still on the stack). */
static void session_done(gw_request_t *req)
{
  session_t *s = req->proto_ctx;
  if (s->ws) {
    if (req->resp.status >= 500) gw_ws_close(s->ws, GW_WS_INTERNAL_ERROR, "internal error", 14);
    gw_ws_release(s->ws);
    s->ws = NULL;
  }
  unlink_session(s); /* only the event below frees it now */
  if (event_base_once(req->ctx->base, -1, EV_TIMEOUT, session_free, s, NULL) != 0)
    gw_log_error("websocket %.*s: cannot free its session (out of memory)", (int)req->in.path_len, req->in.target);
}

static const gw_protocol_t session_protocol = {.send = session_done};

gw_ws_t *gw_ws_handler_socket(const gw_request_t *req)
{
  return req->proto == &session_protocol ? ((session_t *)req->proto_ctx)->ws : NULL;
}

static void refuse(gw_request_t *req, int status, const char *why)
{
  gw_request_simple_response(req, status, why);
  if (status == 426) {
    gw_request_set_header(req, "Upgrade", 7, "websocket", 9);
    gw_request_set_header(req, "Sec-WebSocket-Version", 21, "13", 2);
  }
  gw_request_finish(req);
}

/* The first subprotocol of the client's list (its preference) the location offers. */
static const char *choose_protocol(const ws_handler_t *h, const gw_request_t *req)
{
  const gw_header_t *offered = gw_headers_find((gw_headers_t *)&req->in.headers, "sec-websocket-protocol");
  if (offered == NULL || h->nprotocols == 0) return NULL;
  const char *p = offered->value;
  while (*p) {
    while (*p == ' ' || *p == ',' || *p == '\t') p++;
    const char *e = p;
    while (*e && *e != ',' && *e != ' ' && *e != '\t') e++;
    for (size_t i = 0; i < h->nprotocols; i++)
      if (strlen(h->protocols[i]) == (size_t)(e - p) && strncmp(h->protocols[i], p, (size_t)(e - p)) == 0)
        return h->protocols[i];
    while (*e && *e != ',') e++;
    p = e;
  }
  return NULL;
}

/* A detached copy of what the handler may read of the request. */
static session_t *session_new(const gw_request_t *req)
{
  session_t *s = calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  gw_request_init(&s->req, req->ctx, req->server, &session_protocol, s);
  gw_request_t *r = &s->req;
  r->in.method = req->in.method;
  r->in.method_id = req->in.method_id;
  r->in.http_major = req->in.http_major == 2 ? 2 : 1;
  r->in.http_minor = 1;
  r->in.websocket_connect = req->in.websocket_connect;
  r->handler.location = req->handler.location;
  r->client.fd = -1;
  r->client.remote_port = req->client.remote_port;
  r->in.start_ms = req->in.start_ms;
  snprintf(s->remote_addr, sizeof(s->remote_addr), "%s", req->client.remote_addr ? req->client.remote_addr : "-");
  r->client.remote_addr = s->remote_addr;
  if (req->client.tls) { /* OpenSSL's protocol and cipher names are static; the SNI name is the connection's */
    s->tls_info = *req->client.tls;
    s->server_name = req->client.tls->server_name ? strdup(req->client.tls->server_name) : NULL;
    s->tls_info.server_name = s->server_name;
    r->client.tls = &s->tls_info;
  }
  if (gw_request_set_target(r, req->in.target, req->in.target_len) != 0 || gw_headers_copy(&r->in.headers, &req->in.headers) != 0) {
    gw_request_dispose(r);
    free(s);
    return NULL;
  }
  r->handler.target_changed = 0;
  return s;
}

static void on_req(gw_handler_t *self, gw_request_t *req)
{
  ws_handler_t *h = (ws_handler_t *)self;
  gw_headers_t *hs = &req->in.headers;
  const gw_header_t *key = gw_headers_find(hs, "sec-websocket-key");
  const gw_header_t *version = gw_headers_find(hs, "sec-websocket-version");
  /* HTTP/2 (RFC 8441): the extended CONNECT is the handshake; no Upgrade,
   * Connection or Sec-WebSocket-Key/Accept, the version is still checked. */
  int h2 = req->in.websocket_connect;
  if (h2) {
    if (version == NULL || strcmp(version->value, "13") != 0) {
      refuse(req, 426, "Unsupported Sec-WebSocket-Version: this server speaks version 13.\n");
      return;
    }
  } else if (!gw_headers_have_token(hs, "upgrade", "websocket") ||
             !gw_headers_have_token(hs, "connection", "upgrade")) {
    refuse(req, 426, "This location speaks WebSocket: send an Upgrade: websocket handshake.\n");
    return;
  }
  if (!h2 && (req->in.method == NULL || strcmp(req->in.method, "GET") != 0))
    {
      refuse(req, 400, "A WebSocket handshake is a GET request.\n");
      return;
    }
  if (!h2 && (version == NULL || strcmp(version->value, "13") != 0))
    {
      refuse(req, 426, "Unsupported Sec-WebSocket-Version: this server speaks version 13.\n");
      return;
    }
  if (!h2 && (key == NULL || !gw_ws_key_valid(key->value, key->value_len)))
    {
      refuse(req, 400, "Missing or invalid Sec-WebSocket-Key.\n");
      return;
    }
  if (!gw_request_can_upgrade(req)) /* HTTP/1.0, an HTTP/2 GET */
    {
      refuse(req, 426, "WebSockets need an HTTP/1.1 connection, or HTTP/2's extended CONNECT (RFC 8441).\n");
      return;
    }
  /* The answer; the protocol writes it (HTTP/1.1 a 101, HTTP/2 a 200). */
  const char *protocol = choose_protocol(h, req);
  char accept[29];
  if (key) gw_ws_accept(key->value, key->value_len, accept); /* RFC 8441 has no key */
  req->resp.status = 101;
  int answered = gw_request_set_header(req, "Upgrade", 7, "websocket", 9) == 0 &&
                 (!key || gw_request_set_header(req, "Sec-WebSocket-Accept", 20, accept, 28) == 0) &&
                 (!protocol || gw_request_set_header(req, "Sec-WebSocket-Protocol", 22, protocol, strlen(protocol)) == 0);
  session_t *s = answered ? session_new(req) : NULL;
  struct evbuffer *to_client = evbuffer_new(), *from_client = evbuffer_new();
  if (s == NULL || to_client == NULL || from_client == NULL) {
    gw_log_error("websocket %.*s: out of memory", (int)req->in.path_len, req->in.target);
    if (s) session_free(-1, 0, s);
    if (to_client) evbuffer_free(to_client);
    if (from_client) evbuffer_free(from_client);
    {
      refuse(req, 503, NULL);
      return;
    }
  }
  struct event_base *base = req->ctx->base;
  gw_byte_end_t end;
  int rc = gw_request_upgrade(req, to_client, from_client, &end); /* req is gone */
  gw_ws_t *ws = rc < 0 ? NULL
                       : gw_ws_new(base, &end, s->remote_addr, to_client, from_client, h->max_message,
                                   h->timeout_ms, protocol);
  evbuffer_free(to_client);
  evbuffer_free(from_client);
  if (ws == NULL) {
    if (rc >= 0) gw_log_error("websocket %.*s: out of memory", (int)s->req.in.path_len, s->req.in.target);
    session_free(-1, 0, s);
    return;
  }
  s->ws = ws;
  s->next = sessions;
  if (sessions) sessions->prev = s;
  sessions = s;
  s->req.handler.running = 1;
  h->script->on_req(h->script, &s->req);
}

void gw_ws_handler_close_all(void)
{
  for (int guard = 0; sessions != NULL && guard < 10000000; guard++) {
    session_t *s = sessions; /* its parked fiber is dropped, never resumed */
    if (s->ws) {
      gw_ws_close(s->ws, GW_WS_GOING_AWAY, NULL, 0); /* written by gw_ws_close_all() */
      gw_ws_release(s->ws);
    }
    s->ws = NULL;
    session_free(-1, 0, s);
  }
}

static void dispose(gw_handler_t *self)
{
  ws_handler_t *h = (ws_handler_t *)self;
  if (h->script) h->script->dispose(h->script);
  for (size_t i = 0; i < h->nprotocols; i++) free(h->protocols[i]);
  free(h->protocols);
  free(h);
}

gw_handler_t *gw_ws_handler_new(gw_handler_t *script, size_t max_message, int timeout_ms, const char *const *protocols,
                                size_t nprotocols)
{
  ws_handler_t *h = calloc(1, sizeof(*h));
  if (h == NULL || (nprotocols && (h->protocols = calloc(nprotocols, sizeof(char *))) == NULL)) {
    free(h);
    script->dispose(script);
    return NULL;
  }
  h->super = (gw_handler_t){.name = "websocket", .on_req = on_req, .dispose = dispose};
  h->script = script;
  h->max_message = max_message;
  h->timeout_ms = timeout_ms;
  for (; h->nprotocols < nprotocols; h->nprotocols++) {
    if ((h->protocols[h->nprotocols] = strdup(protocols[h->nprotocols])) == NULL) {
      dispose(&h->super);
      return NULL;
    }
  }
  return &h->super;
}
