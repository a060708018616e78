/* config.h - the configuration as the C core sees it, read out of the mruby
 * objects that the config script built (Gateway::Config.current). */
#ifndef GW_CONFIG_H
#define GW_CONFIG_H

#include <stddef.h>
#include <sys/socket.h>
#include <mruby.h>

#include "balancer.h" /* gw_upstream_group_t, gw_upstream_server_t */
#include "settings.h"
#include "url.h"

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

typedef struct {
  char *path;           /* owned; without the "= " of exact locations */
  size_t path_len;
  int exact;            /* 1: "= /x" matches only /x */
  mrb_value handler;    /* Proc or nil; kept alive by the config's Ruby objects */
  char *proxy_pass;     /* owned URL, or NULL */
  gw_url_t proxy_url;   /* proxy_pass split once at load (points into it) */
  mrb_value body_filter;/* Proc or nil */
  mrb_value header_filter; /* Proc or nil: runs on a proxied response's head */
  int pass_host;        /* proxy: send the client's Host header upstream */
  char *via;            /* owned "1.1 NAME" for a Via field both ways, or NULL */
  size_t max_body;      /* request body limit here (the server's unless set) */
  int stream_body;      /* proxy: send a request body upstream as it arrives */
  int status;           /* the status page (status.c) */
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
} gw_server_t;

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

/* The group called name (len bytes), or NULL. */
gw_upstream_group_t *gw_config_group(gw_config_t *cfg, const char *name, size_t len);

/* Evaluates the config file in a new VM. On error returns NULL and writes
 * "FILE:LINE: message" into err. The caller owns the result (gw_config_free). */
gw_config_t *gw_config_load(const char *path, char *err, size_t errlen);

/* Opens (or takes over from `old`, when the same host:port is listed there)
 * every server's listening socket. Returns 0, or -1 with err set. */
int gw_config_listen(gw_config_t *cfg, gw_config_t *old, char *err, size_t errlen);

/* Closes listening sockets that are not shared with `keep` (may be NULL),
 * closes the VM and frees everything. */
void gw_config_free(gw_config_t *cfg, const gw_config_t *keep);

#endif
