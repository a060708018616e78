/* re.h - what the gem's files share: the Regexp and MatchData objects, the
 * per-VM cache of compiled patterns, and $~ / $1..$9. */
#ifndef GW_RE_GEM_H
#define GW_RE_GEM_H

#include <mruby.h>

#include "regex.h"

/* A Regexp object's C side. src is the source as the user wrote it (Ruby
 * syntax); re is shared with every Regexp of the same source and options. */
typedef struct {
  gw_regex_t *re;
  char *src;
  mrb_int len;
  int opts; /* GW_RE_* */
} gw_re_t;

/* A MatchData's C side: n pairs of byte offsets (GW_RE_UNSET when a group
 * did not take part). Its string (a frozen copy of the subject) and regexp
 * are the instance variables @string and @regexp. */
typedef struct {
  int n;
  size_t ov[];
} gw_md_t;

struct RClass *gw_re_class(mrb_state *mrb);
struct RClass *gw_md_class(mrb_state *mrb);
struct RClass *gw_re_error_class(mrb_state *mrb);

/* The Regexp behind v, or NULL if v is not a Regexp. */
gw_re_t *gw_re_ptr(mrb_state *mrb, mrb_value v);
/* Same, raising TypeError if v is not one. */
gw_re_t *gw_re_get(mrb_state *mrb, mrb_value v);
gw_md_t *gw_md_get(mrb_state *mrb, mrb_value v);

/* The Regexp for (src, opts): the cached object (frozen) when `shared`,
 * else a new object with the cached compiled pattern. Raises RegexpError. */
mrb_value gw_re_lookup(mrb_state *mrb, const char *src, mrb_int len, int opts, mrb_bool shared);

/* Searches str (a String) from byte pos (pos <= length); a MatchData or
 * nil. Raises RegexpError on a match error (match limit). Leaves $~ alone. */
mrb_value gw_re_exec(mrb_state *mrb, mrb_value re, mrb_value str, mrb_int pos, int anchored);

/* A MatchData of self (a Regexp) on str with n pairs of offsets ov. */
mrb_value gw_md_new(mrb_state *mrb, mrb_value self, mrb_value str, const size_t *ov, int n);

/* Sets $~ to md (a MatchData or nil) and $1..$9 to its groups. */
void gw_re_set_last_match(mrb_state *mrb, mrb_value md);

/* Group i of md as a String (a copy), or nil when it did not take part. */
mrb_value gw_md_group(mrb_state *mrb, mrb_value md, int i);
/* The group number a name (String or Symbol) stands for in md's regexp: the
 * last one of that name that took part. Raises IndexError if none. */
int gw_md_name_group(mrb_state *mrb, mrb_value md, mrb_value name);
/* The same on a pattern and `pairs` pairs of offsets; -1 if no such name. */
int gw_re_name_group(const gw_regex_t *re, const size_t *ov, int pairs, const char *name, size_t len);

void gw_re_init_regexp(mrb_state *mrb);
void gw_re_init_matchdata(mrb_state *mrb);
void gw_re_init_string(mrb_state *mrb);
void gw_re_init_request(mrb_state *mrb);

#endif
