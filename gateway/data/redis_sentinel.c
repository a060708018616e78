/* redis_sentinel.c - Redis behind Sentinel (redis_sentinel.h): a client of
 * redis.c whose server's address this module finds (gw_redis_finder_t).
 * The master's address is asked of the sentinels (SENTINEL
 * get-master-addr-by-name, each in turn, one question at a time) before
 * the first connect and again whenever redis.c loses the master (a failed
 * or broken connection, a -READONLY answer); a subscription to
 * +switch-master on every sentinel moves the client at once when they
 * promote a replica. What happens to connections and commands when the
 * master moves is redis.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/read.h>

#include "log.h"
#include "redis_sentinel.h"

typedef struct {
  gw_redis_t *r;                /* the master's client (the one callers hold) */
  char *master_name;
  gw_redis_t **sentinels;       /* a client per sentinel */
  gw_redis_sub_t **switch_subs; /* SUBSCRIBE +switch-master on each */
  size_t nsentinels, ask_next, asked;
  gw_redis_op_t *asking;        /* SENTINEL get-master-addr-by-name in flight */
} sentinel_t;

static void find_master(void *state);

static void set_master(sentinel_t *st, const char *ip, const char *port, const char *why)
{
  char addr[128];
  snprintf(addr, sizeof(addr), strchr(ip, ':') ? "[%s]:%s" : "%s:%s", ip, port);
  gw_sockaddr_t sa;
  socklen_t len = gw_addr_parse_fixed(addr, &sa);
  if (len == 0) {
    gw_log_error("redis %s: sentinel named an invalid master address %s", gw_redis_addr(st->r), addr);
    return;
  }
  gw_redis_found(st->r, &sa, len, addr, why);
}

static void on_master_addr(gw_err_t err, gw_redis_reply_t **replies, size_t n, void *arg)
{
  sentinel_t *st = arg;
  const gw_redis_reply_t *a = n == 1 ? replies[0] : NULL;
  st->asking = NULL;
  if (err.kind == GW_OK && a && a->type == REDIS_REPLY_ARRAY && a->elements == 2 &&
      a->element[0]->type == REDIS_REPLY_STRING && a->element[1]->type == REDIS_REPLY_STRING) {
    st->asked = 0;
    set_master(st, a->element[0]->str, a->element[1]->str, "sentinel");
    return;
  }
  gw_log_error("redis %s: sentinel %s: %s", gw_redis_addr(st->r),
               gw_redis_addr(st->sentinels[st->ask_next % st->nsentinels]),
               err.kind != GW_OK ? err.msg : a && a->type == REDIS_REPLY_ERROR ? a->str : "no master of that name");
  st->ask_next++;
  if (++st->asked < st->nsentinels) {
    find_master(st);
    return;
  }
  st->asked = 0;
  gw_dpool_mark_down(gw_redis_pool(st->r));
  gw_redis_not_found(st->r, gw_err(GW_ERR_CONNECT, "no redis sentinel named a master"));
}

/* Asks the next sentinel for the master (one question at a time). */
static void find_master(void *state)
{
  sentinel_t *st = state;
  if (st->asking) return;
  gw_buf_t cmd = {0};
  if (gw_redis_append_array(&cmd, 3) == 0 && gw_redis_append_bulk(&cmd, "SENTINEL", 8) == 0 &&
      gw_redis_append_bulk(&cmd, "get-master-addr-by-name", 23) == 0 &&
      gw_redis_append_bulk(&cmd, st->master_name, strlen(st->master_name)) == 0)
    st->asking = gw_redis_exec(st->sentinels[st->ask_next % st->nsentinels], cmd.data, cmd.len, 1, 1000,
                               on_master_addr, st);
  gw_buf_dispose(&cmd);
  if (st->asking == NULL) gw_redis_not_found(st->r, gw_err(GW_ERR_NOMEM, "out of memory"));
}

/* "+switch-master NAME old-ip old-port new-ip new-port" */
static void on_switch_master(gw_redis_reply_t *m, void *arg)
{
  sentinel_t *st = arg;
  if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 || m->element[2]->type != REDIS_REPLY_STRING) return;
  char name[256], old_ip[64], old_port[8], ip[64], port[8];
  if (sscanf(m->element[2]->str, "%255s %63s %7s %63s %7s", name, old_ip, old_port, ip, port) == 5 &&
      strcmp(name, st->master_name) == 0)
    set_master(st, ip, port, "+switch-master");
}

static void on_switch_state(gw_err_t err, void *arg)
{
  (void)err;
  (void)arg;
}

static void sentinel_free(void *state)
{
  sentinel_t *st = state;
  if (st->asking) gw_redis_cancel(st->asking);
  for (size_t i = 0; i < st->nsentinels; i++) {
    if (st->switch_subs && st->switch_subs[i]) gw_redis_subscriber_free(st->switch_subs[i]);
    if (st->sentinels) gw_redis_free(st->sentinels[i]);
  }
  free(st->switch_subs);
  free(st->sentinels);
  free(st->master_name);
  free(st);
}

static const gw_redis_finder_t finder = {find_master, sentinel_free};

/* The sentinels' clients and their +switch-master subscriptions; -1 with err. */
static int watch_sentinels(sentinel_t *st, const char *list, char *err, size_t errlen)
{
  for (const char *p = list; p; p = strchr(p, ',')) {
    p += *p == ',';
    st->nsentinels++;
  }
  st->sentinels = calloc(st->nsentinels, sizeof(*st->sentinels));
  st->switch_subs = calloc(st->nsentinels, sizeof(*st->switch_subs));
  gw_buf_t cmd = {0};
  if (st->sentinels == NULL || st->switch_subs == NULL || gw_redis_append_array(&cmd, 2) < 0 ||
      gw_redis_append_bulk(&cmd, "SUBSCRIBE", 9) < 0 || gw_redis_append_bulk(&cmd, "+switch-master", 14) < 0) {
    gw_buf_dispose(&cmd);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  const char *p = list;
  for (size_t i = 0; i < st->nsentinels; i++) {
    const char *comma = strchr(p, ',');
    char *one = strndup(p, comma ? (size_t)(comma - p) : strlen(p));
    gw_redis_params_t sp = {one, 0, NULL, 1};
    st->sentinels[i] = one ? gw_redis_new(gw_redis_pool(st->r)->base, &sp, err, errlen) : NULL;
    free(one);
    if (st->sentinels[i] == NULL ||
        (st->switch_subs[i] = gw_redis_subscribe(st->sentinels[i], cmd.data, cmd.len, on_switch_master,
                                                 on_switch_state, st)) == NULL) {
      if (one == NULL || st->sentinels[i]) snprintf(err, errlen, "out of memory");
      gw_buf_dispose(&cmd);
      return -1;
    }
    p = comma ? comma + 1 : NULL;
  }
  gw_buf_dispose(&cmd);
  return 0;
}

gw_redis_t *gw_redis_sentinel_new(struct event_base *base, const gw_redis_params_t *p, char *err, size_t errlen)
{
  const char *spec = strncmp(p->addr, "sentinel:", 9) == 0 ? p->addr + 9 : p->addr;
  const char *at = strchr(spec, '@');
  if (at == NULL || at == spec || at[1] == '\0') {
    snprintf(err, errlen, "redis sentinel address must be \"sentinel:NAME@host:port,...\", got \"sentinel:%s\"", spec);
    return NULL;
  }
  sentinel_t *st = calloc(1, sizeof(*st));
  if (st == NULL || (st->master_name = strndup(spec, (size_t)(at - spec))) == NULL) {
    free(st);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if ((st->r = gw_redis_new_found(base, p, &finder, st, err, errlen)) == NULL) {
    sentinel_free(st);
    return NULL;
  }
  if (watch_sentinels(st, at + 1, err, errlen) < 0) {
    gw_redis_free(st->r); /* and st */
    return NULL;
  }
  return st->r;
}
