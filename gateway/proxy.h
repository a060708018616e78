/* proxy.h - answers a request by forwarding it to an upstream URL. */
#ifndef GW_PROXY_H
#define GW_PROXY_H

#include "request.h"

/* Forwards req to url ("http://host:port/prefix"); finishes req with the
 * upstream's response, or 502/504. */
void gw_proxy_start(gw_request_t *req, const char *url);

#endif
