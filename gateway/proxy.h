/* proxy.h - answers a request by forwarding it to an upstream URL. */
#ifndef GW_PROXY_H
#define GW_PROXY_H

#include "request.h"

typedef struct {
  char host[256];     /* without brackets for IPv6 */
  int port;           /* 80 when the URL has none */
  const char *path;   /* points into the URL: "/x?y", or "" when it has none */
  char hostport[300]; /* for the Host header */
  int is_ip;          /* host is an IP literal */
  const char *unix_path; /* "unix:/path.sock": points into the URL; else NULL */
} gw_proxy_url_t;

/* Splits "http://host[:port][/path]" or "unix:/path.sock" (the request-target
 * then passes unchanged). Returns 0, or -1 for anything else. */
int gw_proxy_parse_url(const char *url, gw_proxy_url_t *u);

/* Forwards req to url ("http://IP:PORT/prefix" or "http://GROUP/prefix");
 * finishes req with the upstream's response, or 502/504. key: the hash key
 * for a group balanced by :hash (may be NULL). */
void gw_proxy_start(gw_request_t *req, const char *url, const char *key);

#endif
