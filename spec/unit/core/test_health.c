/* test_health.c - health.c: the up/down transitions of active health checks
 * and the lock that lets one worker run a group's checks.
 * unit: health */
#include <string.h>
#include <unistd.h>

#include "health.h"
#include "unit.h"

static void test_transitions(void)
{
  gw_health_conf_t c = {.fails = 2, .passes = 3, .expect = 200};
  gw_health_server_t s;
  memset(&s, 0, sizeof(s));
  CHECK_EQ_INT(gw_health_record(&s, &c, 500, "status 500"), 0);
  CHECK_EQ_INT(s.down, 0);
  CHECK_EQ_INT(gw_health_record(&s, &c, 0, "connection refused"), -1); /* the 2nd failure in a row */
  CHECK_EQ_INT(s.down, 1);
  CHECK_STR(s.last_error, "connection refused");
  CHECK_EQ_INT(gw_health_record(&s, &c, 0, "timed out"), 0);        /* down already */
  CHECK_EQ_INT(gw_health_record(&s, &c, 200, NULL), 0);
  CHECK_EQ_INT(gw_health_record(&s, &c, 200, NULL), 0);
  CHECK_EQ_INT(gw_health_record(&s, &c, 500, "status 500"), 0);     /* passes start over */
  CHECK_EQ_INT(s.down, 1);
  CHECK_EQ_INT(gw_health_record(&s, &c, 200, NULL), 0);
  CHECK_EQ_INT(gw_health_record(&s, &c, 200, NULL), 0);
  CHECK_EQ_INT(gw_health_record(&s, &c, 200, NULL), 1);             /* the 3rd pass in a row */
  CHECK_EQ_INT(s.down, 0);
  CHECK_STR(s.last_error, "");
  CHECK_EQ_UINT(s.checks, 9);
  CHECK_EQ_UINT(s.transitions, 2);
  CHECK_EQ_INT(gw_health_record(&s, &c, 500, "status 500"), 0);     /* one failure: still up */
  CHECK_EQ_INT(gw_health_record(&s, &c, 200, NULL), 0);
  CHECK_EQ_INT(gw_health_record(&s, &c, 500, "status 500"), 0);
  CHECK_EQ_INT(s.down, 0);
  char longwhy[200];
  memset(longwhy, 'x', sizeof(longwhy) - 1);
  longwhy[sizeof(longwhy) - 1] = '\0';
  gw_health_record(&s, &c, 0, longwhy);
  CHECK_EQ_UINT(strlen(s.last_error), sizeof(s.last_error) - 1);
}

static void test_claim(void)
{
  gw_health_conf_t c = {0};
  CHECK_EQ_INT(gw_health_map(&c, 3), 0);
  gw_health_shared_t *h = c.shared;
  int32_t me = (int32_t)getpid(), other = (int32_t)getppid();
  CHECK_EQ_INT(gw_health_claim(h, me, 1000, 3000), 1);     /* free: taken */
  CHECK_EQ_INT(gw_health_claim(h, other, 2000, 3000), 0);  /* held, fresh */
  CHECK_EQ_INT(gw_health_claim(h, me, 2500, 3000), 1);     /* the holder's round */
  CHECK_EQ_INT(gw_health_claim(h, other, 6000, 3000), 1);  /* stale: taken over */
  CHECK_EQ_INT(gw_health_claim(h, me, 6100, 3000), 0);
  gw_health_release(h, me);                                /* not the holder: nothing */
  CHECK_EQ_INT(h->owner, other);
  gw_health_release(h, other);
  CHECK_EQ_INT(h->owner, 0);
  h->owner = 999999999; /* a pid that does not exist */
  h->owner_seen_ms = 6000;
  CHECK_EQ_INT(gw_health_claim(h, me, 6001, 3000), 1);     /* its holder is gone */
  CHECK_EQ_INT(h->servers[2].down, 0);                     /* zeroed: every server starts up */
  gw_health_unmap(&c);
  CHECK(c.shared == NULL);
}

int main(void)
{
  test_transitions();
  test_claim();
  return UNIT_DONE();
}
