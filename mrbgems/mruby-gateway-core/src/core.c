/* core.c - natives of the Gateway module: logging, process facts, and what
 * the config DSL asks of the system (files, globs, users). */
#include <errno.h>
#include <glob.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/compile.h>
#include <mruby/error.h>
#include <mruby/hash.h>
#include <mruby/string.h>

#include "addr.h"
#include "fcgi_record.h"
#include "gw_mruby.h"
#include "log.h"
#include "url.h"

static mrb_value gw_mrb_log(mrb_state *mrb, mrb_value self)
{
  mrb_int level;
  char *msg;
  (void)self;
  mrb_get_args(mrb, "iz", &level, &msg);
  if (level < GW_LOG_DEBUG || level > GW_LOG_CRIT) mrb_raise(mrb, E_ARGUMENT_ERROR, "bad log level");
  gw_log((gw_log_level_t)level, "%s", msg);
  return mrb_nil_value();
}

static mrb_value gw_mrb_pid(mrb_state *mrb, mrb_value self)
{
  (void)mrb;
  (void)self;
  return mrb_fixnum_value(getpid());
}

static mrb_value gw_mrb_worker_id(mrb_state *mrb, mrb_value self)
{
  (void)mrb;
  (void)self;
  return mrb_fixnum_value(gw_mrb_worker_index());
}

static void set(mrb_state *mrb, mrb_value h, const char *key, mrb_value v)
{
  mrb_hash_set(mrb, h, mrb_symbol_value(mrb_intern_cstr(mrb, key)), v);
}

/* Gateway.stats: every live worker's counters and gauges (the status page's
 * numbers), as [{pid:, port:, index:, requests:, ...}, ...]. This worker's
 * gauges are refreshed first; the others' are at most a second old. */
static mrb_value gw_mrb_stats(mrb_state *mrb, mrb_value self)
{
  (void)self;
  gw_mrb_publish_stats();
  mrb_value list = mrb_ary_new(mrb);
  for (int i = 0; gw_stats_table && i < GW_STATS_SLOTS; i++) {
    const gw_worker_stats_t *s = &gw_stats_table[i];
    if (!gw_stats_live(s)) continue;
    mrb_value h = mrb_hash_new(mrb);
    set(mrb, h, "pid", mrb_fixnum_value(s->pid));
    set(mrb, h, "port", mrb_fixnum_value(s->port));
    set(mrb, h, "index", mrb_fixnum_value(s->index));
    for (size_t f = 0; f < gw_stats_nfields; f++) {
      const gw_stats_field_t *fd = &gw_stats_fields[f];
      mrb_int v = fd->is_counter ? (mrb_int)gw_stats_counter(s, fd) : (mrb_int)gw_stats_gauge(s, fd);
      set(mrb, h, fd->name, mrb_fixnum_value(v));
    }
    mrb_ary_push(mrb, list, h);
  }
  return list;
}

/* Gateway._proxy_url_valid?(url): the proxy's own URL parser, so the config
 * DSL rejects exactly what the proxy could not use. */
static mrb_value gw_mrb_proxy_url_valid(mrb_state *mrb, mrb_value self)
{
  char *url;
  (void)self;
  mrb_get_args(mrb, "z", &url);
  gw_url_t u;
  return mrb_bool_value(gw_url_parse(url, &u) == 0);
}

/* Gateway._fastcgi_target?(s): "unix:/path", "IP:port" or a group name, as
 * the FastCGI handler reads it (fcgi_record.c). */
static mrb_value gw_mrb_fastcgi_target_p(mrb_state *mrb, mrb_value self)
{
  char *s;
  (void)self;
  mrb_get_args(mrb, "z", &s);
  gw_sockaddr_t a;
  return mrb_bool_value(gw_fcgi_target_parse(s, &a) >= 0);
}

/* Gateway._ip?(host): an IPv4 or IPv6 literal (no brackets). */
static mrb_value gw_mrb_ip_p(mrb_state *mrb, mrb_value self)
{
  char *host;
  (void)self;
  mrb_get_args(mrb, "z", &host);
  return mrb_bool_value(gw_addr_is_ip(host));
}

/* Gateway._cidr?(s): "10.0.0.0/8", "::1/128" or one address (addr.c). */
static mrb_value gw_mrb_cidr_p(mrb_state *mrb, mrb_value self)
{
  char *s;
  mrb_int len;
  gw_cidr_t c;
  (void)self;
  mrb_get_args(mrb, "s", &s, &len);
  return mrb_bool_value(gw_addr_parse_cidr(s, (size_t)len, &c) == 0);
}

/* The text of the file at path, after head; raises err "PATH: cannot ..." */
static mrb_value read_source(mrb_state *mrb, const char *path, const char *head, struct RClass *err)
{
  FILE *fp = fopen(path, "r");
  if (fp == NULL) mrb_raisef(mrb, err, "%s: cannot open: %s", path, strerror(errno));
  mrb_value src = mrb_str_new_cstr(mrb, head);
  char chunk[8192];
  size_t n;
  while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0) mrb_str_cat(mrb, src, chunk, n);
  int failed = ferror(fp);
  fclose(fp);
  if (failed) mrb_raisef(mrb, err, "%s: cannot read", path);
  return src;
}

typedef struct {
  mrb_value src;
  mrbc_context *cxt;
} load_t;

static mrb_value load_body(mrb_state *mrb, void *p)
{
  load_t *l = p;
  return mrb_load_nstring_cxt(mrb, RSTRING_PTR(l->src), RSTRING_LEN(l->src), l->cxt);
}

/* Evaluates src at the top level with path as its file name, and returns
 * its value. A syntax error is raised as err "PATH:LINE: message"; an
 * exception raised while it runs is raised again as is (its backtrace
 * names path and its lines). Run protected: an exception inside a nested
 * load jumps past it otherwise, and the context would leak. */
static mrb_value eval_source(mrb_state *mrb, mrb_value src, const char *path, struct RClass *err)
{
  load_t l = {src, mrbc_context_new(mrb)};
  mrbc_filename(mrb, l.cxt, path);
  l.cxt->capture_errors = TRUE;
  mrb_bool failed = FALSE;
  mrb_value v = mrb_protect_error(mrb, load_body, &l, &failed);
  mrbc_context_free(mrb, l.cxt);
  if (!failed && mrb->exc == NULL) return v;
  mrb_value exc = failed ? v : mrb_obj_value(mrb->exc);
  mrb->exc = NULL;
  if (!mrb_obj_is_kind_of(mrb, exc, E_SYNTAX_ERROR)) mrb_exc_raise(mrb, exc);
  mrb_value msg = mrb_funcall(mrb, exc, "message", 0);
  const char *m = mrb_string_p(msg) ? mrb_string_cstr(mrb, msg) : "?";
  int line = 0;
  if (sscanf(m, "line %d:", &line) == 1) /* the parser's "line 3: syntax error, ..." */
    mrb_raisef(mrb, err, "%s:%d:%s", path, line, strchr(m, ':') + 1);
  mrb_raisef(mrb, err, "%s: %s", path, m);
  return mrb_nil_value(); /* not reached */
}

/* A handler file's source, compiled into a lambda taking the request
 * (`req`), so a top-level `return` ends the handler as in ngx_mruby, and
 * backtraces name the file and its lines (the wrapper opens on the file's
 * first line, so line numbers are the file's; a file cannot start with
 * =begin). Raises Gateway::HandlerFileError "PATH:LINE: message". */
static mrb_value compile_source(mrb_state *mrb, const char *path, const char *text, size_t len)
{
  static const char head[] = "->(req) { ", tail[] = "\n}\n";
  struct RClass *err = mrb_class_get_under(mrb, mrb_module_get(mrb, "Gateway"), "HandlerFileError");
  mrb_value src = mrb_str_new(mrb, head, sizeof(head) - 1);
  mrb_str_cat(mrb, src, text, len);
  mrb_str_cat(mrb, src, tail, sizeof(tail) - 1);
  mrb_value lambda = eval_source(mrb, src, path, err);
  if (!mrb_proc_p(lambda)) mrb_raisef(mrb, err, "%s: did not compile to a handler", path);
  return lambda;
}

/* Gateway._compile_file(path): a handler file, compiled once (compile_source). */
static mrb_value gw_mrb_compile_file(mrb_state *mrb, mrb_value self)
{
  const char *path;
  (void)self;
  mrb_get_args(mrb, "z", &path);
  struct RClass *err = mrb_class_get_under(mrb, mrb_module_get(mrb, "Gateway"), "HandlerFileError");
  mrb_value text = read_source(mrb, path, "", err);
  return compile_source(mrb, path, RSTRING_PTR(text), (size_t)RSTRING_LEN(text));
}

/* Gateway._compile_source(text, path): the same for text read elsewhere
 * (ruby_files:, from the descriptor the static handler opened). */
static mrb_value gw_mrb_compile_source(mrb_state *mrb, mrb_value self)
{
  mrb_value text;
  const char *path;
  (void)self;
  mrb_get_args(mrb, "Sz", &text, &path);
  return compile_source(mrb, path, RSTRING_PTR(text), (size_t)RSTRING_LEN(text));
}

/* Gateway._load_config_file(path): evaluates a config file (`include`) at
 * the top level, as the main one is; a syntax error is raised as
 * Gateway::HandlerFileError "PATH:LINE: message". */
static mrb_value gw_mrb_load_config_file(mrb_state *mrb, mrb_value self)
{
  const char *path;
  (void)self;
  mrb_get_args(mrb, "z", &path);
  struct RClass *err = mrb_class_get_under(mrb, mrb_module_get(mrb, "Gateway"), "HandlerFileError");
  eval_source(mrb, read_source(mrb, path, "", err), path, err);
  return mrb_nil_value();
}

/* Gateway._glob(pattern): the paths glob(3) matches, sorted, folders left
 * out; [] when none does. */
static mrb_value gw_mrb_glob(mrb_state *mrb, mrb_value self)
{
  const char *pattern;
  (void)self;
  mrb_get_args(mrb, "z", &pattern);
  glob_t g;
  int rc = glob(pattern, GLOB_MARK, NULL, &g); /* GLOB_MARK: folders end in '/' */
  mrb_value list = mrb_ary_new(mrb);
  if (rc == GLOB_NOMATCH) return list;
  if (rc != 0) {
    globfree(&g);
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "include %s: %s", pattern, rc == GLOB_NOSPACE ? "out of memory" : "cannot read a folder");
  }
  for (size_t i = 0; i < g.gl_pathc; i++) {
    size_t len = strlen(g.gl_pathv[i]);
    if (len > 0 && g.gl_pathv[i][len - 1] != '/') mrb_ary_push(mrb, list, mrb_str_new(mrb, g.gl_pathv[i], len));
  }
  globfree(&g);
  return list;
}

/* Gateway._realpath(path): realpath(3), or nil. */
static mrb_value gw_mrb_realpath(mrb_state *mrb, mrb_value self)
{
  const char *path;
  (void)self;
  mrb_get_args(mrb, "z", &path);
  char real[PATH_MAX];
  return realpath(path, real) ? mrb_str_new_cstr(mrb, real) : mrb_nil_value();
}

/* Gateway._user_ids(user, group): [uid, gid] of a user (and group; nil:
 * the user's own), from the system's user database; raises ArgumentError
 * naming the one that does not exist. */
static mrb_value gw_mrb_user_ids(mrb_state *mrb, mrb_value self)
{
  const char *user, *group = NULL;
  (void)self;
  mrb_get_args(mrb, "z|z!", &user, &group);
  errno = 0;
  struct passwd *pw = getpwnam(user);
  if (pw == NULL)
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "user: no such user \"%s\"%s%s", user, errno ? ": " : "", errno ? strerror(errno) : "");
  gid_t gid = pw->pw_gid;
  uid_t uid = pw->pw_uid;
  if (group) {
    errno = 0;
    struct group *gr = getgrnam(group);
    if (gr == NULL)
      mrb_raisef(mrb, E_ARGUMENT_ERROR, "user: no such group \"%s\"%s%s", group, errno ? ": " : "", errno ? strerror(errno) : "");
    gid = gr->gr_gid;
  }
  mrb_value ids[2] = {mrb_int_value(mrb, (mrb_int)uid), mrb_int_value(mrb, (mrb_int)gid)};
  return mrb_ary_new_from_values(mrb, 2, ids);
}

/* Gateway._file?(path): a regular file that can be opened for reading. */
static mrb_value gw_mrb_file_p(mrb_state *mrb, mrb_value self)
{
  const char *path;
  (void)self;
  mrb_get_args(mrb, "z", &path);
  FILE *fp = fopen(path, "r");
  struct stat st;
  int regular = fp && fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode); /* fopen opens folders too */
  if (fp) fclose(fp);
  return mrb_bool_value(regular);
}

void mrb_mruby_gateway_core_gem_init(mrb_state *mrb)
{
  struct RClass *gw = mrb_define_module(mrb, "Gateway");
  mrb_define_module_function(mrb, gw, "_gw_log", gw_mrb_log, MRB_ARGS_REQ(2));
  mrb_define_module_function(mrb, gw, "pid", gw_mrb_pid, MRB_ARGS_NONE());
  mrb_define_module_function(mrb, gw, "worker_id", gw_mrb_worker_id, MRB_ARGS_NONE());
  mrb_define_module_function(mrb, gw, "stats", gw_mrb_stats, MRB_ARGS_NONE());
  mrb_define_module_function(mrb, gw, "_ip?", gw_mrb_ip_p, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_cidr?", gw_mrb_cidr_p, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_proxy_url_valid?", gw_mrb_proxy_url_valid, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_fastcgi_target?", gw_mrb_fastcgi_target_p, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_compile_file", gw_mrb_compile_file, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_compile_source", gw_mrb_compile_source, MRB_ARGS_REQ(2));
  mrb_define_module_function(mrb, gw, "_file?", gw_mrb_file_p, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_load_config_file", gw_mrb_load_config_file, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_glob", gw_mrb_glob, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_realpath", gw_mrb_realpath, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_user_ids", gw_mrb_user_ids, MRB_ARGS_ARG(1, 1));
}

void mrb_mruby_gateway_core_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
