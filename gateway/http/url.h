/* url.h - the upstream URLs the gateway understands: "http://host[:port][/path]",
 * "https://host[:port][/path]" (host a name or an IP literal, "[v6]"
 * bracketed), "h2c://host[:port][/path]" (HTTP/2 cleartext, prior knowledge:
 * http2_client.c), "h2://host[:port][/path]" (HTTP/2 over TLS, ALPN h2) and
 * "unix:/path.sock".
 * Split once (a location's proxy_pass at load, a sub-request's target when it
 * starts). Pure: built on addr.c only. */
#ifndef GW_URL_H
#define GW_URL_H

#include <sys/socket.h>

typedef struct {
  char host[256];     /* without brackets for IPv6; "" for a unix URL */
  int port;           /* 80 (https: 443) when the URL has none */
  int tls;            /* https:// or h2:// */
  const char *path;   /* points into the URL: "/x?y", "?y", or "" when it has none */
  char hostport[300]; /* for the Host header: host, or host:port unless the scheme's default port (IPv6 unbracketed,
                         as it always was); "localhost" for unix */
  struct sockaddr_storage addr; /* host:port when host is an IP literal */
  socklen_t addrlen;  /* 0: host is a name (an upstream group, or resolved at run time) */
  const char *unix_path; /* "unix:/path.sock": points into the URL ("/path.sock"); else NULL */
  int h2c;            /* "h2c://" or "h2://": the upstream speaks HTTP/2 */
} gw_url_t;

/* Splits url into *u (which points into url afterwards: url must outlive it).
 * "unix:/path" takes the whole rest as the socket path (the request-target
 * then passes unchanged). Returns 0, or -1 for anything else (another scheme,
 * no host, a bad port, a socket path too long). */
int gw_url_parse(const char *url, gw_url_t *u);

#endif
