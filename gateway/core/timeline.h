/* timeline.h - the event loop's timeline: what each worker's thread was
 * doing over the last seconds, for the dashboard's strip. Four states:
 *
 *   C        running the core's C (parsing, writing, callbacks)
 *   IDLE     waiting in epoll_wait for something to happen
 *   FIBER    running a request's Ruby fiber (which request)
 *   BLOCKED  inside a system call that blocks the loop on purpose
 *            (HttpRequest's connect/send/recv)
 *
 * Recorded cheaply: a timestamp at each edge (epoll_wait's entry and return,
 * a fiber's resume and return, a blocking call's start and end) into a fixed
 * ring per worker in memory shared with the master, so any worker's
 * dashboard shows all of them. Only while a dashboard page watches: its poll
 * calls gw_timeline_watch(), and each worker stops recording
 * GW_TIMELINE_LINGER_S after the last one (gw_timeline_tick, every second).
 * With nobody watching, an edge costs a store and a branch. */
#ifndef GW_TIMELINE_H
#define GW_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;

enum { GW_TL_C = 0, GW_TL_IDLE = 1, GW_TL_FIBER = 2, GW_TL_BLOCKED = 3 };

#define GW_TIMELINE_SLOTS 64         /* workers with a ring: the first stats slots */
#define GW_TIMELINE_EVENTS 65536     /* per worker (a power of two): ~2 s at 5,000 req/s */
#define GW_TIMELINE_LINGER_S 5       /* recording goes on this long after the last poll */
#define GW_TIMELINE_MAX_MS 10000     /* the longest window a page may ask for */

/* Nonzero while this worker records. */
extern int gw_timeline_on;
/* The state this worker's thread is in: state << 30 | request id. */
extern uint32_t gw_timeline_now;

void gw_timeline_record(uint32_t word);

/* Enters a state (for request id, 0: none); returns the one it left, for
 * gw_timeline_leave (so that a blocking call inside a fiber returns to it). */
static inline uint32_t gw_timeline_enter(int state, unsigned long id)
{
  uint32_t prev = gw_timeline_now;
  gw_timeline_now = (uint32_t)state << 30 | (uint32_t)(id & 0x3fffffff);
  if (gw_timeline_on) gw_timeline_record(gw_timeline_now);
  return prev;
}

static inline void gw_timeline_leave(uint32_t prev)
{
  gw_timeline_now = prev;
  if (gw_timeline_on) gw_timeline_record(prev);
}

/* Names request id for the page ("GET /path"); call when recording. */
void gw_timeline_name(unsigned long id, const char *method, const char *path, size_t len);

/* Maps the rings (master, once, before any fork). Returns 0 or -1. */
int gw_timeline_init(void);
/* Worker start: takes the ring of stats slot `slot` (none past the first
 * GW_TIMELINE_SLOTS: that worker records nothing). */
void gw_timeline_attach(int slot);
/* A dashboard page polled: every worker records for the next
 * GW_TIMELINE_LINGER_S seconds (this one at once). */
void gw_timeline_watch(void);
/* Each second in each worker: starts or stops recording. */
void gw_timeline_tick(void);

/* Every live worker's last window_ms as JSON into out, cut in cols columns:
 * each column's share of time (per mille) in IDLE, C, FIBER and BLOCKED, and
 * the request that ran (or blocked) longest in it; with the names of those
 * requests. */
void gw_timeline_render_json(struct evbuffer *out, int window_ms, int cols);

#endif
