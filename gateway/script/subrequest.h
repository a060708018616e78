/* subrequest.h - a request made by a handler: an internal location or a URL. */
#ifndef GW_SUBREQUEST_H
#define GW_SUBREQUEST_H

#include "error.h"
#include "request.h"

typedef struct gw_subreq_s gw_subreq_t;

typedef struct {
  const char *method;   /* static or outliving the call: "GET" */
  const char *target;   /* "/path?query" (internal) or "http://host:port/path"; copied */
  const gw_headers_t *headers; /* copied; may be NULL */
  const char *body;     /* copied */
  size_t body_len;
  int timeout_ms;       /* 0: none beyond the upstream client's own */
} gw_subreq_params_t;

/* The result, exactly once (unless cancelled by a parent abort). status,
 * headers and body are valid during the call; body may be drained. err.kind
 * is GW_OK, or the failure (the upstream's, or GW_ERR_TIMEOUT "sub-request
 * timed out"; gw_err_is_timeout tells timeouts from other errors) with its
 * static message. */
typedef void (*gw_subreq_done_cb)(int status, gw_headers_t *headers, struct evbuffer *body, gw_err_t err,
                                  void *arg);

/* Starts a sub-request for parent; NULL on a bad target or out of memory.
 * A missing internal location gives a 404 result, not an error. */
gw_subreq_t *gw_subrequest_start(gw_request_t *parent, const gw_subreq_params_t *p, gw_subreq_done_cb cb, void *arg);

/* Stops it and frees everything; no callback afterwards. Not from inside the
 * done callback (the sub-request is freed right after it returns). */
void gw_subrequest_cancel(gw_subreq_t *s);

#endif
