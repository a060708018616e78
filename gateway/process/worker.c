/* worker.c - a worker process: one event_base, one VM, one server's listener.
 *
 * Accepts connections, caches the Date header, and stops on signals from the
 * master: SIGTERM/SIGINT close everything now, SIGQUIT stops accepting and
 * exits once every in-flight request is answered. With `user`, it first
 * becomes that user (drop_privileges). */
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "access_log.h"
#include "cache.h"
#include "config_load.h"
#include "http1_server.h"
#include "fastcgi.h"
#include "http2_server.h"
#include "gw_mruby.h"
#include "listener.h"
#include "proxy_accept.h"
#include "http2_client.h"
#include "health_check.h"
#include "log.h"
#include "mruby_handler.h"
#include "resolver.h"
#include "stats.h"
#include "timeline.h"
#include "timeutil.h"
#include "http1_client.h"
#include "tunnel.h"
#include "websocket.h"
#include "ws_handler.h"
#include "worker.h"

#define ACCEPT_BURST 64
#define EMFILE_PAUSE_MS 100

static void publish_stats(gw_context_t *w)
{
  gw_worker_stats_t *st = gw_stats_self;
  uint32_t idle = 0, reading = 0, writing = 0; /* of HTTP/1.1 connections: HTTP/2 ones have streams */
  for (gw_conn_t *c = w->http1_conns; c; c = c->next) {
    if (c->state == GW_CONN_IDLE) idle++;
    else if (c->state == GW_CONN_HEAD || c->state == GW_CONN_BODY) reading++;
    else writing++;
  }
  st->connections_active = (uint32_t)w->nconns;
  st->connections_idle = idle;
  st->connections_reading = reading;
  st->connections_writing = writing;
  st->tunnels_active = (uint32_t)gw_tunnel_count();
  st->websockets_active = (uint32_t)gw_ws_count();
  gw_h2_count(&st->h2_connections_active, &st->h2_streams_open);
  st->fibers_parked = gw_mruby_parked_fibers();
  gw_upstream_stats_t us;
  gw_upstream_pool_stats(w->pool, &us);
  st->upstream_opened = us.opened;
  st->upstream_reused = us.reused;
  st->upstream_retried = us.retried;
  st->upstream_tls_handshakes = us.tls_handshakes;
  st->upstream_tls_resumed = us.tls_resumed;
  if (w->h2_client) { /* h2:// upstreams shake hands too */
    gw_h2_client_stats_t hs;
    gw_h2_client_stats(w->h2_client, &hs);
    st->upstream_tls_handshakes += hs.tls_handshakes;
    st->upstream_tls_resumed += hs.tls_resumed;
  }
  st->upstream_idle = (uint32_t)us.idle;
  if (w->resolver) {
    gw_resolver_stats_t rs;
    gw_resolver_stats(w->resolver, &rs);
    st->dns_lookups = rs.lookups;
    st->dns_cache_hits = rs.cache_hits;
    st->dns_failures = rs.failures;
    st->dns_cache_entries = (uint32_t)rs.cache_entries;
  }
  if (w->server->latency_histogram) gw_stats_publish_latency(gw_now_ms());
}

/* Loop lag: a 20 ms timer notes how late it runs; the worst of each second
 * is a gauge (a blocking call shows as a lag as long as it blocks). */
#define LAG_PROBE_MS 20

static double lag_due_ms, lag_worst_ms;

static void on_lag_probe(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  (void)arg;
  double now = gw_now_ms(), late = now - lag_due_ms;
  if (late > lag_worst_ms) lag_worst_ms = late;
  lag_due_ms = now + LAG_PROBE_MS;
}

/* Each second: the gauges, and the heartbeat the master's watchdog reads
 * (a loop that stops turning stops stamping it: stall_timeout). */
static void on_stats_timer(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  publish_stats(arg);
  gw_stats_self->heartbeat_ms = (int64_t)gw_now_ms();
  gw_stats_self->loop_lag_ms = (uint32_t)(lag_worst_ms + 0.5);
  lag_worst_ms = 0;
  gw_timeline_tick(); /* records while a dashboard page watches */
}

/* SIGUSR2 from the watchdog: this loop stalled. Say what is running into the
 * shared slot (plain copies only: async-signal-safe); the master logs it and
 * kills this process. */
static void on_stall_query(int sig)
{
  (void)sig;
  char *out = gw_stats_self->stalled_on;
  size_t n = 0, room = sizeof(gw_stats_self->stalled_on) - 1;
  const gw_request_t *req = gw_mrb_current_request_or_null();
  const char *parts[3] = {req ? req->in.method : "no request (the loop itself)", req ? " " : "", req ? req->in.target : ""};
  size_t lens[3] = {0, req ? 1 : 0, req ? req->in.target_len : 0};
  for (const char *m = parts[0]; *m; m++) lens[0]++;
  for (int i = 0; i < 3; i++)
    for (size_t j = 0; j < lens[i] && n < room; j++) out[n++] = parts[i][j];
  out[n] = '\0';
}

/* A connection closed: a stopping worker exits once the last one has. */
static void on_conn_closed(gw_context_t *ctx)
{
  if (ctx->stopping && ctx->nconns == 0) event_base_loopbreak(ctx->base);
}

/* A proxy_protocol: listener's connection whose PROXY header was read. */
static int on_proxy_header(gw_context_t *ctx, int fd, const struct sockaddr *client, const struct sockaddr *peer,
                           int carried)
{
  if (gw_conn_new(ctx, fd, client, carried ? peer : NULL) != NULL) return 0;
  gw_log_error("out of memory for a new connection");
  close(fd);
  return -1;
}

/* Accepts up to ACCEPT_BURST connections; 1 if it took that many (more may wait). */
static int accept_burst(gw_worker_t *w, evutil_socket_t fd)
{
  for (int i = 0; i < ACCEPT_BURST; i++) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int cfd = accept4(fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return 0;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        /* Out of descriptors: stop accepting for a moment instead of spinning. */
        gw_log_error("accept: %s; pausing accepts for %d ms", strerror(errno), EMFILE_PAUSE_MS);
        event_del(w->listen_ev);
        struct timeval tv = gw_timeval_from_ms(EMFILE_PAUSE_MS);
        event_add(w->accept_pause_ev, &tv);
        return 0;
      }
      gw_log_error("accept: %s", strerror(errno));
      return 0;
    }
    if (ss.ss_family != AF_UNIX) {
      int one = 1;
      setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    gw_stats_self->connections_accepted++;
    if (w->ctx.server->proxy_protocol) { /* the PROXY header first (proxy_accept.c) */
      if (gw_proxy_accept_start(&w->ctx, cfd, (struct sockaddr *)&ss, len, on_proxy_header) < 0)
        gw_log_error("out of memory for a new connection");
      continue;
    }
    if (gw_conn_new(&w->ctx, cfd, (struct sockaddr *)&ss, NULL) == NULL) {
      gw_log_error("out of memory for a new connection");
      close(cfd);
    }
  }
  return 1;
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
  (void)what;
  accept_burst(arg, fd);
}

static void on_accept_resume(evutil_socket_t fd, short what, void *arg)
{
  gw_worker_t *w = arg;
  (void)fd;
  (void)what;
  if (!w->ctx.stopping) event_add(w->listen_ev, NULL);
}

/* The accept queue of a socket closed by its last holder is reset: a
 * reuseport socket may be this worker's alone (a reload shrank the pool), so
 * a graceful stop first takes what is queued there (bounded); those are
 * served as any open connection of a stopping worker. */
#define DRAIN_BURSTS 16

static void stop_accepting(gw_worker_t *w, int graceful)
{
  if (graceful && w->ctx.server->reuseport)
    for (int i = 0; i < DRAIN_BURSTS && accept_burst(w, w->ctx.server->fd); i++) {
    }
  event_del(w->listen_ev);
  event_del(w->accept_pause_ev);
  close(w->ctx.server->fd);
  w->ctx.server->fd = -1;
}

/* Every client connection ends: HTTP/1.1 ones (graceful: after the
 * response in progress), HTTP/2 ones (GOAWAY; graceful: open streams finish). */
static void shutdown_conns(gw_context_t *ctx, int graceful)
{
  gw_conn_t *next;
  for (gw_conn_t *c = ctx->http1_conns; c; c = next) {
    next = c->next;
    gw_conn_shutdown(c, graceful);
  }
  gw_h2_shutdown_all(graceful);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
  gw_worker_t *w = arg;
  (void)what;
  if (sig == SIGUSR1) { /* logrotate: the master forwards its SIGUSR1 */
    gw_log_reopen();
    gw_access_log_reopen();
    return;
  }
  int graceful = sig == SIGQUIT;
  gw_context_t *ctx = &w->ctx;
  if (ctx->stopping && graceful) return;
  ctx->stopping = 1;
  gw_log_notice("%s stop (signal %d), %zu connection(s) open", graceful ? "graceful" : "fast", (int)sig, ctx->nconns);
  if (ctx->server->fd >= 0) stop_accepting(w, graceful);
  gw_proxy_accept_close_all(); /* nothing of a request arrived on these yet */
  gw_health_check_stop();      /* another worker takes the checks over */
  shutdown_conns(ctx, graceful);
  if (!graceful) event_base_loopexit(ctx->base, NULL); /* after the closes above run */
  on_conn_closed(ctx);
}

/* cpu_affinity: :auto: worker index on the (index mod n)-th of the n CPUs
 * this process may run on (all online CPUs unless started under taskset or
 * a cpuset: then CPU index mod ncpu), or -1. */
static int auto_cpu(int index)
{
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0) return -1;
  int n = CPU_COUNT(&allowed);
  if (n < 1) return -1;
  int want = index % n;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, &allowed) && want-- == 0) return cpu;
  return -1;
}

/* `user`: the master (root) has bound the listening sockets and opened the
 * logs; the worker becomes that user before it runs anything of the config.
 * Not root: nothing to drop (the master warned). */
static void drop_privileges(const gw_settings_t *s)
{
  if (s->user == NULL || geteuid() != 0) return;
  if (initgroups(s->user, s->gid) < 0 || setgid(s->gid) < 0 || setuid(s->uid) < 0) {
    gw_log_crit("user %s: cannot switch to uid %d, gid %d: %s", s->user, (int)s->uid, (int)s->gid, strerror(errno));
    _exit(2);
  }
}

/* -- gw_worker_run's steps ------------------------------------------------------ */

/* The process: its log role, its user, its death with the master, the one
 * listening socket it serves, its CPU. */
static void become_worker(gw_config_t *cfg, gw_server_t *server, int index)
{
  char role[32];
  snprintf(role, sizeof(role), "worker %d:%d", server->port, index);
  gw_log_set_role(role);

  drop_privileges(&cfg->settings);

  /* A master killed outright (SIGKILL) takes its workers with it (after
   * drop_privileges: a change of user clears the death signal). */
  pid_t master = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != master) _exit(0); /* it died before prctl() */

  /* Listening sockets of the other servers belong to their own workers. */
  for (size_t i = 0; i < cfg->nservers; i++)
    if (&cfg->servers[i] != server) gw_listener_close_all(&cfg->servers[i], NULL);
  gw_listener_keep_own(server, index); /* reuseport: worker i listens on socket i */

  int cpu = server->cpu == GW_CPU_AUTO ? auto_cpu(index) : server->cpu;
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0) gw_log_warn("cpu_affinity %d: %s", cpu, strerror(errno));
  }
}

/* The event loop. The precise timer: libevent's default cached coarse
 * clock ticks every 4 ms here and fires a 10 ms timer as early as 6 ms. It
 * costs a timerfd_settime() per loop round, so a server whose locations run
 * no Ruby (proxy_pass and status only: timeouts in seconds) goes without. */
static struct event_base *new_loop(const gw_server_t *server)
{
  struct event_config *ec = event_config_new();
  if (server->precise_timers) event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
  struct event_base *base = event_base_new_with_config(ec);
  event_config_free(ec);
  if (base == NULL) {
    gw_log_crit("cannot create the event loop");
    _exit(2);
  }
  return base;
}

/* The context every request of this worker shares (context.h): its loop, the
 * handler runtime, the upstream pool and the resolver. */
static void context_init(gw_context_t *ctx, gw_config_t *cfg, gw_server_t *server, int index)
{
  ctx->config = cfg;
  ctx->server = server;
  ctx->index = index;
  ctx->mrb = cfg->mrb;
  ctx->on_conn_closed = on_conn_closed;
  ctx->publish_stats = publish_stats;
  ctx->base = new_loop(server);
  if (gw_mruby_worker_init(ctx) < 0) {
    gw_log_crit("cannot set up the handler runtime");
    _exit(2);
  }
  /* Idle connections kept per upstream server: the largest `keepalive:` of
   * the config's groups; GW_DEFAULT_KEEPALIVE for plain URLs. */
  int keepalive = cfg->ngroups ? 0 : GW_DEFAULT_KEEPALIVE;
  for (size_t i = 0; i < cfg->ngroups; i++)
    if (cfg->groups[i].keepalive > keepalive) keepalive = cfg->groups[i].keepalive;
  ctx->pool = gw_upstream_pool_new(ctx->base, keepalive, 60000);
  gw_resolver_config_t rc = {
    .servers = cfg->resolver_servers,
    .timeout_ms = cfg->resolver_timeout_ms,
    .tries = cfg->resolver_tries,
  };
  char err[256];
  ctx->resolver = gw_resolver_new(ctx->base, &rc, err, sizeof(err));
  if (ctx->resolver == NULL) gw_log_error("DNS resolver: %s; host names will not resolve", err);
}

/* The master's signals (on_signal); SIGHUP and SIGPIPE ignored, nothing
 * blocked. */
static void signals_init(gw_worker_t *w)
{
  int sigs[] = {SIGTERM, SIGINT, SIGQUIT, SIGUSR1};
  for (int i = 0; i < 4; i++) {
    w->signal_evs[i] = evsignal_new(w->ctx.base, sigs[i], on_signal, w);
    event_add(w->signal_evs[i], NULL);
  }
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

/* This worker's slot in the shared stats table, the watchdog's heartbeat
 * and stall query (SIGUSR2), the gauges each second and the lag probe. */
static void stats_init(gw_worker_t *w, int index, uint64_t restarts, uint64_t stalls)
{
  gw_context_t *ctx = &w->ctx;
  gw_stats_attach(ctx->server->port, index, ctx->config->generation, restarts, stalls);
  if (gw_stats_table) gw_timeline_attach((int)(gw_stats_self - gw_stats_table));
  gw_stats_self->heartbeat_ms = (int64_t)gw_now_ms();
  struct sigaction stall = {.sa_handler = on_stall_query, .sa_flags = SA_RESTART};
  sigemptyset(&stall.sa_mask);
  sigaction(SIGUSR2, &stall, NULL);
  w->stats_ev = event_new(ctx->base, -1, EV_PERSIST, on_stats_timer, ctx);
  struct timeval one_second = gw_timeval_from_ms(1000);
  event_add(w->stats_ev, &one_second);
  w->lag_ev = event_new(ctx->base, -1, EV_PERSIST, on_lag_probe, NULL);
  struct timeval probe = gw_timeval_from_ms(LAG_PROBE_MS);
  lag_due_ms = gw_now_ms() + LAG_PROBE_MS;
  event_add(w->lag_ev, &probe);
}

/* The config's init_worker, the health checks, then connections. */
static void start_serving(gw_worker_t *w)
{
  gw_context_t *ctx = &w->ctx;
  gw_server_t *server = ctx->server;
  gw_mruby_worker_hook(server->init_worker, "init_worker");
  gw_health_check_start(ctx); /* upstream groups' health_check: (one worker runs each) */
  w->listen_ev = event_new(ctx->base, server->fd, EV_READ | EV_PERSIST, on_accept, w);
  w->accept_pause_ev = evtimer_new(ctx->base, on_accept_resume, w);
  event_add(w->listen_ev, NULL);
  gw_log_info("serving %s:%d", server->host, server->port);
}

/* Everything closed and freed, so that leak checkers see a clean exit. */
static void teardown(gw_worker_t *w)
{
  gw_context_t *ctx = &w->ctx;
  gw_server_t *server = ctx->server;
  shutdown_conns(ctx, 0);
  gw_proxy_accept_close_all();
  gw_health_check_stop();
  gw_tunnel_close_all(); /* proxied WebSockets end with the worker */
  gw_ws_handler_close_all(); /* ... and scripted ones: their handlers, */
  gw_ws_close_all();     /* ... and connections */
  gw_cache_close_all();  /* background cache refreshes: no connection holds them */
  event_base_loop(ctx->base, EVLOOP_NONBLOCK); /* run the deferred frees */
  gw_upstream_pool_free(ctx->pool);
  gw_fastcgi_worker_dispose(ctx);
  gw_h2_client_free(ctx->h2_client);
  ctx->h2_client = NULL;
  if (ctx->resolver) gw_resolver_free(ctx->resolver);
  for (int i = 0; i < 4; i++) event_free(w->signal_evs[i]);
  event_free(w->listen_ev);
  event_free(w->accept_pause_ev);
  event_free(w->stats_ev);
  event_free(w->lag_ev);
  gw_stats_detach();
  if (server->fd >= 0) close(server->fd);
  gw_mruby_worker_dispose();
  gw_config_free(ctx->config, NULL);
  event_base_free(ctx->base);
}

void gw_worker_run(gw_config_t *cfg, gw_server_t *server, int index, uint64_t restarts, uint64_t stalls)
{
  static gw_worker_t worker;
  gw_worker_t *w = &worker;
  become_worker(cfg, server, index);
  context_init(&w->ctx, cfg, server, index);
  signals_init(w);
  stats_init(w, index, restarts, stalls);
  start_serving(w);

  event_base_dispatch(w->ctx.base);

  gw_mruby_worker_hook(server->exit_worker, "exit_worker");
  teardown(w);
  exit(0);
}
