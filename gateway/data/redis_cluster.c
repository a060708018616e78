/* redis_cluster.c - the Redis Cluster client (redis_cluster.h): a client
 * per node (redis.c), and the slot map (CLUSTER SLOTS, asked of the nodes
 * in turn) choosing one for each call by the hash slot of its keys (all
 * keys of one call must share a slot, as Redis requires; redis_resp.c
 * finds it). A -MOVED answer updates the map, asks for a new one and sends
 * the call to the named node; -ASK sends it there once, after ASKING. A
 * node that cannot be reached makes the map be asked for again before the
 * call is sent, once more (a write only when it cannot have run).
 *
 * The cluster's own gw_redis_t routes its calls here (gw_redis_router_t);
 * a call waits in that client's pool's line while the map is unknown, and
 * its timeout and deferred failure run on that pool too (data_conn.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/read.h>

#include "data_conn.h"
#include "log.h"
#include "redis_cluster.h"

#define MAX_REDIRECTS 5
#define MAX_NODES 1000

typedef struct cluster_s cluster_t;

/* One call (handed out as a gw_redis_op_t: redis.c's cancel comes back here). */
typedef struct call_s {
  gw_dreq_t q;                /* first: q.pool is the cluster client's */
  cluster_t *cl;
  int retried;
  int slot, redirects;        /* the keys' slot (-1: none); redirects < 0: ASKING's reply comes first */
  gw_redis_op_t *inner;       /* the call on a node's client */
  gw_buf_t cmd;
  size_t nreplies;
  gw_redis_done_cb cb;
  void *arg;
} call_t;

struct cluster_s {
  gw_redis_t *r;              /* the cluster's client (the one callers hold) */
  char *password;             /* and node_pool: each node's client's */
  int node_pool;
  gw_redis_t **nodes;         /* a client per node met */
  size_t nnodes, slots_next, slots_asked;
  uint16_t *slot_node;        /* GW_REDIS_SLOTS entries: node index + 1, 0: unknown */
  gw_redis_op_t *asking_slots; /* CLUSTER SLOTS in flight */
  int have_slots;
  gw_dpool_t *pool;           /* the cluster client's: its line holds the calls waiting for the map */
};

static void ask_slots(cluster_t *cl);
static void send_to(call_t *call, int node, int asking);

/* -- calls ------------------------------------------------------------------------ */

static void call_free(call_t *call)
{
  gw_dreq_stop(&call->q);
  gw_buf_dispose(&call->cmd);
  free(call);
}

/* Ends call with n replies of a node's call (the node's client frees them). */
static void finish(call_t *call, gw_err_t err, gw_redis_reply_t **replies, size_t n)
{
  gw_dreq_stop(&call->q);
  call->cb(err, replies, n, call->arg);
  call_free(call);
}

static void call_timed_out(gw_dreq_t *q)
{
  call_t *call = (call_t *)q;
  gw_dreq_unwait(&call->q);
  if (call->inner) gw_redis_cancel(call->inner);
  call->inner = NULL;
  finish(call, gw_err(GW_ERR_TIMEOUT, "redis timed out"), NULL, 0);
}

static void call_fail(gw_dreq_t *q, gw_err_t err)
{
  finish((call_t *)q, err, NULL, 0);
}

/* -- nodes and the slot map ---------------------------------------------------------- */

/* The client of the node at addr ("ip:port"), made when first met; -1 when out of memory or a bad address. */
static int node_index(cluster_t *cl, const char *addr)
{
  for (size_t i = 0; i < cl->nnodes; i++)
    if (strcmp(gw_redis_addr(cl->nodes[i]), addr) == 0) return (int)i;
  if (cl->nnodes >= MAX_NODES) return -1;
  gw_redis_t **more = realloc(cl->nodes, (cl->nnodes + 1) * sizeof(*more));
  if (more == NULL) return -1;
  cl->nodes = more;
  char err[200];
  gw_redis_params_t p = {addr, 0, cl->password, cl->node_pool};
  if ((cl->nodes[cl->nnodes] = gw_redis_new(cl->pool->base, &p, err, sizeof(err))) == NULL) {
    gw_log_error("redis %s: node %s: %s", gw_redis_addr(cl->r), addr, err);
    return -1;
  }
  return (int)cl->nnodes++;
}

/* Sends call to the node its slot maps to, or waits for the map. */
static void dispatch(call_t *call)
{
  cluster_t *cl = call->cl;
  int node = call->slot >= 0 ? (int)cl->slot_node[call->slot] - 1 : 0;
  if (!cl->have_slots || node < 0) {
    gw_dpool_wait(cl->pool, &call->q);
    ask_slots(cl);
    return;
  }
  send_to(call, node, 0);
}

/* CLUSTER SLOTS: [[start, end, [ip, port, id...], replicas...], ...] */
static int read_slots(cluster_t *cl, const gw_redis_reply_t *a)
{
  if (a->type != REDIS_REPLY_ARRAY) return -1;
  memset(cl->slot_node, 0, GW_REDIS_SLOTS * sizeof(*cl->slot_node));
  for (size_t i = 0; i < a->elements; i++) {
    const gw_redis_reply_t *e = a->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER || e->element[2]->type != REDIS_REPLY_ARRAY ||
        e->element[2]->elements < 2)
      return -1;
    long long from = e->element[0]->integer, to = e->element[1]->integer;
    const gw_redis_reply_t *ip = e->element[2]->element[0], *port = e->element[2]->element[1];
    if (from < 0 || to >= GW_REDIS_SLOTS || from > to || ip->type != REDIS_REPLY_STRING || ip->len == 0 ||
        port->type != REDIS_REPLY_INTEGER)
      return -1;
    char addr[200];
    snprintf(addr, sizeof(addr), strchr(ip->str, ':') ? "[%s]:%lld" : "%s:%lld", ip->str, port->integer);
    int node = node_index(cl, addr);
    if (node < 0) return -1;
    for (long long s = from; s <= to; s++) cl->slot_node[s] = (uint16_t)(node + 1);
  }
  return 0;
}

static void on_slots(gw_err_t err, gw_redis_reply_t **replies, size_t n, void *arg)
{
  cluster_t *cl = arg;
  gw_redis_t *asked = cl->nodes[cl->slots_next % cl->nnodes];
  cl->asking_slots = NULL;
  if (err.kind == GW_OK && n == 1 && read_slots(cl, replies[0]) == 0) {
    cl->have_slots = 1;
    cl->slots_asked = 0;
    while (cl->pool->wait_head) {
      dispatch((call_t *)gw_dpool_next_waiter(cl->pool));
      if (!cl->have_slots) return; /* a slot still unknown: asked again */
    }
    return;
  }
  gw_log_error("redis %s: CLUSTER SLOTS from %s: %s", gw_redis_addr(cl->r), gw_redis_addr(asked),
               err.kind != GW_OK ? err.msg : n == 1 && replies[0]->type == REDIS_REPLY_ERROR ? replies[0]->str : "not a slot map");
  cl->slots_next++;
  if (++cl->slots_asked < cl->nnodes) {
    ask_slots(cl);
    return;
  }
  cl->slots_asked = 0;
  gw_dpool_fail_waiters(cl->pool, gw_err(GW_ERR_CONNECT, "no redis cluster node answered with its slots"));
}

/* Asks the next node for the slot map (one question at a time). */
static void ask_slots(cluster_t *cl)
{
  static const char cmd[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
  if (cl->asking_slots) return;
  cl->asking_slots = gw_redis_exec(cl->nodes[cl->slots_next % cl->nnodes], cmd, sizeof(cmd) - 1, 1, 1000, on_slots, cl);
  if (cl->asking_slots == NULL) gw_dpool_fail_waiters(cl->pool, gw_err(GW_ERR_NOMEM, "out of memory"));
}

/* -- a call on a node ------------------------------------------------------------------ */

/* "MOVED 3999 127.0.0.1:6381" or "ASK ...": the slot and the address; 0 if reply is neither. */
static int redirect_of(const gw_redis_reply_t *reply, int *ask, int *slot, char *addr, size_t size)
{
  if (reply->type != REDIS_REPLY_ERROR) return 0;
  char kind[8], where[200];
  if (sscanf(reply->str, "%7s %d %199s", kind, slot, where) != 3 || *slot < 0 || *slot >= GW_REDIS_SLOTS) return 0;
  if (strcmp(kind, "MOVED") != 0 && strcmp(kind, "ASK") != 0) return 0;
  *ask = kind[0] == 'A';
  if (where[0] == ':') { /* an empty host: the node's own, which we only know as the sender */
    return 0;
  }
  snprintf(addr, size, "%s", where);
  return 1;
}

/* A call the node could not take may go again, once: a keyless one, or
 * one command that cannot have run (its connect failed) or only reads. */
static int may_resend(const call_t *call, gw_err_t err)
{
  int not_run = gw_err_is_connect_failure(err.kind);
  if (call->retried || !(not_run || err.kind == GW_ERR_CLOSED || err.kind == GW_ERR_RESET)) return 0;
  return call->slot < 0 ||
         (call->nreplies == 1 && (not_run || gw_redis_commands_read_only(call->cmd.data, call->cmd.len)));
}

static void on_node_done(gw_err_t err, gw_redis_reply_t **replies, size_t n, void *arg)
{
  call_t *call = arg;
  cluster_t *cl = call->cl;
  int asked = call->redirects < 0; /* ASKING's +OK comes first */
  call->inner = NULL;
  if (asked) {
    call->redirects = -call->redirects;
    if (n > 0) {
      replies++;
      n--;
    }
  }
  if (err.kind != GW_OK) {
    if (may_resend(call, err)) {
      call->retried = 1; /* the node is gone: the map may have moved on */
      cl->have_slots = 0;
      dispatch(call);
      return;
    }
    finish(call, err, replies, 0);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    int ask, slot;
    char addr[200];
    if (!redirect_of(replies[i], &ask, &slot, addr, sizeof(addr))) continue;
    if (call->redirects >= MAX_REDIRECTS) break;
    int node = node_index(cl, addr);
    if (node < 0) break;
    call->redirects++;
    if (!ask) {
      cl->slot_node[slot] = (uint16_t)(node + 1);
      ask_slots(cl); /* the rest of the map has likely moved too */
    }
    send_to(call, node, ask);
    return;
  }
  finish(call, err, replies, n);
}

static void send_to(call_t *call, int node, int asking)
{
  static const char asking_cmd[] = "*1\r\n$6\r\nASKING\r\n";
  gw_buf_t b = {0};
  const char *cmd = call->cmd.data;
  size_t len = call->cmd.len;
  if (asking) {
    if (gw_buf_append(&b, asking_cmd, sizeof(asking_cmd) - 1) < 0 || gw_buf_append(&b, cmd, len) < 0) {
      gw_buf_dispose(&b);
      gw_dreq_fail_later(&call->q, gw_err(GW_ERR_NOMEM, "out of memory"));
      return;
    }
    cmd = b.data;
    len = b.len;
    call->redirects = -call->redirects; /* marks the ASKING reply to skip */
  }
  call->inner = gw_redis_exec(call->cl->nodes[node], cmd, len, call->nreplies + (asking ? 1 : 0), 0, on_node_done, call);
  gw_buf_dispose(&b);
  if (call->inner == NULL) gw_dreq_fail_later(&call->q, gw_err(GW_ERR_NOMEM, "out of memory"));
}

/* -- the router (redis.c hands the cluster client's calls here) ------------------------- */

static gw_redis_op_t *cluster_exec(void *state, const char *cmd, size_t len, size_t nreplies, int timeout_ms,
                                   gw_redis_done_cb cb, void *arg)
{
  cluster_t *cl = state;
  call_t *call = calloc(1, sizeof(*call));
  if (call == NULL) return NULL;
  call->cl = cl;
  call->nreplies = nreplies;
  call->cb = cb;
  call->arg = arg;
  if (gw_buf_append(&call->cmd, cmd, len) < 0) {
    free(call);
    return NULL;
  }
  gw_dreq_init(&call->q, cl->pool, timeout_ms);
  call->slot = gw_redis_commands_slot(cmd, len);
  if (call->slot == -2)
    gw_dreq_fail_later(&call->q, gw_err(GW_ERR_BAD_NAME, "redis cluster: the keys of one call must hash to one slot "
                                                         "(give them a common {hash tag})"));
  else
    dispatch(call);
  return (gw_redis_op_t *)call;
}

static void cluster_cancel(gw_redis_op_t *op)
{
  call_t *call = (call_t *)op;
  if (call->inner) gw_redis_cancel(call->inner);
  gw_dreq_unwait(&call->q);
  call_free(call);
}

/* A cluster sends every PUBLISH to every node: any one serves a subscriber. */
static gw_redis_t *cluster_subscriber(void *state)
{
  return ((cluster_t *)state)->nodes[0];
}

static void cluster_free(void *state)
{
  cluster_t *cl = state;
  if (cl->asking_slots) gw_redis_cancel(cl->asking_slots);
  for (size_t i = 0; i < cl->nnodes; i++) gw_redis_free(cl->nodes[i]);
  free(cl->nodes);
  free(cl->slot_node);
  free(cl->password);
  free(cl);
}

static const gw_dconn_proto_t proto = {"redis", NULL, NULL, NULL, NULL, NULL, /* no connection of its own */
                                       NULL, NULL, NULL, NULL, call_timed_out, call_fail};
static const gw_redis_router_t router = {&proto, cluster_exec, cluster_cancel, cluster_subscriber, cluster_free};

gw_redis_t *gw_redis_cluster_new(struct event_base *base, const gw_redis_params_t *p, char *err, size_t errlen)
{
  cluster_t *cl = calloc(1, sizeof(*cl));
  if (cl == NULL || (cl->slot_node = calloc(GW_REDIS_SLOTS, sizeof(*cl->slot_node))) == NULL ||
      (p->password && (cl->password = strdup(p->password)) == NULL)) {
    if (cl) cluster_free(cl);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  cl->node_pool = p->pool > 0 ? p->pool : 1;
  if ((cl->r = gw_redis_new_router(base, p->addr, &router, cl)) == NULL) {
    cluster_free(cl);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  cl->pool = gw_redis_pool(cl->r);
  const char *seeds = strncmp(p->addr, "cluster:", 8) == 0 ? p->addr + 8 : p->addr;
  for (const char *s = seeds; s;) {
    const char *comma = strchr(s, ',');
    char *one = strndup(s, comma ? (size_t)(comma - s) : strlen(s));
    gw_sockaddr_t sa;
    if (one == NULL || gw_addr_parse_fixed(one, &sa) == 0 || node_index(cl, one) < 0) {
      snprintf(err, errlen, "redis cluster node must be \"IP:port\" or \"localhost:port\", got \"%s\"", one ? one : "");
      free(one);
      gw_redis_free(cl->r); /* and cl */
      return NULL;
    }
    free(one);
    s = comma ? comma + 1 : NULL;
  }
  return cl->r;
}
