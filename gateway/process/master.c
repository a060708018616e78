/* master.c - the master process: owns the configuration and the listening
 * sockets, forks each server's worker pool and supervises it.
 *
 *   SIGCHLD       a worker of the current generation died: start a new one
 *   SIGHUP        reload: evaluate the file again; if it is good, start new
 *                 workers (listening sockets are kept) and let the old drain
 *   SIGQUIT       graceful stop: workers finish in-flight requests, then exit
 *   SIGTERM/INT   fast stop
 *   SIGUSR1       reopen the log files (logrotate), then have every worker
 *                 reopen its own
 *
 * Signals are blocked and taken synchronously with sigwaitinfo(), so no
 * handler ever runs in the middle of the master's own work.
 *
 * The master also owns the pid file (written at start, moved when a reload
 * changes `pid`, removed at exit) and opens the error and access logs, which
 * the workers inherit (and, with `user`, hands them over to the workers'
 * user); gw_master_signal() is the other end: `gateway -s`. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "access_log.h"
#include "cache_store.h"
#include "config_load.h"
#include "listener.h"
#include "log.h"
#include "master.h"
#include "stats.h"
#include "timeline.h"
#include "worker.h"

#define MAX_WORKERS 1024
#define STOP_GRACE_S 10      /* fast stop: SIGKILL workers still alive after this */
#define RESPAWN_THROTTLE_MS 200
#define WATCHDOG_MS 500      /* how often the master checks its workers' heartbeats */

typedef struct {
  pid_t pid;          /* 0: free slot */
  int generation;
  size_t server;      /* index in its generation's config */
  int port;           /* its server's */
  int index;          /* worker number within the server */
  int stall_ms;       /* its server's stall_timeout; 0: not watched */
  int killed;         /* the watchdog killed it; not reaped yet */
  uint64_t restarts, stalls; /* of this (server, index) so far: the stats carry them */
  struct timespec started;
} worker_slot_t;

static worker_slot_t workers[MAX_WORKERS];
static int generation;
static gw_config_t *config;

/* -- pid file ----------------------------------------------------------------- */

/* Writes "PID\n" to a temporary file next to path and renames it over path:
 * readers never see a half-written file, and a symlink planted at path is
 * replaced, not followed. */
static int pid_file_write(const char *path, char *err, size_t errlen)
{
  char tmp[PATH_MAX + 32];
  char buf[32];
  int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
  snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
  unlink(tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) goto fail;
  if (write(fd, buf, (size_t)n) != n) {
    int e = errno;
    close(fd);
    unlink(tmp);
    errno = e;
    goto fail;
  }
  close(fd);
  if (rename(tmp, path) < 0) {
    int e = errno;
    unlink(tmp);
    errno = e;
    goto fail;
  }
  return 0;
fail:
  snprintf(err, errlen, "pid file %s: %s", path, strerror(errno));
  return -1;
}

/* The pid in the file at path, or -1 (missing: errno ENOENT; garbage: 0 with EINVAL). */
static long pid_file_read(const char *path)
{
  FILE *fp = fopen(path, "r");
  if (fp == NULL) return -1;
  long pid = 0;
  char extra;
  int ok = fscanf(fp, "%ld", &pid) == 1 && pid > 0 && fscanf(fp, " %c", &extra) != 1;
  fclose(fp);
  if (!ok) {
    errno = EINVAL;
    return 0;
  }
  return pid;
}

/* Removes the pid file if it still names this process (another master may
 * have taken the path over). */
static void pid_file_remove(const char *path)
{
  if (pid_file_read(path) == (long)getpid()) unlink(path);
}

/* -- logs --------------------------------------------------------------------- */

typedef struct {
  int error_fd;               /* -1: stderr */
  gw_access_log_t *access;    /* NULL: off */
} logs_t;

/* Opens the log files that s names; nothing changes on failure. */
static int logs_open(const gw_settings_t *s, logs_t *l, char *err, size_t errlen)
{
  char why[768];
  l->error_fd = -1;
  l->access = NULL;
  if (s->error_log == GW_LOG_TO_FILE && (l->error_fd = gw_log_file_open(s->error_log_path, why, sizeof(why))) < 0) {
    snprintf(err, errlen, "error_log %s", why);
    return -1;
  }
  if (gw_access_log_new(s, &l->access, why, sizeof(why)) < 0) {
    snprintf(err, errlen, "access_log %s", why);
    if (l->error_fd >= 0) close(l->error_fd);
    l->error_fd = -1;
    return -1;
  }
  return 0;
}

/* `user`: the workers reopen the log files themselves (SIGUSR1), as that
 * user, so the files the master (root) opens are handed over to it (their
 * owner; nginx does the same), and so are the caches' folders it made.
 * Not root: `user` is ignored, with a warning. */
static void logs_hand_over(const gw_settings_t *s)
{
  if (s->user == NULL) return;
  if (geteuid() != 0) {
    gw_log_warn("user %s: ignored, the master does not run as root", s->user);
    return;
  }
  const char *paths[] = {s->error_log == GW_LOG_TO_FILE ? s->error_log_path : NULL,
                         s->access_log == GW_LOG_TO_FILE ? s->access_log_path : NULL};
  for (size_t i = 0; i < 2; i++)
    if (paths[i] && chown(paths[i], s->uid, (gid_t)-1) < 0) /* the group stays (logrotate's `create ... adm`) */
      gw_log_warn("user %s: cannot hand %s over to it: %s", s->user, paths[i], strerror(errno));
  gw_cache_store_hand_over(s->uid, s->gid);
}

static void logs_close(logs_t *l)
{
  if (l->error_fd >= 0) close(l->error_fd);
  gw_access_log_free(l->access);
}

/* Makes the logs opened by logs_open() this process's (and future workers'). */
static void logs_use(const gw_settings_t *s, logs_t *l)
{
  gw_log_use(l->error_fd, l->error_fd >= 0 ? s->error_log_path : NULL, (gw_log_level_t)s->error_log_level);
  gw_access_log_use(l->access);
}

static double since(const struct timespec *t)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

static int spawn(size_t server, int index, uint64_t restarts, uint64_t stalls)
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
  if (pid == 0) {
    /* Until the worker's loop takes SIGUSR1 (reopen), it must not kill it. */
    signal(SIGUSR1, SIG_IGN);
    gw_worker_run(config, &config->servers[server], index, restarts, stalls);
  }
  slot->pid = pid;
  slot->generation = generation;
  slot->server = server;
  slot->port = config->servers[server].port;
  slot->index = index;
  slot->stall_ms = config->servers[server].stall_timeout_ms;
  slot->killed = 0;
  slot->restarts = restarts;
  slot->stalls = stalls;
  clock_gettime(CLOCK_MONOTONIC, &slot->started);
  return 0;
}

/* The watchdog: a worker whose loop has not turned (its heartbeat, stamped
 * each second) for its server's stall_timeout is stuck in code that never
 * yields: asked what it runs (SIGUSR2), logged, killed and, as any dead
 * worker of the current generation, replaced. Workers of older generations
 * (draining after a reload or a graceful stop) are watched too, so those
 * never wait forever on a stalled worker. */
static void watchdog(void)
{
  double now = gw_now_ms();
  for (int i = 0; i < MAX_WORKERS; i++) {
    worker_slot_t *w = &workers[i];
    if (w->pid <= 0 || w->stall_ms <= 0 || w->killed) continue;
    gw_worker_stats_t *st = gw_stats_of(w->pid);
    if (st == NULL || st->heartbeat_ms == 0 || now - (double)st->heartbeat_ms < w->stall_ms) continue;
    st->stalled_on[0] = '\0';
    kill(w->pid, SIGUSR2);
    struct timespec answer = {0, 50 * 1000000L};
    nanosleep(&answer, NULL);
    gw_log_error("worker %d (port %d #%d): its loop has not turned for %.1f s (stall_timeout %.1f s) while "
                 "running %.120s; killing it", (int)w->pid, w->port, w->index, (now - (double)st->heartbeat_ms) / 1000,
                 w->stall_ms / 1000.0, st->stalled_on[0] ? st->stalled_on : "(no answer)");
    kill(w->pid, SIGKILL);
    w->killed = 1;
  }
}

static void spawn_all(void)
{
  for (size_t s = 0; s < config->nservers; s++)
    for (int i = 0; i < config->servers[s].workers; i++) spawn(s, i, 0, 0);
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
      gw_log(unexpected ? GW_LOG_ERROR : GW_LOG_INFO, "worker %d (port %d #%d) %s", (int)pid, w->port, w->index, how);
      if (unexpected) {
        /* A worker that dies right after start would otherwise respawn in a hot loop. */
        if (since(&w->started) < 1.0) {
          struct timespec ts = {0, RESPAWN_THROTTLE_MS * 1000000L};
          nanosleep(&ts, NULL);
        }
        spawn(w->server, w->index, w->restarts + 1, w->stalls + (w->killed ? 1 : 0));
      }
    }
  }
}

static void reload(void)
{
  char err[1024];
  gw_log_notice("reloading %s", config->path);
  gw_config_t *next = gw_config_load(config->path, err, sizeof(err));
  logs_t logs;
  if (next == NULL || gw_settings_resolve(&next->settings, next->path, err, sizeof(err)) < 0 ||
      gw_config_listen(next, config, err, sizeof(err)) < 0)
    goto fail;
  if (logs_open(&next->settings, &logs, err, sizeof(err)) < 0) goto fail;
  int pid_moved = strcmp(next->settings.pid_path, config->settings.pid_path) != 0;
  if (pid_moved && pid_file_write(next->settings.pid_path, err, sizeof(err)) < 0) {
    logs_close(&logs);
    goto fail;
  }
  if (pid_moved) pid_file_remove(config->settings.pid_path);
  logs_use(&next->settings, &logs);
  logs_hand_over(&next->settings);
  int old_generation = generation;
  /* Close the old config's own sockets first, or the new workers would
   * inherit them and keep a port open that the new config dropped. */
  gw_config_free(config, next);
  config = next;
  config->generation = ++generation;
  spawn_all();
  signal_workers(SIGQUIT, old_generation); /* old workers drain and exit */
  gw_log_notice("reloaded: generation %d", generation);
  return;
fail:
  gw_log_error("reload failed, keeping the running configuration: %s", err);
  gw_config_free(next, config);
}

static void stop(int graceful)
{
  gw_log_notice("%s stop", graceful ? "graceful" : "fast");
  signal_workers(graceful ? SIGQUIT : SIGTERM, -1);
  /* Listening sockets close now: new connections are refused, not queued. */
  for (size_t s = 0; s < config->nservers; s++) gw_listener_close_all(&config->servers[s], NULL);
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int killed = 0, rounds = 0;
  while (live_workers() > 0) {
    reap(1);
    if (live_workers() == 0) break;
    if (!graceful && !killed && since(&start) > STOP_GRACE_S) {
      signal_workers(SIGKILL, -1);
      killed = 1;
    }
    if (++rounds % 50 == 0) watchdog(); /* every 0.5 s: a stalled worker never drains */
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

  /* Signals are blocked already: a `gateway -s` that reads the pid file the
   * moment it appears is queued, not fatal. */
  char err[1024];
  logs_t logs;
  /* The stats table is shared by every worker: mapped before any fork. */
  if (gw_stats_init() < 0 || gw_timeline_init() < 0) {
    fprintf(stderr, "%s: cannot map the stats table: %s\n", config->path, strerror(errno));
    gw_config_free(config, NULL);
    return 1;
  }
  int opened = logs_open(&config->settings, &logs, err, sizeof(err)) == 0;
  if (!opened || pid_file_write(config->settings.pid_path, err, sizeof(err)) < 0) {
    if (opened) logs_close(&logs);
    fprintf(stderr, "%s: %s\n", config->path, err);
    gw_config_free(config, NULL);
    return 1;
  }
  logs_use(&config->settings, &logs);
  logs_hand_over(&config->settings);

  spawn_all();
  gw_log_notice("ready: %zu server(s), master pid %d", config->nservers, (int)getpid());

  double watched = gw_now_ms();
  for (;;) {
    siginfo_t info;
    struct timespec tick = {0, WATCHDOG_MS * 1000000L};
    int sig = sigtimedwait(&set, &info, &tick);
    if (gw_now_ms() - watched >= WATCHDOG_MS) {
      watchdog();
      watched = gw_now_ms();
    }
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
      pid_file_remove(config->settings.pid_path);
      gw_config_free(config, NULL);
      gw_log_notice("exit");
      gw_log_use(-1, NULL, gw_log_min_level); /* close the files: a clean exit for leak checkers */
      gw_access_log_use(NULL);
      return 0;
    case SIGUSR1:
      gw_log_reopen();
      gw_access_log_reopen();
      logs_hand_over(&config->settings);
      gw_log_notice("reopened the log files");
      signal_workers(SIGUSR1, -1);
      break;
    default:
      break;
    }
  }
}

/* -- gateway -s ---------------------------------------------------------------- */

static const struct {
  const char *action;
  int sig;
} actions[] = {{"reload", SIGHUP}, {"stop", SIGTERM}, {"quit", SIGQUIT}, {"reopen", SIGUSR1}};

int gw_master_signal_number(const char *action)
{
  for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
    if (strcmp(actions[i].action, action) == 0) return actions[i].sig;
  return -1;
}

/* The command name of process pid ("gateway"), or "" when unknown. */
static void comm_of(const char *pid, char *buf, size_t len)
{
  char path[64];
  snprintf(path, sizeof(path), "/proc/%s/comm", pid);
  buf[0] = '\0';
  FILE *fp = fopen(path, "r");
  if (fp == NULL) return;
  if (fgets(buf, (int)len, fp) == NULL) buf[0] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
  fclose(fp);
}

int gw_master_signal(const gw_config_t *cfg, const char *action)
{
  int sig = gw_master_signal_number(action);
  const char *path = cfg->settings.pid_path;
  if (sig < 0) {
    fprintf(stderr, "gateway: unknown signal \"%s\" (use reload, stop, quit or reopen)\n", action);
    return 1;
  }
  errno = 0;
  long pid = pid_file_read(path);
  if (pid < 0) {
    fprintf(stderr, "gateway: cannot %s: pid file %s: %s (is the gateway of %s running?)\n", action, path,
            strerror(errno), cfg->path);
    return 1;
  }
  if (pid == 0) {
    fprintf(stderr, "gateway: cannot %s: pid file %s does not hold a process id\n", action, path);
    return 1;
  }
  /* A pid file left by a killed master may name a process that reused the
   * number: signal it only if it runs the same program as we do. */
  char spid[24], mine[64], theirs[64];
  snprintf(spid, sizeof(spid), "%ld", pid);
  comm_of("self", mine, sizeof(mine));
  comm_of(spid, theirs, sizeof(theirs));
  if (mine[0] && theirs[0] && strcmp(mine, theirs) != 0) {
    fprintf(stderr, "gateway: cannot %s: pid file %s names process %ld (%s), not a gateway: a stale pid file?\n",
            action, path, pid, theirs);
    return 1;
  }
  if (kill((pid_t)pid, sig) < 0) {
    if (errno == ESRCH)
      fprintf(stderr, "gateway: cannot %s: process %ld from pid file %s is not running: a stale pid file?\n", action,
              pid, path);
    else
      fprintf(stderr, "gateway: cannot %s: kill %ld: %s\n", action, pid, strerror(errno));
    return 1;
  }
  return 0;
}
