/* matchdata.c - MatchData: the groups of one match, by number or name, and
 * where they are (byte offsets). values_at, == and inspect are in mrblib. */
#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/hash.h>
#include <mruby/range.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "re.h"

static mrb_value md_string(mrb_state *mrb, mrb_value self)
{
  return mrb_iv_get(mrb, self, mrb_intern_lit(mrb, "@string"));
}

static mrb_value md_regexp(mrb_state *mrb, mrb_value self)
{
  return mrb_iv_get(mrb, self, mrb_intern_lit(mrb, "@regexp"));
}

/* A group number from an Integer (negative from the end), a name (String or
 * Symbol: IndexError if unknown); -1 when an Integer is out of range. */
static int group_of(mrb_state *mrb, mrb_value self, mrb_value i)
{
  gw_md_t *m = gw_md_get(mrb, self);
  if (mrb_string_p(i) || mrb_symbol_p(i)) return gw_md_name_group(mrb, self, i);
  mrb_int n = mrb_as_int(mrb, i);
  if (n < 0) n += m->n;
  return n < 0 || n >= m->n ? -1 : (int)n;
}

static mrb_value md_to_a(mrb_state *mrb, mrb_value self)
{
  gw_md_t *m = gw_md_get(mrb, self);
  mrb_value a = mrb_ary_new_capa(mrb, m->n);
  for (int i = 0; i < m->n; i++) mrb_ary_push(mrb, a, gw_md_group(mrb, self, i));
  return a;
}

static mrb_value md_captures(mrb_state *mrb, mrb_value self)
{
  gw_md_t *m = gw_md_get(mrb, self);
  mrb_value a = mrb_ary_new_capa(mrb, m->n);
  for (int i = 1; i < m->n; i++) mrb_ary_push(mrb, a, gw_md_group(mrb, self, i));
  return a;
}

/* md[i], md["name"], md[:name], md[start, len], md[range] */
static mrb_value md_aref(mrb_state *mrb, mrb_value self)
{
  mrb_value i, len = mrb_undef_value();
  mrb_get_args(mrb, "o|o", &i, &len);
  if (!mrb_undef_p(len) || mrb_range_p(i)) {
    mrb_value a = md_to_a(mrb, self);
    return mrb_undef_p(len) ? mrb_funcall(mrb, a, "[]", 1, i) : mrb_funcall(mrb, a, "[]", 2, i, len);
  }
  int g = group_of(mrb, self, i);
  return g < 0 ? mrb_nil_value() : gw_md_group(mrb, self, g);
}

static mrb_value md_size(mrb_state *mrb, mrb_value self)
{
  return mrb_int_value(mrb, gw_md_get(mrb, self)->n);
}

static mrb_value md_to_s(mrb_state *mrb, mrb_value self)
{
  return gw_md_group(mrb, self, 0);
}

static mrb_value md_pre_match(mrb_state *mrb, mrb_value self)
{
  gw_md_t *m = gw_md_get(mrb, self);
  mrb_value s = md_string(mrb, self);
  return mrb_str_new(mrb, RSTRING_PTR(s), (mrb_int)m->ov[0]);
}

static mrb_value md_post_match(mrb_state *mrb, mrb_value self)
{
  gw_md_t *m = gw_md_get(mrb, self);
  mrb_value s = md_string(mrb, self);
  return mrb_str_new(mrb, RSTRING_PTR(s) + m->ov[1], RSTRING_LEN(s) - (mrb_int)m->ov[1]);
}

/* The group's pair, or raises IndexError for a number out of range. */
static int pair_of(mrb_state *mrb, mrb_value self, size_t *b, size_t *e)
{
  mrb_value i = mrb_get_arg1(mrb);
  int g = group_of(mrb, self, i);
  if (g < 0) mrb_raisef(mrb, E_INDEX_ERROR, "index %v out of matches", i);
  gw_md_t *m = gw_md_get(mrb, self);
  *b = m->ov[2 * g];
  *e = m->ov[2 * g + 1];
  return *b != GW_RE_UNSET;
}

static mrb_value md_begin(mrb_state *mrb, mrb_value self)
{
  size_t b, e;
  return pair_of(mrb, self, &b, &e) ? mrb_int_value(mrb, (mrb_int)b) : mrb_nil_value();
}

static mrb_value md_end(mrb_state *mrb, mrb_value self)
{
  size_t b, e;
  return pair_of(mrb, self, &b, &e) ? mrb_int_value(mrb, (mrb_int)e) : mrb_nil_value();
}

static mrb_value md_offset(mrb_state *mrb, mrb_value self)
{
  size_t b, e;
  if (!pair_of(mrb, self, &b, &e)) return mrb_assoc_new(mrb, mrb_nil_value(), mrb_nil_value());
  return mrb_assoc_new(mrb, mrb_int_value(mrb, (mrb_int)b), mrb_int_value(mrb, (mrb_int)e));
}

static mrb_value md_names(mrb_state *mrb, mrb_value self)
{
  return mrb_funcall(mrb, md_regexp(mrb, self), "names", 0);
}

/* {"name" => String or nil}; a name used twice gives its last group that took part. */
static mrb_value md_named_captures(mrb_state *mrb, mrb_value self)
{
  mrb_value names = md_names(mrb, self), h = mrb_hash_new(mrb);
  for (mrb_int k = 0; k < RARRAY_LEN(names); k++) {
    mrb_value name = RARRAY_PTR(names)[k];
    mrb_hash_set(mrb, h, name, gw_md_group(mrb, self, gw_md_name_group(mrb, self, name)));
  }
  return h;
}

void gw_re_init_matchdata(mrb_state *mrb)
{
  struct RClass *md = mrb_define_class(mrb, "MatchData", mrb->object_class);
  MRB_SET_INSTANCE_TT(md, MRB_TT_DATA);
  mrb_undef_class_method(mrb, md, "new");
  mrb_define_method(mrb, md, "[]", md_aref, MRB_ARGS_ARG(1, 1));
  mrb_define_method(mrb, md, "to_a", md_to_a, MRB_ARGS_NONE());
  mrb_define_method(mrb, md, "captures", md_captures, MRB_ARGS_NONE());
  mrb_define_method(mrb, md, "named_captures", md_named_captures, MRB_ARGS_NONE());
  mrb_define_method(mrb, md, "names", md_names, MRB_ARGS_NONE());
  mrb_define_method(mrb, md, "size", md_size, MRB_ARGS_NONE());
  mrb_define_method(mrb, md, "length", md_size, MRB_ARGS_NONE());
  mrb_define_method(mrb, md, "to_s", md_to_s, MRB_ARGS_NONE());
  mrb_define_method(mrb, md, "pre_match", md_pre_match, MRB_ARGS_NONE());
  mrb_define_method(mrb, md, "post_match", md_post_match, MRB_ARGS_NONE());
  mrb_define_method(mrb, md, "begin", md_begin, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, md, "end", md_end, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, md, "offset", md_offset, MRB_ARGS_REQ(1));
  mrb_define_method(mrb, md, "string", md_string, MRB_ARGS_NONE());
  mrb_define_method(mrb, md, "regexp", md_regexp, MRB_ARGS_NONE());
}
