/* config_load.c - evaluates the config script in a fresh mruby VM and copies what
 * the C core needs (servers, limits, locations) out of Gateway::Config.current.
 * Also opens the listening sockets, reusing those of the previous config on
 * reload so that no connection is refused while workers are replaced. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/compile.h>
#include <mruby/error.h>
#include <mruby/hash.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "addr.h"
#include "cache.h"
#include "compress.h"
#include "compress_http.h"
#include "fcgi_record.h"
#include "config_load.h"
#include "dashboard.h"
#include "fastcgi.h"
#include "gw_mruby.h"
#include "handler.h"
#include "listener.h"
#include "log.h"
#include "mruby_handler.h"
#include "ws_handler.h"
#include "proxy.h"
#include "regex.h"
#include "router.h"
#include "static.h"
#include "shdict.h"
#include "shm_zone.h"
#include "status.h"
#include "tls_server.h"
#include "tls_client.h"
#include "tls_hook.h"

static mrb_value iv(mrb_state *mrb, mrb_value obj, const char *name)
{
  return mrb_iv_get(mrb, obj, mrb_intern_cstr(mrb, name));
}

static char *dup_str(mrb_state *mrb, mrb_value s)
{
  return strdup(mrb_string_cstr(mrb, s));
}

static int limit_ms(mrb_state *mrb, mrb_value limits, const char *key)
{
  mrb_value v = mrb_hash_get(mrb, limits, mrb_symbol_value(mrb_intern_cstr(mrb, key)));
  return (int)(mrb_as_float(mrb, v) * 1000.0 + 0.5);
}

static size_t limit_size(mrb_state *mrb, mrb_value limits, const char *key)
{
  mrb_value v = mrb_hash_get(mrb, limits, mrb_symbol_value(mrb_intern_cstr(mrb, key)));
  return (size_t)mrb_as_float(mrb, v);
}

static void *need(mrb_state *mrb, void *p)
{
  if (p == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  return p;
}

/* -- FastCGI (docs/upstreams.md, "FastCGI"): fastcgi: TARGET, params:, script_filename:, split_path_info: -- */

static gw_regex_t *compile_regexp(mrb_state *mrb, mrb_value re, const char *path);

/* The protocol of upstream group `name` as the DSL holds it (nil: none). */
static mrb_value group_protocol(mrb_state *mrb, const char *name)
{
  struct RClass *gw = mrb_module_get(mrb, "Gateway");
  mrb_value current = mrb_funcall(mrb, mrb_obj_value(mrb_class_get_under(mrb, gw, "Config")), "current", 0);
  mrb_value up = mrb_hash_get(mrb, iv(mrb, current, "@upstreams"), mrb_str_new_cstr(mrb, name));
  return mrb_nil_p(up) ? up : iv(mrb, up, "@protocol");
}

static gw_handler_t *fastcgi_handler(mrb_state *mrb, mrb_value loc, const char *path, mrb_value target)
{
  const char *t = mrb_string_cstr(mrb, target);
  gw_sockaddr_t a;
  if (gw_fcgi_target_parse(t, &a) == 0) { /* a group name: it may be declared after the location */
    mrb_value proto = group_protocol(mrb, t);
    if (!mrb_symbol_p(proto) || strcmp(mrb_sym_name(mrb, mrb_symbol(proto)), "fastcgi") != 0)
      mrb_raisef(mrb, E_ARGUMENT_ERROR, "location %s: fastcgi: %s is not an upstream with protocol: :fastcgi", path, t);
  }
  mrb_value params = iv(mrb, loc, "@params");
  mrb_value keys = mrb_hash_p(params) ? mrb_hash_keys(mrb, params) : mrb_ary_new(mrb);
  size_t n = (size_t)RARRAY_LEN(keys);
  mrb_value sf = iv(mrb, loc, "@script_filename");
  mrb_value split_re = iv(mrb, loc, "@split_path_info"); /* a Regexp of two groups (the DSL checked) */
  gw_regex_t *split = mrb_nil_p(split_re) ? NULL : compile_regexp(mrb, split_re, path);
  const char **pairs = calloc(2 * n + 1, sizeof(char *));
  if (pairs == NULL) {
    gw_regex_unref(split);
    mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    mrb_value k = mrb_ary_ref(mrb, keys, (mrb_int)i);
    pairs[2 * i] = mrb_string_cstr(mrb, k); /* the DSL checked: Strings without NUL */
    pairs[2 * i + 1] = mrb_string_cstr(mrb, mrb_hash_get(mrb, params, k));
  }
  gw_handler_t *h = gw_fastcgi_handler_new(t, mrb_string_p(sf) ? mrb_string_cstr(mrb, sf) : NULL, split, pairs, n);
  gw_regex_unref(split); /* the handler holds its own reference */
  free(pairs);
  return need(mrb, h);
}

/* A proxy_pass: URL may not name a FastCGI group. */
static void check_proxy_group(mrb_state *mrb, const char *path, const char *url)
{
  gw_url_t u;
  if (gw_url_parse(url, &u) < 0 || u.unix_path || u.addrlen) return;
  mrb_value proto = group_protocol(mrb, u.host);
  if (mrb_symbol_p(proto) && strcmp(mrb_sym_name(mrb, mrb_symbol(proto)), "fastcgi") == 0)
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "location %s: proxy_pass to %s, a FastCGI upstream: use fastcgi: \"%s\"", path,
               u.host, u.host);
}

/* -- static files: the Hash of Gateway::Static.options (mrblib/static.rb) -- */

static mrb_value hget(mrb_state *mrb, mrb_value h, const char *key)
{
  return mrb_hash_get(mrb, h, mrb_symbol_value(mrb_intern_cstr(mrb, key)));
}

static gw_handler_t *read_static(mrb_state *mrb, mrb_value st, gw_server_t *s, gw_location_t *l)
{
  gw_static_conf_t c;
  memset(&c, 0, sizeof(c));
  c.root = mrb_string_cstr(mrb, hget(mrb, st, "dir"));
  c.alias = mrb_test(hget(mrb, st, "alias"));
  c.prefix_len = l->path_len;
  c.autoindex = mrb_test(hget(mrb, st, "autoindex"));
  c.follow_symlinks = mrb_test(hget(mrb, st, "follow_symlinks"));
  c.gzip_static = mrb_test(hget(mrb, st, "gzip_static"));
  c.default_type = mrb_string_cstr(mrb, hget(mrb, st, "default_type"));
  mrb_value index = hget(mrb, st, "index"), types = hget(mrb, st, "types");
  const char *names[64], *pairs[128];
  c.nindex = (size_t)RARRAY_LEN(index) < 64 ? (size_t)RARRAY_LEN(index) : 64;
  for (size_t i = 0; i < c.nindex; i++) names[i] = mrb_string_cstr(mrb, mrb_ary_ref(mrb, index, (mrb_int)i));
  c.index = names;
  c.ntypes = (size_t)RARRAY_LEN(types) / 2 < 64 ? (size_t)RARRAY_LEN(types) / 2 : 64;
  for (size_t i = 0; i < 2 * c.ntypes; i++) pairs[i] = mrb_string_cstr(mrb, mrb_ary_ref(mrb, types, (mrb_int)i));
  c.types = pairs;
  mrb_value ofc = hget(mrb, st, "open_file_cache"), mem = hget(mrb, st, "memory_cache");
  if (mrb_hash_p(ofc)) {
    c.cache.max_entries = (size_t)mrb_as_float(mrb, hget(mrb, ofc, "max"));
    c.cache.valid_ms = (int)(mrb_as_float(mrb, hget(mrb, ofc, "valid")) * 1000.0 + 0.5);
  }
  if (mrb_hash_p(mem)) {
    c.cache.mem_max_file = (size_t)mrb_as_float(mrb, hget(mrb, mem, "max_file"));
    c.cache.mem_budget = (size_t)mrb_as_float(mrb, hget(mrb, mem, "budget"));
  }
  if (mrb_test(hget(mrb, st, "ruby_files"))) {
    c.ruby_file = gw_mruby_ruby_file;
    s->precise_timers = 1; /* Ruby may wait on Async.sleep: exact timers */
  }
  mrb_value fallback = hget(mrb, st, "fallback");
  if (mrb_test(fallback)) {
    c.fallback = need(mrb, gw_mruby_handler_new(mrb, fallback));
    s->precise_timers = 1; /* Ruby may wait on Async.sleep: exact timers */
  }
  char err[512];
  gw_handler_t *h = gw_static_handler_new(&c, err, sizeof(err));
  if (h == NULL) mrb_raisef(mrb, E_ARGUMENT_ERROR, "location %s: %s", l->path, err);
  return h;
}

/* compress: (Gateway::Compress.options' Hash, checked by the DSL; nil: off)
 * as the location's compression settings and response stage. */
static void read_compress(mrb_state *mrb, mrb_value h, gw_location_t *l)
{
  if (!mrb_hash_p(h)) return;
  gw_compress_conf_t *c = calloc(1, sizeof(*c));
  if (c == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  l->compress = c; /* freed with the location */
  mrb_value enc = hget(mrb, h, "encodings"), level = hget(mrb, h, "level"), types = hget(mrb, h, "types");
  for (mrb_int i = 0; i < RARRAY_LEN(enc) && c->nencodings < GW_CODING_COUNT; i++) {
    const char *name = mrb_sym_name(mrb, mrb_symbol(mrb_ary_ref(mrb, enc, i)));
    for (gw_coding_t k = GW_CODING_GZIP; k < GW_CODING_COUNT; k++)
      if (strcmp(name, gw_coding_name(k)) == 0) c->encodings[c->nencodings++] = k;
  }
  for (gw_coding_t k = GW_CODING_GZIP; k < GW_CODING_COUNT; k++)
    c->level[k] = (int)mrb_integer(hget(mrb, level, gw_coding_name(k)));
  c->min_length = (long long)mrb_integer(hget(mrb, h, "min_length"));
  c->types = calloc((size_t)RARRAY_LEN(types) + 1, sizeof(char *));
  if (c->types == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  for (mrb_int i = 0; i < RARRAY_LEN(types); i++) {
    if ((c->types[i] = strdup(mrb_string_cstr(mrb, mrb_ary_ref(mrb, types, i)))) == NULL)
      mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
    c->ntypes++;
  }
  l->stage = &gw_compress_stage;
}

/* cache: (Gateway::Cache.location_options' Hash, checked by the DSL; nil:
 * none) as the location's cache settings and hooks (cache.h). */
static void read_cache(mrb_state *mrb, mrb_value h, gw_server_t *s, gw_location_t *l)
{
  if (!mrb_hash_p(h)) return;
  char err[256];
  gw_cache_conf_t *c = gw_cache_conf_new(mrb_string_cstr(mrb, hget(mrb, h, "zone")), err, sizeof(err));
  if (c == NULL) mrb_raisef(mrb, E_ARGUMENT_ERROR, "location %s: cache: %s", l->path, err);
  l->cache = c; /* freed with the location */
  mrb_value valid = hget(mrb, h, "valid"), use_stale = hget(mrb, h, "use_stale"), prepare = hget(mrb, h, "prepare");
  for (mrb_int i = 0; i < RARRAY_LEN(valid); i++) { /* [[status (0: any), seconds], ...] */
    mrb_value pair = mrb_ary_ref(mrb, valid, i);
    int status = (int)mrb_integer(mrb_ary_ref(mrb, pair, 0));
    c->valid[status ? gw_cc_valid_slot(status) : GW_CC_VALID_ANY] = (long long)mrb_integer(mrb_ary_ref(mrb, pair, 1));
  }
  for (mrb_int i = 0; i < RARRAY_LEN(use_stale); i++) {
    const char *w = mrb_sym_name(mrb, mrb_symbol(mrb_ary_ref(mrb, use_stale, i)));
    if (strcmp(w, "error") == 0) c->stale_error = 1;
    else if (strcmp(w, "timeout") == 0) c->stale_timeout = 1;
    else if (strcmp(w, "updating") == 0) c->stale_updating = 1;
  }
  c->lock = mrb_test(hget(mrb, h, "lock"));
  c->lock_timeout_ms = (int)mrb_integer(hget(mrb, h, "lock_timeout")) * 1000;
  c->status_header = mrb_test(hget(mrb, h, "status_header"));
  c->store_set_cookie = mrb_test(hget(mrb, h, "store_set_cookie"));
  if (!mrb_nil_p(prepare)) { /* key:/bypass: lambdas: a Ruby step before the lookup */
    c->prepare = need(mrb, gw_mruby_filter_new(mrb, prepare, GW_MRUBY_ACCESS));
    s->precise_timers = 1;
  }
  l->cache_hooks = &gw_cache_hooks;
}

/* A websocket: location: the Ruby block runs (in an mruby handler) once the
 * handshake is done; the options were checked by the DSL. */
static gw_handler_t *websocket_handler(mrb_state *mrb, mrb_value loc, const gw_location_t *l, mrb_value runner)
{
  mrb_value max = iv(mrb, loc, "@websocket_max_message");
  mrb_value timeout = iv(mrb, loc, "@tunnel_timeout");
  mrb_value protocols = iv(mrb, loc, "@websocket_protocols");
  const char *names[32];
  mrb_int n = mrb_array_p(protocols) ? RARRAY_LEN(protocols) : 0;
  if (n > 32) mrb_raisef(mrb, E_ARGUMENT_ERROR, "location %s: websocket_protocols: at most 32", l->path);
  for (mrb_int i = 0; i < n; i++) names[i] = mrb_string_cstr(mrb, mrb_ary_ref(mrb, protocols, i));
  gw_handler_t *script = need(mrb, gw_mruby_handler_new(mrb, runner));
  return need(mrb, gw_ws_handler_new(script, mrb_nil_p(max) ? 0 : (size_t)mrb_integer(max),
                                     mrb_nil_p(timeout) ? 0 : (int)(mrb_as_float(mrb, timeout) * 1000.0 + 0.5), names,
                                     (size_t)n));
}

/* The location's handler object, by kind, and its filters (handler.h). */
static void read_handlers(mrb_state *mrb, mrb_value loc, gw_server_t *s, gw_location_t *l)
{
  mrb_value proxy_pass = iv(mrb, loc, "@proxy_pass");
  mrb_value allow = iv(mrb, loc, "@allow");
  mrb_value st = iv(mrb, loc, "@static");
  mrb_value websocket = iv(mrb, loc, "@websocket");
  if (!mrb_nil_p(websocket)) {
    l->handler = websocket_handler(mrb, loc, l, websocket);
    s->precise_timers = 1; /* Ruby may wait on Async.sleep: exact timers */
  } else if (mrb_hash_p(st)) {
    l->handler = read_static(mrb, st, s, l);
  } else if (mrb_test(iv(mrb, loc, "@status"))) {
    l->handler = need(mrb, gw_status_handler_new());
  } else if (mrb_test(iv(mrb, loc, "@dashboard"))) {
    mrb_int n = mrb_array_p(allow) ? RARRAY_LEN(allow) : 0;
    const char *addrs[64];
    if (n > 64) mrb_raisef(mrb, E_ARGUMENT_ERROR, "location %s: allow: at most 64 addresses", l->path);
    for (mrb_int i = 0; i < n; i++) addrs[i] = mrb_string_cstr(mrb, mrb_ary_ref(mrb, allow, i));
    l->handler = need(mrb, gw_dashboard_handler_new(addrs, (size_t)n));
    s->latency_histogram = 1;
    l->no_latency = 1; /* its polls would pull the percentiles it shows down */
  } else if (mrb_string_p(iv(mrb, loc, "@fastcgi"))) {
    l->handler = fastcgi_handler(mrb, loc, l->path, iv(mrb, loc, "@fastcgi"));
    l->stream_body = 1; /* a Content-Length body goes as FCGI_STDIN as it arrives */
  } else if (mrb_string_p(proxy_pass)) {
    check_proxy_group(mrb, l->path, mrb_string_cstr(mrb, proxy_pass));
    l->handler = gw_proxy_handler_new(mrb_string_cstr(mrb, proxy_pass));
    if (l->handler == NULL) /* the DSL checked it */
      mrb_raisef(mrb, E_ARGUMENT_ERROR, "location %s: bad proxy_pass URL %v", l->path, proxy_pass);
    l->stream_body = !mrb_test(iv(mrb, loc, "@request_buffering"));
  } else {
    l->handler = need(mrb, gw_mruby_handler_new(mrb, iv(mrb, loc, "@handler")));
    s->precise_timers = 1; /* Ruby may wait on Async.sleep: exact timers */
  }
  static const struct {
    const char *iv;
    gw_mruby_phase_t phase;
    size_t offset;
  } phases[] = {
    {"@rewrite", GW_MRUBY_REWRITE, offsetof(gw_location_t, rewrite)},
    {"@access", GW_MRUBY_ACCESS, offsetof(gw_location_t, access)},
    {"@header_filter", GW_MRUBY_HEADER_FILTER, offsetof(gw_location_t, header_filter)},
    {"@body_filter", GW_MRUBY_BODY_FILTER, offsetof(gw_location_t, body_filter)},
    {"@log", GW_MRUBY_LOG, offsetof(gw_location_t, log)},
  };
  for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
    mrb_value proc = iv(mrb, loc, phases[i].iv);
    if (!mrb_test(proc)) continue;
    *(gw_filter_t **)((char *)l + phases[i].offset) = need(mrb, gw_mruby_filter_new(mrb, proc, phases[i].phase));
    s->precise_timers = 1; /* Ruby may wait on Async.sleep: exact timers */
  }
}

/* A Regexp of the config: the DSL compiled it (errors are reported with the
 * config's line there); the core compiles the same source and options. */
static gw_regex_t *compile_regexp(mrb_state *mrb, mrb_value re, const char *path)
{
  mrb_value src = mrb_funcall(mrb, re, "source", 0);
  int opts = (int)mrb_integer(mrb_funcall(mrb, re, "options", 0));
  char err[256];
  gw_regex_t *out = gw_regex_new(RSTRING_PTR(src), (size_t)RSTRING_LEN(src), opts, err, sizeof(err));
  if (out == NULL) mrb_raisef(mrb, E_ARGUMENT_ERROR, "location %s: %s", path, err);
  return out;
}

/* A regex location's pattern. */
static void read_regex(mrb_state *mrb, mrb_value loc, gw_location_t *l)
{
  l->no_regex = mrb_test(iv(mrb, loc, "@no_regex"));
  mrb_value re = iv(mrb, loc, "@regex");
  if (!mrb_nil_p(re)) l->regex = compile_regexp(mrb, re, l->path);
}

static int dsl_call_line(const char *path, int line, const char *method);

/* -- TLS (tls_server.h): the server's certificates, loaded now, in the master -- */

/* path, or path relative to the config file's folder; owned. */
static char *config_relative(const char *config_path, const char *path)
{
  const char *slash = strrchr(config_path, '/');
  if (path[0] == '/' || slash == NULL) return strdup(path);
  size_t dl = (size_t)(slash - config_path) + 1, pl = strlen(path);
  char *p = malloc(dl + pl + 1);
  if (p == NULL) return NULL;
  memcpy(p, config_path, dl);
  memcpy(p + dl, path, pl + 1);
  return p;
}

/* An Array of ranges the DSL checked (Gateway._cidr?) into an owned list. */
static gw_cidr_t *read_cidrs(mrb_state *mrb, mrb_value list, size_t *n)
{
  mrb_int len = RARRAY_LEN(list);
  gw_cidr_t *out = calloc((size_t)len + 1, sizeof(*out));
  if (out == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  for (mrb_int i = 0; i < len; i++) {
    mrb_value v = mrb_ary_ref(mrb, list, i);
    gw_addr_parse_cidr(RSTRING_PTR(v), (size_t)RSTRING_LEN(v), &out[i]);
  }
  *n = (size_t)len;
  return out;
}

/* health_check: (mrblib/fleet.rb checked it): the settings, and the shared
 * records mapped now, before the workers fork, so that they all see them. */
static void read_health_check(mrb_state *mrb, mrb_value hc, gw_upstream_group_t *g)
{
  if (!mrb_hash_p(hc)) return;
  gw_health_conf_t *c = calloc(1, sizeof(*c));
  if (c == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  g->health = c;
  c->path = dup_str(mrb, hget(mrb, hc, "path"));
  c->interval_ms = (int)(mrb_as_float(mrb, hget(mrb, hc, "interval")) * 1000 + 0.5);
  c->timeout_ms = (int)(mrb_as_float(mrb, hget(mrb, hc, "timeout")) * 1000 + 0.5);
  c->fails = (int)mrb_integer(hget(mrb, hc, "fails"));
  c->passes = (int)mrb_integer(hget(mrb, hc, "passes"));
  c->expect = (int)mrb_integer(hget(mrb, hc, "expect"));
  if (c->path == NULL || gw_health_map(c, g->nservers) < 0) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  for (size_t j = 0; j < g->nservers; j++) g->servers[j].health = &c->shared->servers[j];
}

/* proxy_protocol:, proxy_protocol_from:, real_ip: (mrblib/fleet.rb checked them). */
static void read_fleet(mrb_state *mrb, mrb_value srv, gw_server_t *s)
{
  mrb_value f = iv(mrb, srv, "@fleet");
  if (!mrb_hash_p(f)) return;
  s->proxy_protocol = mrb_test(hget(mrb, f, "proxy_protocol"));
  s->proxy_from = read_cidrs(mrb, hget(mrb, f, "proxy_protocol_from"), &s->nproxy_from);
  mrb_value r = hget(mrb, f, "real_ip");
  if (!mrb_hash_p(r)) return;
  s->real_ip.header = dup_str(mrb, hget(mrb, r, "header"));
  s->real_ip.forwarded = mrb_test(hget(mrb, r, "forwarded"));
  s->real_ip.recursive = mrb_test(hget(mrb, r, "recursive"));
  s->real_ip.from = read_cidrs(mrb, hget(mrb, r, "from"), &s->real_ip.nfrom);
}

static void read_tls(mrb_state *mrb, mrb_value srv, gw_server_t *s, const char *config_path)
{
  s->http2 = mrb_test(iv(mrb, srv, "@http2"));
  mrb_value tls = iv(mrb, srv, "@tls");
  if (!mrb_hash_p(tls)) return;
  mrb_value certs = hget(mrb, tls, "certs");
  mrb_int n = RARRAY_LEN(certs);
  gw_tls_cert_t *list = calloc((size_t)n, sizeof(*list));
  char **owned = calloc((size_t)n * 3 + 1, sizeof(char *));
  if (list == NULL || owned == NULL) {
    free(list);
    free(owned);
    mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  }
  for (mrb_int i = 0; i < n; i++) {
    mrb_value c = mrb_ary_ref(mrb, certs, i);
    mrb_value name = hget(mrb, c, "server_name");
    list[i].server_name = mrb_string_p(name) ? mrb_string_cstr(mrb, name) : NULL;
    list[i].cert = owned[3 * i] = config_relative(config_path, mrb_string_cstr(mrb, hget(mrb, c, "cert")));
    list[i].key = owned[3 * i + 1] = config_relative(config_path, mrb_string_cstr(mrb, hget(mrb, c, "key")));
    mrb_value ocsp = hget(mrb, c, "ocsp");
    if (mrb_string_p(ocsp)) list[i].ocsp = owned[3 * i + 2] = config_relative(config_path, mrb_string_cstr(mrb, ocsp));
  }
  gw_tls_config_t tc = {.certs = list, .ncerts = (size_t)n, .min_version = 13, .max_version = 12,
                        .alpn_h2 = s->http2};
  mrb_value protos = hget(mrb, tls, "protocols");
  for (mrb_int i = 0; i < RARRAY_LEN(protos); i++) {
    int v = strcmp(mrb_string_cstr(mrb, mrb_ary_ref(mrb, protos, i)), "TLSv1.3") == 0 ? 13 : 12;
    if (v < tc.min_version) tc.min_version = v;
    if (v > tc.max_version) tc.max_version = v;
  }
  mrb_value hook = hget(mrb, tls, "on_handshake");
  if (mrb_proc_p(hook)) {
    s->tls_hook = gw_tls_hook_new(mrb, hook);
    if (s->tls_hook == NULL) {
      for (mrb_int i = 0; i < n * 3; i++) free(owned[i]);
      free(owned);
      free(list);
      mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
    }
    tc.on_handshake = gw_tls_hook_run;
    tc.on_handshake_arg = s->tls_hook;
    tc.on_handshake_drop = gw_tls_hook_drop;
  }
  mrb_value ciphers = hget(mrb, tls, "ciphers"), suites = hget(mrb, tls, "ciphersuites");
  tc.ciphers = mrb_string_p(ciphers) ? mrb_string_cstr(mrb, ciphers) : NULL;
  tc.ciphersuites = mrb_string_p(suites) ? mrb_string_cstr(mrb, suites) : NULL;
  char err[512];
  s->tls = gw_tls_ctx_new(&tc, err, sizeof(err));
  for (mrb_int i = 0; i < n * 3; i++) free(owned[i]);
  free(owned);
  free(list);
  if (s->tls == NULL) {
    mrb_value line = iv(mrb, srv, "@tls_line");
    int l = mrb_integer_p(line) ? dsl_call_line(config_path, (int)mrb_integer(line), "server") : 0;
    struct RClass *e = mrb_class_get_under(mrb, mrb_module_get(mrb, "Gateway"), "HandlerFileError");
    mrb_raisef(mrb, e, "%s:%d: server listen %d: %s", config_path, l, s->port, err);
  }
}

/* The tls_* options of a location or an upstream group (Gateway::TLS.client's
 * Hash) as client settings for its https upstreams; NULL for nil. The files
 * are read now: a bad one is reported as FILE:LINE of the call. */
static gw_tls_client_t *read_tls_client(mrb_state *mrb, mrb_value h, const char *config_path, const char *where)
{
  if (!mrb_hash_p(h)) return NULL;
  mrb_value ca = hget(mrb, h, "ca"), cert = hget(mrb, h, "cert"), key = hget(mrb, h, "key");
  mrb_value name = hget(mrb, h, "server_name");
  gw_tls_client_config_t tc = {.verify = mrb_test(hget(mrb, h, "verify"))};
  char *owned[3] = {NULL, NULL, NULL};
  if (mrb_string_p(ca)) tc.ca = owned[0] = config_relative(config_path, mrb_string_cstr(mrb, ca));
  if (mrb_string_p(cert)) tc.cert = owned[1] = config_relative(config_path, mrb_string_cstr(mrb, cert));
  if (mrb_string_p(key)) tc.key = owned[2] = config_relative(config_path, mrb_string_cstr(mrb, key));
  tc.server_name = mrb_string_p(name) ? mrb_string_cstr(mrb, name) : NULL;
  char err[512];
  gw_tls_client_t *t = gw_tls_client_new(&tc, err, sizeof(err));
  for (int i = 0; i < 3; i++) free(owned[i]);
  if (t == NULL) {
    mrb_value line = hget(mrb, h, "line");
    int l = mrb_integer_p(line) ? (int)mrb_integer(line) : 0;
    struct RClass *e = mrb_class_get_under(mrb, mrb_module_get(mrb, "Gateway"), "HandlerFileError");
    mrb_raisef(mrb, e, "%s:%d: %s: %s", config_path, l, where, err);
  }
  return t;
}

/* A number of seconds as whole milliseconds, rounded. */
static int seconds_ms(mrb_state *mrb, mrb_value seconds)
{
  return (int)(mrb_as_float(mrb, seconds) * 1000.0 + 0.5);
}

/* -- read_config's steps: a server, its locations, upstream groups ---------- */

/* workers: a count, or :auto: one per online CPU. */
static int read_workers(mrb_state *mrb, mrb_value srv)
{
  mrb_value workers = iv(mrb, srv, "@workers");
  if (mrb_integer_p(workers)) return (int)mrb_integer(workers);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  return ncpu < 1 ? 1 : ncpu > GW_MAX_AUTO_WORKERS ? GW_MAX_AUTO_WORKERS : (int)ncpu;
}

static void read_limits(mrb_state *mrb, mrb_value limits, gw_limits_t *lim)
{
  lim->max_request_line = limit_size(mrb, limits, "max_request_line");
  lim->max_header_size = limit_size(mrb, limits, "max_header_size");
  lim->max_headers = limit_size(mrb, limits, "max_headers");
  lim->max_body = limit_size(mrb, limits, "max_body");
  lim->header_timeout_ms = limit_ms(mrb, limits, "header_timeout");
  lim->body_timeout_ms = limit_ms(mrb, limits, "body_timeout");
  lim->keepalive_timeout_ms = limit_ms(mrb, limits, "keepalive_timeout");
  lim->send_timeout_ms = limit_ms(mrb, limits, "send_timeout");
}

/* What a location does with an upstream: the Host it passes, WebSocket
 * tunnels' timeout, TLS to https upstreams, its Via. */
static void read_location_upstream(mrb_state *mrb, mrb_value loc, gw_location_t *l, const char *config_path)
{
  l->pass_host = mrb_test(iv(mrb, loc, "@pass_host"));
  mrb_value tunnel_timeout = iv(mrb, loc, "@tunnel_timeout"); /* WebSocket proxying: checked by the DSL */
  if (!mrb_nil_p(tunnel_timeout)) l->tunnel_timeout_ms = seconds_ms(mrb, tunnel_timeout);
  char where[300];
  snprintf(where, sizeof(where), "location %s", l->path);
  l->tls_client = read_tls_client(mrb, iv(mrb, loc, "@tls_client"), config_path, where);
  mrb_value via = iv(mrb, loc, "@via");
  if (mrb_string_p(via)) {
    size_t n = (size_t)RSTRING_LEN(via) + 5;
    l->via = malloc(n);
    if (l->via == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
    snprintf(l->via, n, "1.1 %s", mrb_string_cstr(mrb, via));
  }
}

/* A location's own limits: ranges, body size, CPU time (the DSL gave it the
 * server's cpu_limit unless it had its own). */
static void read_location_limits(mrb_state *mrb, mrb_value loc, gw_server_t *s, gw_location_t *l)
{
  mrb_value max_ranges = iv(mrb, loc, "@max_ranges"); /* checked by the DSL (compress.rb) */
  l->max_ranges = mrb_integer_p(max_ranges) ? (int)mrb_integer(max_ranges) : 100;
  mrb_value max_body = iv(mrb, loc, "@max_body");
  l->max_body = mrb_nil_p(max_body) ? s->limits.max_body : (size_t)mrb_integer(max_body);
  mrb_value cpu_limit = iv(mrb, loc, "@cpu_limit");
  l->cpu_limit_ms = mrb_nil_p(cpu_limit) ? 0 : seconds_ms(mrb, cpu_limit);
  if (!mrb_nil_p(cpu_limit) && l->cpu_limit_ms < 1) l->cpu_limit_ms = 1;
  if (l->cpu_limit_ms && (l->header_filter || l->body_filter || !mrb_nil_p(iv(mrb, loc, "@handler"))))
    s->cpu_limits = 1;
}

static void read_location(mrb_state *mrb, mrb_value loc, gw_server_t *s, gw_location_t *l, const char *config_path)
{
  l->path = dup_str(mrb, iv(mrb, loc, "@path"));
  l->path_len = strlen(l->path);
  l->exact = mrb_test(iv(mrb, loc, "@exact"));
  read_regex(mrb, loc, l);
  read_handlers(mrb, loc, s, l);
  read_location_upstream(mrb, loc, l, config_path);
  read_compress(mrb, iv(mrb, loc, "@compress"), l);
  read_cache(mrb, iv(mrb, loc, "@cache"), s, l);
  read_location_limits(mrb, loc, s, l);
}

/* The server's locations, sorted for the router. */
static void read_locations(mrb_state *mrb, mrb_value srv, gw_server_t *s, const char *config_path)
{
  mrb_value locs = iv(mrb, srv, "@locations");
  mrb_int nl = RARRAY_LEN(locs);
  s->locations = calloc((size_t)nl + 1, sizeof(gw_location_t));
  if (s->locations == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  for (mrb_int j = 0; j < nl; j++) {
    gw_location_t *l = &s->locations[j];
    s->nlocations++;
    l->seq = (size_t)j;
    read_location(mrb, mrb_ary_ref(mrb, locs, j), s, l, config_path);
  }
  gw_router_sort(s->locations, s->nlocations);
}

static void read_server(mrb_state *mrb, mrb_value srv, gw_server_t *s, const char *config_path)
{
  s->fd = -1;
  s->host = dup_str(mrb, iv(mrb, srv, "@host"));
  s->port = (int)mrb_integer(iv(mrb, srv, "@port"));
  s->workers = read_workers(mrb, srv);
  mrb_value reuseport = iv(mrb, srv, "@reuseport");
  s->reuseport_default = mrb_nil_p(reuseport);
  s->reuseport = s->reuseport_default ? GW_REUSEPORT_DEFAULT : mrb_test(reuseport);
  read_fleet(mrb, srv, s);
  read_limits(mrb, iv(mrb, srv, "@limits"), &s->limits);
  read_locations(mrb, srv, s, config_path);
  s->init_worker = iv(mrb, srv, "@init_worker"); /* kept alive by the config's objects */
  s->exit_worker = iv(mrb, srv, "@exit_worker");
  mrb_value stall = iv(mrb, srv, "@stall_timeout");
  s->stall_timeout_ms = mrb_nil_p(stall) ? 0 : seconds_ms(mrb, stall);
  mrb_value cpu = iv(mrb, srv, "@cpu_affinity");
  s->cpu = mrb_nil_p(cpu) ? -1 : mrb_integer_p(cpu) ? (int)mrb_integer(cpu) : GW_CPU_AUTO;
  read_tls(mrb, srv, s, config_path);
}

static void read_servers(mrb_state *mrb, mrb_value servers, gw_config_t *cfg)
{
  mrb_int n = RARRAY_LEN(servers);
  cfg->servers = calloc((size_t)n, sizeof(gw_server_t));
  if (n && cfg->servers == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  for (mrb_int i = 0; i < n; i++) {
    cfg->nservers++;
    read_server(mrb, mrb_ary_ref(mrb, servers, i), &cfg->servers[i], cfg->path);
  }
}

/* https:// upstreams without tls_* options: verified against the system's CAs. */
static void default_tls_client(mrb_state *mrb, gw_config_t *cfg)
{
  char err[512];
  cfg->tls_client = gw_tls_client_new(&(gw_tls_client_config_t){.verify = 1}, err, sizeof(err));
  if (cfg->tls_client == NULL) mrb_raisef(mrb, E_RUNTIME_ERROR, "%s", err);
}

static void read_resolver(mrb_state *mrb, mrb_value res, gw_config_t *cfg)
{
  if (!mrb_hash_p(res)) return;
  cfg->resolver_servers = dup_str(mrb, mrb_hash_get(mrb, res, mrb_symbol_value(mrb_intern_lit(mrb, "servers"))));
  cfg->resolver_timeout_ms = limit_ms(mrb, res, "timeout");
  cfg->resolver_tries = (int)limit_size(mrb, res, "tries");
}

/* One server of an upstream group. Validated by the DSL: "unix:/path",
 * "host:port" or "https://host:port" (Gateway::Upstream). */
static void read_upstream_server(mrb_state *mrb, const char *addr, int weight, gw_upstream_server_t *us,
                                 const char *group)
{
  us->label = strdup(addr);
  if (strncmp(addr, "https://", 8) == 0) {
    us->tls = 1;
    addr += 8;
  }
  us->weight = weight;
  gw_hostport_t hp;
  if (gw_addr_unix_path(addr)) {
    us->unix_path = strdup(gw_addr_unix_path(addr));
  } else if (gw_addr_split(addr, strlen(addr), &hp, GW_ADDR_BARE_V6) == 0 && hp.port > 0) {
    us->host = strdup(hp.host);
    us->port = hp.port;
    us->addrlen = gw_addr_from_ip(hp.host, hp.port, &us->addr);
  } else {
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "upstream %s: bad server address %s", group, addr);
  }
}

static void read_upstream(mrb_state *mrb, mrb_value up, gw_upstream_group_t *g, const char *config_path)
{
  g->name = dup_str(mrb, iv(mrb, up, "@name"));
  g->keepalive = (int)mrb_integer(iv(mrb, up, "@keepalive"));
  const char *balance = mrb_sym_name(mrb, mrb_symbol(iv(mrb, up, "@balance")));
  g->balance = strcmp(balance, "least_conn") == 0 ? GW_BALANCE_LEAST_CONN
               : strcmp(balance, "hash") == 0     ? GW_BALANCE_HASH
                                                  : GW_BALANCE_ROUND_ROBIN;
  g->max_fails = (int)mrb_integer(iv(mrb, up, "@max_fails"));
  g->fail_timeout_ms = (int)(mrb_as_float(mrb, iv(mrb, up, "@fail_timeout")) * 1000);
  g->connect_timeout_ms = (int)(mrb_as_float(mrb, iv(mrb, up, "@connect_timeout")) * 1000);
  g->timeout_ms = (int)(mrb_as_float(mrb, iv(mrb, up, "@timeout")) * 1000);
  mrb_value proto = iv(mrb, up, "@protocol");
  g->fastcgi = mrb_symbol_p(proto) && strcmp(mrb_sym_name(mrb, mrb_symbol(proto)), "fastcgi") == 0;
  g->h2c = mrb_symbol_p(proto) && strcmp(mrb_sym_name(mrb, mrb_symbol(proto)), "h2c") == 0;
  g->send_proxy_protocol = (int)mrb_integer(iv(mrb, up, "@send_proxy_protocol"));
  char where[300];
  snprintf(where, sizeof(where), "upstream %s", g->name);
  g->tls_client = read_tls_client(mrb, iv(mrb, up, "@tls_client"), config_path, where);
  mrb_value weights = iv(mrb, up, "@weights");
  mrb_value servers = iv(mrb, up, "@servers");
  g->servers = calloc((size_t)RARRAY_LEN(servers) + 1, sizeof(gw_upstream_server_t));
  if (g->servers == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  for (mrb_int j = 0; j < RARRAY_LEN(servers); j++) {
    g->nservers++;
    read_upstream_server(mrb, mrb_string_cstr(mrb, mrb_ary_ref(mrb, servers, j)),
                         (int)mrb_integer(mrb_ary_ref(mrb, weights, j)), &g->servers[j], g->name);
  }
  read_health_check(mrb, iv(mrb, up, "@health_check"), g);
}

static void read_upstreams(mrb_state *mrb, mrb_value upstreams, gw_config_t *cfg)
{
  mrb_value groups = mrb_hash_values(mrb, upstreams);
  mrb_int ng = RARRAY_LEN(groups);
  cfg->groups = calloc((size_t)ng + 1, sizeof(gw_upstream_group_t));
  if (cfg->groups == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  for (mrb_int i = 0; i < ng; i++) {
    cfg->ngroups++;
    read_upstream(mrb, mrb_ary_ref(mrb, groups, i), &cfg->groups[i], cfg->path);
  }
}

/* Copies Gateway::Config.current into cfg. Runs under mrb_protect_error. */
static mrb_value read_config(mrb_state *mrb, void *ud)
{
  gw_config_t *cfg = ud;
  struct RClass *gw = mrb_module_get(mrb, "Gateway");
  mrb_value current = mrb_funcall(mrb, mrb_obj_value(mrb_class_get_under(mrb, gw, "Config")), "current", 0);
  read_servers(mrb, iv(mrb, current, "@servers"), cfg);
  gw_settings_read(mrb, current, &cfg->settings);
  default_tls_client(mrb, cfg);
  mrb_value limit = iv(mrb, current, "@vm_memory_limit");
  if (!mrb_nil_p(limit)) gw_vm_set_memory_limit(mrb, (size_t)mrb_as_float(mrb, limit));
  read_resolver(mrb, iv(mrb, current, "@resolver"), cfg);
  read_upstreams(mrb, iv(mrb, current, "@upstreams"), cfg);
  return mrb_nil_value();
}

/* mruby 3.1 gives a call with keyword arguments and a do-block the line of
 * its `end`. For an error raised by a DSL method (server, location,
 * upstream), walk back from there to the line that starts with its name. */
static int dsl_call_line(const char *path, int line, const char *method)
{
  FILE *fp = fopen(path, "r");
  if (fp == NULL) return line;
  size_t mlen = strlen(method);
  int found = line, n = 0;
  char buf[4096];
  while (n < line && fgets(buf, sizeof(buf), fp)) {
    n++;
    const char *p = buf + strspn(buf, " \t");
    if (strncmp(p, method, mlen) == 0 && (p[mlen] == ' ' || p[mlen] == '(' || p[mlen] == '\t')) found = n;
  }
  fclose(fp);
  return found;
}

/* The method name of a backtrace entry "file:12:in Gateway::Server#location". */
static const char *frame_method(const char *entry)
{
  const char *in = strstr(entry, ":in ");
  if (in == NULL) return NULL;
  const char *name = in + 4;
  const char *sep = strrchr(name, '#');
  if (sep == NULL) sep = strrchr(name, '.');
  return sep ? sep + 1 : name;
}

/* The config file (the main one or one it includes) that backtrace entry
 * "file:12:in ..." is in, or NULL. */
static const char *config_file_of(mrb_state *mrb, mrb_value files, const char *entry)
{
  for (mrb_int i = 0; mrb_array_p(files) && i < RARRAY_LEN(files); i++) {
    mrb_value f = mrb_ary_ref(mrb, files, i);
    if (!mrb_string_p(f)) continue;
    size_t len = (size_t)RSTRING_LEN(f);
    if (strncmp(entry, RSTRING_PTR(f), len) == 0 && entry[len] == ':') return mrb_string_cstr(mrb, f);
  }
  return NULL;
}

/* "FILE:LINE: message": the line is the first backtrace entry in a config
 * file (the main one or one it includes; the DSL's own frames are skipped). */
static void format_error(mrb_state *mrb, const char *path, char *err, size_t errlen)
{
  mrb_value exc = mrb_obj_value(mrb->exc);
  mrb_value msg = mrb_funcall(mrb, exc, "message", 0);
  const char *cls = mrb_obj_classname(mrb, exc);
  if (strcmp(cls, "Gateway::HandlerFileError") == 0) { /* "handlers/x.rb:3: ..." already */
    snprintf(err, errlen, "%s", mrb_string_cstr(mrb, msg));
    return;
  }
  if (strcmp(cls, "SyntaxError") == 0) { /* the parser says "line 3: syntax error, ..." */
    const char *m = mrb_string_cstr(mrb, msg);
    int line = 0;
    if (sscanf(m, "line %d:", &line) == 1) {
      snprintf(err, errlen, "%s:%d:%s", path, line, strchr(m, ':') + 1);
    } else {
      snprintf(err, errlen, "%s: %s", path, m);
    }
    return;
  }
  mrb_value bt = mrb_exc_backtrace(mrb, exc);
  /* A Ruby method runs only with no exception pending. */
  mrb->exc = NULL;
  mrb_value config_class = mrb_obj_value(mrb_class_get_under(mrb, mrb_module_get(mrb, "Gateway"), "Config"));
  mrb_value files = mrb_funcall(mrb, config_class, "files", 0);
  mrb->exc = NULL;
  if (mrb_array_p(bt)) {
    for (mrb_int i = 0; i < RARRAY_LEN(bt); i++) {
      mrb_value e = mrb_ary_ref(mrb, bt, i);
      if (!mrb_string_p(e)) continue;
      const char *s = mrb_string_cstr(mrb, e);
      const char *file = config_file_of(mrb, files, s);
      if (file) {
        int line = atoi(s + strlen(file) + 1);
        mrb_value callee = i > 0 ? mrb_ary_ref(mrb, bt, i - 1) : mrb_nil_value();
        const char *method = mrb_string_p(callee) ? frame_method(mrb_string_cstr(mrb, callee)) : NULL;
        if (method && (strcmp(method, "server") == 0 || strcmp(method, "location") == 0 || strcmp(method, "upstream") == 0))
          line = dsl_call_line(file, line, method);
        snprintf(err, errlen, "%s:%d: %s (%s)", file, line, mrb_string_cstr(mrb, msg), cls);
        return;
      }
    }
  }
  snprintf(err, errlen, "%s: %s (%s)", path, mrb_string_cstr(mrb, msg), cls);
}

static gw_config_t *load(const char *path, char *err, size_t errlen)
{
  FILE *fp = fopen(path, "r");
  if (fp == NULL) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  gw_config_t *cfg = calloc(1, sizeof(*cfg));
  cfg->path = strdup(path);
  cfg->mrb = gw_vm_open(err, errlen);
  if (cfg->mrb == NULL) {
    fclose(fp);
    gw_config_free(cfg, NULL);
    return NULL;
  }
  mrb_state *mrb = cfg->mrb;
  /* Handler files are relative to the config file's folder. */
  mrb_value config_class = mrb_obj_value(mrb_class_get_under(mrb, mrb_module_get(mrb, "Gateway"), "Config"));
  mrb_funcall(mrb, config_class, "file=", 1, mrb_str_new_cstr(mrb, path));
  mrbc_context *cxt = mrbc_context_new(mrb);
  mrbc_filename(mrb, cxt, path);
  cxt->capture_errors = TRUE;
  mrb_load_file_cxt(mrb, fp, cxt);
  mrbc_context_free(mrb, cxt);
  fclose(fp);
  if (mrb->exc == NULL) mrb_funcall(mrb, config_class, "file_read", 0); /* include: only while the file is read */
  if (mrb->exc) {
    format_error(mrb, path, err, errlen);
    gw_config_free(cfg, NULL);
    return NULL;
  }
  mrb_bool failed = FALSE;
  mrb_value res = mrb_protect_error(mrb, read_config, cfg, &failed);
  if (failed && mrb->exc == NULL && mrb_exception_p(res)) mrb->exc = mrb_obj_ptr(res); /* raised in C */
  if (failed || mrb->exc) {
    format_error(mrb, path, err, errlen);
    gw_config_free(cfg, NULL);
    return NULL;
  }
  if (cfg->nservers == 0) {
    snprintf(err, errlen, "%s: no server defined (add: server listen: 8080 do ... end)", path);
    gw_config_free(cfg, NULL);
    return NULL;
  }
  for (size_t i = 0; i < cfg->nservers; i++)
    for (size_t j = 0; j < i; j++)
      if (cfg->servers[i].port == cfg->servers[j].port) {
        snprintf(err, errlen, "%s: two servers listen on port %d", path, cfg->servers[i].port);
        gw_config_free(cfg, NULL);
        return NULL;
      }
  return cfg;
}

/* Shared regions are mapped while the file is evaluated (`shared_dict`,
 * `cache`): made current only if the whole config is good. */
gw_config_t *gw_config_load(const char *path, char *err, size_t errlen)
{
  gw_config_t *cfg = load(path, err, errlen);
  if (cfg) gw_shm_zone_commit();
  else gw_shm_zone_abort();
  return cfg;
}

int gw_config_listen(gw_config_t *cfg, gw_config_t *old, char *err, size_t errlen)
{
  for (size_t i = 0; i < cfg->nservers; i++) {
    gw_server_t *s = &cfg->servers[i];
    const gw_server_t *running = NULL;
    for (size_t j = 0; old && j < old->nservers; j++) {
      gw_server_t *o = &old->servers[j];
      if ((o->fd >= 0 || o->nfds > 0) && o->port == s->port && strcmp(o->host, s->host) == 0) running = o;
    }
    if (gw_listener_take(s, running, err, errlen) < 0) return -1;
  }
  return 0;
}

void gw_config_free(gw_config_t *cfg, const gw_config_t *keep)
{
  if (cfg == NULL) return;
  for (size_t i = 0; i < cfg->nservers; i++) {
    gw_server_t *s = &cfg->servers[i];
    gw_listener_close_all(s, keep);
    for (size_t j = 0; j < s->nlocations; j++) {
      gw_location_t *l = &s->locations[j];
      free(l->path);
      free(l->via);
      gw_regex_unref(l->regex);
      gw_tls_client_free(l->tls_client);
      gw_compress_conf_free(l->compress);
      gw_cache_conf_free(l->cache);
      if (l->handler) l->handler->dispose(l->handler);
      gw_filter_t *steps[] = {l->rewrite, l->access, l->header_filter, l->body_filter, l->log};
      for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++)
        if (steps[k]) steps[k]->dispose(steps[k]);
    }
    free(s->locations);
    free(s->host);
    free(s->proxy_from);
    free(s->real_ip.from);
    free(s->real_ip.header);
    gw_tls_ctx_free(s->tls);
    gw_tls_hook_free(s->tls_hook);
  }
  free(cfg->servers);
  for (size_t i = 0; i < cfg->ngroups; i++) {
    gw_upstream_group_t *g = &cfg->groups[i];
    for (size_t j = 0; j < g->nservers; j++) {
      free(g->servers[j].host);
      free(g->servers[j].unix_path);
      free(g->servers[j].label);
    }
    free(g->servers);
    free(g->name);
    if (g->health) {
      gw_health_unmap(g->health);
      free(g->health->path);
      free(g->health);
    }
    gw_tls_client_free(g->tls_client);
  }
  free(cfg->groups);
  gw_settings_dispose(&cfg->settings);
  free(cfg->resolver_servers);
  gw_tls_client_free(cfg->tls_client);
  if (cfg->mrb) gw_vm_close(cfg->mrb);
  free(cfg->path);
  free(cfg);
}
