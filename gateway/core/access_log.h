/* access_log.h - one line per answered client request, in a format compiled
 * from the config's `access_log` directive (settings.h). The master builds
 * it; workers inherit it on fork and write it with one write(2) per line. */
#ifndef GW_ACCESS_LOG_H
#define GW_ACCESS_LOG_H

#include <stddef.h>

#include "request.h"
#include "settings.h"

typedef struct gw_access_log_s gw_access_log_t;

/* Builds the access log that settings s describe: copies its format and
 * opens its file. *out is NULL when the log is :off. Returns 0, or -1 with
 * err set ("PATH: reason"). */
int gw_access_log_new(const gw_settings_t *s, gw_access_log_t **out, char *err, size_t errlen);

/* Makes al (NULL: off) this process's access log, owned from now on, and
 * frees the previous one. */
void gw_access_log_use(gw_access_log_t *al);

void gw_access_log_free(gw_access_log_t *al);

/* Reopens the access log file at its path (SIGUSR1, via gw_log_reopen()). */
void gw_access_log_reopen(void);

/* Called once per client request, right after its response was queued:
 * status as sent, bytes_sent the bytes of head and body queued. */
void gw_access_log_write(const gw_request_t *req, int status, size_t bytes_sent, size_t body_bytes);

#endif
