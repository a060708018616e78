/* timeline.c - the rings of timeline.h, the edges of the loop, and their
 * rendering as columns.
 *
 * The loop's edges: libevent 2.1 has no prepare/check hooks, and the worker
 * runs it with event_base_dispatch(); the one place every turn of the loop
 * goes through is the backend's epoll_wait. So this file defines epoll_wait:
 * libevent's shared library calls it through its PLT, the executable's
 * definition comes first in the lookup, and it calls the next one (libc's,
 * or a sanitizer's interceptor) via dlsym(RTLD_NEXT). With nobody watching
 * it adds one call and one branch per turn. */
#include <dlfcn.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <time.h>

#include <event2/buffer.h>

#include "json_out.h"
#include "stats.h"
#include "timeline.h"

#define NAMES 256
#define MASK (GW_TIMELINE_EVENTS - 1)
/* Events this close to being overwritten are not read (the writer runs on). */
#define SAFETY 4096

typedef struct {
  int32_t pid;        /* the worker writing it (its stats slot's pid) */
  uint32_t recording; /* 1 while it records */
  uint64_t head;      /* events written; the next goes to head & MASK */
  uint64_t names_head;
  struct {
    uint32_t id;
    char name[60];
  } names[NAMES];
  uint32_t ev[GW_TIMELINE_EVENTS][2]; /* µs (CLOCK_MONOTONIC, mod 2^32), state << 30 | request id */
} ring_t;

typedef struct {
  int64_t watch_until_ms; /* CLOCK_MONOTONIC ms: every worker records until then */
} control_t;

static control_t *control;
static ring_t *rings;
static ring_t *self;

int gw_timeline_on;
uint32_t gw_timeline_now;

static int64_t now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void gw_timeline_record(uint32_t word)
{
  if (self == NULL) return;
  uint64_t h = self->head;
  self->ev[h & MASK][0] = (uint32_t)now_us();
  self->ev[h & MASK][1] = word;
  __atomic_store_n(&self->head, h + 1, __ATOMIC_RELEASE);
}

void gw_timeline_name(unsigned long id, const char *method, const char *path, size_t len)
{
  if (self == NULL) return;
  uint64_t h = self->names_head;
  size_t m = strlen(method);
  char *out = self->names[h % NAMES].name;
  size_t room = sizeof(self->names[0].name) - 1, n = 0;
  for (size_t i = 0; i < m && n < room; i++) out[n++] = method[i];
  if (n < room) out[n++] = ' ';
  for (size_t i = 0; i < len && n < room; i++) out[n++] = path[i];
  out[n] = '\0';
  self->names[h % NAMES].id = (uint32_t)(id & 0x3fffffff);
  __atomic_store_n(&self->names_head, h + 1, __ATOMIC_RELEASE);
}

int gw_timeline_init(void)
{
  if (control) return 0;
  size_t size = 4096 + GW_TIMELINE_SLOTS * sizeof(ring_t);
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -1;
  control = p;
  rings = (ring_t *)((char *)p + 4096);
  return 0;
}

void gw_timeline_attach(int slot)
{
  if (rings == NULL || slot < 0 || slot >= GW_TIMELINE_SLOTS) return;
  self = &rings[slot];
  self->recording = 0;
  self->head = 0;
  self->names_head = 0;
  memset(self->names, 0, sizeof(self->names));
  __atomic_store_n(&self->pid, gw_stats_self->pid, __ATOMIC_RELEASE);
}

void gw_timeline_tick(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  int on = self && control && ms < __atomic_load_n(&control->watch_until_ms, __ATOMIC_ACQUIRE);
  if (on && !gw_timeline_on) {
    self->recording = 1;
    gw_timeline_on = 1;
    gw_timeline_record(gw_timeline_now); /* where it is now */
  } else if (!on && gw_timeline_on) {
    gw_timeline_record(gw_timeline_now);
    gw_timeline_on = 0;
    self->recording = 0;
  }
}

void gw_timeline_watch(void)
{
  if (control == NULL) return;
  __atomic_store_n(&control->watch_until_ms, now_us() / 1000 + GW_TIMELINE_LINGER_S * 1000, __ATOMIC_RELEASE);
  gw_timeline_tick();
}

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
  static int (*next)(int, struct epoll_event *, int, int);
  if (next == NULL) *(void **)&next = dlsym(RTLD_NEXT, "epoll_wait");
  if (!gw_timeline_on) return next(epfd, events, maxevents, timeout);
  uint32_t prev = gw_timeline_enter(GW_TL_IDLE, 0);
  int n = next(epfd, events, maxevents, timeout);
  gw_timeline_leave(prev);
  return n;
}

/* -- rendering ---------------------------------------------------------------- */

typedef struct {
  double in[4];   /* µs in each state */
  double longest; /* the longest FIBER or BLOCKED piece, and its request */
  uint32_t req;
} column_t;

/* The newest name given to id (ids are unique until they wrap at 2^30). */
static const char *name_of(const ring_t *r, uint32_t id)
{
  uint64_t head = __atomic_load_n(&r->names_head, __ATOMIC_ACQUIRE);
  for (uint64_t k = head; k > 0 && head - k < NAMES; k--)
    if (r->names[(k - 1) % NAMES].id == id) return r->names[(k - 1) % NAMES].name;
  return NULL;
}

/* Adds the span [from, to) (µs since the window's start) in state word to
 * the columns. */
static void add_span(column_t *col, int cols, double width, double from, double to, uint32_t word)
{
  if (from < 0) from = 0;
  if (to > width * cols) to = width * cols;
  int state = (int)(word >> 30);
  for (int c = (int)(from / width); c < cols && from < to; c++) {
    double end = (c + 1) * width < to ? (c + 1) * width : to;
    double piece = end - from;
    col[c].in[state] += piece;
    if ((state == GW_TL_FIBER || state == GW_TL_BLOCKED) && piece > col[c].longest) {
      col[c].longest = piece;
      col[c].req = word & 0x3fffffff;
    }
    from = end;
  }
}

static void render_ring(struct evbuffer *out, const ring_t *r, int window_ms, int cols, column_t *col)
{
  double window = window_ms * 1000.0, width = window / cols;
  memset(col, 0, sizeof(*col) * (size_t)cols);
  uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
  int64_t now = now_us(); /* after head: every event read is older (its writer runs on) */
  uint64_t first = head > GW_TIMELINE_EVENTS - SAFETY ? head - (GW_TIMELINE_EVENTS - SAFETY) : 0;
  /* the oldest event at or before the window's start (earlier ones do not show) */
  uint64_t k = head;
  while (k > first && (double)(uint32_t)((uint32_t)now - r->ev[(k - 1) & MASK][0]) < window) k--;
  if (k > first) k--;
  int recording = __atomic_load_n(&r->recording, __ATOMIC_ACQUIRE) != 0;
  for (; k < head; k++) {
    double at = window - (double)(uint32_t)((uint32_t)now - r->ev[k & MASK][0]);
    double until = k + 1 < head ? window - (double)(uint32_t)((uint32_t)now - r->ev[(k + 1) & MASK][0])
                                : (recording ? window : at);
    if (until > at) add_span(col, cols, width, at, until, r->ev[k & MASK][1]);
  }
  evbuffer_add_printf(out, ",\"recording\":%s,\"cols\":[", recording ? "true" : "false");
  static const int order[4] = {GW_TL_IDLE, GW_TL_C, GW_TL_FIBER, GW_TL_BLOCKED};
  for (int c = 0; c < cols; c++) {
    evbuffer_add(out, c ? ",[" : "[", c ? 2 : 1);
    for (int s = 0; s < 4; s++) evbuffer_add_printf(out, "%d,", (int)(col[c].in[order[s]] * 1000 / width + 0.5));
    evbuffer_add_printf(out, "%u]", col[c].req);
  }
  evbuffer_add(out, "],\"names\":{", 11);
  int written = 0;
  for (int c = 0; c < cols; c++) {
    uint32_t id = col[c].req;
    if (id == 0 || (c > 0 && col[c - 1].req == id)) continue;
    int seen = 0;
    for (int p = 0; p < c && !seen; p++) seen = col[p].req == id;
    const char *name = seen ? NULL : name_of(r, id);
    if (name == NULL) continue;
    evbuffer_add_printf(out, "%s\"%u\":", written++ ? "," : "", id);
    gw_json_string(out, name, strlen(name));
  }
  evbuffer_add(out, "}", 1);
}

void gw_timeline_render_json(struct evbuffer *out, int window_ms, int cols)
{
  static column_t col[2000];
  if (cols > 2000) cols = 2000;
  evbuffer_add_printf(out, "{\"window_ms\":%d,\"columns\":[\"idle\",\"c\",\"fiber\",\"blocked\",\"request\"],\"workers\":[",
                      window_ms);
  int first = 1;
  for (int i = 0; rings && gw_stats_table && i < GW_TIMELINE_SLOTS; i++) {
    const gw_worker_stats_t *s = &gw_stats_table[i];
    if (!gw_stats_live(s) || __atomic_load_n(&rings[i].pid, __ATOMIC_ACQUIRE) != s->pid) continue;
    evbuffer_add_printf(out, "%s{\"pid\":%d,\"port\":%d,\"index\":%d", first ? "" : ",", (int)s->pid, (int)s->port,
                        (int)s->index);
    render_ring(out, &rings[i], window_ms, cols, col);
    evbuffer_add(out, "}", 1);
    first = 0;
  }
  evbuffer_add(out, "]}\n", 3);
}
