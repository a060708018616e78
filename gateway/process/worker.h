/* worker.h - one worker process: its event loop, its VM, its connections.
 * The parts its requests share are its context (context.h). */
#ifndef GW_WORKER_H
#define GW_WORKER_H

#include <stdint.h>

#include <event2/event.h>

#include "config.h"
#include "context.h"

typedef struct gw_worker_s {
  gw_context_t ctx;         /* what the layers below see */
  struct event *listen_ev;
  struct event *accept_pause_ev; /* re-enables accept after EMFILE */
  struct event *stats_ev;   /* publishes the gauges every second */
  struct event *lag_ev;     /* the loop lag probe (every 20 ms) */
  struct event *signal_evs[4];
} gw_worker_t;

/* Runs the loop of a freshly forked worker; never returns. restarts and
 * stalls: how often this (server, index) was replaced so far (the stats). */
void gw_worker_run(gw_config_t *cfg, gw_server_t *server, int index, uint64_t restarts, uint64_t stalls)
    __attribute__((noreturn));

#endif
