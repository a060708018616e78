/* test_real_ip.c - real_ip.c: the client's address from X-Forwarded-For or
 * Forwarded when the peer is a trusted proxy (nginx's realip semantics).
 * unit: real_ip addr headers */
#include <stdio.h>
#include <string.h>

#include "real_ip.h"
#include "unit.h"

static gw_cidr_t trusted[2];
static gw_real_ip_t cfg = {trusted, 2, "x-forwarded-for", 0, 0};

static void setup(void)
{
  gw_addr_parse_cidr("127.0.0.0/8", 11, &trusted[0]);
  gw_addr_parse_cidr("10.0.0.0/8", 10, &trusted[1]);
}

/* The address found for peer with the header fields given ("" if no
 * change); fields separated by '|'. */
static const char *find(const char *peer, const char *fields)
{
  static char out[64];
  gw_headers_t h;
  gw_headers_init(&h);
  gw_headers_add(&h, "Host", 4, "x", 1);
  char buf[512];
  snprintf(buf, sizeof(buf), "%s", fields);
  for (char *save = NULL, *f = strtok_r(buf, "|", &save); f; f = strtok_r(NULL, "|", &save)) {
    const char *name = cfg.forwarded ? "Forwarded" : "X-Forwarded-For";
    gw_headers_add(&h, name, strlen(name), f, strlen(f));
  }
  gw_headers_add(&h, "Accept", 6, "*/*", 3);
  int r = gw_real_ip_find(&cfg, peer, &h, out, sizeof(out));
  gw_headers_dispose(&h);
  return r ? out : "";
}

static void test_xff(void)
{
  cfg.recursive = 0;
  CHECK_STR(find("10.0.0.1", "1.1.1.1"), "1.1.1.1");
  CHECK_STR(find("8.8.8.8", "1.1.1.1"), "");                   /* peer not trusted */
  CHECK_STR(find("10.0.0.1", "1.1.1.1, 10.0.0.2"), "10.0.0.2"); /* one step only */
  CHECK_STR(find("10.0.0.1", "2.2.2.2, 1.1.1.1"), "1.1.1.1");
  CHECK_STR(find("10.0.0.1", ""), "");
  CHECK_STR(find("10.0.0.1", "garbage"), "");
  CHECK_STR(find("10.0.0.1", "1.1.1.1:5555"), "1.1.1.1");
  CHECK_STR(find("10.0.0.1", "[2001:db8::1]:80"), "2001:db8::1");
  CHECK_STR(find("10.0.0.1", "2001:db8::1"), "2001:db8::1");
  CHECK_STR(find("::ffff:10.0.0.1", "1.1.1.1"), "1.1.1.1");   /* v4-mapped peer */

  cfg.recursive = 1;
  CHECK_STR(find("10.0.0.1", "1.1.1.1, 10.0.0.2"), "1.1.1.1");
  CHECK_STR(find("10.0.0.1", "3.3.3.3, 1.1.1.1, 10.0.0.2, 127.0.0.5"), "1.1.1.1"); /* the rightmost untrusted */
  CHECK_STR(find("10.0.0.1", "10.0.0.3, 10.0.0.2"), "10.0.0.3"); /* all trusted: the leftmost */
  CHECK_STR(find("10.0.0.1", "evil, 10.0.0.2"), "10.0.0.2");     /* garbage ends the walk */
  CHECK_STR(find("10.0.0.1", "1.1.1.1|10.0.0.2"), "1.1.1.1");   /* two fields: one list */
  CHECK_STR(find("10.0.0.1", "1.1.1.1|"), "1.1.1.1");
  CHECK_STR(find("10.0.0.1", "1.1.1.1, , 10.0.0.2 ,"), "1.1.1.1"); /* empty elements skipped */
  CHECK_STR(find("8.8.8.8", "1.1.1.1, 10.0.0.2"), "");
}

static void test_forwarded(void)
{
  cfg.forwarded = 1;
  cfg.header = "forwarded";
  cfg.recursive = 0;
  CHECK_STR(find("10.0.0.1", "for=192.0.2.60;proto=http;by=203.0.113.43"), "192.0.2.60");
  CHECK_STR(find("10.0.0.1", "For=\"[2001:db8:cafe::17]:4711\""), "2001:db8:cafe::17");
  CHECK_STR(find("10.0.0.1", "proto=https; for=192.0.2.61"), "192.0.2.61");
  CHECK_STR(find("10.0.0.1", "for=unknown"), "");
  CHECK_STR(find("10.0.0.1", "for=_hidden"), "");
  CHECK_STR(find("10.0.0.1", "for=\"_gazonk\""), "");
  CHECK_STR(find("10.0.0.1", "proto=https"), "");           /* no for= */
  CHECK_STR(find("10.0.0.1", "for=\"[::1]"), "");            /* unterminated quote */
  CHECK_STR(find("10.0.0.1", "for=192.0.2.60, for=10.0.0.7"), "10.0.0.7");
  cfg.recursive = 1;
  CHECK_STR(find("10.0.0.1", "for=192.0.2.60, for=10.0.0.7"), "192.0.2.60");
  CHECK_STR(find("10.0.0.1", "for=192.0.2.60, for=_hidden, for=10.0.0.7"), "10.0.0.7"); /* stops at _hidden */
  CHECK_STR(find("10.0.0.1", "for=192.0.2.60|for=\"[2001:db8::2]\";proto=https"), "2001:db8::2");
  CHECK_STR(find("8.8.8.8", "for=192.0.2.60"), "");
}

int main(void)
{
  setup();
  test_xff();
  test_forwarded();
  return UNIT_DONE();
}
