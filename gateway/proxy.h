/* proxy.h - answers a request by forwarding it to an upstream URL. */
#ifndef GW_PROXY_H
#define GW_PROXY_H

#include "request.h"
#include "url.h"

/* Forwards req to url ("http://IP:PORT/prefix" or "http://GROUP/prefix");
 * finishes req with the upstream's response, or 502/504. key: the hash key
 * for a group balanced by :hash (may be NULL). */
void gw_proxy_start(gw_request_t *req, const char *url, const char *key);
/* The same with the URL parsed already (gw_url_parse: a location's, at load). u
 * and the URL it points into must outlive the request. */
void gw_proxy_start_url(gw_request_t *req, const char *url, const gw_url_t *u, const char *key);

#endif
