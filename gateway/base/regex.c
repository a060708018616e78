/* regex.c - Ruby-syntax patterns on PCRE2 (see regex.h): the translation to
 * PCRE2's syntax, compilation (+ JIT), the shared match context with its
 * limits, and one scratch match block for every match of the process. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regex.h"

struct gw_regex_s {
  pcre2_code *code;
  int refs;
  int groups;
  int utf;
};

static pcre2_match_context *mctx;
static pcre2_jit_stack *jit_stack;
static pcre2_match_data *scratch;  /* the largest pattern's groups so far */
static uint32_t scratch_pairs;
static pcre2_match_data *scratch1; /* group 0 only: gw_regex_test */
static unsigned match_limit = GW_RE_MATCH_LIMIT, depth_limit = GW_RE_DEPTH_LIMIT;
static char last_error[160];

int gw_regex_valid_utf8(const char *str, size_t len)
{
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < len) {
    unsigned c = s[i];
    size_t n;
    uint32_t cp, min;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return 0;
    }
    if (len - i <= n) return 0;
    for (size_t k = 1; k <= n; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += n + 1;
  }
  return 1;
}

/* -- Ruby syntax -> PCRE2 syntax --------------------------------------------
 * Out: the translated pattern and, per byte of it, the offset in src it came
 * from (to report PCRE2's error offsets in the user's terms). */
typedef struct {
  char *p;
  size_t *from;
  size_t len, cap;
} out_t;

static int put(out_t *o, const char *s, size_t n, size_t from)
{
  if (o->len + n > o->cap) {
    size_t cap = (o->cap + n) * 2;
    char *p = realloc(o->p, cap);
    if (p == NULL) return -1;
    o->p = p;
    size_t *f = realloc(o->from, cap * sizeof(size_t));
    if (f == NULL) return -1;
    o->from = f;
    o->cap = cap;
  }
  memcpy(o->p + o->len, s, n);
  for (size_t i = 0; i < n; i++) o->from[o->len + i] = from;
  o->len += n;
  return 0;
}

static int hexval(int c)
{
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* \uHHHH or \u{H[ H...]} at s[i] (the backslash): emitted as \x{...};
 * returns the bytes consumed, 0 if it is not one (copied as it is). */
static size_t put_unicode(out_t *o, const char *s, size_t n, size_t i)
{
  char buf[16];
  if (i + 2 < n && s[i + 2] == '{') {
    size_t j = i + 3, emitted = 0;
    for (;;) {
      while (j < n && s[j] == ' ') j++;
      if (j < n && s[j] == '}') break;
      size_t k = j;
      while (k < n && hexval((unsigned char)s[k]) >= 0 && k - j < 6) k++;
      if (k == j || (k < n && s[k] != ' ' && s[k] != '}')) return 0;
      snprintf(buf, sizeof(buf), "\\x{%.*s}", (int)(k - j), s + j);
      if (put(o, buf, strlen(buf), i) < 0) return 0;
      emitted++;
      j = k;
    }
    return emitted ? j + 1 - i : 0;
  }
  if (i + 5 < n && hexval((unsigned char)s[i + 2]) >= 0 && hexval((unsigned char)s[i + 3]) >= 0 &&
      hexval((unsigned char)s[i + 4]) >= 0 && hexval((unsigned char)s[i + 5]) >= 0) {
    snprintf(buf, sizeof(buf), "\\x{%.4s}", s + i + 2);
    return put(o, buf, strlen(buf), i) < 0 ? 0 : 6;
  }
  return 0;
}

/* 0, or -1 when out of memory, or -2 with *unsupported naming a Ruby
 * construct PCRE2 would read differently (it is refused, not misread). */
static int translate(const char *s, size_t n, int extended, out_t *o, int *unicode, const char **unsupported,
                     size_t *at)
{
  int in_class = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '\\' && i + 1 < n) {
      char d = s[i + 1];
      if (d == 'h' || d == 'H') {
        const char *rep = in_class ? (d == 'h' ? "[:xdigit:]" : "[:^xdigit:]")
                                   : (d == 'h' ? "[[:xdigit:]]" : "[[:^xdigit:]]");
        if (put(o, rep, strlen(rep), i) < 0) return -1;
        i++;
        continue;
      }
      if (d == 'u') {
        size_t used = put_unicode(o, s, n, i);
        if (used) {
          *unicode = 1;
          i += used - 1;
          continue;
        }
      }
      if (put(o, s + i, 2, i) < 0) return -1;
      i++;
      continue;
    }
    if (in_class) {
      if (c == '[' && i + 1 < n && s[i + 1] == ':') { /* [:alpha:] */
        const char *end = memchr(s + i + 2, ']', n - i - 2);
        size_t upto = end ? (size_t)(end - s) : i;
        if (put(o, s + i, upto - i + 1, i) < 0) return -1;
        i = upto;
        continue;
      }
      if (c == '[' || (c == '&' && i + 1 < n && s[i + 1] == '&')) {
        *unsupported = c == '[' ? "nested character classes are not supported" : "character class intersection (&&) is not supported";
        *at = i;
        return -2;
      }
      if (c == ']') in_class = 0;
      if (put(o, &c, 1, i) < 0) return -1;
      continue;
    }
    if (c == '[') {
      in_class = 1;
      size_t j = i + 1;
      if (j < n && s[j] == '^') j++;
      if (j < n && s[j] == ']') j++; /* a leading ] is literal */
      if (put(o, s + i, j - i, i) < 0) return -1;
      i = j - 1;
      continue;
    }
    if (c == '(' && i + 2 < n && s[i + 1] == '?') {
      if (s[i + 2] == '#') { /* (?# comment ) */
        const char *end = memchr(s + i, ')', n - i);
        size_t upto = end ? (size_t)(end - s) : n - 1;
        if (put(o, s + i, upto - i + 1, i) < 0) return -1;
        i = upto;
        continue;
      }
      size_t j = i + 2;
      while (j < n && (s[j] == 'i' || s[j] == 'm' || s[j] == 'x' || s[j] == '-')) j++;
      if (j > i + 2 && j < n && (s[j] == ':' || s[j] == ')')) { /* (?mi-x:...): Ruby's m is PCRE2's s */
        for (size_t k = i; k <= j; k++) {
          char ch = s[k] == 'm' && k > i + 1 ? 's' : s[k];
          if (put(o, &ch, 1, k) < 0) return -1;
        }
        i = j;
        continue;
      }
    }
    if (c == '#' && extended) { /* a comment to the end of the line: copied as it is */
      const char *end = memchr(s + i, '\n', n - i);
      size_t upto = end ? (size_t)(end - s) : n - 1;
      if (put(o, s + i, upto - i + 1, i) < 0) return -1;
      i = upto;
      continue;
    }
    if (put(o, &c, 1, i) < 0) return -1;
  }
  return 0;
}

gw_regex_t *gw_regex_new(const char *src, size_t len, int opts, char *err, size_t errlen)
{
  out_t o = {0};
  int unicode = 0;
  gw_regex_t *re = NULL;
  const char *unsupported = NULL;
  size_t at = 0;
  int t = translate(src, len, (opts & GW_RE_EXTENDED) != 0, &o, &unicode, &unsupported, &at);
  if (t == -2) {
    snprintf(err, errlen, "%s at offset %zu", unsupported, at);
    goto done;
  }
  if (t < 0) {
    snprintf(err, errlen, "out of memory");
    goto done;
  }
  uint32_t flags = PCRE2_MULTILINE | PCRE2_DUPNAMES | PCRE2_NEVER_BACKSLASH_C;
  if (opts & GW_RE_IGNORECASE) flags |= PCRE2_CASELESS;
  if (opts & GW_RE_EXTENDED) flags |= PCRE2_EXTENDED;
  if (opts & GW_RE_MULTILINE) flags |= PCRE2_DOTALL;
  int utf = !(opts & GW_RE_NOENCODING) && gw_regex_valid_utf8(src, len);
  if (utf) flags |= PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  (void)unicode; /* \x{...} above 0xff fails on its own in byte mode */
  int code;
  PCRE2_SIZE off;
  pcre2_code *pc = pcre2_compile((PCRE2_SPTR)(o.p ? o.p : ""), o.len, flags, &code, &off, NULL);
  if (pc == NULL) {
    PCRE2_UCHAR msg[128];
    pcre2_get_error_message(code, msg, sizeof(msg));
    size_t at = off < o.len ? o.from[off] : len;
    snprintf(err, errlen, "%s at offset %zu", (const char *)msg, at);
    goto done;
  }
  pcre2_jit_compile(pc, PCRE2_JIT_COMPLETE); /* the interpreter when it cannot */
  re = calloc(1, sizeof(*re));
  if (re == NULL) {
    pcre2_code_free(pc);
    snprintf(err, errlen, "out of memory");
    goto done;
  }
  uint32_t groups = 0;
  pcre2_pattern_info(pc, PCRE2_INFO_CAPTURECOUNT, &groups);
  re->code = pc;
  re->refs = 1;
  re->groups = (int)groups;
  re->utf = utf;
done:
  free(o.p);
  free(o.from);
  return re;
}

gw_regex_t *gw_regex_ref(gw_regex_t *re)
{
  re->refs++;
  return re;
}

void gw_regex_unref(gw_regex_t *re)
{
  if (re == NULL || --re->refs > 0) return;
  pcre2_code_free(re->code);
  free(re);
}

int gw_regex_groups(const gw_regex_t *re)
{
  return re->groups;
}

int gw_regex_utf(const gw_regex_t *re)
{
  return re->utf;
}

int gw_regex_name_count(const gw_regex_t *re)
{
  uint32_t n = 0;
  pcre2_pattern_info(re->code, PCRE2_INFO_NAMECOUNT, &n);
  return (int)n;
}

const char *gw_regex_name_at(const gw_regex_t *re, int i, int *group)
{
  PCRE2_SPTR table;
  uint32_t size;
  pcre2_pattern_info(re->code, PCRE2_INFO_NAMETABLE, &table);
  pcre2_pattern_info(re->code, PCRE2_INFO_NAMEENTRYSIZE, &size);
  const unsigned char *e = table + (size_t)i * size;
  *group = (e[0] << 8) | e[1];
  return (const char *)e + 2;
}

static pcre2_match_context *context(void)
{
  if (mctx == NULL) {
    mctx = pcre2_match_context_create(NULL);
    if (mctx == NULL) return NULL;
    pcre2_set_match_limit(mctx, match_limit);
    pcre2_set_depth_limit(mctx, depth_limit);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
    if (jit_stack) pcre2_jit_stack_assign(mctx, NULL, jit_stack);
  }
  return mctx;
}

void gw_regex_set_limits(unsigned match, unsigned depth)
{
  if (match) match_limit = match;
  if (depth) depth_limit = depth;
  if (mctx) {
    pcre2_set_match_limit(mctx, match_limit);
    pcre2_set_depth_limit(mctx, depth_limit);
  }
}

unsigned gw_regex_match_limit(void)
{
  return match_limit;
}

const char *gw_regex_last_error(void)
{
  return last_error;
}

static int failed(int rc)
{
  switch (rc) {
  case PCRE2_ERROR_MATCHLIMIT:
    snprintf(last_error, sizeof(last_error), "match limit exceeded");
    break;
  case PCRE2_ERROR_DEPTHLIMIT:
  case PCRE2_ERROR_HEAPLIMIT:
  case PCRE2_ERROR_JIT_STACKLIMIT:
    snprintf(last_error, sizeof(last_error), "match stack limit exceeded");
    break;
  default: {
    PCRE2_UCHAR msg[120];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    snprintf(last_error, sizeof(last_error), "%s", (const char *)msg);
  }
  }
  return -1;
}

int gw_regex_exec(const gw_regex_t *re, const char *subject, size_t len, size_t start, int anchored,
                  const size_t **ov)
{
  if (start > len) return 0;
  uint32_t need = (uint32_t)re->groups + 1;
  if (scratch_pairs < need) {
    pcre2_match_data *md = pcre2_match_data_create(need < 10 ? 10 : need, NULL);
    if (md == NULL) {
      snprintf(last_error, sizeof(last_error), "out of memory");
      return -1;
    }
    pcre2_match_data_free(scratch);
    scratch = md;
    scratch_pairs = pcre2_get_ovector_count(md);
  }
  pcre2_match_context *ctx = context();
  int rc = pcre2_match(re->code, (PCRE2_SPTR)(subject ? subject : ""), len, start, anchored ? PCRE2_ANCHORED : 0,
                       scratch, ctx);
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc < 0) return failed(rc);
  *ov = pcre2_get_ovector_pointer(scratch);
  return 1;
}

int gw_regex_test(const gw_regex_t *re, const char *subject, size_t len)
{
  if (scratch1 == NULL && (scratch1 = pcre2_match_data_create(1, NULL)) == NULL) {
    snprintf(last_error, sizeof(last_error), "out of memory");
    return -1;
  }
  int rc = pcre2_match(re->code, (PCRE2_SPTR)(subject ? subject : ""), len, 0, 0, scratch1, context());
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc < 0) return failed(rc);
  return 1;
}

size_t gw_regex_next_pos(const gw_regex_t *re, const char *subject, size_t len, size_t pos)
{
  if (pos >= len) return len + 1;
  pos++;
  if (re->utf)
    while (pos < len && ((unsigned char)subject[pos] & 0xC0) == 0x80) pos++;
  return pos;
}
