/* worker.c - a worker process: one event_base, one VM, one server's listener.
 *
 * Accepts connections, caches the Date header, and stops on signals from the
 * master: SIGTERM/SIGINT close everything now, SIGQUIT stops accepting and
 * exits once every in-flight request is answered. */
#include <errno.h>
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

#include <mruby.h>
#include <mruby/array.h>

#include "conn.h"
#include "handler.h"
#include "log.h"
#include "stats.h"
#include "worker.h"

gw_worker_t *gw_worker;

#define ACCEPT_BURST 64
#define EMFILE_PAUSE_MS 100

void gw_worker_publish_stats(gw_worker_t *w)
{
  gw_worker_stats_t *st = gw_stats_self;
  uint32_t idle = 0, reading = 0, writing = 0;
  for (gw_conn_t *c = w->conns; c; c = c->next) {
    if (c->state == GW_CONN_IDLE) idle++;
    else if (c->state == GW_CONN_HEAD || c->state == GW_CONN_BODY) reading++;
    else writing++;
  }
  st->connections_active = (uint32_t)w->nconns;
  st->connections_idle = idle;
  st->connections_reading = reading;
  st->connections_writing = writing;
  /* Every used root slot holds a parked fiber or a running sub-request task. */
  st->fibers_parked = (uint32_t)(RARRAY_LEN(w->roots) - w->nfree);
  gw_upstream_stats_t us;
  gw_upstream_pool_stats(w->pool, &us);
  st->upstream_opened = us.opened;
  st->upstream_reused = us.reused;
  st->upstream_retried = us.retried;
  st->upstream_idle = (uint32_t)us.idle;
  if (w->resolver) {
    gw_resolver_stats_t rs;
    gw_resolver_stats(w->resolver, &rs);
    st->dns_lookups = rs.lookups;
    st->dns_cache_hits = rs.cache_hits;
    st->dns_failures = rs.failures;
    st->dns_cache_entries = (uint32_t)rs.cache_entries;
  }
}

static void on_full_gc(evutil_socket_t fd, short what, void *arg)
{
  gw_worker_t *w = arg;
  (void)fd;
  (void)what;
  mrb_full_gc(w->mrb); /* from the loop: no Ruby code is running */
}

static void on_stats_timer(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_worker_publish_stats(arg);
}

static void worker_exit_if_done(gw_worker_t *w)
{
  if (w->stopping && w->nconns == 0) event_base_loopbreak(w->base);
}

void gw_worker_conn_closed(gw_worker_t *w)
{
  worker_exit_if_done(w);
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
  gw_worker_t *w = arg;
  (void)what;
  for (int i = 0; i < ACCEPT_BURST; i++) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int cfd = accept4(fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        /* Out of descriptors: stop accepting for a moment instead of spinning. */
        gw_log_error("accept: %s; pausing accepts for %d ms", strerror(errno), EMFILE_PAUSE_MS);
        event_del(w->listen_ev);
        struct timeval tv = {0, EMFILE_PAUSE_MS * 1000};
        event_add(w->accept_pause_ev, &tv);
        return;
      }
      gw_log_error("accept: %s", strerror(errno));
      return;
    }
    if (ss.ss_family != AF_UNIX) {
      int one = 1;
      setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    gw_stats_self->connections_accepted++;
    if (gw_conn_new(w, cfd, (struct sockaddr *)&ss) == NULL) {
      gw_log_error("out of memory for a new connection");
      close(cfd);
    }
  }
}

static void on_accept_resume(evutil_socket_t fd, short what, void *arg)
{
  gw_worker_t *w = arg;
  (void)fd;
  (void)what;
  if (!w->stopping) event_add(w->listen_ev, NULL);
}

static void stop_accepting(gw_worker_t *w)
{
  event_del(w->listen_ev);
  event_del(w->accept_pause_ev);
  close(w->server->fd);
  w->server->fd = -1;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
  gw_worker_t *w = arg;
  (void)what;
  if (sig == SIGUSR1) { /* logrotate: the master forwards its SIGUSR1 */
    gw_log_reopen();
    return;
  }
  int graceful = sig == SIGQUIT;
  if (w->stopping && graceful) return;
  w->stopping = 1;
  gw_log_notice("%s stop (signal %d), %zu connection(s) open", graceful ? "graceful" : "fast", (int)sig, w->nconns);
  if (w->server->fd >= 0) stop_accepting(w);
  gw_conn_t *next;
  for (gw_conn_t *c = w->conns; c; c = next) {
    next = c->next;
    gw_conn_shutdown(c, graceful);
  }
  if (!graceful) event_base_loopexit(w->base, NULL); /* after the closes above run */
  worker_exit_if_done(w);
}

/* 1 if some location of the server runs Ruby (a handler, a body or a header
 * filter), which may wait on Async.sleep and wants exact timers. */
static int runs_ruby(const gw_server_t *server)
{
  for (size_t i = 0; i < server->nlocations; i++) {
    const gw_location_t *l = &server->locations[i];
    if (!mrb_nil_p(l->handler) || mrb_test(l->body_filter) || mrb_test(l->header_filter)) return 1;
  }
  return 0;
}

void gw_worker_run(gw_config_t *cfg, gw_server_t *server, int index)
{
  static gw_worker_t worker;
  gw_worker_t *w = &worker;
  char role[32];
  snprintf(role, sizeof(role), "worker %d:%d", server->port, index);
  gw_log_set_role(role);

  /* A master killed outright (SIGKILL) takes its workers with it. */
  pid_t master = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != master) _exit(0); /* it died before prctl() */

  /* Listening sockets of the other servers belong to their own workers. */
  for (size_t i = 0; i < cfg->nservers; i++)
    if (&cfg->servers[i] != server && cfg->servers[i].fd >= 0) {
      close(cfg->servers[i].fd);
      cfg->servers[i].fd = -1;
    }

  if (server->cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(server->cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0)
      gw_log_warn("cpu_affinity %d: %s", server->cpu, strerror(errno));
  }

  w->config = cfg;
  w->server = server;
  w->index = index;
  w->mrb = cfg->mrb;
  w->roots = mrb_nil_value();

  /* The precise timer: libevent's default cached coarse clock ticks every
   * 4 ms here and fires a 10 ms timer as early as 6 ms. It costs a
   * timerfd_settime() per loop round, so a server whose locations run no
   * Ruby (proxy_pass and status only: timeouts in seconds) goes without. */
  struct event_config *ec = event_config_new();
  if (runs_ruby(server)) event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
  w->base = event_base_new_with_config(ec);
  event_config_free(ec);
  if (w->base == NULL) {
    gw_log_crit("cannot create the event loop");
    _exit(2);
  }
  gw_worker = w;
  if (gw_handler_worker_init(w) < 0) {
    gw_log_crit("cannot set up the handler runtime");
    _exit(2);
  }
  /* Idle connections kept per upstream server: the largest `keepalive:` of
   * the config's groups; GW_DEFAULT_KEEPALIVE for plain URLs. */
  int keepalive = cfg->ngroups ? 0 : GW_DEFAULT_KEEPALIVE;
  for (size_t i = 0; i < cfg->ngroups; i++)
    if (cfg->groups[i].keepalive > keepalive) keepalive = cfg->groups[i].keepalive;
  w->pool = gw_upstream_pool_new(w->base, keepalive, 60000);
  gw_resolver_config_t rc = {
    .servers = cfg->resolver_servers,
    .timeout_ms = cfg->resolver_timeout_ms,
    .tries = cfg->resolver_tries,
  };
  char err[256];
  w->resolver = gw_resolver_new(w->base, &rc, err, sizeof(err));
  if (w->resolver == NULL) gw_log_error("DNS resolver: %s; host names will not resolve", err);

  int sigs[] = {SIGTERM, SIGINT, SIGQUIT, SIGUSR1};
  for (int i = 0; i < 4; i++) {
    w->signal_evs[i] = evsignal_new(w->base, sigs[i], on_signal, w);
    event_add(w->signal_evs[i], NULL);
  }
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);

  gw_stats_attach(server->port, index, cfg->generation);
  w->gc_ev = event_new(w->base, -1, 0, on_full_gc, w);
  w->stats_ev = event_new(w->base, -1, EV_PERSIST, on_stats_timer, w);
  struct timeval one_second = {1, 0};
  event_add(w->stats_ev, &one_second);

  w->listen_ev = event_new(w->base, server->fd, EV_READ | EV_PERSIST, on_accept, w);
  w->accept_pause_ev = evtimer_new(w->base, on_accept_resume, w);
  event_add(w->listen_ev, NULL);
  gw_log_info("serving %s:%d", server->host, server->port);

  event_base_dispatch(w->base);

  /* Teardown, so that leak checkers see a clean exit. */
  gw_conn_t *next;
  for (gw_conn_t *c = w->conns; c; c = next) {
    next = c->next;
    gw_conn_shutdown(c, 0);
  }
  event_base_loop(w->base, EVLOOP_NONBLOCK); /* run the deferred frees */
  gw_upstream_pool_free(w->pool);
  if (w->resolver) gw_resolver_free(w->resolver);
  for (int i = 0; i < 4; i++) event_free(w->signal_evs[i]);
  event_free(w->listen_ev);
  event_free(w->accept_pause_ev);
  event_free(w->stats_ev);
  event_free(w->gc_ev);
  gw_stats_detach();
  if (server->fd >= 0) close(server->fd);
  mrb_gc_unregister(w->mrb, w->roots);
  free(w->free_slots);
  gw_worker = NULL;
  gw_config_free(cfg, NULL);
  event_base_free(w->base);
  exit(0);
}
