/* test_url.c - url.c: proxy_pass and sub-request URLs.
 * unit: url addr */
#include <string.h>

#include "url.h"
#include "unit.h"

static void test_http(void)
{
  gw_url_t u;
  CHECK(gw_url_parse("http://127.0.0.1:8080/x?y=1", &u) == 0);
  CHECK_STR(u.host, "127.0.0.1");
  CHECK(u.port == 8080);
  CHECK_STR(u.path, "/x?y=1");
  CHECK_STR(u.hostport, "127.0.0.1:8080");
  CHECK(u.addrlen > 0 && u.addr.ss_family == AF_INET);
  CHECK(u.unix_path == NULL);

  /* no port, no path: 80 and "" (the request-target passes unchanged) */
  CHECK(gw_url_parse("http://backend", &u) == 0);
  CHECK_STR(u.host, "backend");
  CHECK(u.port == 80);
  CHECK_STR(u.path, "");
  CHECK_STR(u.hostport, "backend");
  CHECK(u.addrlen == 0); /* a name: a group, or resolved at run time */

  CHECK(gw_url_parse("http://backend:80/", &u) == 0);
  CHECK(u.port == 80);
  CHECK_STR(u.hostport, "backend"); /* :80 is left out */
  CHECK_STR(u.path, "/");

  CHECK(gw_url_parse("http://backend?q=1", &u) == 0); /* a query without a path */
  CHECK_STR(u.host, "backend");
  CHECK_STR(u.path, "?q=1");
  CHECK(gw_url_parse("http://b:81?q", &u) == 0);
  CHECK(u.port == 81);
  CHECK_STR(u.path, "?q");

  const char *url = "http://h.example:9000/api/v1";
  CHECK(gw_url_parse(url, &u) == 0);
  CHECK(u.path == url + strlen("http://h.example:9000")); /* points into the URL */
}

static void test_ipv6(void)
{
  gw_url_t u;
  CHECK(gw_url_parse("http://[::1]:8081/p", &u) == 0);
  CHECK_STR(u.host, "::1");
  CHECK(u.port == 8081);
  CHECK_STR(u.path, "/p");
  CHECK(u.addrlen > 0 && u.addr.ss_family == AF_INET6);
  CHECK_STR(u.hostport, "::1:8081"); /* unbracketed, as it always was */
  CHECK(gw_url_parse("http://[2001:db8::2]/", &u) == 0);
  CHECK_STR(u.host, "2001:db8::2");
  CHECK(u.port == 80);
  CHECK(gw_url_parse("http://[::1]", &u) == 0);
  CHECK_STR(u.path, "");
  /* without brackets an IPv6 address is not a host */
  CHECK(gw_url_parse("http://::1:80/", &u) == -1);
  CHECK(gw_url_parse("http://[::1/", &u) == -1);
  CHECK(gw_url_parse("http://[]:80/", &u) == -1);
}

static void test_unix(void)
{
  gw_url_t u;
  CHECK(gw_url_parse("unix:/tmp/app.sock", &u) == 0);
  CHECK_STR(u.unix_path, "/tmp/app.sock");
  CHECK_STR(u.path, "");
  CHECK_STR(u.hostport, "localhost");
  CHECK(u.addrlen == 0);
  char url[200] = "unix:/";
  memset(url + 6, 'p', 106); /* a 107-byte path fits sun_path */
  CHECK(gw_url_parse(url, &u) == 0);
  url[112] = 'p'; /* 108 bytes do not */
  CHECK(gw_url_parse(url, &u) == -1);
  CHECK(gw_url_parse("unix:relative.sock", &u) == -1);
}

static void test_bad(void)
{
  gw_url_t u;
  /* https: port 443 unless given; the Host value omits only 443 */
  CHECK(gw_url_parse("https://h/", &u) == 0);
  CHECK(u.tls == 1 && u.port == 443);
  CHECK_STR(u.hostport, "h");
  CHECK_STR(u.path, "/");
  CHECK(gw_url_parse("https://127.0.0.1:8443/a", &u) == 0);
  CHECK(u.tls == 1 && u.port == 8443 && u.addrlen > 0);
  CHECK_STR(u.hostport, "127.0.0.1:8443");
  CHECK(gw_url_parse("https://h:80/", &u) == 0);
  CHECK_STR(u.hostport, "h:80");
  CHECK(gw_url_parse("http://h/", &u) == 0);
  CHECK(u.tls == 0 && u.port == 80);
  CHECK(gw_url_parse("https:///x", &u) == -1);
  CHECK(gw_url_parse("httpsx://h/", &u) == -1);
  CHECK(gw_url_parse("ftp://h/", &u) == -1);
  CHECK(gw_url_parse("HTTP://h/", &u) == -1);
  CHECK(gw_url_parse("h:80/", &u) == -1);
  CHECK(gw_url_parse("", &u) == -1);
  CHECK(gw_url_parse("http://", &u) == -1);
  CHECK(gw_url_parse("http:///x", &u) == -1);
  CHECK(gw_url_parse("http://:80/", &u) == -1);
  CHECK(gw_url_parse("http://h:/", &u) == -1);
  CHECK(gw_url_parse("http://h:0/", &u) == -1);
  CHECK(gw_url_parse("http://h:65536/", &u) == -1);
  CHECK(gw_url_parse("http://h:x/", &u) == -1);
  CHECK(gw_url_parse("http://h:123456/", &u) == -1);
  CHECK(gw_url_parse("http://h:65535/", &u) == 0);
  char url[300] = "http://";
  memset(url + 7, 'a', 255);
  CHECK(gw_url_parse(url, &u) == 0); /* a 255-byte host */
  url[7 + 255] = 'a';
  CHECK(gw_url_parse(url, &u) == -1);
}

int main(void)
{
  test_http();
  test_ipv6();
  test_unix();
  test_bad();
  return UNIT_DONE();
}
