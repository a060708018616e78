/* url.c - splits proxy_pass and sub-request URLs (see url.h). */
#include <stdio.h>
#include <string.h>

#include "addr.h"
#include "url.h"

int gw_url_parse(const char *url, gw_url_t *u)
{
  memset(u, 0, sizeof(*u));
  const char *unix_path = gw_addr_unix_path(url);
  if (unix_path) {
    gw_sockaddr_t sun;
    u->unix_path = unix_path;
    u->path = "";
    snprintf(u->hostport, sizeof(u->hostport), "localhost");
    return gw_addr_from_unix(unix_path, &sun) > 0 ? 0 : -1; /* fits sun_path */
  }
  const char *h;
  if (strncmp(url, "http://", 7) == 0) {
    h = url + 7;
  } else if (strncmp(url, "https://", 8) == 0) {
    h = url + 8;
    u->tls = 1;
  } else if (strncmp(url, "h2c://", 6) == 0) {
    h = url + 6;
    u->h2c = 1;
  } else if (strncmp(url, "h2://", 5) == 0) { /* HTTP/2 over TLS */
    h = url + 5;
    u->h2c = 1;
    u->tls = 1;
  } else {
    return -1;
  }
  int default_port = u->tls ? 443 : 80;
  size_t alen = strcspn(h, "/?");
  gw_hostport_t hp;
  if (gw_addr_split(h, alen, &hp, 0) < 0) return -1;
  if (strlen(hp.host) >= sizeof(u->host)) return -1;
  memcpy(u->host, hp.host, strlen(hp.host) + 1);
  u->port = hp.port > 0 ? hp.port : default_port;
  u->path = h + alen;
  snprintf(u->hostport, sizeof(u->hostport), u->port == default_port ? "%s" : "%s:%d", u->host, u->port);
  u->addrlen = gw_addr_from_ip(u->host, u->port, &u->addr);
  return 0;
}
