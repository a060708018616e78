/* config.h - the configuration as the C core sees it: servers, limits,
 * locations and upstream groups (types only; config_load.c reads them out of
 * the mruby objects the config script built). */
#ifndef GW_CONFIG_H
#define GW_CONFIG_H

#include <stddef.h>
#include <sys/socket.h>
#include <mruby.h>

#include "settings.h"

typedef struct {
  size_t max_request_line; /* bytes of request-target; over -> 414 */
  size_t max_header_size;  /* bytes of the header block; over -> 431 */
  size_t max_headers;      /* header fields; over -> 431 */
  size_t max_body;         /* bytes of request body; over -> 413 */
  int header_timeout_ms;
  int body_timeout_ms;
  int keepalive_timeout_ms;
  int send_timeout_ms;
} gw_limits_t;

/* A proxy_pass URL, split (proxy.c: gw_proxy_parse_url). */
typedef struct {
  char host[256];     /* without brackets for IPv6 */
  int port;           /* 80 when the URL has none */
  const char *path;   /* points into the URL: "/x?y", or "" when it has none */
  char hostport[300]; /* for the Host header */
  struct sockaddr_storage addr; /* host:port when host is an IP literal */
  socklen_t addrlen;  /* 0: host is a name (an upstream group, or resolved at run time) */
  const char *unix_path; /* "unix:/path.sock": points into the URL; else NULL */
} gw_proxy_url_t;

struct gw_handler_s;
struct gw_filter_s;

typedef struct {
  char *path;           /* owned; without the "= " of exact locations */
  size_t path_len;
  int exact;            /* 1: "= /x" matches only /x */
  struct gw_handler_s *handler; /* owned: what answers here (handler.h) */
  /* owned, or NULL: run on a proxied response's head, and on its whole body */
  struct gw_filter_s *header_filter, *body_filter;
  int pass_host;        /* proxy: send the client's Host header upstream */
  char *via;            /* owned "1.1 NAME" for a Via field both ways, or NULL */
  size_t max_body;      /* request body limit here (the server's unless set) */
  int stream_body;      /* the handler takes a request body as it arrives */
} gw_location_t;

typedef struct {
  char *host;           /* owned, e.g. "0.0.0.0" */
  int port;
  int workers;
  gw_limits_t limits;
  gw_location_t *locations; /* owned array, most specific first (see router.c) */
  size_t nlocations;
  int fd;               /* listening socket, -1 until gw_config_listen() */
  int cpu;              /* cpu_affinity: pin the workers to this CPU; -1: no pinning */
  int precise_timers;   /* some location runs Ruby, which may wait on short timers */
} gw_server_t;

typedef struct {
  char *host;           /* owned IP literal, or NULL for a unix socket */
  int port;
  struct sockaddr_storage addr; /* host:port, parsed at load */
  socklen_t addrlen;
  char *unix_path;      /* owned, or NULL */
  char *label;          /* owned "host:port" or "unix:/path", for logs */
  int weight;
  /* per worker, changed at run time (passive health, least_conn) */
  int fails;            /* consecutive failures */
  double down_until_ms; /* skipped until then (CLOCK_MONOTONIC ms) */
  int active;           /* requests in flight */
  int current_weight;   /* smooth weighted round robin */
} gw_upstream_server_t;

typedef enum { GW_BALANCE_ROUND_ROBIN, GW_BALANCE_LEAST_CONN, GW_BALANCE_HASH } gw_balance_t;

/* upstream :name, servers: [...], keepalive: N */
typedef struct {
  char *name;           /* owned */
  gw_upstream_server_t *servers; /* owned array */
  size_t nservers;
  int keepalive;        /* idle connections kept per server */
  gw_balance_t balance;
  int max_fails;        /* 0: never mark a server down */
  int fail_timeout_ms;
  int connect_timeout_ms;
  int timeout_ms;
} gw_upstream_group_t;

typedef struct {
  mrb_state *mrb;       /* the VM that evaluated the file; workers inherit it on fork */
  char *path;           /* owned copy of the config file path */
  gw_server_t *servers; /* owned array */
  size_t nservers;
  gw_upstream_group_t *groups; /* owned array */
  size_t ngroups;
  gw_settings_t settings;  /* pid file, logs (settings.c) */
  char *resolver_servers;  /* owned "ip:port,..." or NULL: /etc/resolv.conf */
  int resolver_timeout_ms; /* 0: the resolver's default */
  int resolver_tries;
  int generation;          /* 0 at start, +1 per reload (set by the master) */
} gw_config_t;

#endif
