/* trace.h - trace mode (--trace or GATEWAY_TRACE=1): each request's route,
 * and each fiber start, suspend and resume, logged with the event behind it
 * and timestamps. Implemented in request.c. */
#ifndef GW_TRACE_H
#define GW_TRACE_H

typedef struct gw_request_s gw_request_t;

extern int gw_trace;

/* Numbers the request, notes its start, logs where it was routed. */
void gw_trace_start(gw_request_t *req);
/* Logs one line for req: "trace #ID METHOD PATH +T ms: event". */
void gw_trace_event(gw_request_t *req, const char *event);
/* Records what the fiber is about to wait for (printf-style), for the trace. */
void gw_trace_wait(gw_request_t *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
