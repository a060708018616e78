/* addr.c - IP literals, ports, host:port, unix paths and socket addresses
 * (see addr.h). */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "addr.h"

int gw_addr_parse_port(const char *s, size_t len)
{
  if (len == 0 || len > 5) return -1;
  int port = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    port = port * 10 + (s[i] - '0');
  }
  return port >= 1 && port <= 65535 ? port : -1;
}

int gw_addr_is_ip(const char *host)
{
  struct in6_addr a;
  return inet_pton(AF_INET, host, &a) == 1 || inet_pton(AF_INET6, host, &a) == 1;
}

socklen_t gw_addr_from_ip(const char *host, int port, struct sockaddr_storage *out)
{
  memset(out, 0, sizeof(*out));
  if (port <= 0 || port > 65535) return 0;
  struct sockaddr_in *in4 = (struct sockaddr_in *)out;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
  if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons((uint16_t)port);
    return sizeof(*in4);
  }
  if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    return sizeof(*in6);
  }
  return 0;
}

int gw_addr_parse_literal(const char *host, size_t len, gw_sockaddr_t *out, socklen_t *outlen)
{
  char buf[INET6_ADDRSTRLEN + 1];
  memset(out, 0, sizeof(*out));
  if (len >= sizeof(buf) + 2) return (len > 0 && host[0] == '[') || memchr(host, ':', len) ? -1 : 0;
  memcpy(buf, host, len);
  buf[len] = '\0';
  if (inet_pton(AF_INET, buf, &out->in4.sin_addr) == 1) {
    out->in4.sin_family = AF_INET;
    *outlen = sizeof(struct sockaddr_in);
    return 1;
  }
  const char *v6 = buf;
  if (buf[0] == '[') {
    if (len < 3 || buf[len - 1] != ']') return -1;
    buf[len - 1] = '\0';
    v6 = buf + 1;
  } else if (!memchr(buf, ':', len)) {
    return 0;
  }
  if (inet_pton(AF_INET6, v6, &out->in6.sin6_addr) != 1) return -1;
  out->in6.sin6_family = AF_INET6;
  *outlen = sizeof(struct sockaddr_in6);
  return 1;
}

void gw_addr_set_port(gw_sockaddr_t *a, int port)
{
  if (a->sa.sa_family == AF_INET) a->in4.sin_port = htons((uint16_t)port);
  else if (a->sa.sa_family == AF_INET6) a->in6.sin6_port = htons((uint16_t)port);
}

int gw_addr_split(const char *s, size_t len, gw_hostport_t *out, int flags)
{
  const char *host = s, *end = s + len, *host_end, *port = NULL;
  out->host[0] = '\0';
  out->port = -1;
  out->bracketed = 0;
  if (len > 0 && s[0] == '[') {
    host++;
    host_end = memchr(host, ']', (size_t)(end - host));
    if (host_end == NULL) return -1;
    if (host_end + 1 < end) {
      if (host_end[1] != ':') return -1;
      port = host_end + 2;
    }
    out->bracketed = 1;
  } else {
    host_end = (flags & GW_ADDR_BARE_V6) ? memrchr(s, ':', len) : memchr(s, ':', len);
    if (host_end) port = host_end + 1;
    else host_end = end;
  }
  size_t hl = (size_t)(host_end - host);
  if (hl == 0 || hl > GW_ADDR_HOST_MAX) return -1;
  if (port && (out->port = gw_addr_parse_port(port, (size_t)(end - port))) < 0) return -1;
  memcpy(out->host, host, hl);
  out->host[hl] = '\0';
  return 0;
}

const char *gw_addr_unix_path(const char *s)
{
  return strncmp(s, "unix:/", 6) == 0 ? s + 5 : NULL;
}

socklen_t gw_addr_from_unix(const char *path, gw_sockaddr_t *out)
{
  memset(out, 0, sizeof(*out));
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof(out->un.sun_path)) return 0;
  out->un.sun_family = AF_UNIX;
  memcpy(out->un.sun_path, path, n);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
}

/* An IPv4 address as dotted quad: glibc's inet_ntop formats it with
 * sprintf, which costs more than the rest of taking a connection. */
static int ipv4_text(const unsigned char *b, char *buf, size_t size)
{
  char t[16];
  size_t n = 0;
  for (int i = 0; i < 4; i++) {
    unsigned v = b[i];
    if (v >= 100) t[n++] = (char)('0' + v / 100);
    if (v >= 10) t[n++] = (char)('0' + v / 10 % 10);
    t[n++] = (char)('0' + v % 10);
    t[n++] = i < 3 ? '.' : '\0';
  }
  if (n > size) return -1;
  memcpy(buf, t, n);
  return 0;
}

int gw_addr_to_string(const struct sockaddr *sa, char *buf, size_t size)
{
  if (sa->sa_family == AF_INET) {
    if (ipv4_text((const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr, buf, size) == 0) return 0;
    if (size > 0) buf[0] = '\0';
    return -1;
  }
  const void *ip;
  if (sa->sa_family == AF_INET) ip = &((const struct sockaddr_in *)sa)->sin_addr;
  else if (sa->sa_family == AF_INET6) ip = &((const struct sockaddr_in6 *)sa)->sin6_addr;
  else ip = NULL;
  if (ip == NULL || size > (size_t)INT32_MAX || inet_ntop(sa->sa_family, ip, buf, (socklen_t)size) == NULL) {
    if (size > 0) buf[0] = '\0';
    return -1;
  }
  return 0;
}

int gw_addr_format(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
  char ip[INET6_ADDRSTRLEN];
  int n;
  if (sa->sa_family == AF_UNIX) {
    const struct sockaddr_un *un = (const struct sockaddr_un *)sa;
    size_t max = len > offsetof(struct sockaddr_un, sun_path) ? len - offsetof(struct sockaddr_un, sun_path) : 0;
    n = snprintf(buf, size, "unix:%.*s", (int)strnlen(un->sun_path, max), un->sun_path);
  } else if (gw_addr_to_string(sa, ip, sizeof(ip)) == 0) {
    int port = ntohs(sa->sa_family == AF_INET ? ((const struct sockaddr_in *)sa)->sin_port
                                              : ((const struct sockaddr_in6 *)sa)->sin6_port);
    n = snprintf(buf, size, sa->sa_family == AF_INET ? "%s:%d" : "[%s]:%d", ip, port);
  } else {
    n = -1;
  }
  if (n < 0 || (size_t)n >= size) {
    if (size > 0) buf[0] = '\0';
    return -1;
  }
  return 0;
}

socklen_t gw_addr_parse_fixed(const char *addr, gw_sockaddr_t *out)
{
  const char *path = gw_addr_unix_path(addr);
  if (path) return gw_addr_from_unix(path, out);
  gw_hostport_t hp;
  if (gw_addr_split(addr, strlen(addr), &hp, 0) < 0 || hp.port <= 0) return 0;
  const char *host = strcmp(hp.host, "localhost") == 0 ? "127.0.0.1" : hp.host;
  socklen_t len;
  if (gw_addr_parse_literal(host, strlen(host), out, &len) != 1) return 0;
  gw_addr_set_port(out, hp.port);
  return len;
}

int gw_addr_parse_cidr(const char *s, size_t len, gw_cidr_t *out)
{
  memset(out, 0, sizeof(*out));
  const char *slash = memchr(s, '/', len);
  size_t alen = slash ? (size_t)(slash - s) : len;
  if (alen == 0 || s[0] == '[') return -1;
  gw_sockaddr_t a;
  socklen_t alen_sa;
  if (gw_addr_parse_literal(s, alen, &a, &alen_sa) != 1) return -1;
  int max = a.sa.sa_family == AF_INET ? 32 : 128;
  int bits = max;
  if (slash) {
    const char *d = slash + 1, *end = s + len;
    if (d == end || end - d > 3) return -1;
    bits = 0;
    for (; d < end; d++) {
      if (*d < '0' || *d > '9') return -1;
      bits = bits * 10 + (*d - '0');
    }
    if (bits > max) return -1;
  }
  out->family = a.sa.sa_family;
  out->bits = bits;
  if (out->family == AF_INET) memcpy(out->net, &a.in4.sin_addr, 4);
  else memcpy(out->net, &a.in6.sin6_addr, 16);
  for (int i = 0; i < max / 8; i++) { /* clear the host bits */
    int keep = bits - i * 8;
    out->net[i] &= keep >= 8 ? 0xff : keep <= 0 ? 0 : (unsigned char)(0xff << (8 - keep));
  }
  return 0;
}

static int cidr_has(const gw_cidr_t *c, int family, const unsigned char *ip)
{
  if (c->family != family) return 0;
  int full = c->bits / 8, rest = c->bits % 8;
  if (memcmp(c->net, ip, (size_t)full) != 0) return 0;
  return rest == 0 || (ip[full] & (unsigned char)(0xff << (8 - rest))) == c->net[full];
}

int gw_addr_cidr_match(const gw_cidr_t *list, size_t n, const struct sockaddr *sa)
{
  int family;
  const unsigned char *ip;
  if (sa->sa_family == AF_INET) {
    family = AF_INET;
    ip = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
  } else if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    family = IN6_IS_ADDR_V4MAPPED(a6) ? AF_INET : AF_INET6;
    ip = family == AF_INET ? a6->s6_addr + 12 : a6->s6_addr;
  } else {
    return 0;
  }
  for (size_t i = 0; i < n; i++)
    if (cidr_has(&list[i], family, ip)) return 1;
  return 0;
}

int gw_addr_cidr_match_text(const gw_cidr_t *list, size_t n, const char *ip, size_t len)
{
  gw_sockaddr_t a;
  socklen_t alen;
  if (gw_addr_parse_literal(ip, len, &a, &alen) != 1) return -1;
  return gw_addr_cidr_match(list, n, &a.sa);
}
