/* proxy_proto.c - the PROXY protocol header, v1 and v2 (proxy_proto.h). The
 * parser looks only at the bytes it is given and says how many belong to
 * the header, so its caller can take exactly those off the socket and leave
 * what follows (a TLS ClientHello, an HTTP/2 preface) where it was. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "proxy_proto.h"

#define V1_PREFIX "PROXY "
#define V1_PREFIX_LEN 6

#define PP2_TYPE_AUTHORITY 0x02
#define PP2_TYPE_SSL 0x20
#define PP2_SSL_FIXED 5 /* client (1) and verify (4) before the SSL sub-TLVs */

static int fail(const char **why, const char *text, int code)
{
  *why = text;
  return code;
}

/* -- version 1: "PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n" ------------------ */

/* A port: 1 to 5 digits, at most 65535 (0 allowed: the spec sets no floor). */
static int v1_port(const char *s, size_t len)
{
  if (len == 0 || len > 5) return -1;
  int v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v <= 65535 ? v : -1;
}

/* The next space-separated word of [*at, end): exactly one space between
 * words, none before the first. */
static int v1_word(const char **at, const char *end, const char **w, size_t *wlen)
{
  const char *s = *at, *sp = memchr(s, ' ', (size_t)(end - s));
  const char *e = sp ? sp : end;
  if (e == s) return -1;
  *w = s;
  *wlen = (size_t)(e - s);
  *at = sp ? sp + 1 : end;
  return sp && sp + 1 == end ? -1 : 0; /* a trailing space */
}

static int v1_addr(const char *w, size_t len, int family, gw_sockaddr_t *a, socklen_t *alen)
{
  char buf[INET6_ADDRSTRLEN];
  if (len >= sizeof(buf)) return -1;
  memcpy(buf, w, len);
  buf[len] = '\0';
  memset(a, 0, sizeof(*a));
  if (family == AF_INET) {
    if (inet_pton(AF_INET, buf, &a->in4.sin_addr) != 1) return -1;
    a->in4.sin_family = AF_INET;
    *alen = sizeof(struct sockaddr_in);
  } else {
    if (inet_pton(AF_INET6, buf, &a->in6.sin6_addr) != 1) return -1;
    a->in6.sin6_family = AF_INET6;
    *alen = sizeof(struct sockaddr_in6);
  }
  return 0;
}

static int parse_v1(const unsigned char *p, size_t n, gw_proxy_header_t *out, const char **why)
{
  size_t scan = n < GW_PROXY_V1_MAX ? n : GW_PROXY_V1_MAX;
  const unsigned char *lf = memchr(p, '\n', scan);
  if (lf == NULL) {
    if (n >= GW_PROXY_V1_MAX) return fail(why, "PROXY v1 line longer than 107 bytes", GW_PROXY_TOO_BIG);
    return GW_PROXY_MORE;
  }
  size_t total = (size_t)(lf - p) + 1;
  if (total < V1_PREFIX_LEN + 2 || lf[-1] != '\r') return fail(why, "PROXY v1 line not ended by CRLF", GW_PROXY_BAD);
  const char *at = (const char *)p + V1_PREFIX_LEN, *end = (const char *)lf - 1, *w = NULL;
  size_t wlen = 0;
  for (const char *c = at; c < end; c++)
    if (*c < 0x20 || *c > 0x7e) return fail(why, "PROXY v1 line with a control byte", GW_PROXY_BAD);
  out->version = 1;
  int r = v1_word(&at, end, &w, &wlen);
  if (wlen == 7 && memcmp(w, "UNKNOWN", 7) == 0) { /* the rest of the line is to be ignored */
    out->local = 1;
    return (int)total;
  }
  if (r < 0) return fail(why, "malformed PROXY v1 line", GW_PROXY_BAD);
  int family;
  if (wlen == 4 && memcmp(w, "TCP4", 4) == 0) family = AF_INET;
  else if (wlen == 4 && memcmp(w, "TCP6", 4) == 0) family = AF_INET6;
  else return fail(why, "PROXY v1 protocol is not TCP4, TCP6 or UNKNOWN", GW_PROXY_BAD);
  const char *ws[4];
  size_t lens[4];
  for (int i = 0; i < 4; i++)
    if (v1_word(&at, end, &ws[i], &lens[i]) < 0 || (i < 3) != (at < end))
      return fail(why, "malformed PROXY v1 line", GW_PROXY_BAD);
  int sport = v1_port(ws[2], lens[2]), dport = v1_port(ws[3], lens[3]);
  if (v1_addr(ws[0], lens[0], family, &out->src, &out->src_len) < 0 ||
      v1_addr(ws[1], lens[1], family, &out->dst, &out->dst_len) < 0)
    return fail(why, "PROXY v1 address does not match its family", GW_PROXY_BAD);
  if (sport < 0 || dport < 0) return fail(why, "bad PROXY v1 port", GW_PROXY_BAD);
  gw_addr_set_port(&out->src, sport);
  gw_addr_set_port(&out->dst, dport);
  return (int)total;
}

/* -- version 2: 12-byte signature, ver/cmd, family, length, addresses, TLVs - */

static unsigned be16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }

/* TLVs filling [p, p + n) exactly; SSL's sub-TLVs too (one level). */
static int v2_tlvs(const unsigned char *p, size_t n, gw_proxy_header_t *out, int nested, const char **why)
{
  while (n > 0) {
    if (n < 3) return fail(why, "PROXY v2 TLV cut short", GW_PROXY_BAD);
    size_t len = be16(p + 1);
    if (len > n - 3) return fail(why, "PROXY v2 TLV longer than the header", GW_PROXY_BAD);
    const unsigned char *v = p + 3;
    if (p[0] == PP2_TYPE_SSL && !nested) {
      if (len < PP2_SSL_FIXED) return fail(why, "PROXY v2 SSL TLV too short", GW_PROXY_BAD);
      int r = v2_tlvs(v + PP2_SSL_FIXED, len - PP2_SSL_FIXED, out, 1, why);
      if (r < 0) return r;
    } else if (p[0] == PP2_TYPE_AUTHORITY && !nested) {
      out->authority = v;
      out->authority_len = len;
    }
    out->ntlvs++;
    p += 3 + len;
    n -= 3 + len;
  }
  return 0;
}

static int parse_v2(const unsigned char *p, size_t n, gw_proxy_header_t *out, const char **why)
{
  if (n < 16) return GW_PROXY_MORE;
  size_t len = be16(p + 14), total = 16 + len;
  if (total > GW_PROXY_V2_MAX) return fail(why, "PROXY v2 header over 4096 bytes", GW_PROXY_TOO_BIG);
  if ((p[12] & 0xf0) != 0x20) return fail(why, "PROXY v2 header of an unknown version", GW_PROXY_BAD);
  int cmd = p[12] & 0x0f;
  if (cmd > 1) return fail(why, "PROXY v2 command is neither LOCAL nor PROXY", GW_PROXY_BAD);
  size_t alen;
  int family = p[13] >> 4, transport = p[13] & 0x0f;
  if (transport > 2) return fail(why, "PROXY v2 transport is not UNSPEC, STREAM or DGRAM", GW_PROXY_BAD);
  switch (family) {
  case 0: alen = 0; break;    /* AF_UNSPEC */
  case 1: alen = 12; break;   /* AF_INET */
  case 2: alen = 36; break;   /* AF_INET6 */
  case 3: alen = 216; break;  /* AF_UNIX */
  default: return fail(why, "PROXY v2 address family unknown", GW_PROXY_BAD);
  }
  if (n < total) return GW_PROXY_MORE;
  if (len < alen) return fail(why, "PROXY v2 header shorter than its addresses", GW_PROXY_BAD);
  out->version = 2;
  const unsigned char *a = p + 16;
  out->local = cmd == 0 || family == 0 || family == 3 || transport == 0;
  if (!out->local && family == 1) {
    out->src.in4.sin_family = out->dst.in4.sin_family = AF_INET;
    memcpy(&out->src.in4.sin_addr, a, 4);
    memcpy(&out->dst.in4.sin_addr, a + 4, 4);
    memcpy(&out->src.in4.sin_port, a + 8, 2);
    memcpy(&out->dst.in4.sin_port, a + 10, 2);
    out->src_len = out->dst_len = sizeof(struct sockaddr_in);
  } else if (!out->local) {
    out->src.in6.sin6_family = out->dst.in6.sin6_family = AF_INET6;
    memcpy(&out->src.in6.sin6_addr, a, 16);
    memcpy(&out->dst.in6.sin6_addr, a + 16, 16);
    memcpy(&out->src.in6.sin6_port, a + 32, 2);
    memcpy(&out->dst.in6.sin6_port, a + 34, 2);
    out->src_len = out->dst_len = sizeof(struct sockaddr_in6);
  }
  int r = v2_tlvs(a + alen, len - alen, out, 0, why);
  return r < 0 ? r : (int)total;
}

int gw_proxy_parse(const unsigned char *p, size_t n, gw_proxy_header_t *out, const char **why)
{
  memset(out, 0, sizeof(*out));
  *why = NULL;
  size_t k;
  if (n > 0 && p[0] == 'P') {
    k = n < V1_PREFIX_LEN ? n : V1_PREFIX_LEN;
    if (memcmp(p, V1_PREFIX, k) != 0) return fail(why, "no PROXY protocol header", GW_PROXY_BAD);
    return k < V1_PREFIX_LEN ? GW_PROXY_MORE : parse_v1(p, n, out, why);
  }
  k = n < GW_PROXY_V2_SIG_LEN ? n : GW_PROXY_V2_SIG_LEN;
  if (n == 0) return GW_PROXY_MORE;
  if (memcmp(p, GW_PROXY_V2_SIG, k) != 0) return fail(why, "no PROXY protocol header", GW_PROXY_BAD);
  return k < GW_PROXY_V2_SIG_LEN ? GW_PROXY_MORE : parse_v2(p, n, out, why);
}

int gw_proxy_write(int version, const struct sockaddr *src, const struct sockaddr *dst, unsigned char *buf, size_t size)
{
  int family = src ? src->sa_family : AF_UNSPEC;
  if ((family != AF_INET && family != AF_INET6) || dst == NULL || dst->sa_family != family) family = AF_UNSPEC;
  if (version == 1) {
    char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];
    int n;
    if (family == AF_UNSPEC || gw_addr_to_string(src, s, sizeof(s)) < 0 || gw_addr_to_string(dst, d, sizeof(d)) < 0) {
      n = snprintf((char *)buf, size, "PROXY UNKNOWN\r\n");
    } else {
      unsigned sp = family == AF_INET ? ntohs(((const struct sockaddr_in *)src)->sin_port)
                                      : ntohs(((const struct sockaddr_in6 *)src)->sin6_port);
      unsigned dp = family == AF_INET ? ntohs(((const struct sockaddr_in *)dst)->sin_port)
                                      : ntohs(((const struct sockaddr_in6 *)dst)->sin6_port);
      n = snprintf((char *)buf, size, "PROXY %s %s %s %u %u\r\n", family == AF_INET ? "TCP4" : "TCP6", s, d, sp, dp);
    }
    return n < 0 || (size_t)n >= size ? -1 : n;
  }
  size_t alen = family == AF_INET ? 12 : family == AF_INET6 ? 36 : 0;
  if (size < 16 + alen) return -1;
  memcpy(buf, GW_PROXY_V2_SIG, GW_PROXY_V2_SIG_LEN);
  buf[12] = family == AF_UNSPEC ? 0x20 : 0x21; /* LOCAL, or PROXY */
  buf[13] = family == AF_INET ? 0x11 : family == AF_INET6 ? 0x21 : 0x00;
  buf[14] = 0;
  buf[15] = (unsigned char)alen;
  unsigned char *a = buf + 16;
  if (family == AF_INET) {
    const struct sockaddr_in *s4 = (const void *)src, *d4 = (const void *)dst;
    memcpy(a, &s4->sin_addr, 4);
    memcpy(a + 4, &d4->sin_addr, 4);
    memcpy(a + 8, &s4->sin_port, 2);
    memcpy(a + 10, &d4->sin_port, 2);
  } else if (family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const void *)src, *d6 = (const void *)dst;
    memcpy(a, &s6->sin6_addr, 16);
    memcpy(a + 16, &d6->sin6_addr, 16);
    memcpy(a + 32, &s6->sin6_port, 2);
    memcpy(a + 34, &d6->sin6_port, 2);
  }
  return (int)(16 + alen);
}
