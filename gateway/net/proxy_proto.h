/* proxy_proto.h - the PROXY protocol header a load balancer (HAProxy, an
 * NLB) writes at the start of a connection: version 1 (one text line) and
 * version 2 (binary, with TLVs), as haproxy's doc/proxy-protocol.txt
 * defines them; and writing one (to upstreams). Pure: no I/O, no allocation. */
#ifndef GW_PROXY_PROTO_H
#define GW_PROXY_PROTO_H

#include <stddef.h>

#include "addr.h"

#define GW_PROXY_V1_MAX 107  /* a v1 line, CRLF included (the spec's bound) */
#define GW_PROXY_V2_MAX 4096 /* a v2 header accepted here, TLVs included (16 + len) */
#define GW_PROXY_V2_SIG "\r\n\r\n\0\r\nQUIT\n"
#define GW_PROXY_V2_SIG_LEN 12

typedef struct {
  int version;              /* 1 or 2 */
  int local;                /* LOCAL (v2), UNKNOWN (v1), or a family that is
                               not TCP/UDP over IP: keep the socket's addresses */
  gw_sockaddr_t src, dst;   /* the client and the address it connected to (!local) */
  socklen_t src_len, dst_len;
  size_t ntlvs;             /* v2: TLVs read (all of them well formed) */
  const unsigned char *authority; /* v2 PP2_TYPE_AUTHORITY (the SNI the balancer saw),
                                     pointing into the parsed bytes; NULL: none */
  size_t authority_len;
} gw_proxy_header_t;

/* What gw_proxy_parse found (a header, or why not). */
enum {
  GW_PROXY_MORE = 0,        /* a prefix of a header: read more */
  GW_PROXY_BAD = -1,        /* not a PROXY header, or a malformed one */
  GW_PROXY_TOO_BIG = -2     /* longer than GW_PROXY_V1_MAX / GW_PROXY_V2_MAX */
};

/* Parses the header at the start of p (n bytes read so far). Returns its
 * length (> 0; *out filled), GW_PROXY_MORE (every byte so far is part of a
 * header not complete yet: what follows belongs to it too), GW_PROXY_BAD
 * or GW_PROXY_TOO_BIG, with *why (static text for the log) set. */
int gw_proxy_parse(const unsigned char *p, size_t n, gw_proxy_header_t *out, const char **why);

/* Writes a header carrying src -> dst (AF_INET or AF_INET6 both; else, or
 * src NULL, v1's UNKNOWN / v2's LOCAL) into buf. Returns its length, or -1
 * when size is too small (GW_PROXY_V1_MAX, or 16 + 36 bytes, is enough). */
int gw_proxy_write(int version, const struct sockaddr *src, const struct sockaddr *dst, unsigned char *buf, size_t size);

#endif
