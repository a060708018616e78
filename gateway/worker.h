/* worker.h - one worker process: its event loop, its VM, its connections. */
#ifndef GW_WORKER_H
#define GW_WORKER_H

#include <event2/event.h>
#include <mruby.h>

#include "config.h"
#include "request.h"
#include "resolver.h"
#include "upstream.h"

struct gw_worker_s {
  struct event_base *base;
  mrb_state *mrb;           /* inherited from the master's config VM */
  gw_config_t *config;
  gw_server_t *server;      /* the server this worker serves */
  int index;                /* 0..workers-1 within its server */

  gw_request_t *current;    /* request whose fiber is running right now, or NULL */
  mrb_value roots;          /* Array: GC roots of parked fibers, one slot per request */
  int *free_slots;          /* free indexes of `roots` (stack) */
  int nfree, free_cap;
  struct RProc *runners[2]; /* Gateway::RUNNER, FILTER_RUNNER: the bodies of handler
                               (and header filter) and body-filter fibers (gw_fiber_kind_t) */
  mrb_value idle_fibers[2]; /* Arrays: fibers of each kind waiting for their next job */
  struct RProc *resumers[3]; /* Gateway::RESUME[1], [2]: resume a fiber with 1 or 2 values */
  int job_done;             /* the fiber just resumed reported its job done */
  int will_wait;            /* ... or called an async primitive, which parks it */
  struct RClass *request_class;
  struct RClass *fiber_class;
  mrb_sym sym_new;

  gw_upstream_pool_t *pool; /* keep-alive connections to upstreams */
  gw_resolver_t *resolver;  /* c-ares on this loop; NULL if it could not start */

  struct event *listen_ev;
  struct event *accept_pause_ev; /* re-enables accept after EMFILE */
  struct event *stats_ev;   /* publishes the gauges every second */
  struct event *gc_ev;      /* a full GC, after many aborted fibers (handler.c) */
  int dropped_fibers;
  struct event *signal_evs[4];
  gw_conn_t *conns;         /* every open client connection (doubly linked) */
  size_t nconns;
  int stopping;             /* graceful stop: no accepting, exit when idle */

  char date[40];            /* "Date: ...\r\n" cached per second (response.c) */
  time_t date_time;
};

typedef enum { GW_FIBER_HANDLER, GW_FIBER_FILTER } gw_fiber_kind_t;

/* Idle fibers kept per kind for reuse, and the largest stacks (VM values,
 * call frames) a fiber may have grown and still be kept (handler.c). */
#define GW_IDLE_FIBERS 128
#define GW_IDLE_FIBER_STACK 1024
#define GW_IDLE_FIBER_FRAMES 64

/* Aborted requests whose parked fibers trigger one full GC (see handler.c). */
#define GW_DROPPED_FIBERS_GC 256

/* The worker of this process (NULL in the master). */
extern gw_worker_t *gw_worker;

/* Runs the loop of a freshly forked worker; never returns. */
void gw_worker_run(gw_config_t *cfg, gw_server_t *server, int index) __attribute__((noreturn));

/* Refreshes this worker's gauges in the shared stats table. */
void gw_worker_publish_stats(gw_worker_t *w);

/* Called by a connection when it closes, to let a stopping worker exit. */
void gw_worker_conn_closed(gw_worker_t *w);

#endif
