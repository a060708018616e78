/* test_balancer.c - balancer.c: round robin (nginx's smooth weighted), least
 * connections, hash, passive health, the tried mask, a request's walk.
 * unit: balancer log */
#include <stdio.h>
#include <string.h>

#include "balancer.h"
#include "unit.h"

static gw_upstream_server_t servers[8];
static char *labels[] = {"a", "b", "c", "d", "e", "f", "g", "h"};

static gw_upstream_group_t group(gw_balance_t balance, const int *weights, size_t n)
{
  memset(servers, 0, sizeof(servers));
  for (size_t i = 0; i < n; i++) {
    servers[i].label = labels[i];
    servers[i].weight = weights[i];
  }
  gw_upstream_group_t g = {.name = "g", .servers = servers, .nservers = n, .balance = balance,
                           .max_fails = 1, .fail_timeout_ms = 10000};
  return g;
}

/* Picks n times (nothing in flight) and spells the labels: "aabacaa". */
static const char *sequence(gw_upstream_group_t *g, int n, double now)
{
  static char seq[64];
  int i;
  for (i = 0; i < n && i < (int)sizeof(seq) - 1; i++) {
    gw_upstream_server_t *s = gw_balancer_pick(g, 0, NULL, now);
    seq[i] = s ? s->label[0] : '-';
  }
  seq[i] = '\0';
  return seq;
}

static void test_round_robin(void)
{
  int w511[] = {5, 1, 1};
  gw_upstream_group_t g = group(GW_BALANCE_ROUND_ROBIN, w511, 3);
  CHECK_STR(sequence(&g, 7, 0), "aabacaa"); /* nginx's smooth WRR */
  CHECK_STR(sequence(&g, 7, 0), "aabacaa"); /* and again: current weights back to 0 */
  for (int i = 0; i < 3; i++) CHECK(servers[i].current_weight == 0);

  int w111[] = {1, 1, 1};
  g = group(GW_BALANCE_ROUND_ROBIN, w111, 3);
  CHECK_STR(sequence(&g, 6, 0), "abcabc");

  int w21[] = {2, 1};
  g = group(GW_BALANCE_ROUND_ROBIN, w21, 2);
  CHECK_STR(sequence(&g, 6, 0), "abaaba");

  /* a down server is skipped, and back after its fail_timeout */
  g = group(GW_BALANCE_ROUND_ROBIN, w111, 3);
  servers[1].down_until_ms = 1000;
  CHECK_STR(sequence(&g, 4, 999), "acac");
  g = group(GW_BALANCE_ROUND_ROBIN, w111, 3);
  servers[1].down_until_ms = 1000;
  CHECK_STR(sequence(&g, 3, 1000), "abc");

  /* all down: none */
  g = group(GW_BALANCE_ROUND_ROBIN, w111, 2);
  servers[0].down_until_ms = servers[1].down_until_ms = 50;
  CHECK(gw_balancer_pick(&g, 0, NULL, 10) == NULL);
}

static void test_tried_mask(void)
{
  int w111[] = {1, 1, 1};
  gw_upstream_group_t g = group(GW_BALANCE_ROUND_ROBIN, w111, 3);
  gw_upstream_server_t *s = gw_balancer_pick(&g, 0, NULL, 0);
  CHECK(s == &servers[0]);
  uint32_t tried = gw_balancer_bit(&g, s);
  CHECK(tried == 1);
  s = gw_balancer_pick(&g, tried, NULL, 0);
  CHECK(s == &servers[1]);
  tried |= gw_balancer_bit(&g, s);
  s = gw_balancer_pick(&g, tried, NULL, 0);
  CHECK(s == &servers[2]);
  tried |= gw_balancer_bit(&g, s);
  CHECK(tried == 7);
  CHECK(gw_balancer_pick(&g, tried, NULL, 0) == NULL);

  /* the mask applies to every method */
  g = group(GW_BALANCE_LEAST_CONN, w111, 3);
  CHECK(gw_balancer_pick(&g, 1, NULL, 0) == &servers[1]);
  CHECK(gw_balancer_pick(&g, 7, NULL, 0) == NULL);
  g = group(GW_BALANCE_HASH, w111, 3);
  s = gw_balancer_pick(&g, 0, "key", 0);
  gw_upstream_server_t *t = gw_balancer_pick(&g, gw_balancer_bit(&g, s), "key", 0);
  CHECK(t != NULL && t != s);
  CHECK(t == &servers[((size_t)(s - servers) + 1) % 3]); /* the next one after the key's */
  CHECK(gw_balancer_pick(&g, 7, "key", 0) == NULL);
}

static void test_least_conn(void)
{
  int w111[] = {1, 1, 1};
  gw_upstream_group_t g = group(GW_BALANCE_LEAST_CONN, w111, 3);
  CHECK(gw_balancer_pick(&g, 0, NULL, 0) == &servers[0]); /* ties: the first */
  servers[0].active = 2;
  servers[1].active = 1;
  servers[2].active = 1;
  CHECK(gw_balancer_pick(&g, 0, NULL, 0) == &servers[1]); /* fewest; tie b/c: the first */
  servers[1].active = 3;
  CHECK(gw_balancer_pick(&g, 0, NULL, 0) == &servers[2]);
  /* per unit of weight: 4 on weight 4 beats 2 on weight 1 */
  int w41[] = {4, 1};
  g = group(GW_BALANCE_LEAST_CONN, w41, 2);
  servers[0].active = 4;
  servers[1].active = 2;
  CHECK(gw_balancer_pick(&g, 0, NULL, 0) == &servers[0]);
  servers[0].active = 5;
  servers[1].active = 1; /* 5/4 vs 1/1 */
  CHECK(gw_balancer_pick(&g, 0, NULL, 0) == &servers[1]);
  /* a down server does not count, however idle */
  servers[1].down_until_ms = 100;
  CHECK(gw_balancer_pick(&g, 0, NULL, 50) == &servers[0]);
  /* least_conn does not touch the round-robin weights */
  CHECK(servers[0].current_weight == 0 && servers[1].current_weight == 0);
}

static void test_hash(void)
{
  int w[] = {1, 1, 1, 1, 1};
  gw_upstream_group_t g = group(GW_BALANCE_HASH, w, 5);
  gw_upstream_server_t *first = gw_balancer_pick(&g, 0, "/users/42", 0);
  CHECK(first != NULL);
  for (int i = 0; i < 10; i++) CHECK(gw_balancer_pick(&g, 0, "/users/42", 0) == first); /* stable */
  /* keys spread over the servers */
  int hits[5] = {0};
  char key[32];
  for (int i = 0; i < 500; i++) {
    snprintf(key, sizeof(key), "client-%d", i);
    hits[gw_balancer_pick(&g, 0, key, 0) - servers]++;
  }
  for (int i = 0; i < 5; i++) CHECK(hits[i] > 50);
  /* its server down: the next live one, and the same again once it is back */
  size_t k = (size_t)(first - servers);
  servers[k].down_until_ms = 100;
  CHECK(gw_balancer_pick(&g, 0, "/users/42", 50) == &servers[(k + 1) % 5]);
  CHECK(gw_balancer_pick(&g, 0, "/users/42", 100) == first);
  /* FNV-1a of "" is its offset basis: 2166136261 % 5 == 1 */
  CHECK(gw_balancer_pick(&g, 0, "", 0) == &servers[2166136261u % 5]);
  /* without a key: round robin */
  servers[k].down_until_ms = 0;
  CHECK_STR(sequence(&g, 5, 0), "abcde");
}

static void test_health(void)
{
  int w111[] = {1, 1, 1};
  gw_upstream_group_t g = group(GW_BALANCE_ROUND_ROBIN, w111, 3);
  g.max_fails = 2;
  g.fail_timeout_ms = 500;
  gw_upstream_server_t *b = &servers[1];
  b->active = 1;
  CHECK(gw_balancer_done(&g, b, 1, 1000) == 0); /* one failure of two */
  CHECK(b->active == 0 && b->fails == 1 && b->down_until_ms == 0);
  b->active = 1;
  CHECK(gw_balancer_done(&g, b, 0, 1001) == 0); /* a success clears the count */
  CHECK(b->fails == 0);
  b->active = 2;
  CHECK(gw_balancer_done(&g, b, 1, 1002) == 0);
  CHECK(gw_balancer_done(&g, b, 1, 1003) == 1); /* the second in a row: down */
  CHECK(b->active == 0 && b->fails == 0);
  CHECK(b->down_until_ms == 1503);
  CHECK_STR(sequence(&g, 4, 1502), "acac");
  g = group(GW_BALANCE_ROUND_ROBIN, w111, 3);
  g.max_fails = 2;
  servers[1].down_until_ms = 1503;
  CHECK_STR(sequence(&g, 3, 1503), "abc"); /* back */

  /* max_fails 0: never down */
  g = group(GW_BALANCE_ROUND_ROBIN, w111, 3);
  g.max_fails = 0;
  for (int i = 0; i < 5; i++) CHECK(gw_balancer_done(&g, &servers[0], 1, 0) == 0);
  CHECK(servers[0].down_until_ms == 0);

  /* a group's only server is never marked down */
  g = group(GW_BALANCE_ROUND_ROBIN, w111, 1);
  g.max_fails = 1;
  for (int i = 0; i < 5; i++) CHECK(gw_balancer_done(&g, &servers[0], 1, 0) == 0);
  CHECK(servers[0].down_until_ms == 0);
  CHECK(gw_balancer_pick(&g, 0, NULL, 0) == &servers[0]);

  /* max_fails 1: the first failure marks it */
  g = group(GW_BALANCE_LEAST_CONN, w111, 2);
  g.max_fails = 1;
  g.fail_timeout_ms = 10000;
  CHECK(gw_balancer_done(&g, &servers[0], 1, 5) == 1);
  CHECK(servers[0].down_until_ms == 10005);
  CHECK(gw_balancer_pick(&g, 0, NULL, 6) == &servers[1]);
}

static void test_empty(void)
{
  gw_upstream_group_t g = group(GW_BALANCE_ROUND_ROBIN, NULL, 0);
  CHECK(gw_balancer_pick(&g, 0, NULL, 0) == NULL);
  g.balance = GW_BALANCE_HASH;
  CHECK(gw_balancer_pick(&g, 0, "k", 0) == NULL);
}

/* A request's walk: first, use, done (passive health), next, drop. */
static void test_walk(void)
{
  int w111[] = {1, 1, 1};
  gw_upstream_group_t g = group(GW_BALANCE_ROUND_ROBIN, w111, 3);
  g.max_fails = 2;
  gw_balancer_walk_t w;
  CHECK(gw_balancer_walk_first(&w, &g, NULL) == &servers[0]);
  CHECK(w.tried == 1 && !w.held);
  gw_balancer_walk_use(&w);
  CHECK(servers[0].active == 1 && w.held);
  gw_balancer_walk_done(&w, 1);
  CHECK(servers[0].active == 0 && servers[0].fails == 1 && !w.held);
  gw_balancer_walk_done(&w, 1); /* once per server */
  CHECK(servers[0].fails == 1 && servers[0].active == 0);
  CHECK(gw_balancer_walk_next(&w) == &servers[1]);
  CHECK(w.tried == 3);
  gw_balancer_walk_use(&w);
  gw_balancer_walk_drop(&w); /* cancelled: no verdict */
  CHECK(servers[1].active == 0 && servers[1].fails == 0 && !w.held);
  gw_balancer_walk_drop(&w);
  CHECK(servers[1].active == 0);
  CHECK(gw_balancer_walk_next(&w) == &servers[2]);
  CHECK(gw_balancer_walk_next(&w) == NULL); /* all tried */
  CHECK(w.server == &servers[2] && w.tried == 7);
  gw_balancer_walk_use(&w);
  gw_balancer_walk_done(&w, 0);
  CHECK(servers[2].active == 0 && servers[2].fails == 0);
  /* none live: no walk */
  for (int i = 0; i < 3; i++) servers[i].down_until_ms = 1e18;
  CHECK(gw_balancer_walk_first(&w, &g, NULL) == NULL);
}

int main(void)
{
  test_round_robin();
  test_tried_mask();
  test_least_conn();
  test_hash();
  test_health();
  test_empty();
  test_walk();
  return UNIT_DONE();
}
