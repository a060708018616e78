/* settings.h - process-wide settings of a config file (pid file, logs, the workers' user), read
 * out of Gateway::Config.current (mrblib/settings.rb of mruby-gateway-config
 * defines the `pid`, `error_log` and `access_log` directives). */
#ifndef GW_SETTINGS_H
#define GW_SETTINGS_H

#include <stddef.h>
#include <sys/types.h>
#include <mruby.h>

/* What an access log format part stands for. */
typedef enum {
  GW_ALV_LITERAL = 0,          /* text as written */
  GW_ALV_REMOTE_ADDR,
  GW_ALV_TIME_LOCAL,           /* 10/Oct/2000:13:55:36 +0200 */
  GW_ALV_TIME_ISO8601,         /* 2000-10-10T13:55:36+02:00 */
  GW_ALV_MSEC,                 /* 971178936.123 */
  GW_ALV_PID,
  GW_ALV_REQUEST,              /* GET /a?b HTTP/1.1 */
  GW_ALV_METHOD,
  GW_ALV_URI,                  /* the path, without the query */
  GW_ALV_REQUEST_URI,          /* the request-target as received */
  GW_ALV_ARGS,                 /* the query, without "?" */
  GW_ALV_SERVER_PROTOCOL,      /* HTTP/1.1 */
  GW_ALV_SERVER_PORT,
  GW_ALV_STATUS,
  GW_ALV_BYTES_SENT,           /* head and body */
  GW_ALV_BODY_BYTES_SENT,
  GW_ALV_REQUEST_TIME,         /* seconds, millisecond resolution */
  GW_ALV_UPSTREAM_ADDR,
  GW_ALV_UPSTREAM_STATUS,
  GW_ALV_UPSTREAM_RESPONSE_TIME,
  GW_ALV_UPSTREAM_REUSED,      /* 1: pooled keep-alive connection, 0: new */
  GW_ALV_HTTP2,                /* nginx's $http2: "h2" (TLS), "h2c", or "-" for HTTP/1.x */
  GW_ALV_STREAM_ID,            /* the HTTP/2 stream id, or "-" */
  GW_ALV_PROXY_PROTOCOL_ADDR,  /* the client address a PROXY protocol header carried, or "-" */
  GW_ALV_REALIP_REMOTE_ADDR,   /* the socket peer's address (the balancer's) before
                                  proxy_protocol or real_ip replaced it */
  GW_ALV_CACHE_STATUS,         /* the response cache's HIT, MISS... (cache.h), or "-" */
  GW_ALV_HTTP,                 /* request header; text is its name ("user-agent") */
  GW_ALV_SENT_HTTP             /* response header set by the handler or upstream */
} gw_access_var_t;

typedef struct {
  gw_access_var_t var;
  char *text;                  /* owned: the literal, or the header name; else NULL */
  size_t len;
} gw_access_part_t;

typedef enum { GW_LOG_TO_OFF = 0, GW_LOG_TO_STDERR, GW_LOG_TO_FILE } gw_log_target_t;

typedef struct {
  /* pid file: absolute after gw_settings_resolve(); the default derives from
   * the config file's real path, so two configs never share one. */
  char *pid_path;              /* owned */
  gw_log_target_t error_log;   /* STDERR or FILE */
  char *error_log_path;        /* owned when FILE, else NULL */
  int error_log_level;         /* gw_log_level_t */
  gw_log_target_t access_log;  /* OFF, STDERR or FILE */
  char *access_log_path;       /* owned when FILE, else NULL */
  gw_access_part_t *access_format; /* owned array (see access_log.c) */
  size_t access_nparts;
  /* `user`: the workers' user (for its groups), uid and gid; NULL: none */
  char *user;                  /* owned */
  uid_t uid;
  gid_t gid;
} gw_settings_t;

/* Reads the top-level settings out of Gateway::Config.current into s (raises
 * on invalid values; called under mrb_protect_error by config.c). */
void gw_settings_read(mrb_state *mrb, mrb_value current, gw_settings_t *s);

/* Makes relative paths absolute (relative to config_path's folder) and fills
 * in the default pid file. Returns 0, or -1 with err set. Called once after
 * each successful gw_config_load() by whoever serves or signals it. */
int gw_settings_resolve(gw_settings_t *s, const char *config_path, char *err, size_t errlen);

/* Frees what gw_settings_read allocated. */
void gw_settings_dispose(gw_settings_t *s);

#endif
