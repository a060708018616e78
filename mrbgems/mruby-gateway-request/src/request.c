/* request.c - natives of Gateway::Request: reading the request, writing the
 * response, and the runner's failure hook. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/error.h>
#include <mruby/hash.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "fcgi_record.h"
#include "gw_mruby.h"
#include "proxy.h"
#include "log.h"
#include "tls_server.h"

#define REQ(self) gw_mrb_request_ptr(mrb, self)

static mrb_value req_method(mrb_state *mrb, mrb_value self)
{
  return mrb_str_new_cstr(mrb, REQ(self)->in.method);
}

static mrb_value req_path(mrb_state *mrb, mrb_value self)
{
  gw_request_t *r = REQ(self);
  return mrb_str_new(mrb, r->in.target, (mrb_int)r->in.path_len);
}

static mrb_value req_query(mrb_state *mrb, mrb_value self)
{
  gw_request_t *r = REQ(self);
  size_t qlen = gw_request_query_len(r);
  return qlen ? mrb_str_new(mrb, r->in.target + r->in.path_len + 1, (mrb_int)qlen) : mrb_str_new_lit(mrb, "");
}

static mrb_value req_target(mrb_state *mrb, mrb_value self)
{
  gw_request_t *r = REQ(self);
  return mrb_str_new(mrb, r->in.target, (mrb_int)r->in.target_len);
}

/* req.target = "/new/path?q": in a rewrite phase the request is routed
 * again; later, a proxy_pass sends the new target. */
static mrb_value req_set_target(mrb_state *mrb, mrb_value self)
{
  mrb_value t = mrb_get_arg1(mrb);
  gw_request_t *r = REQ(self);
  if (!mrb_string_p(t) || RSTRING_LEN(t) == 0 || RSTRING_PTR(t)[0] != '/')
    mrb_raise(mrb, E_ARGUMENT_ERROR, "target must be a String starting with \"/\"");
  for (mrb_int i = 0; i < RSTRING_LEN(t); i++) {
    unsigned char ch = (unsigned char)RSTRING_PTR(t)[i];
    if (ch <= 0x20 || ch == 0x7f) mrb_raisef(mrb, E_ARGUMENT_ERROR, "target may not contain spaces or control bytes: %v", t);
  }
  if (gw_request_set_target(r, RSTRING_PTR(t), (size_t)RSTRING_LEN(t)) < 0) mrb_raise(mrb, E_RUNTIME_ERROR, "out of memory");
  return t;
}

static mrb_value req_http_version(mrb_state *mrb, mrb_value self)
{
  return mrb_str_new(mrb, gw_request_protocol(REQ(self)), 8);
}

/* -- TLS: req.scheme, req.tls?, req.tls_server_name/_protocol/_cipher -- */

static mrb_value req_scheme(mrb_state *mrb, mrb_value self)
{
  return REQ(self)->client.tls ? mrb_str_new_lit(mrb, "https") : mrb_str_new_lit(mrb, "http");
}

static mrb_value req_tls_p(mrb_state *mrb, mrb_value self)
{
  return mrb_bool_value(REQ(self)->client.tls != NULL);
}

static mrb_value tls_string(mrb_state *mrb, const char *s)
{
  return s ? mrb_str_new_cstr(mrb, s) : mrb_nil_value();
}

static mrb_value req_tls_server_name(mrb_state *mrb, mrb_value self)
{
  const gw_tls_info_t *t = REQ(self)->client.tls;
  return t ? tls_string(mrb, t->server_name) : mrb_nil_value();
}

static mrb_value req_tls_protocol(mrb_state *mrb, mrb_value self)
{
  const gw_tls_info_t *t = REQ(self)->client.tls;
  return t ? tls_string(mrb, t->protocol) : mrb_nil_value();
}

static mrb_value req_tls_cipher(mrb_state *mrb, mrb_value self)
{
  const gw_tls_info_t *t = REQ(self)->client.tls;
  return t ? tls_string(mrb, t->cipher) : mrb_nil_value();
}

static mrb_value req_remote_addr(mrb_state *mrb, mrb_value self)
{
  return mrb_str_new_cstr(mrb, REQ(self)->client.remote_addr);
}

/* A String with a copy of what buf holds (buf is left as it is). */
static mrb_value buffer_string(mrb_state *mrb, struct evbuffer *buf)
{
  size_t len = evbuffer_get_length(buf);
  mrb_value s = mrb_str_new(mrb, NULL, (mrb_int)len);
  evbuffer_copyout(buf, RSTRING_PTR(s), len);
  return s;
}

static mrb_value req_body(mrb_state *mrb, mrb_value self)
{
  return buffer_string(mrb, REQ(self)->in.body);
}

/* Request headers as a Gateway::Headers (lower-case names, case-insensitive
 * lookups); repeated fields are joined with ", ". */
static mrb_value req_headers_hash(mrb_state *mrb, mrb_value self)
{
  return gw_mrb_headers_new(mrb, &REQ(self)->in.headers);
}

static mrb_value req_write(mrb_state *mrb, mrb_value self)
{
  gw_mrb_write(mrb, REQ(self), mrb_get_arg1(mrb));
  return self;
}

static mrb_value req_set_status(mrb_state *mrb, mrb_value self)
{
  mrb_int status;
  mrb_get_args(mrb, "i", &status);
  gw_mrb_set_status(mrb, REQ(self), status);
  return mrb_fixnum_value(status);
}

static int rack_header(mrb_state *mrb, mrb_value name, mrb_value value, void *req)
{
  gw_mrb_set_header(mrb, req, name, value);
  return 0;
}

/* _rack([status, headers, body]): a handler's Rack-style triple as the
 * response. Natively for a Hash of headers and a String or Array body (what
 * handlers return; in Ruby this was a third of a small handler's cost),
 * other shapes through their #each (_rack_headers, _rack_body in mrblib). */
static mrb_value req_rack(mrb_state *mrb, mrb_value self)
{
  mrb_value r = mrb_get_arg1(mrb);
  if (!mrb_array_p(r) || RARRAY_LEN(r) != 3 || !mrb_integer_p(RARRAY_PTR(r)[0])) {
    mrb_value s = mrb_inspect(mrb, r);
    if (RSTRING_LEN(s) > 80) s = mrb_str_substr(mrb, s, 0, 80);
    mrb_raisef(mrb, E_TYPE_ERROR, "a handler returning an Array must return [status, headers, body], got %v", s);
  }
  gw_request_t *req = REQ(self);
  mrb_value hdrs = RARRAY_PTR(r)[1], body = RARRAY_PTR(r)[2];
  gw_mrb_set_status(mrb, req, mrb_integer(RARRAY_PTR(r)[0]));
  if (mrb_hash_p(hdrs)) mrb_hash_foreach(mrb, mrb_hash_ptr(hdrs), rack_header, req);
  else if (mrb_test(hdrs)) mrb_funcall(mrb, self, "_rack_headers", 1, hdrs);
  if (mrb_string_p(body)) {
    gw_mrb_write(mrb, req, body);
  } else if (mrb_array_p(body)) {
    for (mrb_int i = 0; i < RARRAY_LEN(body); i++) gw_mrb_write(mrb, req, RARRAY_PTR(body)[i]);
  } else if (mrb_test(body)) {
    mrb_funcall(mrb, self, "_rack_body", 1, body);
  }
  return mrb_nil_value();
}

static mrb_value req_status(mrb_state *mrb, mrb_value self)
{
  gw_request_t *r = REQ(self);
  return mrb_fixnum_value(r->resp.status ? r->resp.status : 200);
}

static mrb_value req_set_header(mrb_state *mrb, mrb_value self)
{
  mrb_value name, value;
  mrb_get_args(mrb, "oo", &name, &value);
  gw_mrb_set_header(mrb, REQ(self), name, value);
  return value;
}

/* First response header named `name` (case-insensitive), or nil. */
static mrb_value req_get_header(mrb_state *mrb, mrb_value self)
{
  char *name;
  mrb_get_args(mrb, "z", &name);
  gw_header_t *h = gw_headers_find(&REQ(self)->resp.headers, name);
  return h ? mrb_str_new(mrb, h->value, (mrb_int)h->value_len) : mrb_nil_value();
}

static mrb_value req_delete_header(mrb_state *mrb, mrb_value self)
{
  char *name;
  mrb_get_args(mrb, "z", &name);
  gw_headers_remove(&REQ(self)->resp.headers, name);
  return mrb_nil_value();
}

/* Every response header named `name` (case-insensitive), in order: an Array. */
static mrb_value req_get_headers(mrb_state *mrb, mrb_value self)
{
  char *name;
  mrb_get_args(mrb, "z", &name);
  const gw_headers_t *hs = &REQ(self)->resp.headers;
  mrb_value list = mrb_ary_new(mrb);
  for (size_t i = 0; i < hs->count; i++) {
    const gw_header_t *h = &hs->items[i];
    if (strcasecmp(h->name, name) == 0) mrb_ary_push(mrb, list, mrb_str_new(mrb, h->value, (mrb_int)h->value_len));
  }
  return list;
}

/* The response headers as [[name, value], ...], names as they were set. */
static mrb_value req_response_header_pairs(mrb_state *mrb, mrb_value self)
{
  const gw_headers_t *hs = &REQ(self)->resp.headers;
  mrb_value list = mrb_ary_new_capa(mrb, (mrb_int)hs->count);
  for (size_t i = 0; i < hs->count; i++) {
    const gw_header_t *h = &hs->items[i];
    mrb_value pair[2] = {mrb_str_new(mrb, h->name, (mrb_int)h->name_len), mrb_str_new(mrb, h->value, (mrb_int)h->value_len)};
    mrb_ary_push(mrb, list, mrb_ary_new_from_values(mrb, 2, pair));
  }
  return list;
}

/* req.sub_request?: an internal sub-request (Async::HTTP), not a client's. */
static mrb_value req_sub_request_p(mrb_state *mrb, mrb_value self)
{
  return mrb_bool_value(REQ(self)->parent != NULL);
}

/* req._default_status = 404: the status if the handler sets none and writes
 * nothing (ngx_mruby's answer after a sub-request to a missing location). */
static mrb_value req_set_default_status(mrb_state *mrb, mrb_value self)
{
  mrb_int status;
  mrb_get_args(mrb, "i", &status);
  if (status < 100 || status > 999) mrb_raisef(mrb, E_ARGUMENT_ERROR, "invalid HTTP status %i (100..999)", status);
  REQ(self)->resp.default_status = (int)status;
  return mrb_fixnum_value(status);
}

static mrb_value req_response_body(mrb_state *mrb, mrb_value self)
{
  return buffer_string(mrb, REQ(self)->resp.body);
}

static mrb_value req_replace_response_body(mrb_state *mrb, mrb_value self)
{
  mrb_value s;
  mrb_get_args(mrb, "S", &s);
  gw_request_t *r = REQ(self);
  evbuffer_drain(r->resp.body, evbuffer_get_length(r->resp.body));
  evbuffer_add(r->resp.body, RSTRING_PTR(s), (size_t)RSTRING_LEN(s));
  return s;
}

/* req._proxy_pass(url, key_or_nil): the upstream answers this request once
 * the handler returns. */
static mrb_value req_proxy_pass(mrb_state *mrb, mrb_value self)
{
  char *url, *key;
  mrb_get_args(mrb, "zz!", &url, &key);
  gw_request_t *r = REQ(self);
  gw_url_t u;
  if (gw_url_parse(url, &u) < 0)
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "proxy_pass: need an http:// or https:// URL (\"http://127.0.0.1:8080/path\" or \"http://GROUP/\"), got %s", url);
  gw_mrb_set_proxy_pass(mrb, r, url, key);
  return mrb_nil_value();
}

/* req._fastcgi_pass(target, script_filename_or_nil): a FastCGI server
 * answers this request once the handler returns. */
static mrb_value req_fastcgi_pass(mrb_state *mrb, mrb_value self)
{
  char *target, *script;
  mrb_get_args(mrb, "zz!", &target, &script);
  gw_request_t *r = REQ(self);
  gw_sockaddr_t a;
  if (gw_fcgi_target_parse(target, &a) < 0)
    mrb_raisef(mrb, E_ARGUMENT_ERROR, "fastcgi_pass: need a FastCGI upstream name, \"unix:/path.sock\" or \"IP:port\", got %s", target);
  gw_mrb_set_fastcgi_pass(mrb, r, target, script);
  return mrb_nil_value();
}

/* req._send_file(path): the file answers this request once the handler
 * returns (gateway/handler/static/static.c). */
static mrb_value req_send_file(mrb_state *mrb, mrb_value self)
{
  mrb_value path;
  mrb_get_args(mrb, "S", &path);
  gw_request_t *r = REQ(self);
  if (RSTRING_LEN(path) == 0 || memchr(RSTRING_PTR(path), '\0', (size_t)RSTRING_LEN(path)))
    mrb_raise(mrb, E_ARGUMENT_ERROR, "send_file: need a file path without NUL bytes");
  gw_mrb_set_send_file(mrb, r, RSTRING_PTR(path), (size_t)RSTRING_LEN(path));
  return mrb_nil_value();
}

static mrb_value req_current(mrb_state *mrb, mrb_value self)
{
  (void)self;
  return gw_mrb_request_value(mrb, gw_mrb_current_request(mrb));
}

/* Gateway._fail(req, exc): the runner rescued exc. Log it with its backtrace;
 * the response becomes a 500. */
static mrb_value gw_fail(mrb_state *mrb, mrb_value self)
{
  mrb_value rbreq, exc;
  (void)self;
  mrb_get_args(mrb, "oo", &rbreq, &exc);
  /* nil: the handler took no argument (the request is the one running) */
  gw_request_t *r = mrb_nil_p(rbreq) ? gw_mrb_current_request(mrb) : gw_mrb_request_ptr(mrb, rbreq);
  gw_mrb_fail(r);
  mrb_value msg = mrb_funcall(mrb, exc, "message", 0);
  mrb_value bt = mrb_exc_backtrace(mrb, exc);
  mrb_value text = mrb_str_new_cstr(mrb, "");
  if (mrb_array_p(bt)) { /* the first frames tell; a SystemStackError has thousands */
    mrb_int n = RARRAY_LEN(bt), shown = n > 16 ? 16 : n;
    for (mrb_int i = 0; i < shown; i++) {
      mrb_str_cat_lit(mrb, text, "\n    from ");
      mrb_str_cat_str(mrb, text, mrb_obj_as_string(mrb, mrb_ary_ref(mrb, bt, i)));
    }
    if (n > shown) mrb_str_cat_str(mrb, text, mrb_format(mrb, "\n    ... %i more frames", n - shown));
  }
  gw_log_error("handler for %s %.*s raised %s: %s%s", r->in.method, (int)r->in.path_len, r->in.target,
               mrb_obj_classname(mrb, exc), mrb_string_p(msg) ? mrb_string_cstr(mrb, msg) : "?",
               mrb_string_cstr(mrb, text));
  return mrb_nil_value();
}

/* Gateway._job_yield(result): the runner finished its job (its fiber may
 * take the next one), then Fiber.yield(result), in one call and with one
 * argument (Fiber.yield takes any number: an argument splat per job).
 * Yields from the runner's own fiber, as Fiber.yield does. */
static mrb_value gw_job_yield(mrb_state *mrb, mrb_value self)
{
  (void)self;
  mrb_value result = mrb_get_arg1(mrb);
  gw_mrb_job_done();
  return mrb_fiber_yield(mrb, 1, &result);
}

/* Gateway._request_fiber?(fiber): one the core runs requests in. */
static mrb_value gw_request_fiber_p(mrb_state *mrb, mrb_value self)
{
  (void)self;
  return mrb_bool_value(gw_mrb_is_request_fiber(mrb_get_arg1(mrb)));
}

void mrb_mruby_gateway_request_gem_init(mrb_state *mrb)
{
  struct RClass *gw = mrb_define_module(mrb, "Gateway");
  struct RClass *req = mrb_define_class_under(mrb, gw, "Request", mrb->object_class);
  MRB_SET_INSTANCE_TT(req, MRB_TT_DATA);
  mrb_undef_class_method(mrb, req, "new");
  mrb_define_class_method(mrb, req, "current", req_current, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "method", req_method, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "path", req_path, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "query", req_query, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "target", req_target, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "target=", req_set_target, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, req, "http_version", req_http_version, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "remote_addr", req_remote_addr, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "scheme", req_scheme, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "tls?", req_tls_p, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "tls_server_name", req_tls_server_name, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "tls_protocol", req_tls_protocol, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "tls_cipher", req_tls_cipher, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "body", req_body, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "_headers", req_headers_hash, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "write", req_write, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, req, "status=", req_set_status, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, req, "status", req_status, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "_rack", req_rack, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, req, "_set_header", req_set_header, MRB_ARGS_REQ(2));
  mrb_define_method(mrb, req, "_get_header", req_get_header, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, req, "_delete_header", req_delete_header, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, req, "_proxy_pass", req_proxy_pass, MRB_ARGS_REQ(2));
  mrb_define_method(mrb, req, "_fastcgi_pass", req_fastcgi_pass, MRB_ARGS_REQ(2));
  mrb_define_method(mrb, req, "_get_headers", req_get_headers, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, req, "_response_header_pairs", req_response_header_pairs, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "_set_target", req_set_target, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, req, "_default_status=", req_set_default_status, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, req, "sub_request?", req_sub_request_p, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "_send_file", req_send_file, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, req, "_response_body", req_response_body, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "_replace_response_body", req_replace_response_body, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_fail", gw_fail, MRB_ARGS_REQ(2));
  mrb_define_module_function(mrb, gw, "_job_yield", gw_job_yield, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, gw, "_request_fiber?", gw_request_fiber_p, MRB_ARGS_REQ(1));
}

void mrb_mruby_gateway_request_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
