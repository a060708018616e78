/* log.h - the error log: leveled lines on stderr (or a file), one per event. */
#ifndef GW_LOG_H
#define GW_LOG_H

#include <stddef.h>

typedef enum {
  GW_LOG_DEBUG = 0,
  GW_LOG_INFO,
  GW_LOG_NOTICE,
  GW_LOG_WARN,
  GW_LOG_ERROR,
  GW_LOG_CRIT
} gw_log_level_t;

/* Lines below this level are dropped (default GW_LOG_NOTICE). */
extern gw_log_level_t gw_log_min_level;

/* Set by main: "master" or "worker N" prefix for every line of this process. */
void gw_log_set_role(const char *role);

/* Maps "debug".."crit" to a level; returns -1 for an unknown name. */
int gw_log_level_from_name(const char *name);

void gw_log(gw_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Opens path for appending (created 0644; O_CLOEXEC). Returns the fd, or -1
 * with err set to "PATH: reason". Shared by the error and access logs. */
int gw_log_file_open(const char *path, char *err, size_t errlen);

/* Makes this process log to fd (from gw_log_file_open, owned from now on)
 * or, when path is NULL, to stderr (fd ignored); lines below level are
 * dropped. The previous log file is closed. Workers inherit it on fork. */
void gw_log_use(int fd, const char *path, gw_log_level_t level);

/* SIGUSR1 (logrotate): reopens the error log file at its path (the caller
 * reopens the access log too); a file renamed away stops receiving lines.
 * Failures are logged and the old file is kept. */
void gw_log_reopen(void);

#define gw_log_crit(...) gw_log(GW_LOG_CRIT, __VA_ARGS__)
#define gw_log_error(...) gw_log(GW_LOG_ERROR, __VA_ARGS__)
#define gw_log_warn(...) gw_log(GW_LOG_WARN, __VA_ARGS__)
#define gw_log_notice(...) gw_log(GW_LOG_NOTICE, __VA_ARGS__)
#define gw_log_info(...) gw_log(GW_LOG_INFO, __VA_ARGS__)
#define gw_log_debug(...) gw_log(GW_LOG_DEBUG, __VA_ARGS__)

/* CLOCK_MONOTONIC in milliseconds (fractional). */
double gw_now_ms(void);

#endif
