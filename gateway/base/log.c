/* log.c - the error log. Every line: timestamp, level, process role, message.
 * Writes go straight to the log's fd (stderr, or a file opened O_APPEND) in
 * one write(2), so lines from the master and the workers never interleave
 * mid-line. The master opens the file; workers inherit the descriptor. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

gw_log_level_t gw_log_min_level = GW_LOG_NOTICE;

static int log_fd = STDERR_FILENO;
static char *log_path; /* owned; NULL: stderr */

static char role[32] = "master";

static const char *const level_names[] = {"debug", "info", "notice", "warn", "error", "crit"};

void gw_log_set_role(const char *r)
{
  snprintf(role, sizeof(role), "%s", r);
}

int gw_log_level_from_name(const char *name)
{
  for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
    if (strcmp(name, level_names[i]) == 0) return (int)i;
  return -1;
}

double gw_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void gw_log(gw_log_level_t level, const char *fmt, ...)
{
  if (level < gw_log_min_level) return;
  char line[4096];
  struct timeval tv;
  struct tm tm;
  gettimeofday(&tv, NULL);
  localtime_r(&tv.tv_sec, &tm);
  int n = (int)strftime(line, sizeof(line), "%Y/%m/%d %H:%M:%S", &tm);
  n += snprintf(line + n, sizeof(line) - n, ".%03d [%s] %s[%d]: ", (int)(tv.tv_usec / 1000),
                level_names[level], role, (int)getpid());
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) m = 0;
  n += m;
  if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
  line[n++] = '\n';
  ssize_t w = write(log_fd, line, (size_t)n);
  (void)w;
}

int gw_log_file_open(const char *path, char *err, size_t errlen)
{
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) snprintf(err, errlen, "%s: %s", path, strerror(errno));
  return fd;
}

void gw_log_use(int fd, const char *path, gw_log_level_t level)
{
  char *copy = path ? strdup(path) : NULL;
  if (log_fd != STDERR_FILENO) close(log_fd);
  free(log_path);
  if (path && copy == NULL) { /* out of memory: stay on stderr */
    close(fd);
    fd = STDERR_FILENO;
  }
  log_fd = path ? fd : STDERR_FILENO;
  log_path = copy;
  gw_log_min_level = level;
}

void gw_log_reopen(void)
{
  if (log_path) {
    char err[512];
    int fd = gw_log_file_open(log_path, err, sizeof(err));
    if (fd < 0) {
      gw_log_error("reopening the error log: %s", err);
    } else {
      /* dup3 swaps the file under the same descriptor number in one step. */
      dup3(fd, log_fd, O_CLOEXEC);
      close(fd);
    }
  }
}
