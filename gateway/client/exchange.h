/* exchange.h - one request to an upstream that may be named by a host name:
 * resolved on the worker's loop (resolver.c), then sent (http1_client.c). */
#ifndef GW_EXCHANGE_H
#define GW_EXCHANGE_H

#include "resolver.h"
#include "http1_client.h"

typedef struct gw_exchange_s gw_exchange_t;

/* As gw_client_request(), except that params->host may be a host name: it is
 * resolved first with `resolver` (IP literals and unix paths skip that). A
 * failed lookup completes with the resolver's error (GW_ERR_DNS_NOT_FOUND "host
 * not found", GW_ERR_DNS_TIMEOUT "DNS server did not answer", ...); the host
 * name is logged. NULL when out of memory. */
gw_exchange_t *gw_exchange_start(gw_upstream_pool_t *pool, gw_resolver_t *resolver, const gw_client_params_t *params,
                                 gw_client_done_cb cb, void *arg);

/* Back-pressure for streamed responses (gw_client_pause/resume). */
void gw_exchange_pause(gw_exchange_t *x);
void gw_exchange_resume(gw_exchange_t *x);

/* A streamed request body grew or ended (gw_client_body_more). */
void gw_exchange_body_more(gw_exchange_t *x, int complete);

/* Inside on_head of a 101 to an upgrade request (gw_client_detach): the
 * socket, or -1; *tls its TLS state (NULL: plain; tls NULL refuses TLS).
 * Cancel the exchange afterwards (from inside on_head too). */
int gw_exchange_detach(gw_exchange_t *x, struct evbuffer *rest, struct gw_tls_client_conn_s **tls);

/* Abandons it (lookup or exchange): no callback afterwards. */
void gw_exchange_cancel(gw_exchange_t *x);

#endif
