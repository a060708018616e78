/* proxy.h - proxy_pass: answers a request by forwarding it to an upstream URL. */
#ifndef GW_PROXY_H
#define GW_PROXY_H

#include "handler.h"
#include "request.h"
#include "url.h"

/* The handler of a `proxy_pass: URL` location; NULL for a URL that
 * gw_url_parse() rejects, or when out of memory. */
gw_handler_t *gw_proxy_handler_new(const char *url);

/* Forwards req to url ("http://IP:PORT/prefix" or "http://GROUP/prefix");
 * finishes req with the upstream's response, or 502/504 (req.proxy_pass
 * from a script). key: the hash key for a group balanced by :hash (may be
 * NULL). */
void gw_proxy_start(gw_request_t *req, const char *url, const char *key);

#endif
