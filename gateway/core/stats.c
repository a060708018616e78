/* stats.c - the shared stats table and the list of its fields. Each worker
 * writes only its own slot (plain stores: a reader may see a slightly stale
 * value, never a torn one for these aligned words). */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "histogram.h"
#include "stats.h"

gw_worker_stats_t *gw_stats_table;
static gw_worker_stats_t private_slot;
gw_worker_stats_t *gw_stats_self = &private_slot;

#define COUNTER(f, h) {#f, offsetof(gw_worker_stats_t, f), 1, h}
#define GAUGE(f, h) {#f, offsetof(gw_worker_stats_t, f), 0, h}

const gw_stats_field_t gw_stats_fields[] = {
  COUNTER(connections_accepted, "client connections accepted"),
  COUNTER(requests, "client requests started"),
  {"responses_1xx", offsetof(gw_worker_stats_t, responses[1]), 1, "responses sent with a 1xx status"},
  {"responses_2xx", offsetof(gw_worker_stats_t, responses[2]), 1, "responses sent with a 2xx status"},
  {"responses_3xx", offsetof(gw_worker_stats_t, responses[3]), 1, "responses sent with a 3xx status"},
  {"responses_4xx", offsetof(gw_worker_stats_t, responses[4]), 1, "responses sent with a 4xx status"},
  {"responses_5xx", offsetof(gw_worker_stats_t, responses[5]), 1, "responses sent with a 5xx status"},
  COUNTER(subrequests, "sub-requests started"),
  COUNTER(upstream_opened, "upstream connections opened"),
  COUNTER(upstream_reused, "upstream requests sent on a pooled keep-alive connection"),
  COUNTER(upstream_retried, "upstream requests retried after a stale pooled connection"),
  COUNTER(upstream_failures, "proxied requests that failed (502/504)"),
  COUNTER(upstream_tls_handshakes, "TLS handshakes completed with HTTPS upstreams"),
  COUNTER(upstream_tls_resumed, "... of which resumed a session"),
  COUNTER(dns_lookups, "DNS lookups"),
  COUNTER(dns_cache_hits, "DNS answers served from the cache"),
  COUNTER(dns_failures, "DNS lookups that failed"),
  COUNTER(restarts, "times this worker (port, index) died unexpectedly and was replaced"),
  COUNTER(stalls, "... of which its loop stalled past stall_timeout and the watchdog killed it"),
  COUNTER(proxy_protocol_headers, "PROXY protocol headers read (proxy_protocol: listeners)"),
  COUNTER(proxy_protocol_rejected, "connections closed for a missing, malformed or oversized PROXY protocol header"),
  COUNTER(proxy_protocol_timeouts, "connections closed for a PROXY protocol header not complete within header_timeout"),
  COUNTER(proxy_protocol_untrusted, "connections closed for coming from a peer not in proxy_protocol_from"),
  COUNTER(cache_hits, "response cache lookups answered from the cache (HIT, UPDATING, STALE in the background)"),
  COUNTER(cache_misses, "response cache lookups that ran the handler (MISS, EXPIRED)"),
  COUNTER(cache_hit_bytes, "body bytes answered from the response cache"),
  GAUGE(connections_active, "open client connections"),
  GAUGE(connections_idle, "HTTP/1.1 client connections waiting for a request (keep-alive)"),
  GAUGE(connections_reading, "HTTP/1.1 client connections reading a request"),
  GAUGE(connections_writing, "HTTP/1.1 client connections with a request in progress"),
  GAUGE(fibers_parked, "handler fibers waiting for an event"),
  GAUGE(timers_pending, "Async.sleep timers armed"),
  GAUGE(subrequests_in_flight, "sub-requests in flight"),
  GAUGE(upstream_idle, "idle pooled upstream connections"),
  GAUGE(dns_cache_entries, "names in the DNS cache"),
  GAUGE(loop_lag_ms, "how late the event loop ran a timer (ms, worst of the last second)"),
  GAUGE(tunnels_active, "proxied WebSocket tunnels open (not counted in connections_active)"),
  GAUGE(websockets_active, "WebSockets of websocket: locations open (not counted in connections_active)"),
  COUNTER(h2_connections, "HTTP/2 connections (h2 by ALPN, h2c by preface or Upgrade)"),
  COUNTER(h2_streams, "HTTP/2 streams run as requests (also counted in requests)"),
  GAUGE(h2_connections_active, "open HTTP/2 connections (counted in connections_active)"),
  GAUGE(h2_streams_open, "HTTP/2 streams open"),
};
const size_t gw_stats_nfields = sizeof(gw_stats_fields) / sizeof(gw_stats_fields[0]);

/* The note, after the table in the same mapping; a sequence number, odd
 * while a writer is at it, lets a reader retry rather than read a torn one. */
typedef struct {
  uint32_t seq;
  double set_ms;
  char text[GW_STATS_NOTE_MAX + 1];
} note_t;
static note_t *note;

void gw_stats_set_note(const char *text, size_t len, double now_ms)
{
  if (note == NULL) return;
  if (len > GW_STATS_NOTE_MAX) len = GW_STATS_NOTE_MAX;
  __atomic_add_fetch(&note->seq, 1, __ATOMIC_ACQ_REL);
  memcpy(note->text, text, len);
  note->text[len] = '\0';
  note->set_ms = now_ms;
  __atomic_add_fetch(&note->seq, 1, __ATOMIC_ACQ_REL);
}

double gw_stats_note(char *buf, size_t size)
{
  buf[0] = '\0';
  if (note == NULL || size == 0) return 0;
  for (int tries = 0; tries < 100; tries++) {
    uint32_t seq = __atomic_load_n(&note->seq, __ATOMIC_ACQUIRE);
    if (seq & 1) continue;
    size_t n = strnlen(note->text, GW_STATS_NOTE_MAX);
    if (n >= size) n = size - 1;
    memcpy(buf, note->text, n);
    buf[n] = '\0';
    double at = note->set_ms;
    if (__atomic_load_n(&note->seq, __ATOMIC_ACQUIRE) == seq) return at;
  }
  buf[0] = '\0';
  return 0;
}

int gw_stats_init(void)
{
  if (gw_stats_table) return 0;
  note = mmap(NULL, sizeof(note_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (note == MAP_FAILED) {
    note = NULL;
    return -1;
  }
  void *p = mmap(NULL, GW_STATS_SLOTS * sizeof(gw_worker_stats_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) return -1;
  gw_stats_table = p;
  return 0;
}

int gw_stats_live(const gw_worker_stats_t *s)
{
  int32_t pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
  return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

void gw_stats_attach(int port, int index, int generation, uint64_t restarts, uint64_t stalls)
{
  if (gw_stats_table == NULL) return;
  int32_t me = (int32_t)getpid();
  for (int i = 0; i < GW_STATS_SLOTS; i++) {
    gw_worker_stats_t *s = &gw_stats_table[i];
    int32_t old = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
    if (old != 0 && gw_stats_live(s)) continue;
    /* Free, or left by a worker that died: claim it (another new worker
     * may race for the same slot; the exchange settles it). */
    if (!__atomic_compare_exchange_n(&s->pid, &old, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) continue;
    memset((char *)s + sizeof(s->pid), 0, sizeof(*s) - sizeof(s->pid));
    s->port = port;
    s->index = index;
    s->generation = generation;
    s->restarts = restarts;
    s->stalls = stalls;
    gw_stats_self = s;
    return;
  }
}

void gw_stats_detach(void)
{
  if (gw_stats_self != &private_slot) __atomic_store_n(&gw_stats_self->pid, 0, __ATOMIC_RELEASE);
  gw_stats_self = &private_slot;
}

gw_worker_stats_t *gw_stats_of(int32_t pid)
{
  for (int i = 0; gw_stats_table && i < GW_STATS_SLOTS; i++)
    if (__atomic_load_n(&gw_stats_table[i].pid, __ATOMIC_ACQUIRE) == pid) return &gw_stats_table[i];
  return NULL;
}

/* The precise view: one log-linear histogram per second of the window, in
 * this worker's own memory (only its percentiles are shared); a second's
 * histogram is cleared when the ring comes back to it. */
static struct {
  int64_t second; /* which second it counts; -1: none yet */
  uint64_t total;
  uint32_t counts[GW_HIST_BUCKETS];
} window[GW_LATENCY_WINDOW_S];
static int window_ready;

void gw_stats_latency(double now_ms, double ms)
{
  if (!window_ready) {
    for (int i = 0; i < GW_LATENCY_WINDOW_S; i++) window[i].second = -1;
    window_ready = 1;
  }
  int64_t second = (int64_t)(now_ms / 1000);
  int slot = (int)(second % GW_LATENCY_WINDOW_S);
  if (window[slot].second != second) {
    memset(window[slot].counts, 0, sizeof(window[slot].counts));
    window[slot].total = 0;
    window[slot].second = second;
  }
  window[slot].counts[gw_hist_index(ms <= 0 ? 0 : (uint64_t)(ms * 1000 + 0.5))]++;
  window[slot].total++;

  double us = ms * 1000.0, bound = 64.0;
  int b = 0;
  while (b < GW_LATENCY_BUCKETS - 1 && us >= bound) {
    bound *= 2;
    b++;
  }
  gw_stats_self->latency[b]++;
}

void gw_stats_publish_latency(double now_ms)
{
  static uint32_t merged[GW_HIST_BUCKETS];
  int64_t second = (int64_t)(now_ms / 1000);
  uint64_t total = 0;
  memset(merged, 0, sizeof(merged));
  for (int i = 0; window_ready && i < GW_LATENCY_WINDOW_S; i++) {
    if (window[i].second <= second - GW_LATENCY_WINDOW_S || window[i].total == 0) continue;
    for (size_t b = 0; b < GW_HIST_BUCKETS; b++) merged[b] += window[i].counts[b];
    total += window[i].total;
  }
  gw_worker_stats_t *s = gw_stats_self;
  s->latency_p50_ms = gw_hist_quantile(merged, total, 0.50) / 1000;
  s->latency_p90_ms = gw_hist_quantile(merged, total, 0.90) / 1000;
  s->latency_p99_ms = gw_hist_quantile(merged, total, 0.99) / 1000;
  s->latency_mean_ms = gw_hist_mean(merged, total) / 1000;
  s->latency_window_count = total;
}

