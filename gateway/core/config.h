/* config.h - the configuration as the C core sees it: servers, limits,
 * locations and upstream groups (types only; config_load.c reads them out of
 * the mruby objects the config script built). */
#ifndef GW_CONFIG_H
#define GW_CONFIG_H

#include <stddef.h>
#include <sys/socket.h>
#include <mruby.h>

#include "addr.h"
#include "balancer.h" /* gw_upstream_group_t, gw_upstream_server_t */
#include "real_ip.h"
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

struct gw_handler_s;
struct gw_filter_s;
struct gw_compress_conf_s;
struct gw_stage_s;
struct gw_cache_conf_s;
struct gw_cache_hooks_s;

typedef struct {
  char *path;           /* owned; without the "= " of exact locations */
  size_t path_len;
  int exact;            /* 1: "= /x" matches only /x */
  struct gw_handler_s *handler; /* owned: what answers here, the content phase (handler.h) */
  /* owned, or NULL: the other phases, in the order they run (handler.h) */
  struct gw_filter_s *rewrite, *access; /* before the content; may answer */
  struct gw_filter_s *header_filter, *body_filter; /* on the response, before it goes out */
  struct gw_filter_s *log;      /* after the response was queued */
  int pass_host;        /* proxy: send the client's Host header upstream */
  int tunnel_timeout_ms; /* proxy: a WebSocket tunnel idle this long closes (0: tunnel.h's default) */
  char *via;            /* owned "1.1 NAME" for a Via field both ways, or NULL */
  size_t max_body;      /* request body limit here (the server's unless set) */
  int stream_body;      /* the handler takes a request body as it arrives */
  int no_latency;       /* not counted in the response-time histograms (the dashboard's own polls) */
  /* Regex locations (router.c): a compiled pattern (regex.h; owned, one
   * reference) tried on the path, or NULL for an exact/prefix location. */
  struct gw_regex_s *regex;
  int no_regex;         /* "^~ /x": as the longest prefix, regex locations are skipped */
  size_t seq;           /* position in the config: regex locations keep this order */
  int cpu_limit_ms;     /* CPU time its Ruby code may run between two waits
                           (the server's unless set); 0: no limit (cpu_limit.h) */
  struct gw_tls_client_s *tls_client; /* owned (tls_client.h): https:// upstreams reached from
                                         here (tls_* options); NULL: the config's defaults */
  struct gw_compress_conf_s *compress; /* owned (compress_http.h): compression on the fly; NULL: off */
  const struct gw_stage_s *stage; /* the response stage (request.h) when compress is set, else NULL */
  int max_ranges;       /* static files: ranges in one request before the whole file is sent (200); 0: no ranges */
  struct gw_cache_conf_s *cache; /* owned (cache.h): the response cache in front of the handler; NULL: none */
  const struct gw_cache_hooks_s *cache_hooks; /* request.h: cache.c's hooks when cache is set, else NULL */
} gw_location_t;

#define GW_CPU_AUTO (-2)
#define GW_MAX_AUTO_WORKERS 64 /* workers: :auto on a bigger machine */

/* The default of a server's reuseport: (see docs/configuration.md, "All cores"). */
#define GW_REUSEPORT_DEFAULT 1

typedef struct {
  char *host;           /* owned, e.g. "0.0.0.0" */
  int port;
  int workers;
  gw_limits_t limits;
  gw_location_t *locations; /* owned array, most specific first (see router.c) */
  size_t nlocations;
  int fd;               /* listening socket, -1 until gw_config_listen(); with
                           reuseport, -1 in the master, the worker's own in a worker */
  int cpu;              /* cpu_affinity: pin the workers to this CPU; -1: no
                           pinning; GW_CPU_AUTO: worker i on the i-th allowed CPU */
  /* reuseport (listener.c): one SO_REUSEPORT socket per worker index in fds
   * (owned, nfds == workers) instead of the shared fd. */
  int reuseport;
  int reuseport_default; /* not given in the file: a reload keeps the running mode */
  int *fds;
  int nfds;
  int precise_timers;   /* some location runs Ruby, which may wait on short timers */
  int stall_timeout_ms; /* a worker whose loop stalls this long is replaced; 0: never */
  int latency_histogram; /* record response times (a location has a dashboard) */
  mrb_value init_worker, exit_worker; /* Procs or nil, run at a worker's start and exit */
  struct gw_tls_ctx_s *tls; /* owned (tls_server.h): TLS on this listener; NULL: plain */
  void *tls_hook;       /* owned (tls_hook.h): its on_handshake proc, or NULL */
  int http2;            /* HTTP/2: h2 by ALPN over TLS, h2c (prior knowledge) on plain */
  int cpu_limits;       /* some location runs Ruby under a cpu_limit: its workers tick */
  /* proxy_protocol: every connection starts with a PROXY header (proxy_accept.c) */
  int proxy_protocol;
  gw_cidr_t *proxy_from; /* owned: peers allowed to send one (proxy_protocol_from); */
  size_t nproxy_from;    /* ... 0: any */
  gw_real_ip_t real_ip;  /* real_ip: (real_ip.h); real_ip.nfrom 0: off */
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
  struct gw_tls_client_s *tls_client; /* owned: https:// upstreams where nothing else is
                                         configured (verified against the system's CAs) */
} gw_config_t;

#endif
