/* real_ip.h - the client's address from a header set by trusted proxies
 * (a server's `real_ip:`), with nginx's set_real_ip_from / real_ip_header /
 * real_ip_recursive semantics: X-Forwarded-For (or any header holding a
 * list of addresses, X-Real-IP) or RFC 7239 Forwarded's for=. Pure. */
#ifndef GW_REAL_IP_H
#define GW_REAL_IP_H

#include <stddef.h>

#include "addr.h"
#include "headers.h"

typedef struct {
  gw_cidr_t *from;          /* owned: the trusted proxies; nfrom 0: real_ip is off */
  size_t nfrom;
  char *header;             /* owned: the header's name ("x-forwarded-for") */
  int forwarded;            /* the header is RFC 7239 Forwarded: its for= parameters */
  int recursive;            /* skip trusted addresses from the right (real_ip_recursive) */
} gw_real_ip_t;

/* When peer (the address the request came from, text) is trusted, the
 * client's address from the header's fields (all of them, in order, as one
 * list): the rightmost entry, or with recursive the rightmost one that is
 * not trusted (the leftmost if all are). An entry that is no address
 * ("unknown", an obfuscated "_node", garbage) ends the walk: what was found
 * before it stands. Writes the address (no port, no brackets) into out and
 * returns 1; 0: no change (peer not trusted, no header, the rightmost entry
 * unusable). */
int gw_real_ip_find(const gw_real_ip_t *cfg, const char *peer, const gw_headers_t *headers, char *out, size_t size);

#endif
