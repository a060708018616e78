/* status.c - renders the shared stats table (stats.c): JSON by default,
 * Prometheus text exposition with ?format=prometheus. Field names, kinds and
 * help texts all come from gw_stats_fields, so the views cannot drift. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_store.h"
#include "json_out.h"
#include "log.h"
#include "stats.h"
#include "request.h"
#include "status.h"

/* The response cache's zones (shared by every worker): their counters. */
#define CACHE_FIELDS(X)                                                                                 \
  X(hits, counter, "lookups answered without waiting for the handler (HIT, UPDATING, STALE within stale-while-revalidate)") \
  X(misses, counter, "lookups that ran the handler (MISS, EXPIRED; then REVALIDATED or STALE)")                               \
  X(stores, counter, "responses stored")                                                              \
  X(store_failures, counter, "responses that could not be stored (a limit, a full disk)")             \
  X(evictions, counter, "entries evicted to make room (memory: or max_size:)")                         \
  X(purges, counter, "entries removed by purge / purge_prefix")                                       \
  X(bad_files, counter, "cache files found truncated, corrupt or removed")                            \
  X(entries, gauge, "entries stored now")                                                             \
  X(mem_bytes, gauge, "bytes of the shared memory used by entries")                                   \
  X(disk_bytes, gauge, "bytes of the entries' files")

static void render_caches_json(struct evbuffer *out)
{
  const char *name;
  gw_cache_store_t *z;
  evbuffer_add(out, ",\"caches\":{", 11);
  for (size_t i = 0; (z = gw_cache_store_at(i, &name)) != NULL; i++) {
    gw_cache_stats_t st;
    gw_cache_store_stats(z, &st);
    if (i) evbuffer_add(out, ",", 1);
    gw_json_string(out, name, strlen(name));
    const char *sep = ":{";
#define JSON_FIELD(f, kind, help)                                     \
  evbuffer_add_printf(out, "%s\"" #f "\":%" PRIu64, sep, st.f); \
  sep = ",";
    CACHE_FIELDS(JSON_FIELD)
#undef JSON_FIELD
    evbuffer_add(out, "}", 1);
  }
  evbuffer_add(out, "}", 1);
}

static void render_caches_prometheus(struct evbuffer *out)
{
  const char *name;
  gw_cache_stats_t st;
#define PROM_FIELD(f, kind, help)                                                                           \
  if (gw_cache_store_at(0, &name)) {                                                                        \
    const char *sfx = #kind[0] == 'c' ? "_total" : "";                                                      \
    evbuffer_add_printf(out, "# HELP gateway_cache_zone_" #f "%s " help "\n# TYPE gateway_cache_zone_" #f "%s " #kind "\n", sfx, sfx); \
    gw_cache_store_t *z;                                                                                    \
    for (size_t i = 0; (z = gw_cache_store_at(i, &name)) != NULL; i++) {                                    \
      gw_cache_store_stats(z, &st);                                                                         \
      evbuffer_add_printf(out, "gateway_cache_zone_" #f "%s{zone=\"%s\"} %" PRIu64 "\n", sfx, name, st.f);        \
    }                                                                                                       \
  }
  CACHE_FIELDS(PROM_FIELD)
#undef PROM_FIELD
}

void gw_status_render_json(struct evbuffer *out, const gw_config_t *config, int latency_buckets)
{
  evbuffer_add_printf(out, "{\"served_by\":%d,\"workers\":[", (int)getpid());
  int first = 1;
  for (int i = 0; i < GW_STATS_SLOTS; i++) {
    const gw_worker_stats_t *s = &gw_stats_table[i];
    if (!gw_stats_live(s)) continue;
    evbuffer_add_printf(out, "%s{\"pid\":%d,\"port\":%d,\"index\":%d,\"generation\":%d", first ? "" : ",", (int)s->pid,
                        (int)s->port, (int)s->index, (int)s->generation);
    for (size_t f = 0; f < gw_stats_nfields; f++) {
      const gw_stats_field_t *fd = &gw_stats_fields[f];
      if (fd->is_counter)
        evbuffer_add_printf(out, ",\"%s\":%" PRIu64, fd->name, gw_stats_counter(s, fd));
      else
        evbuffer_add_printf(out, ",\"%s\":%" PRIu32, fd->name, gw_stats_gauge(s, fd));
    }
    if (latency_buckets) {
      evbuffer_add(out, ",\"latency_buckets\":[", 20);
      for (int b = 0; b < GW_LATENCY_BUCKETS; b++) evbuffer_add_printf(out, b ? ",%" PRIu32 : "%" PRIu32, s->latency[b]);
      evbuffer_add(out, "]", 1);
      /* the precise view: percentiles of the last GW_LATENCY_WINDOW_S s */
      evbuffer_add_printf(out, ",\"latency_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"mean\":%.3f,\"count\":%" PRIu64 "}",
                          s->latency_p50_ms, s->latency_p90_ms, s->latency_p99_ms, s->latency_mean_ms,
                          s->latency_window_count);
    }
    evbuffer_add(out, "}", 1);
    first = 0;
  }
  /* Upstream health as this worker sees it (each worker keeps its own). */
  evbuffer_add(out, "],\"upstreams\":{", 15);
  for (size_t g = 0; g < config->ngroups; g++) {
    const gw_upstream_group_t *grp = &config->groups[g];
    if (g) evbuffer_add(out, ",", 1);
    gw_json_string(out, grp->name, strlen(grp->name));
    evbuffer_add(out, ":[", 2);
    double now = gw_now_ms();
    for (size_t j = 0; j < grp->nservers; j++) {
      const gw_upstream_server_t *us = &grp->servers[j];
      evbuffer_add(out, j ? ",{\"server\":" : "{\"server\":", j ? 11 : 10);
      gw_json_string(out, us->label, strlen(us->label));
      evbuffer_add_printf(out, ",\"weight\":%d,\"active\":%d,\"fails\":%d,\"state\":\"%s\"", us->weight, us->active,
                          us->fails, us->down_until_ms > now ? "down" : "up");
      if (us->health) { /* active checks: shared by every worker */
        const gw_health_server_t *h = us->health;
        evbuffer_add_printf(out,
                            ",\"health\":{\"state\":\"%s\",\"checks\":%" PRIu64 ",\"fails\":%u,\"passes\":%u,"
                            "\"transitions\":%" PRIu64 ",\"last_status\":%u,\"checked_by\":%d,\"last_error\":",
                            h->down ? "down" : "up", h->checks, h->fails, h->passes, h->transitions, h->last_status,
                            (int)grp->health->shared->owner);
        gw_json_string(out, h->last_error, strlen(h->last_error));
        evbuffer_add(out, "}", 1);
      }
      evbuffer_add(out, "}", 1);
    }
    evbuffer_add(out, "]", 1);
  }
  evbuffer_add(out, "}", 1);
  render_caches_json(out);
  if (latency_buckets) { /* the dashboard's: the note its pages show */
    char note[GW_STATS_NOTE_MAX + 1];
    double at = gw_stats_note(note, sizeof(note));
    evbuffer_add(out, ",\"note\":", 8);
    gw_json_string(out, note, strlen(note));
    evbuffer_add_printf(out, ",\"note_age_s\":%.1f", at > 0 ? (gw_now_ms() - at) / 1000 : -1.0);
  }
  evbuffer_add(out, "}\n", 2);
}

/* Active health checks: one series per checked server (shared state). */
static void render_health_prometheus(struct evbuffer *out, const gw_config_t *config)
{
  int header = 0;
  for (size_t g = 0; g < config->ngroups; g++) {
    const gw_upstream_group_t *grp = &config->groups[g];
    if (grp->health == NULL) continue;
    if (!header) {
      evbuffer_add_printf(out, "# HELP gateway_upstream_healthy 1 while the server passes its active health checks\n"
                               "# TYPE gateway_upstream_healthy gauge\n");
      header = 1;
    }
    for (size_t j = 0; j < grp->nservers; j++)
      evbuffer_add_printf(out, "gateway_upstream_healthy{upstream=\"%s\",server=\"%s\"} %d\n", grp->name,
                          grp->servers[j].label, grp->servers[j].health->down ? 0 : 1);
  }
  if (!header) return;
  evbuffer_add_printf(out, "# HELP gateway_upstream_health_transitions_total times the server went down or came back up\n"
                           "# TYPE gateway_upstream_health_transitions_total counter\n");
  for (size_t g = 0; g < config->ngroups; g++) {
    const gw_upstream_group_t *grp = &config->groups[g];
    for (size_t j = 0; grp->health && j < grp->nservers; j++)
      evbuffer_add_printf(out, "gateway_upstream_health_transitions_total{upstream=\"%s\",server=\"%s\"} %" PRIu64 "\n",
                          grp->name, grp->servers[j].label, grp->servers[j].health->transitions);
  }
}

static void render_prometheus(struct evbuffer *out)
{
  for (size_t f = 0; f < gw_stats_nfields; f++) {
    const gw_stats_field_t *fd = &gw_stats_fields[f];
    const char *suffix = fd->is_counter ? "_total" : "";
    evbuffer_add_printf(out, "# HELP gateway_%s%s %s\n# TYPE gateway_%s%s %s\n", fd->name, suffix, fd->help, fd->name,
                        suffix, fd->is_counter ? "counter" : "gauge");
    for (int i = 0; i < GW_STATS_SLOTS; i++) {
      const gw_worker_stats_t *s = &gw_stats_table[i];
      if (!gw_stats_live(s)) continue;
      uint64_t v = fd->is_counter ? gw_stats_counter(s, fd) : gw_stats_gauge(s, fd);
      evbuffer_add_printf(out, "gateway_%s%s{port=\"%d\",worker=\"%d\",pid=\"%d\"} %" PRIu64 "\n", fd->name, suffix,
                          (int)s->port, (int)s->index, (int)s->pid, v);
    }
  }
}

static void on_req(gw_handler_t *self, gw_request_t *req)
{
  (void)self;
  req->ctx->publish_stats(req->ctx);
  req->resp.status = 200;
  const char *q = req->in.target + req->in.path_len;
  int prometheus = strstr(q, "format=prometheus") != NULL;
  if (prometheus) {
    gw_headers_add(&req->resp.headers, "Content-Type", 12, "text/plain; version=0.0.4", 25);
    render_prometheus(req->resp.body);
    render_health_prometheus(req->resp.body, req->ctx->config);
    render_caches_prometheus(req->resp.body);
  } else {
    gw_headers_add(&req->resp.headers, "Content-Type", 12, "application/json", 16);
    gw_status_render_json(req->resp.body, req->ctx->config, 0);
  }
  gw_headers_add(&req->resp.headers, "Cache-Control", 13, "no-store", 8);
  gw_request_finish(req);
}

static void dispose(gw_handler_t *self)
{
  free(self);
}

gw_handler_t *gw_status_handler_new(void)
{
  gw_handler_t *h = malloc(sizeof(*h));
  if (h) *h = (gw_handler_t){.name = "status", .on_req = on_req, .dispose = dispose};
  return h;
}
