/* test_addr.c - addr.c: ports, IP literals, host:port, unix paths, sockaddrs.
 * unit: addr */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "addr.h"
#include "unit.h"

static int split(const char *s, int flags, gw_hostport_t *hp)
{
  return gw_addr_split(s, strlen(s), hp, flags);
}

static void test_ports(void)
{
  CHECK(gw_addr_parse_port("80", 2) == 80);
  CHECK(gw_addr_parse_port("1", 1) == 1);
  CHECK(gw_addr_parse_port("65535", 5) == 65535);
  CHECK(gw_addr_parse_port("08080", 5) == 8080);
  CHECK(gw_addr_parse_port("0", 1) == -1);
  CHECK(gw_addr_parse_port("65536", 5) == -1);
  CHECK(gw_addr_parse_port("99999", 5) == -1);
  CHECK(gw_addr_parse_port("", 0) == -1);
  CHECK(gw_addr_parse_port("x", 1) == -1);
  CHECK(gw_addr_parse_port("8x", 2) == -1);
  CHECK(gw_addr_parse_port("+80", 3) == -1);
  CHECK(gw_addr_parse_port("-1", 2) == -1);
  CHECK(gw_addr_parse_port(" 80", 3) == -1);
  CHECK(gw_addr_parse_port("000080", 6) == -1); /* more than 5 digits */
  CHECK(gw_addr_parse_port("8080/x", 4) == 8080); /* only len bytes count */
}

static void test_literals(void)
{
  CHECK(gw_addr_is_ip("127.0.0.1"));
  CHECK(gw_addr_is_ip("::1"));
  CHECK(gw_addr_is_ip("2001:db8::1"));
  CHECK(!gw_addr_is_ip("[::1]"));
  CHECK(!gw_addr_is_ip("localhost"));
  CHECK(!gw_addr_is_ip("1.2.3"));
  CHECK(!gw_addr_is_ip("256.1.1.1"));
  CHECK(!gw_addr_is_ip(""));

  struct sockaddr_storage ss;
  socklen_t n = gw_addr_from_ip("10.1.2.3", 8080, &ss);
  CHECK(n == sizeof(struct sockaddr_in));
  CHECK(ss.ss_family == AF_INET);
  CHECK(ntohs(((struct sockaddr_in *)&ss)->sin_port) == 8080);
  n = gw_addr_from_ip("::1", 443, &ss);
  CHECK(n == sizeof(struct sockaddr_in6));
  CHECK(ss.ss_family == AF_INET6);
  CHECK(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) == 443);
  CHECK(gw_addr_from_ip("[::1]", 80, &ss) == 0); /* brackets are not part of a literal */
  CHECK(gw_addr_from_ip("example.com", 80, &ss) == 0);
  CHECK(gw_addr_from_ip("10.0.0.1", 0, &ss) == 0);
  CHECK(gw_addr_from_ip("10.0.0.1", 65536, &ss) == 0);
  CHECK(gw_addr_from_ip("10.0.0.1", -1, &ss) == 0);

  gw_sockaddr_t a;
  socklen_t alen = 0;
  CHECK(gw_addr_parse_literal("1.2.3.4", 7, &a, &alen) == 1);
  CHECK(a.sa.sa_family == AF_INET && alen == sizeof(struct sockaddr_in) && a.in4.sin_port == 0);
  CHECK(gw_addr_parse_literal("::1", 3, &a, &alen) == 1);
  CHECK(a.sa.sa_family == AF_INET6 && alen == sizeof(struct sockaddr_in6));
  CHECK(gw_addr_parse_literal("[::1]", 5, &a, &alen) == 1);
  CHECK(a.sa.sa_family == AF_INET6);
  CHECK(gw_addr_parse_literal("example.com", 11, &a, &alen) == 0);
  CHECK(gw_addr_parse_literal("localhost", 9, &a, &alen) == 0);
  CHECK(gw_addr_parse_literal("[::1", 4, &a, &alen) == -1);
  CHECK(gw_addr_parse_literal("[]", 2, &a, &alen) == -1);
  CHECK(gw_addr_parse_literal("[1.2.3.4]", 9, &a, &alen) == -1);
  CHECK(gw_addr_parse_literal("fe80::1%eth0", 12, &a, &alen) == -1);
  CHECK(gw_addr_parse_literal("host:80", 7, &a, &alen) == -1);
  const char *longname = "a-very-long-host-name-that-is-not-an-address.example.com";
  CHECK(gw_addr_parse_literal(longname, strlen(longname), &a, &alen) == 0);
  const char *longv6 = "[0000:0000:0000:0000:0000:0000:0000:0001:0000:0000]";
  CHECK(gw_addr_parse_literal(longv6, strlen(longv6), &a, &alen) == -1);
  /* only len bytes are read */
  CHECK(gw_addr_parse_literal("1.2.3.4:80", 7, &a, &alen) == 1);

  gw_addr_parse_literal("1.2.3.4", 7, &a, &alen);
  gw_addr_set_port(&a, 53);
  CHECK(ntohs(a.in4.sin_port) == 53);
  gw_addr_parse_literal("::1", 3, &a, &alen);
  gw_addr_set_port(&a, 5353);
  CHECK(ntohs(a.in6.sin6_port) == 5353);
}

static void test_split(void)
{
  gw_hostport_t hp;
  CHECK(split("example.com:8080", 0, &hp) == 0);
  CHECK_STR(hp.host, "example.com");
  CHECK(hp.port == 8080 && !hp.bracketed);
  CHECK(split("example.com", 0, &hp) == 0);
  CHECK_STR(hp.host, "example.com");
  CHECK(hp.port == -1);
  CHECK(split("10.0.0.1:80", 0, &hp) == 0);
  CHECK_STR(hp.host, "10.0.0.1");
  CHECK(hp.port == 80);
  CHECK(split("[::1]:8080", 0, &hp) == 0);
  CHECK_STR(hp.host, "::1");
  CHECK(hp.port == 8080 && hp.bracketed);
  CHECK(split("[::1]", 0, &hp) == 0);
  CHECK_STR(hp.host, "::1");
  CHECK(hp.port == -1 && hp.bracketed);
  CHECK(split("[2001:db8::1]:65535", 0, &hp) == 0);
  CHECK_STR(hp.host, "2001:db8::1");
  CHECK(hp.port == 65535);

  /* an unbracketed IPv6 address: only with GW_ADDR_BARE_V6 (the last ':') */
  CHECK(split("::1:8080", 0, &hp) == -1);
  CHECK(split("::1:8080", GW_ADDR_BARE_V6, &hp) == 0);
  CHECK_STR(hp.host, "::1");
  CHECK(hp.port == 8080);
  CHECK(split("[::1]:8080", GW_ADDR_BARE_V6, &hp) == 0);
  CHECK_STR(hp.host, "::1");
  CHECK(hp.port == 8080);

  /* bad ports */
  CHECK(split("h:", 0, &hp) == -1);
  CHECK(split("h:0", 0, &hp) == -1);
  CHECK(split("h:65536", 0, &hp) == -1);
  CHECK(split("h:x", 0, &hp) == -1);
  CHECK(split("h:80x", 0, &hp) == -1);
  CHECK(split("[::1]:", 0, &hp) == -1);
  CHECK(split("[::1]:0", 0, &hp) == -1);
  CHECK(split("[::1]:65536", 0, &hp) == -1);
  CHECK(split("[::1]:x", 0, &hp) == -1);

  /* bad hosts */
  CHECK(split("", 0, &hp) == -1);
  CHECK(split(":80", 0, &hp) == -1);
  CHECK(split("[]:80", 0, &hp) == -1);
  CHECK(split("[::1", 0, &hp) == -1);
  CHECK(split("[::1]x", 0, &hp) == -1);
  CHECK(split("[::1]x:80", 0, &hp) == -1);
  char big[300];
  memset(big, 'a', 255);
  strcpy(big + 255, ":80");
  CHECK(split(big, 0, &hp) == 0); /* 255 bytes: the longest kept */
  CHECK(strlen(hp.host) == 255);
  memset(big, 'a', 256);
  strcpy(big + 256, ":80");
  CHECK(split(big, 0, &hp) == -1);

  /* only len bytes are read */
  CHECK(gw_addr_split("h:81/path", 4, &hp, 0) == 0);
  CHECK_STR(hp.host, "h");
  CHECK(hp.port == 81);
}

static void test_unix(void)
{
  CHECK_STR(gw_addr_unix_path("unix:/tmp/a.sock"), "/tmp/a.sock");
  CHECK_STR(gw_addr_unix_path("unix:/"), "/");
  CHECK(gw_addr_unix_path("unix:tmp/a.sock") == NULL);
  CHECK(gw_addr_unix_path("unix:") == NULL);
  CHECK(gw_addr_unix_path("http://h/") == NULL);
  CHECK(gw_addr_unix_path("") == NULL);

  gw_sockaddr_t a;
  socklen_t n = gw_addr_from_unix("/tmp/a.sock", &a);
  CHECK(n == offsetof(struct sockaddr_un, sun_path) + strlen("/tmp/a.sock") + 1);
  CHECK(a.un.sun_family == AF_UNIX);
  CHECK_STR(a.un.sun_path, "/tmp/a.sock");
  CHECK(gw_addr_from_unix("", &a) == 0);
  char path[200];
  memset(path, 'p', sizeof(path) - 1);
  path[0] = '/';
  path[107] = '\0'; /* 107 bytes: the longest that fits sun_path with its NUL */
  CHECK(gw_addr_from_unix(path, &a) > 0);
  memset(path, 'p', sizeof(path) - 1);
  path[108] = '\0';
  CHECK(gw_addr_from_unix(path, &a) == 0);
}

static void test_fixed(void)
{
  gw_sockaddr_t a;
  CHECK(gw_addr_parse_fixed("127.0.0.1:6379", &a) == sizeof(struct sockaddr_in));
  CHECK(a.sa.sa_family == AF_INET && ntohs(a.in4.sin_port) == 6379);
  CHECK(gw_addr_parse_fixed("localhost:3301", &a) == sizeof(struct sockaddr_in));
  CHECK(a.in4.sin_addr.s_addr == htonl(INADDR_LOOPBACK) && ntohs(a.in4.sin_port) == 3301);
  CHECK(gw_addr_parse_fixed("[::1]:6380", &a) == sizeof(struct sockaddr_in6));
  CHECK(a.sa.sa_family == AF_INET6 && ntohs(a.in6.sin6_port) == 6380);
  CHECK(gw_addr_parse_fixed("unix:/run/redis.sock", &a) > 0);
  CHECK(a.sa.sa_family == AF_UNIX);
  CHECK(gw_addr_parse_fixed("redis.example:6379", &a) == 0); /* a name to resolve */
  CHECK(gw_addr_parse_fixed("127.0.0.1", &a) == 0);           /* no port */
  CHECK(gw_addr_parse_fixed("127.0.0.1:0", &a) == 0);
  CHECK(gw_addr_parse_fixed("unix:", &a) == 0);
  CHECK(gw_addr_parse_fixed("", &a) == 0);
}

static void test_to_string(void)
{
  struct sockaddr_storage ss;
  char buf[64];
  socklen_t n = gw_addr_from_ip("192.168.1.20", 8080, &ss);
  CHECK(gw_addr_to_string((struct sockaddr *)&ss, buf, sizeof(buf)) == 0);
  CHECK_STR(buf, "192.168.1.20");
  CHECK(gw_addr_format((struct sockaddr *)&ss, n, buf, sizeof(buf)) == 0);
  CHECK_STR(buf, "192.168.1.20:8080");
  n = gw_addr_from_ip("0:0::1", 443, &ss);
  CHECK(gw_addr_to_string((struct sockaddr *)&ss, buf, sizeof(buf)) == 0);
  CHECK_STR(buf, "::1");
  CHECK(gw_addr_format((struct sockaddr *)&ss, n, buf, sizeof(buf)) == 0);
  CHECK_STR(buf, "[::1]:443");
  CHECK(gw_addr_to_string((struct sockaddr *)&ss, buf, 3) == -1); /* too small */
  CHECK_STR(buf, "");
  CHECK(gw_addr_format((struct sockaddr *)&ss, n, buf, 5) == -1);
  CHECK_STR(buf, "");

  gw_sockaddr_t a;
  n = gw_addr_from_unix("/run/app.sock", &a);
  CHECK(gw_addr_to_string(&a.sa, buf, sizeof(buf)) == -1);
  CHECK(gw_addr_format(&a.sa, n, buf, sizeof(buf)) == 0);
  CHECK_STR(buf, "unix:/run/app.sock");
}

/* The dotted quad written without inet_ntop agrees with it everywhere. */
static void test_ipv4_text(void)
{
  struct sockaddr_in a = {.sin_family = AF_INET};
  char got[INET6_ADDRSTRLEN], want[INET6_ADDRSTRLEN];
  int bad = 0;
  for (unsigned v = 0; v < 256; v++) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(255 - v), (unsigned char)(v * 7), (unsigned char)(v / 3)};
    memcpy(&a.sin_addr, b, 4);
    inet_ntop(AF_INET, &a.sin_addr, want, sizeof(want));
    if (gw_addr_to_string((struct sockaddr *)&a, got, sizeof(got)) != 0 || strcmp(got, want) != 0) bad++;
  }
  CHECK_EQ_INT(bad, 0);
  memset(&a.sin_addr, 255, 4);
  CHECK(gw_addr_to_string((struct sockaddr *)&a, got, 16) == 0);
  CHECK_STR(got, "255.255.255.255");
  CHECK(gw_addr_to_string((struct sockaddr *)&a, got, 15) == -1);
  CHECK_STR(got, "");
  memset(&a.sin_addr, 0, 4);
  CHECK(gw_addr_to_string((struct sockaddr *)&a, got, 8) == 0);
  CHECK_STR(got, "0.0.0.0");
  CHECK(gw_addr_to_string((struct sockaddr *)&a, got, 7) == -1);
}

static int cidr(const char *s, gw_cidr_t *c)
{
  return gw_addr_parse_cidr(s, strlen(s), c);
}

static int in(const char *list_text, const char *ip)
{
  gw_cidr_t list[8];
  size_t n = 0;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", list_text);
  for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && n < 8; t = strtok_r(NULL, " ", &save))
    if (cidr(t, &list[n++]) < 0) return -2;
  return gw_addr_cidr_match_text(list, n, ip, strlen(ip));
}

static void test_cidr(void)
{
  gw_cidr_t c;
  CHECK(cidr("10.0.0.0/8", &c) == 0);
  CHECK_EQ_INT(c.family, AF_INET);
  CHECK_EQ_INT(c.bits, 8);
  CHECK(cidr("10.1.2.3/8", &c) == 0);
  CHECK_EQ_INT(c.net[1], 0); /* host bits cleared */
  CHECK(cidr("127.0.0.1", &c) == 0);
  CHECK_EQ_INT(c.bits, 32);
  CHECK(cidr("::1", &c) == 0);
  CHECK_EQ_INT(c.bits, 128);
  CHECK(cidr("2001:db8::/32", &c) == 0);
  CHECK_EQ_INT(c.family, AF_INET6);
  CHECK(cidr("0.0.0.0/0", &c) == 0);
  CHECK(cidr("::/0", &c) == 0);
  CHECK(cidr("10.0.0.0/33", &c) == -1);
  CHECK(cidr("::/129", &c) == -1);
  CHECK(cidr("10.0.0.0/", &c) == -1);
  CHECK(cidr("/8", &c) == -1);
  CHECK(cidr("10.0.0.0/8x", &c) == -1);
  CHECK(cidr("10.0.0.0/-1", &c) == -1);
  CHECK(cidr("10.0.0.0/0008", &c) == -1);
  CHECK(cidr("localhost", &c) == -1);
  CHECK(cidr("[::1]/128", &c) == -1);
  CHECK(cidr("10.0.0/8", &c) == -1);
  CHECK(cidr("", &c) == -1);

  CHECK_EQ_INT(in("10.0.0.0/8", "10.255.1.2"), 1);
  CHECK_EQ_INT(in("10.0.0.0/8", "11.0.0.1"), 0);
  CHECK_EQ_INT(in("192.168.1.0/25", "192.168.1.127"), 1);
  CHECK_EQ_INT(in("192.168.1.0/25", "192.168.1.128"), 0);
  CHECK_EQ_INT(in("127.0.0.1", "127.0.0.1"), 1);
  CHECK_EQ_INT(in("127.0.0.1", "127.0.0.2"), 0);
  CHECK_EQ_INT(in("0.0.0.0/0", "8.8.8.8"), 1);
  CHECK_EQ_INT(in("0.0.0.0/0", "::1"), 0); /* families apart */
  CHECK_EQ_INT(in("::/0", "::1"), 1);
  CHECK_EQ_INT(in("2001:db8::/32", "2001:db8:ffff::1"), 1);
  CHECK_EQ_INT(in("2001:db8::/32", "2001:db9::1"), 0);
  CHECK_EQ_INT(in("2001:db8::/33", "2001:db8:8000::1"), 0);
  CHECK_EQ_INT(in("10.0.0.0/8", "::ffff:10.1.1.1"), 1); /* v4-mapped counts as IPv4 */
  CHECK_EQ_INT(in("10.0.0.0/8 ::1", "[::1]"), 1);
  CHECK_EQ_INT(in("10.0.0.0/8", "unknown"), -1);
  CHECK_EQ_INT(in("10.0.0.0/8", "_hidden"), -1);
  CHECK_EQ_INT(in("", "10.0.0.1"), 0);
}

int main(void)
{
  test_cidr();
  test_ipv4_text();
  test_ports();
  test_literals();
  test_split();
  test_unix();
  test_fixed();
  test_to_string();
  return UNIT_DONE();
}
