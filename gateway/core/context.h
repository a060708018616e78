/* context.h - what the requests of one worker share: its event loop, VM,
 * config, server, upstream pools and resolver, and its client connections.
 *
 * worker.c creates it and fills in the hooks; every layer below reaches the
 * worker only through this struct (h2o's h2o_context_t), so none of them
 * includes worker.h or calls into it. */
#ifndef GW_CONTEXT_H
#define GW_CONTEXT_H

#include <stddef.h>
#include <time.h>

#include <mruby.h>

#include "config.h"

struct event_base;
typedef struct gw_context_s gw_context_t;
typedef struct gw_conn_s gw_conn_t;
typedef struct gw_pool_s gw_pool_t;
typedef struct gw_resolver_s gw_resolver_t;
typedef struct gw_h2_client_s gw_h2_client_t;

struct gw_context_s {
  struct event_base *base;
  mrb_state *mrb;           /* inherited from the master's config VM */
  gw_config_t *config;
  gw_server_t *server;      /* the server this worker serves */
  int index;                /* 0..workers-1 within its server */
  gw_pool_t *pool;          /* keep-alive connections to HTTP/1.1 upstreams (http1_client.c) */
  gw_resolver_t *resolver;  /* c-ares on this loop; NULL if it could not start */
  gw_pool_t *fcgi_pool;     /* FastCGI keep-alive connections: made on first use (fastcgi.c) */
  gw_h2_client_t *h2_client;/* HTTP/2 upstream connections: made on first use (httpclient.c) */

  gw_conn_t *http1_conns;   /* the open HTTP/1.1 connections (http1_server.c keeps the list;
                               http2_server.c the HTTP/2 ones) */
  size_t nconns;            /* every open client connection, HTTP/1.1 and HTTP/2 */
  int stopping;             /* graceful stop: answer with Connection: close */

  char date[40];            /* "Date: ...\r\n" cached per second (http1_response.c) */
  time_t date_time;

  /* Set by the worker: a connection closed (a stopping worker may exit);
   * refresh this worker's gauges in the shared stats table. */
  void (*on_conn_closed)(gw_context_t *ctx);
  void (*publish_stats)(gw_context_t *ctx);
};

#endif
