/* sleep.c - Async.sleep: a timer on the worker's loop that resumes the
 * handler's fiber, never early. */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include <mruby.h>
#include <event2/event_struct.h>

#include "async.h"
#include "gw_mruby.h"
#include "timeutil.h"

/* A year: long enough for anything real, short enough for a timeval. */
#define GW_MAX_SLEEP_S (365 * 24 * 3600)

typedef struct {
  gw_pending_t pending;
  struct event ev;
  gw_request_t *req;
  struct timespec deadline; /* CLOCK_MONOTONIC */
} sleep_op_t;

static void sleep_cancel(gw_pending_t *p)
{
  sleep_op_t *op = (sleep_op_t *)p;
  gw_stats_self->timers_pending--;
  event_del(&op->ev);
  free(op);
}

static void arm(sleep_op_t *op, double seconds)
{
  struct timeval tv = gw_timeval_from_s(seconds);
  evtimer_add(&op->ev, &tv);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
  sleep_op_t *op = arg;
  (void)fd;
  (void)what;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double left = (double)(op->deadline.tv_sec - now.tv_sec) + (double)(op->deadline.tv_nsec - now.tv_nsec) / 1e9;
  if (left > 0) { /* never wake early, whatever clock libevent used */
    arm(op, left + 1e-6);
    return;
  }
  gw_request_t *req = op->req;
  gw_request_pending_remove(&op->pending);
  free(op);
  gw_stats_self->timers_pending--;
  gw_fiber_resume(req, mrb_nil_value());
}

/* Async._gw_sleep(seconds): arms the timer and parks the fiber (as
 * Fiber.yield does, in the same call); returns what the fiber is resumed
 * with (nil when the timer fired). */
static mrb_value async_sleep(mrb_state *mrb, mrb_value self)
{
  mrb_float seconds = mrb_as_float(mrb, mrb_get_arg1(mrb));
  (void)self;
  if (!(seconds >= 0) || seconds > GW_MAX_SLEEP_S)
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "Async.sleep: seconds must be a number from 0 to %d", GW_MAX_SLEEP_S);
  gw_async_check_yieldable(mrb, "Async.sleep");
  gw_request_t *req = gw_mrb_current_request(mrb);
  sleep_op_t *op = calloc(1, sizeof(*op));
  if (op == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  op->req = req;
  clock_gettime(CLOCK_MONOTONIC, &op->deadline);
  double ns = (double)op->deadline.tv_nsec + seconds * 1e9;
  op->deadline.tv_sec += (time_t)(ns / 1e9);
  op->deadline.tv_nsec = (long)fmod(ns, 1e9);
  evtimer_assign(&op->ev, gw_mrb_event_base(), on_wake, op);
  arm(op, seconds);
  gw_request_pending_add(req, &op->pending, sleep_cancel);
  gw_stats_self->timers_pending++;
  gw_trace_wait(req, "Async.sleep(%.6f) timer", seconds);
  return mrb_fiber_yield(mrb, 0, NULL);
}

void gw_async_sleep_init(mrb_state *mrb, struct RClass *async)
{
  mrb_define_module_function(mrb, async, "_gw_sleep", async_sleep, MRB_ARGS_REQ(1));
}
