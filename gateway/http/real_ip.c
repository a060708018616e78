/* real_ip.c - the client's address from a header of trusted proxies
 * (real_ip.h). The walk is nginx's ngx_http_get_forwarded_addr: from the
 * right, one entry, or (recursive) on while the address found is trusted. */
#include <string.h>
#include <strings.h>

#include "real_ip.h"

static int is_space(char c) { return c == ' ' || c == '\t'; }

static void trim(const char **s, size_t *n)
{
  while (*n > 0 && is_space(**s)) (*s)++, (*n)--;
  while (*n > 0 && is_space((*s)[*n - 1])) (*n)--;
}

/* An entry as an address: "IP", "[v6]", "IP:port", "[v6]:port". 0 with
 * the address text in out, or -1. */
static int entry_addr(const char *s, size_t n, char *out, size_t size)
{
  gw_sockaddr_t a;
  socklen_t alen;
  if (gw_addr_parse_literal(s, n, &a, &alen) != 1) {
    gw_hostport_t hp;
    if (gw_addr_split(s, n, &hp, 0) < 0 || gw_addr_parse_literal(hp.host, strlen(hp.host), &a, &alen) != 1) return -1;
  }
  return gw_addr_to_string(&a.sa, out, size);
}

/* Forwarded: the for= node of one element ("for=1.2.3.4;proto=https",
 * `for="[2001:db8::1]:4711"`); -1 when it has none or it is no address. */
static int forwarded_for(const char *s, size_t n, char *out, size_t size)
{
  while (n > 0) {
    const char *semi = memchr(s, ';', n);
    size_t pl = semi ? (size_t)(semi - s) : n;
    const char *p = s;
    size_t pn = pl;
    trim(&p, &pn);
    if (pn > 4 && strncasecmp(p, "for=", 4) == 0) {
      p += 4;
      pn -= 4;
      if (pn >= 2 && p[0] == '"') {
        if (p[pn - 1] != '"') return -1;
        p++;
        pn -= 2;
        if (memchr(p, '\\', pn)) return -1; /* no address needs a quoted-pair */
      }
      return entry_addr(p, pn, out, size); /* "unknown", "_hidden": no address */
    }
    if (!semi) break;
    s = semi + 1;
    n -= pl + 1;
  }
  return -1;
}

int gw_real_ip_find(const gw_real_ip_t *cfg, const char *peer, const gw_headers_t *headers, char *out, size_t size)
{
  char addr[64];
  if (cfg->nfrom == 0 || peer == NULL || gw_addr_cidr_match_text(cfg->from, cfg->nfrom, peer, strlen(peer)) != 1)
    return 0;
  int found = 0;
  for (size_t i = headers->count; i-- > 0;) { /* the last field holds the rightmost entries */
    const gw_header_t *f = &headers->items[i];
    if (strlen(cfg->header) != f->name_len || strncasecmp(f->name, cfg->header, f->name_len) != 0) continue;
    size_t end = f->value_len;
    for (;;) {
      size_t start = end;
      while (start > 0 && f->value[start - 1] != ',') start--;
      const char *e = f->value + start;
      size_t en = end - start;
      trim(&e, &en);
      if (en > 0) { /* empty list elements are skipped (RFC 9110 §5.6.1) */
        int ok = cfg->forwarded ? forwarded_for(e, en, addr, sizeof(addr)) : entry_addr(e, en, addr, sizeof(addr));
        if (ok < 0) return found;
        if (strlen(addr) >= size) return found;
        memcpy(out, addr, strlen(addr) + 1);
        found = 1;
        if (!cfg->recursive || gw_addr_cidr_match_text(cfg->from, cfg->nfrom, addr, strlen(addr)) != 1) return 1;
      }
      if (start == 0) break;
      end = start - 1;
    }
  }
  return found;
}
