/* regexp.c - the Regexp class: construction (what a literal compiles to:
 * Regexp.compile(source, "imx"[, "n"]), served by the cache), matching, and
 * what describes a pattern (source, options, to_s, inspect, names). */
#include <string.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/hash.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "re.h"

#define OPT_MASK (GW_RE_IGNORECASE | GW_RE_EXTENDED | GW_RE_MULTILINE | GW_RE_NOENCODING)

/* Options as Regexp.new takes them: an Integer of bits, a String of letters
 * ("mix", what a literal passes), else truthy = IGNORECASE. */
static int parse_options(mrb_state *mrb, mrb_value o)
{
  if (mrb_nil_p(o) || mrb_false_p(o)) return 0;
  if (mrb_integer_p(o)) return (int)mrb_integer(o) & (OPT_MASK | GW_RE_FIXEDENCODING);
  if (mrb_string_p(o)) {
    int opts = 0;
    for (mrb_int i = 0; i < RSTRING_LEN(o); i++) {
      switch (RSTRING_PTR(o)[i]) {
      case 'i': opts |= GW_RE_IGNORECASE; break;
      case 'x': opts |= GW_RE_EXTENDED; break;
      case 'm': opts |= GW_RE_MULTILINE; break;
      default: mrb_raisef(mrb, E_ARGUMENT_ERROR, "unknown regexp option: %v", o);
      }
    }
    return opts;
  }
  return GW_RE_IGNORECASE;
}

/* The third argument of a literal: "n" for /re/n (bytes); "u", "e", "s":
 * UTF-8 as usual. */
static int parse_encoding(mrb_value e)
{
  if (mrb_string_p(e) && RSTRING_LEN(e) > 0 && (RSTRING_PTR(e)[0] == 'n' || RSTRING_PTR(e)[0] == 'N'))
    return GW_RE_NOENCODING;
  return 0;
}

static mrb_value make(mrb_state *mrb, mrb_bool shared)
{
  mrb_value src, o = mrb_nil_value(), e = mrb_nil_value();
  mrb_get_args(mrb, "o|oo", &src, &o, &e);
  gw_re_t *from = gw_re_ptr(mrb, src);
  if (from) return gw_re_lookup(mrb, from->src, from->len, from->opts, shared);
  if (mrb_symbol_p(src)) src = mrb_sym_str(mrb, mrb_symbol(src));
  if (!mrb_string_p(src)) mrb_raisef(mrb, E_TYPE_ERROR, "no implicit conversion of %T into String", src);
  int opts = parse_options(mrb, o) | parse_encoding(e);
  return gw_re_lookup(mrb, RSTRING_PTR(src), RSTRING_LEN(src), opts & OPT_MASK, shared);
}

/* Regexp.new(src, opts = nil): a new object (the compiled pattern is shared). */
static mrb_value re_s_new(mrb_state *mrb, mrb_value klass)
{
  (void)klass;
  return make(mrb, FALSE);
}

/* Regexp.compile: what literals call each time they are evaluated; the same
 * frozen object for the same source and options while it stays cached. */
static mrb_value re_s_compile(mrb_state *mrb, mrb_value klass)
{
  (void)klass;
  return make(mrb, TRUE);
}

static mrb_value re_s_escape(mrb_state *mrb, mrb_value klass)
{
  (void)klass;
  mrb_value s = mrb_get_arg1(mrb);
  if (mrb_symbol_p(s)) s = mrb_sym_str(mrb, mrb_symbol(s));
  if (!mrb_string_p(s)) mrb_raisef(mrb, E_TYPE_ERROR, "no implicit conversion of %T into String", s);
  mrb_value out = mrb_str_new_capa(mrb, RSTRING_LEN(s) + 8);
  for (mrb_int i = 0; i < RSTRING_LEN(s); i++) {
    char c = RSTRING_PTR(s)[i];
    const char *rep = NULL;
    switch (c) {
    case '\n': rep = "\\n"; break;
    case '\t': rep = "\\t"; break;
    case '\r': rep = "\\r"; break;
    case '\f': rep = "\\f"; break;
    case '\v': rep = "\\v"; break;
    case ' ': rep = "\\ "; break;
    case '[': case ']': case '{': case '}': case '(': case ')': case '|': case '-': case '*': case '.':
    case '\\': case '?': case '+': case '^': case '$': case '#':
      mrb_str_cat(mrb, out, "\\", 1);
      break;
    default: break;
    }
    if (rep) mrb_str_cat_cstr(mrb, out, rep);
    else mrb_str_cat(mrb, out, &c, 1);
  }
  return out;
}

static mrb_value re_s_last_match(mrb_state *mrb, mrb_value klass)
{
  (void)klass;
  mrb_value n = mrb_nil_value();
  mrb_get_args(mrb, "|o", &n);
  mrb_value md = mrb_gv_get(mrb, mrb_intern_lit(mrb, "$~"));
  if (mrb_nil_p(n) || mrb_nil_p(md)) return md;
  return mrb_funcall(mrb, md, "[]", 1, n);
}

static mrb_value re_s_set_last_match(mrb_state *mrb, mrb_value klass)
{
  (void)klass;
  mrb_value md = mrb_get_arg1(mrb);
  if (!mrb_nil_p(md)) gw_md_get(mrb, md);
  gw_re_set_last_match(mrb, md);
  return md;
}

static mrb_value re_s_match_limit(mrb_state *mrb, mrb_value klass)
{
  (void)klass;
  return mrb_int_value(mrb, (mrb_int)gw_regex_match_limit());
}

static mrb_value re_s_set_match_limit(mrb_state *mrb, mrb_value klass)
{
  (void)klass;
  mrb_int n;
  mrb_get_args(mrb, "i", &n);
  if (n < 1 || n > 0x7fffffff) mrb_raise(mrb, E_ARGUMENT_ERROR, "match limit must be 1..2**31-1");
  gw_regex_set_limits((unsigned)n, 0);
  return mrb_int_value(mrb, n);
}

static mrb_value re_source(mrb_state *mrb, mrb_value self)
{
  gw_re_t *r = gw_re_get(mrb, self);
  return mrb_str_new(mrb, r->src, r->len);
}

static mrb_value re_options(mrb_state *mrb, mrb_value self)
{
  return mrb_int_value(mrb, gw_re_get(mrb, self)->opts);
}

static mrb_value re_casefold(mrb_state *mrb, mrb_value self)
{
  return mrb_bool_value((gw_re_get(mrb, self)->opts & GW_RE_IGNORECASE) != 0);
}

static void cat_flags(mrb_state *mrb, mrb_value s, int opts, int on)
{
  if (!!(opts & GW_RE_MULTILINE) == on) mrb_str_cat_lit(mrb, s, "m");
  if (!!(opts & GW_RE_IGNORECASE) == on) mrb_str_cat_lit(mrb, s, "i");
  if (!!(opts & GW_RE_EXTENDED) == on) mrb_str_cat_lit(mrb, s, "x");
}

/* The source with every `/` not already escaped written `\/`. */
static void cat_source(mrb_state *mrb, mrb_value s, const gw_re_t *r)
{
  for (mrb_int i = 0; i < r->len; i++) {
    if (r->src[i] == '\\' && i + 1 < r->len) {
      mrb_str_cat(mrb, s, r->src + i, 2);
      i++;
    } else if (r->src[i] == '/') {
      mrb_str_cat_lit(mrb, s, "\\/");
    } else {
      mrb_str_cat(mrb, s, r->src + i, 1);
    }
  }
}

/* "(?mi-x:source)": the pattern as a part of another one. */
static mrb_value re_to_s(mrb_state *mrb, mrb_value self)
{
  gw_re_t *r = gw_re_get(mrb, self);
  mrb_value s = mrb_str_new_lit(mrb, "(?");
  cat_flags(mrb, s, r->opts, 1);
  if ((r->opts & (GW_RE_MULTILINE | GW_RE_IGNORECASE | GW_RE_EXTENDED)) != (GW_RE_MULTILINE | GW_RE_IGNORECASE | GW_RE_EXTENDED)) {
    mrb_str_cat_lit(mrb, s, "-");
    cat_flags(mrb, s, r->opts, 0);
  }
  mrb_str_cat_lit(mrb, s, ":");
  cat_source(mrb, s, r);
  mrb_str_cat_lit(mrb, s, ")");
  return s;
}

static mrb_value re_inspect(mrb_state *mrb, mrb_value self)
{
  gw_re_t *r = gw_re_get(mrb, self);
  mrb_value s = mrb_str_new_lit(mrb, "/");
  cat_source(mrb, s, r);
  mrb_str_cat_lit(mrb, s, "/");
  cat_flags(mrb, s, r->opts, 1);
  if (r->opts & GW_RE_NOENCODING) mrb_str_cat_lit(mrb, s, "n");
  return s;
}

static mrb_value re_eq(mrb_state *mrb, mrb_value self)
{
  gw_re_t *a = gw_re_get(mrb, self), *b = gw_re_ptr(mrb, mrb_get_arg1(mrb));
  if (b == NULL) return mrb_false_value();
  return mrb_bool_value(a->opts == b->opts && a->len == b->len && memcmp(a->src, b->src, (size_t)a->len) == 0);
}

static mrb_value re_hash(mrb_state *mrb, mrb_value self)
{
  gw_re_t *r = gw_re_get(mrb, self);
  uint32_t h = 2166136261u ^ (uint32_t)r->opts;
  for (mrb_int i = 0; i < r->len; i++) h = (h ^ (unsigned char)r->src[i]) * 16777619u;
  return mrb_int_value(mrb, (mrb_int)(h & 0x3fffffff));
}

/* A String out of v for matching: nil stays nil; a Symbol is its name. */
static mrb_value subject(mrb_state *mrb, mrb_value v)
{
  if (mrb_nil_p(v) || mrb_string_p(v)) return v;
  if (mrb_symbol_p(v)) return mrb_sym_str(mrb, mrb_symbol(v));
  mrb_raisef(mrb, E_TYPE_ERROR, "no implicit conversion of %T into String", v);
  return v; /* not reached */
}

static mrb_int start_pos(mrb_value str, mrb_int pos)
{
  if (pos < 0) pos += RSTRING_LEN(str);
  return pos;
}

/* match(str, pos = 0) -> MatchData or nil, and $~; with a block, yields it. */
static mrb_value re_match(mrb_state *mrb, mrb_value self)
{
  mrb_value str, blk = mrb_nil_value();
  mrb_int pos = 0;
  mrb_get_args(mrb, "o|i&", &str, &pos, &blk);
  str = subject(mrb, str);
  if (mrb_nil_p(str)) {
    gw_re_set_last_match(mrb, str);
    return str;
  }
  mrb_value md = gw_re_exec(mrb, self, str, start_pos(str, pos), 0);
  gw_re_set_last_match(mrb, md);
  if (!mrb_nil_p(md) && !mrb_nil_p(blk)) return mrb_yield(mrb, blk, md);
  return md;
}

/* match?(str, pos = 0): true or false; $~ is left alone. */
static mrb_value re_match_p(mrb_state *mrb, mrb_value self)
{
  mrb_value str;
  mrb_int pos = 0;
  mrb_get_args(mrb, "o|i", &str, &pos);
  str = subject(mrb, str);
  if (mrb_nil_p(str)) return mrb_false_value();
  gw_re_t *r = gw_re_get(mrb, self);
  pos = start_pos(str, pos);
  if (pos < 0 || pos > RSTRING_LEN(str)) return mrb_false_value();
  const size_t *ov;
  int rc = gw_regex_exec(r->re, RSTRING_PTR(str), (size_t)RSTRING_LEN(str), (size_t)pos, 0, &ov);
  if (rc < 0) mrb_raisef(mrb, gw_re_error_class(mrb), "%s: /%v/", gw_regex_last_error(), mrb_str_new(mrb, r->src, r->len));
  return mrb_bool_value(rc == 1);
}

/* re =~ str: the byte offset of the match or nil; sets $~ and $1..$9. */
static mrb_value re_match_op(mrb_state *mrb, mrb_value self)
{
  mrb_value str = subject(mrb, mrb_get_arg1(mrb));
  if (mrb_nil_p(str)) {
    gw_re_set_last_match(mrb, str);
    return str;
  }
  mrb_value md = gw_re_exec(mrb, self, str, 0, 0);
  gw_re_set_last_match(mrb, md);
  if (mrb_nil_p(md)) return md;
  return mrb_int_value(mrb, (mrb_int)gw_md_get(mrb, md)->ov[0]);
}

/* case/when: true if str (a String or Symbol) matches; anything else is false. */
static mrb_value re_eqq(mrb_state *mrb, mrb_value self)
{
  mrb_value str = mrb_get_arg1(mrb);
  if (mrb_symbol_p(str)) str = mrb_sym_str(mrb, mrb_symbol(str));
  if (!mrb_string_p(str)) {
    gw_re_set_last_match(mrb, mrb_nil_value());
    return mrb_false_value();
  }
  mrb_value md = gw_re_exec(mrb, self, str, 0, 0);
  gw_re_set_last_match(mrb, md);
  return mrb_bool_value(!mrb_nil_p(md));
}

/* __exec(str, pos, anchored = false): a MatchData or nil, $~ untouched (for
 * the Ruby-level loops of gsub with a block, scan). */
static mrb_value re_exec_m(mrb_state *mrb, mrb_value self)
{
  mrb_value str;
  mrb_int pos;
  mrb_bool anchored = FALSE;
  mrb_get_args(mrb, "Si|b", &str, &pos, &anchored);
  return gw_re_exec(mrb, self, str, pos, anchored);
}

/* __next_pos(str, pos): where to search after an empty match at pos. */
static mrb_value re_next_pos(mrb_state *mrb, mrb_value self)
{
  mrb_value str;
  mrb_int pos;
  mrb_get_args(mrb, "Si", &str, &pos);
  gw_re_t *r = gw_re_get(mrb, self);
  if (pos < 0) pos = 0;
  return mrb_int_value(mrb, (mrb_int)gw_regex_next_pos(r->re, RSTRING_PTR(str), (size_t)RSTRING_LEN(str), (size_t)pos));
}

/* The number of capture groups (the config DSL checks split_path_info: by it). */
static mrb_value re_groups(mrb_state *mrb, mrb_value self)
{
  return mrb_int_value(mrb, gw_regex_groups(gw_re_get(mrb, self)->re));
}

/* Named groups, in the order of their first group; each name once. */
static mrb_value re_names(mrb_state *mrb, mrb_value self)
{
  gw_re_t *r = gw_re_get(mrb, self);
  int n = gw_regex_name_count(r->re), groups = gw_regex_groups(r->re);
  mrb_value out = mrb_ary_new(mrb);
  for (int g = 1; g <= groups; g++) {
    for (int i = 0; i < n; i++) {
      int gi;
      const char *nm = gw_regex_name_at(r->re, i, &gi);
      if (gi != g) continue;
      int seen = 0;
      for (int j = 0; j < n && !seen; j++) {
        int gj;
        const char *other = gw_regex_name_at(r->re, j, &gj);
        seen = gj < g && strcmp(other, nm) == 0;
      }
      if (!seen) mrb_ary_push(mrb, out, mrb_str_new_cstr(mrb, nm));
    }
  }
  return out;
}

/* {"name" => [group, ...]} */
static mrb_value re_named_captures(mrb_state *mrb, mrb_value self)
{
  gw_re_t *r = gw_re_get(mrb, self);
  mrb_value names = re_names(mrb, self), h = mrb_hash_new(mrb);
  int n = gw_regex_name_count(r->re);
  for (mrb_int k = 0; k < RARRAY_LEN(names); k++) {
    mrb_value name = RARRAY_PTR(names)[k], groups = mrb_ary_new(mrb);
    for (int i = 0; i < n; i++) {
      int g;
      const char *nm = gw_regex_name_at(r->re, i, &g);
      if (strcmp(nm, RSTRING_PTR(name)) == 0) mrb_ary_push(mrb, groups, mrb_int_value(mrb, g));
    }
    mrb_hash_set(mrb, h, name, groups);
  }
  return h;
}

void gw_re_init_regexp(mrb_state *mrb)
{
  struct RClass *re = mrb_define_class(mrb, "Regexp", mrb->object_class);
  MRB_SET_INSTANCE_TT(re, MRB_TT_DATA);
  mrb_define_class(mrb, "RegexpError", mrb->eStandardError_class);
  mrb_define_const(mrb, re, "IGNORECASE", mrb_int_value(mrb, GW_RE_IGNORECASE));
  mrb_define_const(mrb, re, "EXTENDED", mrb_int_value(mrb, GW_RE_EXTENDED));
  mrb_define_const(mrb, re, "MULTILINE", mrb_int_value(mrb, GW_RE_MULTILINE));
  mrb_define_const(mrb, re, "FIXEDENCODING", mrb_int_value(mrb, GW_RE_FIXEDENCODING));
  mrb_define_const(mrb, re, "NOENCODING", mrb_int_value(mrb, GW_RE_NOENCODING));

  mrb_define_class_method(mrb, re, "new", re_s_new, MRB_ARGS_ARG(1, 2));
  mrb_define_class_method(mrb, re, "compile", re_s_compile, MRB_ARGS_ARG(1, 2));
  mrb_define_class_method(mrb, re, "escape", re_s_escape, MRB_ARGS_REQ(1));
  mrb_define_class_method(mrb, re, "quote", re_s_escape, MRB_ARGS_REQ(1));
  mrb_define_class_method(mrb, re, "last_match", re_s_last_match, MRB_ARGS_OPT(1));
  mrb_define_class_method(mrb, re, "__set_last_match", re_s_set_last_match, MRB_ARGS_REQ(1));
  mrb_define_class_method(mrb, re, "match_limit", re_s_match_limit, MRB_ARGS_NONE());
  mrb_define_class_method(mrb, re, "match_limit=", re_s_set_match_limit, MRB_ARGS_REQ(1));

  mrb_define_method(mrb, re, "source", re_source, MRB_ARGS_NONE());
  mrb_define_method(mrb, re, "options", re_options, MRB_ARGS_NONE());
  mrb_define_method(mrb, re, "casefold?", re_casefold, MRB_ARGS_NONE());
  mrb_define_method(mrb, re, "to_s", re_to_s, MRB_ARGS_NONE());
  mrb_define_method(mrb, re, "inspect", re_inspect, MRB_ARGS_NONE());
  mrb_define_method(mrb, re, "==", re_eq, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, re, "eql?", re_eq, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, re, "hash", re_hash, MRB_ARGS_NONE());
  mrb_define_method(mrb, re, "match", re_match, MRB_ARGS_ARG(1, 1) | MRB_ARGS_BLOCK());
  mrb_define_method(mrb, re, "match?", re_match_p, MRB_ARGS_ARG(1, 1));
  mrb_define_method(mrb, re, "=~", re_match_op, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, re, "===", re_eqq, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, re, "names", re_names, MRB_ARGS_NONE());
  mrb_define_method(mrb, re, "__groups", re_groups, MRB_ARGS_NONE());
  mrb_define_method(mrb, re, "named_captures", re_named_captures, MRB_ARGS_NONE());
  mrb_define_method(mrb, re, "__exec", re_exec_m, MRB_ARGS_ARG(2, 1));
  mrb_define_method(mrb, re, "__next_pos", re_next_pos, MRB_ARGS_REQ(2));
}
