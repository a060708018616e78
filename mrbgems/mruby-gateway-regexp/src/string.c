/* string.c - the String methods of mruby that gain a Regexp argument: index,
 * rindex, [] / slice, split, start_with? (each wraps mruby's own C function,
 * which still handles every other argument exactly as before), and the C
 * half of sub/gsub with a String replacement (mrblib has the rest). */
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/proc.h>
#include <mruby/string.h>

#include "re.h"

enum { ORIG_INDEX, ORIG_RINDEX, ORIG_AREF, ORIG_SPLIT, ORIG_START_WITH, NORIG };
static const char *const orig_names[NORIG] = {"index", "rindex", "[]", "split", "start_with?"};
/* mruby's own C functions; the same in every VM of the process. */
static mrb_func_t orig[NORIG];

/* The original method, with the arguments of the current call (a C function
 * reads them from the same call frame, so nothing is copied). */
static mrb_value call_orig(mrb_state *mrb, mrb_value self, int which)
{
  return orig[which](mrb, self);
}

static int regexp_first(mrb_state *mrb)
{
  return mrb_get_argc(mrb) >= 1 && gw_re_ptr(mrb, mrb_get_argv(mrb)[0]) != NULL;
}

static mrb_value str_index(mrb_state *mrb, mrb_value self)
{
  if (!regexp_first(mrb)) return call_orig(mrb, self, ORIG_INDEX);
  mrb_value re;
  mrb_int pos = 0;
  mrb_get_args(mrb, "o|i", &re, &pos);
  if (pos < 0) pos += RSTRING_LEN(self);
  mrb_value md = pos < 0 ? mrb_nil_value() : gw_re_exec(mrb, re, self, pos, 0);
  gw_re_set_last_match(mrb, md);
  return mrb_nil_p(md) ? md : mrb_int_value(mrb, (mrb_int)gw_md_get(mrb, md)->ov[0]);
}

/* The last position <= pos where re matches (tried at each position backwards). */
static mrb_value str_rindex(mrb_state *mrb, mrb_value self)
{
  if (!regexp_first(mrb)) return call_orig(mrb, self, ORIG_RINDEX);
  mrb_value re;
  mrb_int len = RSTRING_LEN(self), pos = len;
  mrb_get_args(mrb, "o|i", &re, &pos);
  if (pos < 0) pos += len;
  if (pos > len) pos = len;
  gw_re_t *r = gw_re_get(mrb, re);
  const char *s = RSTRING_PTR(self);
  for (; pos >= 0; pos--) {
    if (gw_regex_utf(r->re) && pos < len && ((unsigned char)s[pos] & 0xC0) == 0x80) continue;
    mrb_value md = gw_re_exec(mrb, re, self, pos, 1);
    if (!mrb_nil_p(md)) {
      gw_re_set_last_match(mrb, md);
      return mrb_int_value(mrb, pos);
    }
  }
  gw_re_set_last_match(mrb, mrb_nil_value());
  return mrb_nil_value();
}

/* str[re], str[re, capture] (a number or a name) */
static mrb_value str_aref(mrb_state *mrb, mrb_value self)
{
  if (!regexp_first(mrb)) return call_orig(mrb, self, ORIG_AREF);
  mrb_value re, cap = mrb_int_value(mrb, 0);
  mrb_get_args(mrb, "o|o", &re, &cap);
  mrb_value md = gw_re_exec(mrb, re, self, 0, 0);
  gw_re_set_last_match(mrb, md);
  if (mrb_nil_p(md)) return md;
  return mrb_funcall(mrb, md, "[]", 1, cap);
}

static void push_piece(mrb_state *mrb, mrb_value a, mrb_value str, size_t b, size_t e)
{
  mrb_ary_push(mrb, a, mrb_str_new(mrb, RSTRING_PTR(str) + b, (mrb_int)(e - b)));
}

/* split(re, limit = 0), as CRuby does: groups are part of the result, an
 * empty match splits between characters, limit 0 drops trailing empty
 * fields, a negative limit keeps them. */
static mrb_value str_split(mrb_state *mrb, mrb_value self)
{
  if (!regexp_first(mrb)) return call_orig(mrb, self, ORIG_SPLIT);
  mrb_value re;
  mrb_int lim = 0;
  mrb_get_args(mrb, "o|i", &re, &lim);
  gw_re_t *r = gw_re_get(mrb, re);
  mrb_value result = mrb_ary_new(mrb);
  size_t len = (size_t)RSTRING_LEN(self);
  if (len == 0) return result;
  if (lim == 1) {
    mrb_ary_push(mrb, result, mrb_str_dup(mrb, self));
    return result;
  }
  int ai = mrb_gc_arena_save(mrb);
  size_t beg = 0, start = 0;
  mrb_int count = 1;
  int last_null = 0;
  const size_t *ov;
  int rc;
  while ((rc = gw_regex_exec(r->re, RSTRING_PTR(self), len, start, 0, &ov)) == 1) {
    size_t mb = ov[0], me = ov[1];
    if (start == mb && mb == me) {
      if (last_null) {
        size_t next = gw_regex_next_pos(r->re, RSTRING_PTR(self), len, beg);
        push_piece(mrb, result, self, beg, next > len ? len : next);
        beg = start;
      } else {
        start = gw_regex_next_pos(r->re, RSTRING_PTR(self), len, start);
        last_null = 1;
        continue;
      }
    } else {
      push_piece(mrb, result, self, beg, mb);
      beg = start = me;
    }
    last_null = 0;
    int pairs = gw_regex_groups(r->re) + 1;
    for (int g = 1; g < pairs; g++) {
      /* ov is the scratch block: read it before anything matches again */
      if (ov[2 * g] == GW_RE_UNSET) continue;
      push_piece(mrb, result, self, ov[2 * g], ov[2 * g + 1]);
    }
    mrb_gc_arena_restore(mrb, ai);
    if (lim > 0 && lim <= ++count) break;
  }
  if (rc < 0) mrb_raisef(mrb, gw_re_error_class(mrb), "%s: /%v/", gw_regex_last_error(), mrb_str_new(mrb, r->src, r->len));
  if (lim != 0 || len > beg) push_piece(mrb, result, self, beg, len);
  if (lim == 0)
    while (RARRAY_LEN(result) > 0 && RSTRING_LEN(RARRAY_PTR(result)[RARRAY_LEN(result) - 1]) == 0) mrb_ary_pop(mrb, result);
  return result;
}

static mrb_value str_start_with(mrb_state *mrb, mrb_value self)
{
  mrb_int argc = mrb_get_argc(mrb);
  const mrb_value *argv = mrb_get_argv(mrb);
  int any = 0;
  for (mrb_int i = 0; i < argc; i++) any |= gw_re_ptr(mrb, argv[i]) != NULL;
  if (!any) return call_orig(mrb, self, ORIG_START_WITH);
  for (mrb_int i = 0; i < argc; i++) {
    mrb_value p = argv[i];
    if (gw_re_ptr(mrb, p)) {
      mrb_value md = gw_re_exec(mrb, p, self, 0, 1);
      if (!mrb_nil_p(md)) {
        gw_re_set_last_match(mrb, md);
        return mrb_true_value();
      }
    } else {
      if (!mrb_string_p(p)) mrb_raisef(mrb, E_TYPE_ERROR, "no implicit conversion of %T into String", p);
      if (RSTRING_LEN(p) <= RSTRING_LEN(self) && memcmp(RSTRING_PTR(p), RSTRING_PTR(self), (size_t)RSTRING_LEN(p)) == 0)
        return mrb_true_value();
    }
  }
  return mrb_false_value();
}

/* Appends repl with \0-\9, \&, \`, \', \k<name> and \\ expanded for the match ov. */
static void expand(mrb_state *mrb, mrb_value out, mrb_value repl, mrb_value str, const gw_regex_t *re,
                   const size_t *ov, int pairs)
{
  const char *p = RSTRING_PTR(repl), *s = RSTRING_PTR(str);
  mrb_int n = RSTRING_LEN(repl), lit = 0;
  for (mrb_int i = 0; i < n; i++) {
    if (p[i] != '\\' || i + 1 == n) continue;
    mrb_str_cat(mrb, out, p + lit, i - lit);
    char d = p[i + 1];
    int g = -1;
    mrb_int used = 2;
    if (d >= '0' && d <= '9') {
      g = d - '0';
    } else if (d == '&') {
      g = 0;
    } else if (d == '`') {
      mrb_str_cat(mrb, out, s, (mrb_int)ov[0]);
    } else if (d == '\'') {
      mrb_str_cat(mrb, out, s + ov[1], RSTRING_LEN(str) - (mrb_int)ov[1]);
    } else if (d == '\\') {
      mrb_str_cat_lit(mrb, out, "\\");
    } else if (d == 'k' && i + 2 < n && p[i + 2] == '<' && memchr(p + i + 3, '>', (size_t)(n - i - 3))) {
      const char *name = p + i + 3, *end = memchr(name, '>', (size_t)(n - i - 3));
      g = gw_re_name_group(re, ov, pairs, name, (size_t)(end - name));
      if (g < 0) mrb_raisef(mrb, E_INDEX_ERROR, "undefined group name reference: %v", mrb_str_new(mrb, name, end - name));
      used = end - (p + i) + 1;
    } else {
      mrb_str_cat(mrb, out, p + i, 2); /* not an escape we know: as it is */
    }
    if (g >= 0 && g < pairs && ov[2 * g] != GW_RE_UNSET) mrb_str_cat(mrb, out, s + ov[2 * g], (mrb_int)(ov[2 * g + 1] - ov[2 * g]));
    i += used - 1;
    lit = i + 1;
  }
  mrb_str_cat(mrb, out, p + lit, n - lit);
}

/* __gw_re_sub(re, replacement, global): the new String, or nil when nothing
 * matched; $~ is the last match. */
static mrb_value str_re_sub(mrb_state *mrb, mrb_value self)
{
  mrb_value re, repl;
  mrb_bool global;
  mrb_get_args(mrb, "oSb", &re, &repl, &global);
  gw_re_t *r = gw_re_get(mrb, re);
  mrb_value str = mrb_obj_freeze(mrb, mrb_str_dup(mrb, self)); /* what the MatchData will hold */
  const char *s = RSTRING_PTR(str);
  size_t len = (size_t)RSTRING_LEN(str), pos = 0, last = 0;
  int pairs = gw_regex_groups(r->re) + 1;
  size_t *keep = mrb_malloc(mrb, sizeof(size_t) * 2 * (size_t)pairs);
  mrb_value out = mrb_nil_value();
  const size_t *ov;
  int rc = 0;
  while (pos <= len && (rc = gw_regex_exec(r->re, s, len, pos, 0, &ov)) == 1) {
    memcpy(keep, ov, sizeof(size_t) * 2 * (size_t)pairs);
    if (mrb_nil_p(out)) out = mrb_str_new_capa(mrb, (mrb_int)len + RSTRING_LEN(repl));
    mrb_str_cat(mrb, out, s + last, (mrb_int)(keep[0] - last));
    expand(mrb, out, repl, str, r->re, keep, pairs);
    last = keep[1];
    if (!global) break;
    pos = keep[0] == keep[1] ? gw_regex_next_pos(r->re, s, len, keep[1]) : keep[1];
  }
  if (mrb_nil_p(out)) {
    mrb_free(mrb, keep);
    if (pos <= len && rc < 0)
      mrb_raisef(mrb, gw_re_error_class(mrb), "%s: /%v/", gw_regex_last_error(), mrb_str_new(mrb, r->src, r->len));
    gw_re_set_last_match(mrb, mrb_nil_value());
    return out;
  }
  if (pos <= len && global && rc < 0) {
    mrb_free(mrb, keep);
    mrb_raisef(mrb, gw_re_error_class(mrb), "%s: /%v/", gw_regex_last_error(), mrb_str_new(mrb, r->src, r->len));
  }
  mrb_str_cat(mrb, out, s + last, (mrb_int)(len - last));
  mrb_value md = gw_md_new(mrb, re, str, keep, pairs);
  mrb_free(mrb, keep);
  gw_re_set_last_match(mrb, md);
  return out;
}

void gw_re_init_string(mrb_state *mrb)
{
  struct RClass *s = mrb->string_class;
  for (int i = 0; i < NORIG; i++) {
    struct RClass *c = s;
    mrb_method_t m = mrb_method_search_vm(mrb, &c, mrb_intern_cstr(mrb, orig_names[i]));
    mrb_func_t f = MRB_METHOD_UNDEF_P(m) ? NULL : MRB_METHOD_CFUNC(m);
    if (f == NULL) mrb_raisef(mrb, E_NOTIMP_ERROR, "String#%s is not a C function: cannot take a Regexp", orig_names[i]);
    if (f != str_index && f != str_rindex && f != str_aref && f != str_split && f != str_start_with) orig[i] = f;
  }
  mrb_define_method(mrb, s, "index", str_index, MRB_ARGS_ARG(1, 1));
  mrb_define_method(mrb, s, "rindex", str_rindex, MRB_ARGS_ANY());
  mrb_define_method(mrb, s, "[]", str_aref, MRB_ARGS_ANY());
  mrb_define_method(mrb, s, "slice", str_aref, MRB_ARGS_ANY());
  mrb_define_method(mrb, s, "split", str_split, MRB_ARGS_ANY());
  mrb_define_method(mrb, s, "start_with?", str_start_with, MRB_ARGS_REST());
  mrb_define_method(mrb, s, "__gw_re_sub", str_re_sub, MRB_ARGS_REQ(3));
}
