/* stats.h - counters and gauges of every worker, in memory shared with the
 * master, so that any worker's status page shows them all. */
#ifndef GW_STATS_H
#define GW_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GW_STATS_SLOTS 1024
#define GW_LATENCY_BUCKETS 20 /* 64 µs .. 33 s, doubling */

typedef struct {
  /* identity; pid 0: the slot is free */
  int32_t pid;
  int32_t port;        /* the server this worker serves */
  int32_t index;       /* worker number within the server */
  int32_t generation;  /* config generation (reloads) */
  /* counters (only grow) */
  uint64_t connections_accepted;
  uint64_t requests;
  uint64_t responses[6]; /* 1xx..5xx, [0]: other */
  uint64_t subrequests;
  uint64_t upstream_opened, upstream_reused, upstream_retried, upstream_failures;
  uint64_t upstream_tls_handshakes, upstream_tls_resumed; /* HTTPS upstreams */
  uint64_t dns_lookups, dns_cache_hits, dns_failures;
  uint64_t restarts, stalls; /* carried over from the workers this one replaced */
  uint64_t h2_connections, h2_streams; /* HTTP/2 connections taken (ALPN, preface, Upgrade), streams run */
  uint64_t proxy_protocol_headers, proxy_protocol_rejected, proxy_protocol_timeouts, proxy_protocol_untrusted;
  uint64_t cache_hits, cache_misses, cache_hit_bytes; /* the response cache (cache.c): this worker's lookups */
  /* gauges */
  uint32_t connections_active, connections_idle, connections_reading, connections_writing;
  uint32_t fibers_parked, timers_pending, subrequests_in_flight;
  uint32_t upstream_idle, dns_cache_entries;
  uint32_t loop_lag_ms;  /* how late the loop ran a 20 ms timer, worst of the last second */
  uint32_t tunnels_active; /* proxied WebSockets after their 101 (tunnel.c) */
  uint32_t websockets_active; /* scripted WebSockets (websocket: locations, websocket.c) */
  uint32_t h2_connections_active, h2_streams_open;
  /* Response times of client requests, from the head read to the response
   * queued: bucket b counts those under 2^b * 64 µs (the last: the rest).
   * Recorded only by servers with a dashboard (its percentiles). */
  uint32_t latency[GW_LATENCY_BUCKETS];
  /* Their percentiles over the last GW_LATENCY_WINDOW_S seconds, from a
   * log-linear histogram (histogram.h: within 1 %), published with the
   * gauges (gw_stats_publish_latency); ms. */
  double latency_p50_ms, latency_p90_ms, latency_p99_ms, latency_mean_ms;
  uint64_t latency_window_count;
  /* the stall watchdog (not shown as fields) */
  int64_t heartbeat_ms;  /* CLOCK_MONOTONIC ms when the worker's loop last turned (each second) */
  char stalled_on[128];  /* written when the master asks (SIGUSR2): what was running */
} gw_worker_stats_t;


/* One field, for the JSON, Prometheus and Ruby views alike. */
typedef struct {
  const char *name;
  size_t offset;
  int is_counter;      /* 1: uint64_t counter; 0: uint32_t gauge */
  const char *help;
} gw_stats_field_t;

extern const gw_stats_field_t gw_stats_fields[];
extern const size_t gw_stats_nfields;

/* The shared table (GW_STATS_SLOTS entries), mapped by the master before any
 * fork; NULL until gw_stats_init(). */
extern gw_worker_stats_t *gw_stats_table;
/* This worker's slot; points at a private dummy in the master and in tests,
 * so counting code never checks for NULL. */
extern gw_worker_stats_t *gw_stats_self;
/* Counts one response time (ms), ended at now_ms (gw_now_ms()), in this
 * worker's latency histograms. */
#define GW_LATENCY_WINDOW_S 10
void gw_stats_latency(double now_ms, double ms);
/* Writes the percentiles of the last GW_LATENCY_WINDOW_S seconds into this
 * worker's slot. */
void gw_stats_publish_latency(double now_ms);

/* A note every dashboard page shows (what an experiment is doing now, e.g.
 * `rake lesson`'s phase), shared by the workers; at most GW_STATS_NOTE_MAX
 * bytes. gw_stats_note() copies it and says when it was set (CLOCK_MONOTONIC
 * ms; 0: never). */
#define GW_STATS_NOTE_MAX 200
void gw_stats_set_note(const char *text, size_t len, double now_ms);
double gw_stats_note(char *buf, size_t size);

/* The live slot of worker pid, or NULL. */
gw_worker_stats_t *gw_stats_of(int32_t pid);

/* Maps the table (master, once). Returns 0 or -1. */
int gw_stats_init(void);
/* Worker start: claims a free slot (or one of a dead process) and zeroes it,
 * but for the restarts and stalls of the workers this one replaces. */
void gw_stats_attach(int port, int index, int generation, uint64_t restarts, uint64_t stalls);
/* Worker exit: frees the slot. */
void gw_stats_detach(void);
/* 1 if the slot belongs to a live worker. */
int gw_stats_live(const gw_worker_stats_t *s);

static inline uint64_t gw_stats_counter(const gw_worker_stats_t *s, const gw_stats_field_t *f)
{
  return *(const uint64_t *)((const char *)s + f->offset);
}

static inline uint32_t gw_stats_gauge(const gw_worker_stats_t *s, const gw_stats_field_t *f)
{
  return *(const uint32_t *)((const char *)s + f->offset);
}

#endif
