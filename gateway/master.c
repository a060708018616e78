/* master.c - the master process: owns the configuration and the listening
 * sockets, forks each server's worker pool and supervises it.
 *
 *   SIGCHLD       a worker of the current generation died: start a new one
 *   SIGHUP        reload: evaluate the file again; if it is good, start new
 *                 workers (listening sockets are kept) and let the old drain
 *   SIGQUIT       graceful stop: workers finish in-flight requests, then exit
 *   SIGTERM/INT   fast stop
 *
 * Signals are blocked and taken synchronously with sigwaitinfo(), so no
 * handler ever runs in the middle of the master's own work. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "master.h"
#include "worker.h"

#define MAX_WORKERS 1024
#define STOP_GRACE_S 10      /* fast stop: SIGKILL workers still alive after this */
#define RESPAWN_THROTTLE_MS 200

typedef struct {
  pid_t pid;          /* 0: free slot */
  int generation;
  size_t server;      /* index in its generation's config */
  int index;          /* worker number within the server */
  struct timespec started;
} worker_slot_t;

static worker_slot_t workers[MAX_WORKERS];
static int generation;
static gw_config_t *config;

static double since(const struct timespec *t)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

static int spawn(size_t server, int index)
{
  worker_slot_t *slot = NULL;
  for (int i = 0; i < MAX_WORKERS && slot == NULL; i++)
    if (workers[i].pid == 0) slot = &workers[i];
  if (slot == NULL) {
    gw_log_error("too many worker processes");
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    gw_log_error("fork: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) gw_worker_run(config, &config->servers[server], index);
  slot->pid = pid;
  slot->generation = generation;
  slot->server = server;
  slot->index = index;
  clock_gettime(CLOCK_MONOTONIC, &slot->started);
  return 0;
}

static void spawn_all(void)
{
  for (size_t s = 0; s < config->nservers; s++)
    for (int i = 0; i < config->servers[s].workers; i++) spawn(s, i);
}

static void signal_workers(int sig, int only_generation)
{
  for (int i = 0; i < MAX_WORKERS; i++)
    if (workers[i].pid > 0 && (only_generation < 0 || workers[i].generation == only_generation))
      kill(workers[i].pid, sig);
}

static int live_workers(void)
{
  int n = 0;
  for (int i = 0; i < MAX_WORKERS; i++)
    if (workers[i].pid > 0) n++;
  return n;
}

static void describe_exit(int status, char *buf, size_t len)
{
  if (WIFSIGNALED(status))
    snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
  else
    snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
}

/* Reaps dead workers; restarts those of the current generation unless stopping. */
static void reap(int stopping)
{
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (int i = 0; i < MAX_WORKERS; i++) {
      worker_slot_t *w = &workers[i];
      if (w->pid != pid) continue;
      w->pid = 0;
      char how[64];
      describe_exit(status, how, sizeof(how));
      int unexpected = !stopping && w->generation == generation;
      gw_log(unexpected ? GW_LOG_ERROR : GW_LOG_INFO, "worker %d (port %d #%d) %s", (int)pid,
             w->generation == generation ? config->servers[w->server].port : 0, w->index, how);
      if (unexpected) {
        /* A worker that dies right after start would otherwise respawn in a hot loop. */
        if (since(&w->started) < 1.0) {
          struct timespec ts = {0, RESPAWN_THROTTLE_MS * 1000000L};
          nanosleep(&ts, NULL);
        }
        spawn(w->server, w->index);
      }
    }
  }
}

static void reload(void)
{
  char err[1024];
  gw_log_notice("reloading %s", config->path);
  gw_config_t *next = gw_config_load(config->path, err, sizeof(err));
  if (next == NULL || gw_config_listen(next, config, err, sizeof(err)) < 0) {
    gw_log_error("reload failed, keeping the running configuration: %s", err);
    gw_config_free(next, config);
    return;
  }
  int old_generation = generation;
  /* Close the old config's own sockets first, or the new workers would
   * inherit them and keep a port open that the new config dropped. */
  gw_config_free(config, next);
  config = next;
  generation++;
  spawn_all();
  signal_workers(SIGQUIT, old_generation); /* old workers drain and exit */
  gw_log_notice("reloaded: generation %d", generation);
}

static void stop(int graceful)
{
  gw_log_notice("%s stop", graceful ? "graceful" : "fast");
  signal_workers(graceful ? SIGQUIT : SIGTERM, -1);
  /* Listening sockets close now: new connections are refused, not queued. */
  for (size_t s = 0; s < config->nservers; s++) {
    if (config->servers[s].fd >= 0) close(config->servers[s].fd);
    config->servers[s].fd = -1;
  }
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int killed = 0;
  while (live_workers() > 0) {
    reap(1);
    if (live_workers() == 0) break;
    if (!graceful && !killed && since(&start) > STOP_GRACE_S) {
      signal_workers(SIGKILL, -1);
      killed = 1;
    }
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

int gw_master_run(gw_config_t *cfg)
{
  config = cfg;
  sigset_t set;
  sigemptyset(&set);
  int sigs[] = {SIGCHLD, SIGHUP, SIGQUIT, SIGTERM, SIGINT, SIGUSR1};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) sigaddset(&set, sigs[i]);
  sigprocmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  spawn_all();
  gw_log_notice("ready: %zu server(s), master pid %d", config->nservers, (int)getpid());

  for (;;) {
    siginfo_t info;
    int sig = sigwaitinfo(&set, &info);
    if (sig < 0) continue;
    switch (sig) {
    case SIGCHLD:
      reap(0);
      break;
    case SIGHUP:
      reload();
      break;
    case SIGQUIT:
    case SIGTERM:
    case SIGINT:
      stop(sig == SIGQUIT);
      gw_config_free(config, NULL);
      gw_log_notice("exit");
      return 0;
    default:
      break;
    }
  }
}
