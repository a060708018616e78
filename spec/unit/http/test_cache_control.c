/* test_cache_control.c - cache_control.c: Cache-Control directives, and
 * whether and how long a response may be stored in a shared cache.
 * unit: cache_control static_http headers */
#include <stdio.h>
#include <string.h>

#include "cache_control.h"
#include "unit.h"

#define NOW ((time_t)1700000000) /* Tue, 14 Nov 2023 22:13:20 GMT */

static gw_cc_t cc_of(const char *v)
{
  gw_cc_t cc;
  gw_cc_init(&cc);
  gw_cc_parse(&cc, v, strlen(v));
  return cc;
}

static void test_directives(void)
{
  gw_cc_t cc = cc_of("max-age=60, s-maxage=30");
  CHECK_EQ_INT(cc.max_age, 60);
  CHECK_EQ_INT(cc.s_maxage, 30);
  CHECK_EQ_INT(cc.no_store, 0);
  cc = cc_of("  No-Store ,PRIVATE");
  CHECK(cc.no_store && cc.is_private);
  cc = cc_of("max-age=\"120\"");
  CHECK_EQ_INT(cc.max_age, 120);
  cc = cc_of("max-age=abc");
  CHECK_EQ_INT(cc.max_age, 0); /* malformed: stale at once */
  cc = cc_of("max-age=99999999999999999999");
  CHECK_EQ_INT(cc.max_age, GW_CC_MAX_SECONDS);
  cc = cc_of("max-age=100, max-age=10");
  CHECK_EQ_INT(cc.max_age, 10); /* twice: the smaller */
  cc = cc_of("no-cache=\"Set-Cookie, X-Foo\", must-revalidate");
  CHECK(cc.no_cache && cc.must_revalidate);
  cc = cc_of("private=\"a,b\", max-age=5");
  CHECK(cc.is_private);
  CHECK_EQ_INT(cc.max_age, 5);
  cc = cc_of("stale-while-revalidate=30, stale-if-error=600, public");
  CHECK_EQ_INT(cc.stale_while_revalidate, 30);
  CHECK_EQ_INT(cc.stale_if_error, 600);
  CHECK(cc.is_public);
  cc = cc_of("x-ext=\"a\\\"b,max-age=7\", max-age=9");
  CHECK_EQ_INT(cc.max_age, 9); /* a quoted value's comma is not a separator */
  cc = cc_of("");
  CHECK_EQ_INT(cc.max_age, -1);
  CHECK_EQ_INT(cc.s_maxage, -1);
  cc = cc_of(",,, =, max-age");
  CHECK_EQ_INT(cc.max_age, -1); /* without a value: ignored */
  CHECK_EQ_INT(gw_cc_seconds("12", 2), 12);
  CHECK_EQ_INT(gw_cc_seconds("-1", 2), -1);
  CHECK_EQ_INT(gw_cc_seconds("", 0), -1);
}

static long long valid[GW_CC_VALID_SLOTS];

/* The verdict for a response of status with fields "Name: value|Name: value". */
static gw_cache_verdict_t decide(int status, const char *fields, const char *req_fields, int set_cookie_ok)
{
  gw_headers_t h, rq;
  gw_headers_init(&h);
  gw_headers_init(&rq);
  char buf[1024];
  const char *lists[2] = {fields, req_fields};
  gw_headers_t *into[2] = {&h, &rq};
  for (int k = 0; k < 2; k++) {
    snprintf(buf, sizeof(buf), "%s", lists[k] ? lists[k] : "");
    for (char *save = NULL, *f = strtok_r(buf, "|", &save); f; f = strtok_r(NULL, "|", &save)) {
      char *colon = strchr(f, ':');
      if (colon == NULL) continue;
      char *v = colon + 1;
      while (*v == ' ') v++;
      gw_headers_add(into[k], f, (size_t)(colon - f), v, strlen(v));
    }
  }
  gw_cache_rules_t rules = {valid, set_cookie_ok};
  gw_cache_verdict_t out;
  gw_cache_decide(status, &h, &rq, NOW, &rules, &out);
  gw_headers_dispose(&h);
  gw_headers_dispose(&rq);
  return out;
}

static void test_decide(void)
{
  for (int i = 0; i < GW_CC_VALID_SLOTS; i++) valid[i] = -1;
  gw_cache_verdict_t v = decide(200, "Cache-Control: max-age=60", NULL, 0);
  CHECK(v.storable);
  CHECK_EQ_INT(v.fresh_s, 60);
  v = decide(200, "Cache-Control: max-age=60, s-maxage=5", NULL, 0);
  CHECK_EQ_INT(v.fresh_s, 5); /* s-maxage first */
  CHECK(v.must_revalidate);    /* s-maxage implies proxy-revalidate */
  v = decide(200, "Expires: Tue, 14 Nov 2023 22:15:20 GMT|Date: Tue, 14 Nov 2023 22:13:20 GMT", NULL, 0);
  CHECK(v.storable);
  CHECK_EQ_INT(v.fresh_s, 120);
  v = decide(200, "Expires: Tue, 14 Nov 2023 22:14:20 GMT", NULL, 0);
  CHECK_EQ_INT(v.fresh_s, 60); /* no Date: now */
  v = decide(200, "Expires: 0", NULL, 0);
  CHECK(v.storable);
  CHECK_EQ_INT(v.fresh_s, 0); /* an invalid date: expired */
  v = decide(200, "Expires: Tue, 14 Nov 2023 22:15:20 GMT|Cache-Control: max-age=3", NULL, 0);
  CHECK_EQ_INT(v.fresh_s, 3); /* max-age over Expires */
  v = decide(200, "Content-Type: text/plain", NULL, 0);
  CHECK(!v.storable); /* no freshness at all */
  valid[gw_cc_valid_slot(200)] = 600;
  valid[gw_cc_valid_slot(404)] = 60;
  v = decide(200, "Content-Type: text/plain", NULL, 0);
  CHECK(v.storable);
  CHECK_EQ_INT(v.fresh_s, 600);
  v = decide(404, "", NULL, 0);
  CHECK_EQ_INT(v.fresh_s, 60);
  v = decide(500, "", NULL, 0);
  CHECK(!v.storable);
  valid[GW_CC_VALID_ANY] = 7;
  v = decide(500, "", NULL, 0);
  CHECK(v.storable);
  CHECK_EQ_INT(v.fresh_s, 7); /* any: */
  valid[GW_CC_VALID_ANY] = -1;
  v = decide(200, "Cache-Control: max-age=10", NULL, 0);
  CHECK_EQ_INT(v.fresh_s, 10); /* the response's own over valid: */
  CHECK(!decide(200, "Cache-Control: no-store, max-age=60", NULL, 0).storable);
  CHECK(!decide(200, "Cache-Control: private, max-age=60", NULL, 0).storable);
  CHECK(!decide(200, "Cache-Control: max-age=60|Set-Cookie: a=b", NULL, 0).storable);
  CHECK(decide(200, "Cache-Control: max-age=60|Set-Cookie: a=b", NULL, 1).storable);
  CHECK(!decide(200, "Cache-Control: max-age=60|Vary: Accept, *", NULL, 0).storable);
  CHECK(decide(200, "Cache-Control: max-age=60|Vary: Accept", NULL, 0).storable);
  CHECK(!decide(206, "Cache-Control: max-age=60", NULL, 0).storable);
  CHECK(!decide(304, "Cache-Control: max-age=60", NULL, 0).storable);
  CHECK(!decide(200, "Cache-Control: max-age=60", "Authorization: Basic eA==", 0).storable);
  CHECK(decide(200, "Cache-Control: max-age=60, public", "Authorization: Basic eA==", 0).storable);
  v = decide(200, "Cache-Control: no-cache, max-age=60", NULL, 0);
  CHECK(v.storable);
  CHECK_EQ_INT(v.fresh_s, 0); /* stored, revalidated each time */
  v = decide(200, "Cache-Control: max-age=1, stale-while-revalidate=30, stale-if-error=60|Age: 5", NULL, 0);
  CHECK_EQ_INT(v.stale_while_revalidate_s, 30);
  CHECK_EQ_INT(v.stale_if_error_s, 60);
  CHECK_EQ_INT(v.age_s, 5);
  v = decide(200, "Cache-Control: max-age=1, must-revalidate, stale-if-error=60", NULL, 0);
  CHECK_EQ_INT(v.stale_if_error_s, 0); /* must-revalidate: never stale */
  CHECK(v.must_revalidate);
}

int main(void)
{
  test_directives();
  test_decide();
  return unit_done();
}
