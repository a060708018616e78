/* nginx.c - the ngx_mruby calls as natives: the output calls (they run once
 * or more per request, so they skip the Ruby layers of Gateway::Request),
 * and the facts only C has: the client socket's two addresses
 * (Nginx::Connection), the config's folder (Nginx::Server), the version, the
 * worker's upstream groups (Nginx::Upstream) and whether a location exists
 * (Nginx::Async::HTTP.sub_request), the TLS handshake a tls on_handshake
 * hook decides (Nginx::SSL). mrblib/nginx.rb builds the rest. */
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/string.h>

#include "addr.h"
#include "gw_mruby.h"
#include "router.h"
#include "tls_server.h"

static mrb_value nginx_rputs(mrb_state *mrb, mrb_value self)
{
  mrb_value s = mrb_get_arg1(mrb);
  (void)self;
  /* An empty string writes nothing, so it does not count as output either
   * (the handler's status or default status still applies). */
  if (mrb_string_p(s) && RSTRING_LEN(s) == 0) return mrb_nil_value();
  gw_mrb_write(mrb, gw_mrb_current_request(mrb), s);
  return mrb_nil_value();
}

static mrb_value nginx_echo(mrb_state *mrb, mrb_value self)
{
  mrb_value s = mrb_get_arg1(mrb);
  (void)self;
  gw_request_t *req = gw_mrb_current_request(mrb);
  gw_mrb_write(mrb, req, s);
  gw_mrb_write_bytes(req, "\n", 1);
  return mrb_nil_value();
}

/* Sets the status; output written before or after it is sent with it.
 * Nginx::OK (0) and Nginx::DECLINED (-5) set nothing: in a rewrite or
 * access phase the request goes on to the next phase. */
static mrb_value nginx_return(mrb_state *mrb, mrb_value self)
{
  mrb_int status = 200;
  (void)self;
  mrb_get_args(mrb, "|i", &status);
  if (status != 0 && status != -5) gw_mrb_set_status(mrb, gw_mrb_current_request(mrb), status);
  return mrb_fixnum_value(status);
}

/* Nginx._gw_addresses -> [remote_ip, remote_port, local_ip, local_port] of
 * the current request's client connection (a sub-request: its parent's);
 * nil where the socket cannot tell. The remote side is the client a PROXY
 * protocol header or real_ip: named, as nginx's realip module sets it. */
static mrb_value nginx_addresses(mrb_state *mrb, mrb_value self)
{
  (void)self;
  gw_request_t *req = gw_mrb_current_request(mrb);
  mrb_value out[4] = {mrb_nil_value(), mrb_nil_value(), mrb_nil_value(), mrb_nil_value()};
  for (int side = 0; side < 2 && req->client.fd >= 0; side++) {
    gw_sockaddr_t a;
    socklen_t len = sizeof(a);
    int rc = side == 0 ? getpeername(req->client.fd, &a.sa, &len) : getsockname(req->client.fd, &a.sa, &len);
    char ip[64];
    if (rc != 0 || gw_addr_to_string(&a.sa, ip, sizeof(ip)) != 0) continue;
    int port = a.sa.sa_family == AF_INET ? ntohs(a.in4.sin_port) : ntohs(a.in6.sin6_port);
    out[side * 2] = mrb_str_new_cstr(mrb, ip);
    out[side * 2 + 1] = mrb_fixnum_value(port);
  }
  if (req->client.balancer_addr && req->client.remote_addr) { /* a PROXY header or real_ip named the client (docs/fleet.md) */
    out[0] = mrb_str_new_cstr(mrb, req->client.remote_addr);
    out[1] = req->client.remote_port > 0 ? mrb_fixnum_value(req->client.remote_port) : mrb_nil_value();
  }
  return mrb_ary_new_from_values(mrb, 4, out);
}

/* Nginx._gw_config_dir: the folder of the config file (absolute when it was
 * given so), which Nginx::Server answers for document_root and path. */
static mrb_value nginx_config_dir(mrb_state *mrb, mrb_value self)
{
  (void)self;
  gw_request_t *req = gw_mrb_current_request_or_null();
  const char *path = req && req->ctx && req->ctx->config ? req->ctx->config->path : NULL;
  if (path == NULL) return mrb_nil_value();
  char *copy = strdup(path);
  if (copy == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  mrb_value dir = mrb_str_new_cstr(mrb, dirname(copy));
  free(copy);
  return dir;
}

static mrb_value nginx_version(mrb_state *mrb, mrb_value self)
{
  (void)self;
  return mrb_str_new_lit(mrb, GW_VERSION);
}

/* Nginx._gw_hostname: the machine's host name (nginx's $hostname). */
static mrb_value nginx_hostname(mrb_state *mrb, mrb_value self)
{
  (void)self;
  char name[256];
  if (gethostname(name, sizeof(name)) != 0) return mrb_nil_value();
  name[sizeof(name) - 1] = '\0';
  return mrb_str_new_cstr(mrb, name);
}

/* Nginx::Async::HTTP.last_response: the current request's latest
 * sub-request Response (Async::HTTP.last_response), without a Ruby frame. */
static mrb_value nginx_last_response(mrb_state *mrb, mrb_value self)
{
  (void)self;
  return gw_mrb_last_response(gw_mrb_current_request(mrb));
}

/* Nginx::Async::HTTP._gw_no_location?(path): path is a local one ("/...") that no
 * location of this request's server matches (checked here, not with
 * start_with? and a second call: once per sub-request). */
static mrb_value nginx_no_location_p(mrb_state *mrb, mrb_value self)
{
  mrb_value path = mrb_get_arg1(mrb);
  (void)self;
  if (!mrb_string_p(path)) mrb_raisef(mrb, E_TYPE_ERROR, "expected String, got %!v", path);
  const char *p = RSTRING_PTR(path);
  if (RSTRING_LEN(path) == 0 || p[0] != '/') return mrb_false_value();
  gw_request_t *req = gw_mrb_current_request(mrb);
  const char *q = memchr(p, '?', (size_t)RSTRING_LEN(path));
  size_t len = q ? (size_t)(q - p) : (size_t)RSTRING_LEN(path);
  return mrb_bool_value(gw_router_match(req->server, p, len) == NULL);
}

static gw_upstream_group_t *find_group(mrb_state *mrb, const char *name)
{
  gw_request_t *req = gw_mrb_current_request(mrb);
  gw_config_t *cfg = req->ctx ? req->ctx->config : NULL;
  for (size_t i = 0; cfg && i < cfg->ngroups; i++)
    if (strcmp(cfg->groups[i].name, name) == 0) return &cfg->groups[i];
  mrb_raisef(mrb, E_ARGUMENT_ERROR, "Nginx::Upstream: no upstream group %s", name);
  return NULL;
}

/* Nginx._gw_upstream(name) -> [first server's "host:port", keepalive]. */
static mrb_value nginx_upstream(mrb_state *mrb, mrb_value self)
{
  char *name;
  (void)self;
  mrb_get_args(mrb, "z", &name);
  gw_upstream_group_t *g = find_group(mrb, name);
  mrb_value out[2] = {g->nservers ? mrb_str_new_cstr(mrb, g->servers[0].label) : mrb_nil_value(),
                      mrb_fixnum_value(g->keepalive)};
  return mrb_ary_new_from_values(mrb, 2, out);
}

/* Nginx._gw_upstream_set_server(name, "host:port"): the group's first server
 * becomes host:port, in this worker, from its next request on (requests in
 * flight keep the connection they have; its failure count starts afresh). */
static mrb_value nginx_upstream_set_server(mrb_state *mrb, mrb_value self)
{
  char *name, *addr;
  (void)self;
  mrb_get_args(mrb, "zz", &name, &addr);
  gw_upstream_group_t *g = find_group(mrb, name);
  gw_hostport_t hp;
  if (g->nservers == 0 || gw_addr_split(addr, strlen(addr), &hp, GW_ADDR_BARE_V6) != 0 || hp.port <= 0)
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "Nginx::Upstream#server=: need \"host:port\", got %s", addr);
  char *host = strdup(hp.host), *label = strdup(addr);
  if (host == NULL || label == NULL) {
    free(host);
    free(label);
    mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  }
  gw_upstream_server_t *s = &g->servers[0];
  free(s->host);
  free(s->label);
  free(s->unix_path);
  s->unix_path = NULL;
  s->host = host;
  s->label = label;
  s->port = hp.port;
  s->addrlen = gw_addr_from_ip(hp.host, hp.port, &s->addr); /* 0: a name, resolved when used */
  s->fails = 0;
  s->down_until_ms = 0;
  return mrb_str_new_cstr(mrb, addr);
}

static gw_tls_hello_t *tls_hello(mrb_state *mrb)
{
  gw_tls_hello_t *h = gw_mrb_tls_hello();
  if (h == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "Nginx::SSL can only be used inside a tls on_handshake hook");
  return h;
}

/* Nginx::SSL._gw_servername -> the SNI name, or nil */
static mrb_value ssl_servername(mrb_state *mrb, mrb_value self)
{
  (void)self;
  const char *name = gw_tls_hello_server_name(tls_hello(mrb));
  return name ? mrb_str_new_cstr(mrb, name) : mrb_nil_value();
}

/* Nginx::SSL._gw_info(what): 0 the local port, 1 the protocol version, 2
 * the client's address. */
static mrb_value ssl_info(mrb_state *mrb, mrb_value self)
{
  (void)self;
  mrb_int what;
  mrb_get_args(mrb, "i", &what);
  gw_tls_hello_t *h = tls_hello(mrb);
  if (what == 0) return mrb_fixnum_value(gw_tls_hello_local_port(h));
  return mrb_str_new_cstr(mrb, what == 1 ? gw_tls_hello_version(h) : gw_tls_hello_peer(h));
}

/* Nginx::SSL._gw_userdata -> the handshake's Userdata store (made with
 * Userdata._make on first use), kept for the connection's requests. */
static mrb_value ssl_userdata(mrb_state *mrb, mrb_value self)
{
  (void)self;
  gw_tls_hello_t *h = tls_hello(mrb);
  int kept = gw_tls_hello_kept(h);
  if (kept) return gw_mrb_rooted(kept - 1);
  mrb_value u = mrb_funcall(mrb, mrb_obj_value(mrb_class_get(mrb, "Userdata")), "_make", 0);
  if (mrb->exc) return mrb_nil_value();
  gw_tls_hello_keep(h, gw_mrb_root(u) + 1);
  return u;
}

/* Nginx::SSL._gw_in_handshake? -> inside an on_handshake hook */
static mrb_value ssl_in_handshake(mrb_state *mrb, mrb_value self)
{
  (void)mrb;
  (void)self;
  return mrb_bool_value(gw_mrb_tls_hello() != NULL);
}

/* Nginx._gw_conn_userdata -> what the request's TLS handshake kept in
 * Userdata, or nil. */
static mrb_value nginx_conn_userdata(mrb_state *mrb, mrb_value self)
{
  (void)self;
  gw_request_t *req = gw_mrb_current_request_or_null();
  if (req == NULL || req->client.tls == NULL || req->client.tls->hook_data == 0) return mrb_nil_value();
  (void)mrb;
  return gw_mrb_rooted(req->client.tls->hook_data - 1);
}

/* Nginx::SSL._gw_set(what, s): 0 certificate path, 1 key path, 2
 * certificate PEM, 3 key PEM; a file that cannot be used raises. */
static mrb_value ssl_set(mrb_state *mrb, mrb_value self)
{
  (void)self;
  mrb_int what;
  mrb_value s;
  mrb_get_args(mrb, "iS", &what, &s);
  gw_tls_hello_t *h = tls_hello(mrb);
  char err[512];
  int data = what >= 2;
  int rc = what % 2 ? gw_tls_hello_set_key(h, RSTRING_PTR(s), (size_t)RSTRING_LEN(s), data, err, sizeof(err))
                    : gw_tls_hello_set_cert(h, RSTRING_PTR(s), (size_t)RSTRING_LEN(s), data, err, sizeof(err));
  if (rc < 0) mrb_raise(mrb, E_ARGUMENT_ERROR, err);
  return s;
}

void mrb_mruby_gateway_nginx_gem_init(mrb_state *mrb)
{
  struct RClass *nginx = mrb_define_module(mrb, "Nginx");
  mrb_define_module_function(mrb, nginx, "rputs", nginx_rputs, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, nginx, "echo", nginx_echo, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, nginx, "return", nginx_return, MRB_ARGS_OPT(1));
  mrb_define_module_function(mrb, nginx, "_gw_addresses", nginx_addresses, MRB_ARGS_NONE());
  mrb_define_module_function(mrb, nginx, "_gw_config_dir", nginx_config_dir, MRB_ARGS_NONE());
  mrb_define_module_function(mrb, nginx, "_gw_version", nginx_version, MRB_ARGS_NONE());
  mrb_define_module_function(mrb, nginx, "_gw_hostname", nginx_hostname, MRB_ARGS_NONE());
  mrb_define_module_function(mrb, nginx, "_gw_upstream", nginx_upstream, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, nginx, "_gw_upstream_set_server", nginx_upstream_set_server, MRB_ARGS_REQ(2));
  struct RClass *http = mrb_define_module_under(mrb, mrb_define_module_under(mrb, nginx, "Async"), "HTTP");
  mrb_define_module_function(mrb, http, "_gw_no_location?", nginx_no_location_p, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, http, "last_response", nginx_last_response, MRB_ARGS_NONE());
  struct RClass *ssl = mrb_define_class_under(mrb, nginx, "SSL", mrb->object_class);
  mrb_define_class_method(mrb, ssl, "_gw_servername", ssl_servername, MRB_ARGS_NONE());
  mrb_define_class_method(mrb, ssl, "_gw_set", ssl_set, MRB_ARGS_REQ(2));
  mrb_define_class_method(mrb, ssl, "_gw_info", ssl_info, MRB_ARGS_REQ(1));
  mrb_define_class_method(mrb, ssl, "_gw_userdata", ssl_userdata, MRB_ARGS_NONE());
  mrb_define_class_method(mrb, ssl, "_gw_in_handshake?", ssl_in_handshake, MRB_ARGS_NONE());
  mrb_define_module_function(mrb, nginx, "_gw_conn_userdata", nginx_conn_userdata, MRB_ARGS_NONE());
}

void mrb_mruby_gateway_nginx_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
