/* trace.c - trace mode: one log line per step of a request's life. */
#include <stdarg.h>
#include <stdio.h>

#include "handler.h"
#include "log.h"
#include "trace.h"

int gw_trace;

void gw_trace_wait(gw_request_t *req, const char *fmt, ...)
{
  if (!gw_trace) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(req->waiting_for, sizeof(req->waiting_for), fmt, ap);
  va_end(ap);
}

void gw_trace_event(gw_request_t *req, const char *event)
{
  gw_log_notice("trace #%lu %s %.*s%s +%.3f ms: %s", req->id, req->method, (int)req->path_len, req->target,
                req->parent ? " (sub-request)" : "", gw_now_ms() - req->t_start_ms, event);
}

void gw_trace_start(gw_request_t *req)
{
  static unsigned long next_id;
  req->id = ++next_id;
  req->t_start_ms = gw_now_ms();
  req->waiting_for[0] = '\0';
  char ev[64];
  if (req->location)
    snprintf(ev, sizeof(ev), "routed to a %s location", req->location->handler->name);
  else
    snprintf(ev, sizeof(ev), "no location matches");
  gw_trace_event(req, ev);
}
