/* trace.h - trace mode (--trace or GATEWAY_TRACE=1): each request's route,
 * and each fiber start, suspend and resume, logged with the event behind it
 * and timestamps; and the same events recorded for one request and its
 * sub-requests (the dashboard's waterfall). Implemented in request.c. */
#ifndef GW_TRACE_H
#define GW_TRACE_H

typedef struct gw_request_s gw_request_t;
struct evbuffer;

/* Nonzero while anything traces: GW_TRACE_LOG (--trace), plus
 * GW_TRACE_RECORD while a recording runs. Callers test it before building
 * an event. */
extern int gw_trace;
#define GW_TRACE_LOG 1
#define GW_TRACE_RECORD 2

/* Records the events of req and of the sub-requests it makes into out as
 * JSON objects ({"t":µs since now,"req":id,"depth":n,"path":"...","event":"..."},
 * comma-separated) until gw_trace_record_end(); out must outlive them. */
void gw_trace_record(gw_request_t *req, struct evbuffer *out);
void gw_trace_record_end(void);

/* Numbers the request, notes its start, logs where it was routed. */
void gw_trace_start(gw_request_t *req);
/* Logs one line for req: "trace #ID METHOD PATH +T ms: event". */
void gw_trace_event(gw_request_t *req, const char *event);
/* Records what the fiber is about to wait for (printf-style), for the trace. */
void gw_trace_wait(gw_request_t *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
