/* request.c - Gateway::Request#captures and #named_captures: the groups of
 * the regex location that took the request. Computed when asked for, by
 * matching the location's pattern on the path again: routing itself keeps
 * nothing but the location. And #_fastcgi_split (req.fastcgi_pass's
 * split_path_info:), which hands the core a Regexp's compiled pattern. */
#include <string.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/hash.h>
#include <mruby/string.h>

#include "gw_mruby.h"
#include "re.h"
#include "router.h"

/* The location's match on the path, as the router made it (router.h: the
 * path as received, else its normalised form): 1 with *ov, *pairs and
 * *subject (what the offsets are in) set, 0 when the location is not a regex
 * location (or no longer matches). */
static int location_match(mrb_state *mrb, gw_request_t *r, const size_t **ov, int *pairs, const char **subject)
{
  const gw_location_t *l = r->handler.location;
  if (l == NULL || l->regex == NULL) return 0;
  *subject = r->in.target;
  int rc = gw_regex_exec(l->regex, r->in.target, r->in.path_len, 0, 0, ov);
  if (rc == 0) {
    mrb_value norm = mrb_str_new_capa(mrb, (size_t)r->in.path_len + 2); /* the GC owns it: no leak on a raise */
    ssize_t n = gw_router_normalised(r->in.target, r->in.path_len, RSTRING_PTR(norm), (size_t)r->in.path_len + 2);
    if (n >= 0) {
      *subject = RSTRING_PTR(norm);
      rc = gw_regex_exec(l->regex, *subject, (size_t)n, 0, 0, ov);
    }
  }
  if (rc < 0) mrb_raisef(mrb, gw_re_error_class(mrb), "%s: location %s", gw_regex_last_error(), l->path);
  *pairs = gw_regex_groups(l->regex) + 1;
  return rc;
}

static mrb_value group(mrb_state *mrb, const char *subject, const size_t *ov, int g)
{
  if (ov[2 * g] == GW_RE_UNSET) return mrb_nil_value();
  return mrb_str_new(mrb, subject + ov[2 * g], (mrb_int)(ov[2 * g + 1] - ov[2 * g]));
}

/* Array of Strings (nil for a group that did not take part); [] elsewhere. */
static mrb_value req_captures(mrb_state *mrb, mrb_value self)
{
  gw_request_t *r = gw_mrb_request_ptr(mrb, self);
  const size_t *ov;
  const char *subject;
  int pairs;
  mrb_value a = mrb_ary_new(mrb);
  if (!location_match(mrb, r, &ov, &pairs, &subject)) return a;
  for (int g = 1; g < pairs; g++) mrb_ary_push(mrb, a, group(mrb, subject, ov, g));
  return a;
}

/* {"name" => String or nil}; {} elsewhere. */
static mrb_value req_named_captures(mrb_state *mrb, mrb_value self)
{
  gw_request_t *r = gw_mrb_request_ptr(mrb, self);
  const size_t *ov;
  const char *subject;
  int pairs;
  mrb_value h = mrb_hash_new(mrb);
  if (!location_match(mrb, r, &ov, &pairs, &subject)) return h;
  const gw_regex_t *re = r->handler.location->regex;
  int n = gw_regex_name_count(re);
  for (int i = 0; i < n; i++) {
    int g;
    const char *name = gw_regex_name_at(re, i, &g);
    int best = gw_re_name_group(re, ov, pairs, name, strlen(name));
    mrb_hash_set(mrb, h, mrb_str_new_cstr(mrb, name), group(mrb, subject, ov, best));
  }
  return h;
}

/* req._fastcgi_split(re), after req._fastcgi_pass: re (two groups, checked
 * by request.rb) splits the path into SCRIPT_NAME and PATH_INFO. */
static mrb_value req_fastcgi_split(mrb_state *mrb, mrb_value self)
{
  mrb_value re;
  mrb_get_args(mrb, "o", &re);
  gw_regex_t *split = gw_re_get(mrb, re)->re;
  if (gw_regex_groups(split) != 2) mrb_raise(mrb, E_ARGUMENT_ERROR, "fastcgi_pass: split_path_info: needs two groups");
  gw_mrb_set_fastcgi_split(gw_mrb_request_ptr(mrb, self), split);
  return mrb_nil_value();
}

void gw_re_init_request(mrb_state *mrb)
{
  /* Defined the way mruby-gateway-request defines it (that gem comes later
   * in build_config.rb and adds the rest). */
  struct RClass *gw = mrb_define_module(mrb, "Gateway");
  struct RClass *req = mrb_define_class_under(mrb, gw, "Request", mrb->object_class);
  MRB_SET_INSTANCE_TT(req, MRB_TT_DATA);
  mrb_define_method(mrb, req, "captures", req_captures, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "named_captures", req_named_captures, MRB_ARGS_NONE());
  mrb_define_method(mrb, req, "_fastcgi_split", req_fastcgi_split, MRB_ARGS_REQ(1));
}
