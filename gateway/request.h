/* request.h - one HTTP request and its response, from parse to last byte.
 *
 * A client request lives inside its connection (gw_conn_t) and is reused for
 * every request on it; a sub-request is allocated by its parent. Everything a
 * request waits on (timer, sub-request, upstream exchange) is registered in
 * its `pending` list, so gw_request_abort() can cancel it all when the client
 * goes away. */
#ifndef GW_REQUEST_H
#define GW_REQUEST_H

#include <netinet/in.h>
#include <event2/buffer.h>
#include <mruby.h>

#include "config.h"
#include "headers.h"

typedef struct gw_request_s gw_request_t;
typedef struct gw_conn_s gw_conn_t;
typedef struct gw_worker_s gw_worker_t;

/* Something a request waits for. Embedded in the operation's own struct. */
typedef struct gw_pending_s {
  struct gw_pending_s *next, *prev;
  /* Stops the operation and frees the struct that embeds this; no callback
   * into the request happens afterwards. */
  void (*cancel)(struct gw_pending_s *p);
} gw_pending_t;

struct gw_request_s {
  gw_worker_t *worker;
  const gw_server_t *server;
  gw_conn_t *conn;          /* client connection; NULL for a sub-request */
  gw_request_t *parent;     /* sub-request: who waits for it; else NULL */
  int depth;                /* sub-request nesting: 0 for a client request */

  /* -- as received -- */
  const char *method;       /* static name ("GET"), never freed */
  int method_id;            /* llhttp_method_t */
  char *target;             /* owned, NUL-terminated request-target; buffer reused */
  size_t target_len, target_cap;
  size_t path_len;          /* target[0, path_len) is the path; then "?query" */
  int http_minor;           /* 0 or 1 (HTTP/1.x) */
  int keepalive;            /* the client allows another request on this connection */
  int head;                 /* HEAD: no response body */
  gw_headers_t headers;     /* owned */
  struct evbuffer *body;    /* owned request body (streamed: what arrived and was not taken yet) */
  /* A body streamed to proxy_pass: the request starts once its head is read
   * and the body keeps arriving into `body` while it runs. */
  int body_streaming;       /* more of the body is to come from the client */
  long long body_length;    /* its Content-Length, or -1: chunked */
  /* Set by the consumer: `body` grew, or the body ended (body_streaming 0). */
  void (*on_body_more)(gw_request_t *req);
  void *body_arg;
  char remote_addr[INET6_ADDRSTRLEN];

  /* -- what proxy_pass did, for the access log (upstream_status 0: none) -- */
  char upstream_addr[320];
  int upstream_status;
  double upstream_ms;
  int upstream_reused;      /* the upstream connection came from the pool */
  double start_ms;          /* CLOCK_MONOTONIC ms when the request head was complete */

  /* -- the response -- */
  int status;               /* 0: not set yet */
  gw_headers_t resp_headers;/* owned, validated when set */
  struct evbuffer *resp_body;/* owned */
  int has_output;           /* a script wrote output */
  char *proxy_url;          /* owned: req.proxy_pass(url) from the handler, or NULL */
  char *proxy_key;          /* owned: its hash_key:, or NULL */
  const char *inline_body;  /* when set, the body instead of resp_body: borrowed
                               from a handler's String result until on_finish returns */
  size_t inline_len;
  int text_plain;           /* send Content-Type: text/plain; charset=utf-8 */
  long long head_length;    /* HEAD: Content-Length to announce (an upstream's); -1: the body's */

  /* -- handler -- */
  const gw_location_t *location;
  mrb_value rb_req;         /* Gateway::Request wrapping this, or nil; its pointer is
                               cleared when this request finishes */
  int root_slot;            /* slot in the worker's GC root array holding the fiber; -1: none */
  int failed;               /* the handler raised; the response is 500 */
  int running;              /* between start and finish */
  int filtering;            /* the fiber runs the location's body filter */
  int streaming;            /* its head is sent; the body follows in pieces */
  /* A header filter runs: called (instead of finishing) when it is done. */
  void (*after_filter)(gw_request_t *req);
  void *filter_arg;
  /* Set by a streaming producer: called when the client's output drained
   * below the low water mark after gw_request_stream_data() returned 1. */
  void (*on_drain)(gw_request_t *req);
  void *drain_arg;
  /* trace mode (--trace): what the parked fiber waits for, and when it began */
  unsigned long id;
  double t_start_ms;
  char waiting_for[96];
  gw_pending_t pending;     /* list head of what this request waits for */

  /* Called once when the response is complete (client: write it; sub-request:
   * wake the parent). May free the request. */
  void (*on_finish)(gw_request_t *req);
  void *finish_arg;
};

void gw_request_init(gw_request_t *req, gw_worker_t *w, const gw_server_t *server);
/* Resets per-request state, keeping buffers for the next request. */
void gw_request_reset(gw_request_t *req);
/* Frees everything the request owns (not the struct itself). */
void gw_request_dispose(gw_request_t *req);

/* Routes and runs the request (handler fiber or proxy). on_finish is called
 * when the response is complete, possibly before this returns. */
void gw_request_start(gw_request_t *req);

/* Completes the response with whatever status/headers/body are set. */
void gw_request_finish(gw_request_t *req);

/* Sets a complete response in one go (error pages, 404, 502...). */
void gw_request_simple_response(gw_request_t *req, int status, const char *body);

/* The client went away (or the worker stops): cancels every pending
 * operation; no fiber is resumed afterwards; on_finish is not called. */
void gw_request_abort(gw_request_t *req);

/* Streaming a response to the client instead of finishing it whole (client
 * requests only: gw_request_can_stream()). begin sends the head (status and
 * resp_headers as set) announcing content_length, or -1 for unknown; data
 * returns 0, 1 (pause until on_drain) or -1 (the client is gone and the
 * request was aborted: touch nothing of it); end finishes the request,
 * complete or cut short. */
int gw_request_can_stream(const gw_request_t *req);
void gw_request_stream_begin(gw_request_t *req, long long content_length);
int gw_request_stream_data(gw_request_t *req, const char *data, size_t len);
void gw_request_stream_end(gw_request_t *req, int complete);

/* A streamed request body: the consumer took bytes out of req->body, so the
 * connection may read more (back-pressure). */
void gw_request_body_taken(gw_request_t *req);

void gw_request_pending_add(gw_request_t *req, gw_pending_t *p, void (*cancel)(gw_pending_t *));
void gw_request_pending_remove(gw_pending_t *p);

/* Response helpers used by the Ruby bridge. Return 0, or -1 for a field that
 * may not be sent (CR/LF/NUL, bad name). */
int gw_request_set_header(gw_request_t *req, const char *name, size_t nlen, const char *value, size_t vlen);

/* Sets path_len: target[0, path_len) is the path, before any '?'. */
void gw_request_split_target(gw_request_t *req);

/* Path and query views. */
static inline size_t gw_request_query_len(const gw_request_t *r)
{
  return r->target_len > r->path_len ? r->target_len - r->path_len - 1 : 0;
}

#endif
