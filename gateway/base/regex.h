/* regex.h - Ruby-syntax regular expressions on PCRE2 (8-bit, JIT when the
 * machine allows it): what Regexp (mrbgems/mruby-gateway-regexp) and the
 * router's regex locations share. Pure: no mruby, no loop.
 *
 * A pattern is written in Ruby's syntax and translated before PCRE2 compiles
 * it: `^`/`$` are line anchors (PCRE2_MULTILINE, always), Ruby's `m` is
 * PCRE2_DOTALL (`(?m)` inside the pattern too), `\h`/`\H` are hex digits,
 * `\uHHHH`/`\u{H...}` are code points. Patterns are UTF-8 (PCRE2_UTF with
 * PCRE2_MATCH_INVALID_UTF: bytes that are not valid UTF-8 in a subject never
 * match, nothing is checked per match) unless GW_RE_NOENCODING asks for bytes
 * or the pattern itself is not valid UTF-8. Offsets are bytes.
 *
 * One process-wide match context puts a cap on backtracking (match limit,
 * depth limit, a JIT stack of at most 1 MiB), so a catastrophic pattern fails
 * with an error instead of spinning; one scratch match block, grown to the
 * largest pattern seen, serves every match (workers have no threads). */
#ifndef GW_REGEX_H
#define GW_REGEX_H

#include <stddef.h>

/* Ruby's Regexp option bits. */
enum {
  GW_RE_IGNORECASE = 1,
  GW_RE_EXTENDED = 2,
  GW_RE_MULTILINE = 4, /* Ruby's m: `.` matches a newline (PCRE2_DOTALL) */
  GW_RE_FIXEDENCODING = 16,
  GW_RE_NOENCODING = 32 /* /re/n: bytes, not UTF-8 */
};

typedef struct gw_regex_s gw_regex_t;

/* Compiles Ruby-syntax src (len bytes, NUL bytes allowed) with GW_RE_* opts.
 * NULL with err set to PCRE2's message and the byte offset in src on a
 * syntax error. The result has one reference (gw_regex_ref / gw_regex_unref). */
gw_regex_t *gw_regex_new(const char *src, size_t len, int opts, char *err, size_t errlen);
gw_regex_t *gw_regex_ref(gw_regex_t *re);
void gw_regex_unref(gw_regex_t *re);

/* Capture groups in the pattern (not counting group 0). */
int gw_regex_groups(const gw_regex_t *re);
/* 1 when the pattern is in UTF-8 mode. */
int gw_regex_utf(const gw_regex_t *re);
/* Named groups: count, and the i-th in PCRE2's table order (by name); its
 * group number in *group. Duplicate names appear once per group. */
int gw_regex_name_count(const gw_regex_t *re);
const char *gw_regex_name_at(const gw_regex_t *re, int i, int *group);

#define GW_RE_UNSET ((size_t)-1)

/* Searches subject[start..len) (start <= len). Returns 1 with *ov pointing at
 * 2 * (groups + 1) offsets (begin, end per group; GW_RE_UNSET for a group
 * that did not take part), valid until the next gw_regex_exec; 0 when it does
 * not match; -1 on an error (match limit, bad offset), with its message in
 * gw_regex_last_error(). `anchored`: only at start. */
int gw_regex_exec(const gw_regex_t *re, const char *subject, size_t len, size_t start, int anchored,
                  const size_t **ov);

/* 1 if subject[0..len) matches anywhere; -1 on an error (as above). Uses no
 * more match space than group 0: the router's test. */
int gw_regex_test(const gw_regex_t *re, const char *subject, size_t len);

/* The message of the last error of gw_regex_exec / gw_regex_test: "match
 * limit exceeded" and the like. Static storage. */
const char *gw_regex_last_error(void);

/* Where to search next after an empty match at pos: one character on (a
 * whole UTF-8 sequence in UTF-8 mode), len + 1 at the end. */
size_t gw_regex_next_pos(const gw_regex_t *re, const char *subject, size_t len, size_t pos);

/* Backtracking cap of every match (PCRE2's match limit; default
 * GW_RE_MATCH_LIMIT), and its depth limit (the interpreter's; the JIT's stack
 * is capped at 1 MiB). 0 leaves one as it is. */
#define GW_RE_MATCH_LIMIT 1000000u
#define GW_RE_DEPTH_LIMIT 10000u
void gw_regex_set_limits(unsigned match_limit, unsigned depth_limit);
unsigned gw_regex_match_limit(void);

/* 1 if src[0..len) is valid UTF-8. */
int gw_regex_valid_utf8(const char *s, size_t len);

#endif
