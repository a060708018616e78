/* balancer.c - choosing an upstream group's server (see balancer.h). */
#include "balancer.h"
#include "log.h"

/* Up for both kinds of health: not marked down by failed user requests
 * (this worker's passive view) nor by the active checks (shared). */
static int is_live(const gw_upstream_server_t *s, double now_ms)
{
  return s->down_until_ms <= now_ms && !(s->health && __atomic_load_n(&s->health->down, __ATOMIC_RELAXED));
}

static uint32_t hash_key(const char *key)
{
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *key; key++) h = (h ^ (unsigned char)*key) * 16777619u;
  return h;
}

gw_upstream_server_t *gw_balancer_pick(gw_upstream_group_t *g, uint32_t tried, const char *key, double now_ms)
{
  gw_upstream_server_t *best = NULL;
  size_t n = g->nservers;
  if (n == 0) return NULL;
  if (g->balance == GW_BALANCE_HASH && key) {
    /* The key's server, or the next live one after it. */
    size_t start = hash_key(key) % n;
    for (size_t i = 0; i < n; i++) {
      size_t j = (start + i) % n;
      if (!(tried & (1u << (j % 32))) && is_live(&g->servers[j], now_ms)) return &g->servers[j];
    }
    return NULL;
  }
  int total = 0;
  for (size_t i = 0; i < n; i++) {
    gw_upstream_server_t *s = &g->servers[i];
    if ((tried & (1u << (i % 32))) || !is_live(s, now_ms)) continue;
    if (g->balance == GW_BALANCE_LEAST_CONN) {
      /* fewest in flight per unit of weight; the first of equals wins */
      if (best == NULL || (long)s->active * best->weight < (long)best->active * s->weight) best = s;
    } else { /* smooth weighted round robin, as nginx */
      s->current_weight += s->weight;
      total += s->weight;
      if (best == NULL || s->current_weight > best->current_weight) best = s;
    }
  }
  if (best && g->balance != GW_BALANCE_LEAST_CONN) best->current_weight -= total;
  return best;
}

int gw_balancer_done(gw_upstream_group_t *g, gw_upstream_server_t *s, int failed, double now_ms)
{
  s->active--;
  if (!failed) {
    s->fails = 0;
    return 0;
  }
  /* As nginx: a group's only server is never marked down (there is no other). */
  if (g->max_fails > 0 && g->nservers > 1 && ++s->fails >= g->max_fails) {
    s->down_until_ms = now_ms + g->fail_timeout_ms;
    s->fails = 0;
    return 1;
  }
  return 0;
}

/* ---- a request's walk ---- */

gw_upstream_server_t *gw_balancer_walk_first(gw_balancer_walk_t *w, gw_upstream_group_t *g, const char *key)
{
  *w = (gw_balancer_walk_t){.group = g};
  w->server = gw_balancer_pick(g, 0, key, gw_now_ms());
  if (w->server) w->tried = gw_balancer_bit(g, w->server);
  return w->server;
}

void gw_balancer_walk_use(gw_balancer_walk_t *w)
{
  w->server->active++;
  w->held = 1;
}

void gw_balancer_walk_done(gw_balancer_walk_t *w, int failed)
{
  if (!w->held) return;
  w->held = 0;
  if (gw_balancer_done(w->group, w->server, failed, gw_now_ms()))
    gw_log_warn("upstream %s: server %s marked down for %d ms", w->group->name, w->server->label,
                w->group->fail_timeout_ms);
}

void gw_balancer_walk_drop(gw_balancer_walk_t *w)
{
  if (!w->held) return;
  w->held = 0;
  w->server->active--;
}

gw_upstream_server_t *gw_balancer_walk_next(gw_balancer_walk_t *w)
{
  gw_upstream_server_t *next = gw_balancer_pick(w->group, w->tried, NULL, gw_now_ms());
  if (next == NULL) return NULL;
  w->tried |= gw_balancer_bit(w->group, next);
  w->server = next;
  return next;
}
