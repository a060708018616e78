/* settings.c - reads the process-wide settings of a config file (pid file,
 * error log, access log) out of Gateway::Config.current. The DSL validated
 * every value (mrblib/settings.rb), so errors here are only a backstop. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "log.h"
#include "settings.h"

static const struct {
  const char *name;
  gw_access_var_t var;
} access_vars[] = {
    {"remote_addr", GW_ALV_REMOTE_ADDR},
    {"time_local", GW_ALV_TIME_LOCAL},
    {"time_iso8601", GW_ALV_TIME_ISO8601},
    {"msec", GW_ALV_MSEC},
    {"pid", GW_ALV_PID},
    {"request", GW_ALV_REQUEST},
    {"method", GW_ALV_METHOD},
    {"request_method", GW_ALV_METHOD},
    {"uri", GW_ALV_URI},
    {"request_uri", GW_ALV_REQUEST_URI},
    {"args", GW_ALV_ARGS},
    {"server_protocol", GW_ALV_SERVER_PROTOCOL},
    {"server_port", GW_ALV_SERVER_PORT},
    {"status", GW_ALV_STATUS},
    {"bytes_sent", GW_ALV_BYTES_SENT},
    {"body_bytes_sent", GW_ALV_BODY_BYTES_SENT},
    {"request_time", GW_ALV_REQUEST_TIME},
    {"upstream_addr", GW_ALV_UPSTREAM_ADDR},
    {"upstream_status", GW_ALV_UPSTREAM_STATUS},
    {"upstream_response_time", GW_ALV_UPSTREAM_RESPONSE_TIME},
    {"upstream_reused", GW_ALV_UPSTREAM_REUSED},
    {"http2", GW_ALV_HTTP2},
    {"stream_id", GW_ALV_STREAM_ID},
    {"proxy_protocol_addr", GW_ALV_PROXY_PROTOCOL_ADDR},
    {"realip_remote_addr", GW_ALV_REALIP_REMOTE_ADDR},
    {"cache_status", GW_ALV_CACHE_STATUS},
};

static mrb_value iv(mrb_state *mrb, mrb_value obj, const char *name)
{
  return mrb_iv_get(mrb, obj, mrb_intern_cstr(mrb, name));
}

static char *dup_or_raise(mrb_state *mrb, const char *s, size_t len)
{
  char *p = strndup(s, len);
  if (p == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  return p;
}

static int is_sym(mrb_state *mrb, mrb_value v, const char *name)
{
  return mrb_symbol_p(v) && strcmp(mrb_sym_name(mrb, mrb_symbol(v)), name) == 0;
}

/* A path String, :stderr or :off (nil: the default `dflt`). */
static gw_log_target_t read_target(mrb_state *mrb, mrb_value v, gw_log_target_t dflt, char **path)
{
  if (mrb_nil_p(v)) return dflt;
  if (is_sym(mrb, v, "stderr")) return GW_LOG_TO_STDERR;
  if (is_sym(mrb, v, "off")) return GW_LOG_TO_OFF;
  if (!mrb_string_p(v)) mrb_raise(mrb, E_ARGUMENT_ERROR, "log target must be a path, :stderr or :off");
  *path = dup_or_raise(mrb, RSTRING_PTR(v), (size_t)RSTRING_LEN(v));
  return GW_LOG_TO_FILE;
}

/* "user_agent" -> "user-agent" */
static char *header_name(mrb_state *mrb, const char *s, size_t len)
{
  char *p = dup_or_raise(mrb, s, len);
  for (size_t i = 0; i < len; i++)
    if (p[i] == '_') p[i] = '-';
  return p;
}

static void read_format(mrb_state *mrb, mrb_value parts, gw_settings_t *s)
{
  mrb_int n = RARRAY_LEN(parts);
  s->access_format = calloc((size_t)n + 1, sizeof(gw_access_part_t));
  if (s->access_format == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  for (mrb_int i = 0; i < n; i++) {
    mrb_value p = mrb_ary_ref(mrb, parts, i);
    gw_access_part_t *part = &s->access_format[i];
    s->access_nparts++;
    if (mrb_string_p(p)) {
      part->var = GW_ALV_LITERAL;
      part->len = (size_t)RSTRING_LEN(p);
      part->text = dup_or_raise(mrb, RSTRING_PTR(p), part->len);
      continue;
    }
    if (!mrb_symbol_p(p)) mrb_raise(mrb, E_ARGUMENT_ERROR, "access_log: bad format part");
    const char *name = mrb_sym_name(mrb, mrb_symbol(p));
    size_t len = strlen(name);
    if (strncmp(name, "http_", 5) == 0 && len > 5) {
      part->var = GW_ALV_HTTP;
      part->text = header_name(mrb, name + 5, len - 5);
      part->len = len - 5;
      continue;
    }
    if (strncmp(name, "sent_http_", 10) == 0 && len > 10) {
      part->var = GW_ALV_SENT_HTTP;
      part->text = header_name(mrb, name + 10, len - 10);
      part->len = len - 10;
      continue;
    }
    size_t k;
    for (k = 0; k < sizeof(access_vars) / sizeof(access_vars[0]); k++)
      if (strcmp(access_vars[k].name, name) == 0) break;
    if (k == sizeof(access_vars) / sizeof(access_vars[0]))
      mrb_raisef(mrb, E_ARGUMENT_ERROR, "access_log: unknown variable $%s", name);
    part->var = access_vars[k].var;
  }
}

void gw_settings_read(mrb_state *mrb, mrb_value current, gw_settings_t *s)
{
  mrb_value pid = iv(mrb, current, "@pid");
  if (mrb_string_p(pid)) s->pid_path = dup_or_raise(mrb, RSTRING_PTR(pid), (size_t)RSTRING_LEN(pid));

  s->error_log = read_target(mrb, iv(mrb, current, "@error_log"), GW_LOG_TO_STDERR, &s->error_log_path);
  if (s->error_log == GW_LOG_TO_OFF) mrb_raise(mrb, E_ARGUMENT_ERROR, "error_log: :off is not allowed");
  mrb_value level = iv(mrb, current, "@error_log_level");
  s->error_log_level = GW_LOG_NOTICE;
  if (mrb_symbol_p(level)) {
    int l = gw_log_level_from_name(mrb_sym_name(mrb, mrb_symbol(level)));
    if (l < 0) mrb_raise(mrb, E_ARGUMENT_ERROR, "error_log: unknown level");
    s->error_log_level = l;
  }

  mrb_value user = iv(mrb, current, "@user"), ids = iv(mrb, current, "@user_ids");
  if (mrb_string_p(user) && mrb_array_p(ids) && RARRAY_LEN(ids) == 2) { /* the DSL looked them up */
    s->uid = (uid_t)mrb_integer(mrb_ary_ref(mrb, ids, 0));
    s->gid = (gid_t)mrb_integer(mrb_ary_ref(mrb, ids, 1));
    s->user = dup_or_raise(mrb, RSTRING_PTR(user), (size_t)RSTRING_LEN(user));
  }

  s->access_log = read_target(mrb, iv(mrb, current, "@access_log"), GW_LOG_TO_OFF, &s->access_log_path);
  mrb_value format = iv(mrb, current, "@access_log_format");
  if (s->access_log != GW_LOG_TO_OFF) {
    if (!mrb_array_p(format)) mrb_raise(mrb, E_ARGUMENT_ERROR, "access_log: no format");
    read_format(mrb, format, s);
  }
}

/* path made absolute against dir (with its trailing '/'); NULL when out of memory. */
static char *absolute(const char *dir, const char *path)
{
  if (path[0] == '/') return strdup(path);
  size_t dl = strlen(dir), pl = strlen(path);
  char *p = malloc(dl + pl + 1);
  if (p == NULL) return NULL;
  memcpy(p, dir, dl);
  memcpy(p + dl, path, pl + 1);
  return p;
}

static int make_absolute(char **path, const char *dir)
{
  if (*path == NULL || (*path)[0] == '/') return 0;
  char *p = absolute(dir, *path);
  if (p == NULL) return -1;
  free(*path);
  *path = p;
  return 0;
}

int gw_settings_resolve(gw_settings_t *s, const char *config_path, char *err, size_t errlen)
{
  char real[PATH_MAX];
  if (realpath(config_path, real) == NULL) {
    snprintf(err, errlen, "%s: %s", config_path, strerror(errno));
    return -1;
  }
  char dir[PATH_MAX];
  snprintf(dir, sizeof(dir), "%s", real);
  char *slash = strrchr(dir, '/');
  slash[1] = '\0'; /* realpath always has one */

  if (s->pid_path == NULL) {
    /* FNV-1a of the config's real path: one pid file per config file. */
    uint64_t h = 14695981039346656037ULL;
    for (const char *p = real; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    char def[64];
    snprintf(def, sizeof(def), "/tmp/gateway-%016llx.pid", (unsigned long long)h);
    s->pid_path = strdup(def);
    if (s->pid_path == NULL) goto oom;
  }
  if (make_absolute(&s->pid_path, dir) < 0 || make_absolute(&s->error_log_path, dir) < 0 ||
      make_absolute(&s->access_log_path, dir) < 0)
    goto oom;
  return 0;
oom:
  snprintf(err, errlen, "%s: out of memory", config_path);
  return -1;
}

void gw_settings_dispose(gw_settings_t *s)
{
  free(s->pid_path);
  free(s->error_log_path);
  free(s->access_log_path);
  free(s->user);
  for (size_t i = 0; i < s->access_nparts; i++) free(s->access_format[i].text);
  free(s->access_format);
  memset(s, 0, sizeof(*s));
}
