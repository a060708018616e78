/* json.c - JSON.parse and JSON.generate natives (the JSON module's C half;
 * mrblib/json.rb holds the option handling, to_json and the aliases).
 *
 * Parsing is YAJL's event parser (libyajl-dev 2.1): its callbacks build the
 * mruby objects directly, with no intermediate tree. Measured against
 * jansson (libjansson-dev 2.14, json_loadb then a walk of its tree) on a
 * small mruby C driver under callgrind, both building the same mruby
 * objects: a 4 KB API response 454k vs 1,165k instructions per parse, a
 * 100 KB array of objects 11.5M vs 31.3M, 20 documents nested 97 deep
 * 4.5M vs 9.3M; generating the same three 0.50M vs 1.39M, 12.3M vs 36.4M,
 * 3.9M vs 14.1M (jansson must build its tree from the mruby objects first).
 * YAJL it is; jansson is not used.
 *
 * What YAJL does not do right is redone here:
 * - UTF-8: YAJL's check lets overlong forms, encoded surrogates and code
 *   points past U+10FFFF through. The whole input is checked strictly
 *   (RFC 3629) first, and YAJL's own check is switched off.
 * - \u escapes: YAJL turns a lone high surrogate into "?", pairs a high one
 *   with any following \u escape, and writes a lone low one as CESU-8
 *   bytes. A string with escapes is decoded again from its raw text here:
 *   pairs combine, a lone surrogate becomes U+FFFD (RFC 8259 §8.2 leaves
 *   it to the implementation; CRuby keeps the invalid bytes instead).
 * - Numbers arrive as text: integers that fit mrb_int are Integers, larger
 *   ones and anything with a fraction or exponent are Floats (strtod).
 *
 * Generating is a small writer of our own into one mruby String rather than
 * yajl_gen: yajl_gen stops at depth 128 and prints doubles with %.20g
 * (0.1 -> 0.10000000000000000555), and its beautify layout is not CRuby's.
 * It is also cheaper: 210k instructions for the 4 KB document (yajl_gen
 * 498k with a plain %.17g), 6.0M for the 100 KB one (12.3M). And the parse
 * above is now 371k / 8.8M / 3.5M: frozen keys shared within a document,
 * no second UTF-8 check, integers read without strtoll.
 * Floats are printed as the shortest text that reads back as the same
 * Float, in Float#to_s's form (as CRuby's JSON); format_float() says how
 * that works with Debian's mruby, which keeps 2 bits fewer than a double. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/error.h>
#include <mruby/hash.h>
#include <mruby/proc.h>
#include <mruby/string.h>
#include <mruby/variable.h>
#include <yajl/yajl_parse.h>

#include "gw_json.h"

static struct RClass *json_error(mrb_state *mrb, const char *name)
{
  return mrb_class_get_under(mrb, mrb_module_get(mrb, "JSON"), name);
}

/* -- UTF-8 ----------------------------------------------------------------- */

/* Index of the first byte of s[0, n) that does not start a well-formed UTF-8
 * sequence (RFC 3629 table 3-7), or n when all of it is well formed. */
static size_t utf8_invalid_at(const unsigned char *s, size_t n)
{
  size_t i = 0;
  while (i < n) {
    if (n - i >= 8) {
      uint64_t w;
      memcpy(&w, s + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    unsigned c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) need = 2, lo = 0xA0;
    else if (c == 0xED) need = 2, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) need = 2;
    else if (c == 0xF0) need = 3, lo = 0x90;
    else if (c == 0xF4) need = 3, hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else return i;
    if (n - i <= need) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k <= need; k++)
      if ((s[i + k] & 0xC0) != 0x80) return i;
    i += need + 1;
  }
  return n;
}

static size_t utf8_put(char *out, uint32_t cp)
{
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static uint32_t hex4(const unsigned char *p)
{
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned c = p[i];
    v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return v;
}

/* -- parse ----------------------------------------------------------------- */

#define KEY_CACHE_SLOTS 64
#define KEY_CACHE_MAX_LEN 32

typedef struct {
  mrb_value container; /* Array or Hash being filled */
  mrb_value key;       /* Hash: the key of the value to come */
} frame_t;

typedef struct {
  mrb_state *mrb;
  yajl_handle yh;
  const unsigned char *in; /* the whole input (one yajl_parse call) */
  size_t len;
  frame_t *stack; /* malloc'd; freed by gw_json_parse on every path */
  int depth, cap;
  int max_nesting; /* 0: none */
  int symbolize;
  int too_deep;    /* a callback stopped YAJL: nesting beyond max_nesting */
  size_t deep_at;  /* byte offset of that bracket */
  mrb_value root;
  int have_root;
  int ai; /* arena index right after the root was created */
  /* Object keys seen in this document, as frozen Strings shared by every
   * object that repeats them (an array of records repeats its keys). keep
   * holds them for the parse: a key's object may be dropped (a duplicate
   * key replaced it) while the cache still points at the key. */
  mrb_value keep;
  mrb_value key_cache[KEY_CACHE_SLOTS];
} parser_t;

/* Attaches v to the open container (or makes it the root). Everything built
 * so far hangs off the root, which the arena holds: the arena goes back to
 * just after the root once v is attached. */
static void attach(parser_t *p, mrb_value v)
{
  mrb_state *mrb = p->mrb;
  if (p->depth == 0) {
    p->root = v;
    p->have_root = 1;
    p->ai = mrb_gc_arena_save(mrb);
    return;
  }
  frame_t *f = &p->stack[p->depth - 1];
  if (mrb_array_p(f->container)) mrb_ary_push(mrb, f->container, v);
  else mrb_hash_set(mrb, f->container, f->key, v);
  mrb_gc_arena_restore(mrb, p->ai);
}

static int on_null(void *ctx)
{
  attach(ctx, mrb_nil_value());
  return 1;
}

static int on_boolean(void *ctx, int b)
{
  attach(ctx, mrb_bool_value(b));
  return 1;
}

static int on_number(void *ctx, const char *s, size_t n)
{
  parser_t *p = ctx;
  mrb_state *mrb = p->mrb;
  /* YAJL's lexer has checked the syntax: -?digits(.digits)?([eE][+-]?digits)? */
  size_t i = (n > 0 && s[0] == '-');
  int is_int = n - i <= 18; /* 18 digits always fit in 63 bits */
  for (size_t k = i; is_int && k < n; k++)
    if (s[k] < '0' || s[k] > '9') is_int = 0;
  if (is_int) {
    mrb_int v = 0;
    for (size_t k = i; k < n; k++) v = v * 10 + (s[k] - '0');
    attach(p, mrb_int_value(mrb, i ? -v : v));
    return 1;
  }
  char buf[128];
  const char *text = buf;
  mrb_value big = mrb_nil_value();
  if (n < sizeof(buf)) {
    memcpy(buf, s, n);
    buf[n] = '\0';
  } else {
    big = mrb_str_new(mrb, s, n); /* NUL-terminated, held by the arena */
    text = RSTRING_PTR(big);
  }
  int integral = 1;
  for (size_t k = i; k < n; k++)
    if (s[k] < '0' || s[k] > '9') integral = 0;
  if (integral) {
    errno = 0;
    long long v = strtoll(text, NULL, 10);
    if (errno == 0 && v >= MRB_INT_MIN && v <= MRB_INT_MAX) {
      attach(p, mrb_int_value(mrb, (mrb_int)v));
      return 1;
    }
  }
  attach(p, mrb_float_value(mrb, strtod(text, NULL)));
  return 1;
}

/* The raw text of the string token that ends just before byte `end` of the
 * input (the closing quote is in[end - 1]): back to the first quote not
 * escaped by an odd run of backslashes. */
static const unsigned char *raw_string_start(parser_t *p, size_t end)
{
  size_t i = end - 1;
  while (i-- > 0) {
    if (p->in[i] != '"') continue;
    size_t bs = 0;
    while (i - bs > 0 && p->in[i - bs - 1] == '\\') bs++;
    if (bs % 2 == 0) return p->in + i + 1;
  }
  return p->in;
}

/* The string YAJL reported: as is when it had no escape (YAJL then points
 * into the input, already checked), else decoded again from its raw text. */
static mrb_value string_value(parser_t *p, const unsigned char *s, size_t n, int as_key)
{
  mrb_state *mrb = p->mrb;
  if (!(s >= p->in && s < p->in + p->len)) {
    size_t end = yajl_get_bytes_consumed(p->yh); /* just past the closing quote */
    const unsigned char *raw = raw_string_start(p, end);
    const unsigned char *stop = p->in + end - 1;
    /* Decoded UTF-8 is never longer than its escaped form. */
    mrb_value str = mrb_str_new(mrb, NULL, (mrb_int)(stop - raw));
    char *out = RSTRING_PTR(str), *o = out;
    for (const unsigned char *r = raw; r < stop;) {
      if (*r != '\\') {
        *o++ = (char)*r++;
        continue;
      }
      unsigned c = r[1];
      r += 2;
      switch (c) {
      case 'b': *o++ = '\b'; break;
      case 'f': *o++ = '\f'; break;
      case 'n': *o++ = '\n'; break;
      case 'r': *o++ = '\r'; break;
      case 't': *o++ = '\t'; break;
      case 'u': {
        uint32_t cp = hex4(r);
        r += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && stop - r >= 6 && r[0] == '\\' && r[1] == 'u') {
          uint32_t lo = hex4(r + 2);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            r += 6;
          }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD; /* lone surrogate */
        o += utf8_put(o, cp);
        break;
      }
      default: *o++ = (char)c; break; /* " \ / */
      }
    }
    mrb_str_resize(mrb, str, (mrb_int)(o - out));
    if (as_key && p->symbolize) return mrb_symbol_value(mrb_intern_str(mrb, str));
    return str;
  }
  if (as_key && p->symbolize) return mrb_symbol_value(mrb_intern(mrb, (const char *)s, n));
  return mrb_str_new(mrb, (const char *)s, n);
}

static int on_string(void *ctx, const unsigned char *s, size_t n)
{
  attach(ctx, string_value(ctx, s, n, 0));
  return 1;
}

/* The shared frozen String for key s[0, n), made on first sight; nil for a
 * key that is not cached (long, or a symbolized parse). */
static mrb_value cached_key(parser_t *p, const unsigned char *s, size_t n)
{
  if (p->symbolize || n > KEY_CACHE_MAX_LEN || !(s >= p->in && s < p->in + p->len)) return mrb_nil_value();
  uint32_t h = 2166136261u ^ (uint32_t)n;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
  mrb_value *slot = &p->key_cache[h % KEY_CACHE_SLOTS];
  if (mrb_string_p(*slot) && (size_t)RSTRING_LEN(*slot) == n && memcmp(RSTRING_PTR(*slot), s, n) == 0) return *slot;
  mrb_state *mrb = p->mrb;
  mrb_value k = mrb_str_new(mrb, (const char *)s, n);
  MRB_SET_FROZEN_FLAG(mrb_str_ptr(k));
  mrb_ary_push(mrb, p->keep, k);
  *slot = k;
  return k;
}

static int on_map_key(void *ctx, const unsigned char *s, size_t n)
{
  parser_t *p = ctx;
  mrb_value k = cached_key(p, s, n);
  if (!mrb_nil_p(k)) {
    p->stack[p->depth - 1].key = k;
    return 1;
  }
  k = string_value(p, s, n, 1);
  /* A frozen String key is stored as is (an unfrozen one is copied). */
  if (mrb_string_p(k)) MRB_SET_FROZEN_FLAG(mrb_str_ptr(k));
  p->stack[p->depth - 1].key = k;
  return 1;
}

static int open_container(parser_t *p, mrb_value c)
{
  if (p->max_nesting > 0 && p->depth >= p->max_nesting) {
    p->too_deep = 1;
    p->deep_at = yajl_get_bytes_consumed(p->yh);
    return 0;
  }
  attach(p, c);
  if (p->depth == p->cap) {
    int cap = p->cap ? p->cap * 2 : 32;
    frame_t *s = realloc(p->stack, sizeof(*s) * (size_t)cap);
    if (s == NULL) {
      mrb_state *mrb = p->mrb;
      mrb_raise(mrb, E_RUNTIME_ERROR, "JSON.parse: out of memory");
    }
    p->stack = s;
    p->cap = cap;
  }
  p->stack[p->depth].container = c;
  p->stack[p->depth].key = mrb_nil_value();
  p->depth++;
  return 1;
}

static int on_start_map(void *ctx)
{
  parser_t *p = ctx;
  return open_container(p, mrb_hash_new(p->mrb));
}

static int on_start_array(void *ctx)
{
  parser_t *p = ctx;
  return open_container(p, mrb_ary_new(p->mrb));
}

static int on_end(void *ctx)
{
  ((parser_t *)ctx)->depth--;
  return 1;
}

static const yajl_callbacks callbacks = {
  on_null, on_boolean, NULL, NULL, on_number, on_string,
  on_start_map, on_map_key, on_end, on_start_array, on_end,
};

/* Raises ParserError: YAJL's message (first line, no trailing period), the
 * byte offset and up to 16 bytes from there. */
static void raise_parse_error(mrb_state *mrb, parser_t *p, const char *what, size_t at)
{
  char near[80];
  size_t o = 0;
  for (size_t i = at; i < p->len && i < at + 16 && o + 5 < sizeof(near); i++) {
    unsigned c = p->in[i];
    if (c >= 0x20 && c < 0x7F && c != '\\' && c != '\'') near[o++] = (char)c;
    else o += (size_t)snprintf(near + o, sizeof(near) - o, "\\x%02X", c);
  }
  near[o] = '\0';
  int wl = (int)strcspn(what, "\n");
  while (wl > 0 && (what[wl - 1] == '.' || what[wl - 1] == ' ')) wl--;
  char msg[256];
  snprintf(msg, sizeof(msg), "%.*s at byte %zu%s%s%s", wl, what, at, o ? " near '" : "", near, o ? "'" : "");
  mrb_raise(mrb, json_error(mrb, "ParserError"), msg);
}

static mrb_value parse_body(mrb_state *mrb, void *ud)
{
  parser_t *p = ud;
  size_t bad = utf8_invalid_at(p->in, p->len);
  if (bad < p->len) raise_parse_error(mrb, p, "invalid UTF-8", bad);
  p->yh = yajl_alloc(&callbacks, NULL, p);
  if (p->yh == NULL) mrb_raise(mrb, E_RUNTIME_ERROR, "JSON.parse: out of memory");
  yajl_config(p->yh, yajl_dont_validate_strings, 1);
  int in_finish = 0;
  yajl_status st = yajl_parse(p->yh, p->in, p->len);
  if (st == yajl_status_ok) {
    in_finish = 1;
    st = yajl_complete_parse(p->yh);
  }
  if (p->too_deep) {
    char msg[96];
    snprintf(msg, sizeof(msg), "nesting of %d is too deep at byte %zu", p->max_nesting + 1,
             p->deep_at ? p->deep_at - 1 : 0);
    mrb_raise(mrb, json_error(mrb, "NestingError"), msg);
  }
  if (st != yajl_status_ok) {
    unsigned char *msg = yajl_get_error(p->yh, 0, p->in, p->len);
    /* After the input (premature end, a number cut off): the error is at its end. */
    size_t at = in_finish ? p->len : yajl_get_bytes_consumed(p->yh);
    mrb_value m = mrb_str_new_cstr(mrb, msg ? (const char *)msg : "parse error");
    if (msg) yajl_free_error(p->yh, msg);
    raise_parse_error(mrb, p, RSTRING_PTR(m), at);
  }
  return p->root;
}

mrb_value gw_json_parse(mrb_state *mrb, const char *s, size_t len, int symbolize_names, int max_nesting)
{
  parser_t p;
  memset(&p, 0, sizeof(p));
  p.mrb = mrb;
  p.in = (const unsigned char *)s;
  p.len = len;
  p.symbolize = symbolize_names;
  p.max_nesting = max_nesting;
  p.root = mrb_nil_value();
  int ai = mrb_gc_arena_save(mrb);
  p.keep = mrb_ary_new(mrb); /* in the arena, under the root */
  /* Callbacks allocate (and may raise NoMemoryError): free YAJL's handle
   * and the stack whatever happens, then pass the exception on. */
  mrb_bool failed = FALSE;
  mrb_value v = mrb_protect_error(mrb, parse_body, &p, &failed);
  if (p.yh) yajl_free(p.yh);
  free(p.stack);
  mrb_gc_arena_restore(mrb, ai);
  if (failed) mrb_exc_raise(mrb, v);
  mrb_gc_protect(mrb, v);
  return v;
}

/* -- generate -------------------------------------------------------------- */

typedef struct {
  mrb_state *mrb;
  mrb_value str; /* the output, held by the arena; len bytes used of capa */
  char *ptr;
  mrb_int len, capa;
  int pretty;
  int max_depth;
} writer_t;

static void reserve(writer_t *w, mrb_int more)
{
  if (w->len + more <= w->capa) return;
  mrb_int capa = w->capa * 2;
  if (capa < w->len + more) capa = w->len + more + 64;
  mrb_str_resize(w->mrb, w->str, capa);
  w->ptr = RSTRING_PTR(w->str);
  w->capa = capa;
}

static void put(writer_t *w, const char *s, mrb_int n)
{
  reserve(w, n);
  memcpy(w->ptr + w->len, s, (size_t)n);
  w->len += n;
}

static void put_c(writer_t *w, char c)
{
  reserve(w, 1);
  w->ptr[w->len++] = c;
}

static void newline(writer_t *w, int depth)
{
  reserve(w, 1 + 2 * (mrb_int)depth);
  w->ptr[w->len++] = '\n';
  memset(w->ptr + w->len, ' ', 2 * (size_t)depth);
  w->len += 2 * depth;
}

/* Bytes that need an escape: control characters, '"' and '\'. */
static const char escape_of[256] = {
  ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't', ['"'] = '"', ['\\'] = '\\',
  [0x00] = 'u', [0x01] = 'u', [0x02] = 'u', [0x03] = 'u', [0x04] = 'u', [0x05] = 'u', [0x06] = 'u',
  [0x07] = 'u', [0x0B] = 'u', [0x0E] = 'u', [0x0F] = 'u', [0x10] = 'u', [0x11] = 'u', [0x12] = 'u',
  [0x13] = 'u', [0x14] = 'u', [0x15] = 'u', [0x16] = 'u', [0x17] = 'u', [0x18] = 'u', [0x19] = 'u',
  [0x1A] = 'u', [0x1B] = 'u', [0x1C] = 'u', [0x1D] = 'u', [0x1E] = 'u', [0x1F] = 'u',
};

static void put_string(writer_t *w, const char *s, mrb_int n)
{
  size_t bad = utf8_invalid_at((const unsigned char *)s, (size_t)n);
  if (bad < (size_t)n) {
    char msg[96];
    snprintf(msg, sizeof(msg), "source sequence is illegal/malformed utf-8 (byte %zu of a string)", bad);
    mrb_raise(w->mrb, json_error(w->mrb, "GeneratorError"), msg);
  }
  reserve(w, n + 2);
  w->ptr[w->len++] = '"';
  mrb_int run = 0; /* bytes copied as they are, pending */
  for (mrb_int i = 0; i < n; i++) {
    char e = escape_of[(unsigned char)s[i]];
    if (!e) {
      run++;
      continue;
    }
    put(w, s + i - run, run);
    run = 0;
    if (e == 'u') {
      char u[7];
      snprintf(u, sizeof(u), "\\u%04x", (unsigned char)s[i]);
      put(w, u, 6);
    } else {
      char two[2] = { '\\', e };
      put(w, two, 2);
    }
  }
  put(w, s + n - run, run);
  put_c(w, '"');
}

/* The double mruby keeps for d. Debian's mruby boxes a Float inline in a
 * word and drops the 2 lowest bits of its significand (0.1 is kept as
 * 0.09999999999999998); other builds keep d whole. */
static double kept(mrb_state *mrb, double d)
{
  int ai = mrb_gc_arena_save(mrb);
  double k = mrb_float(mrb_float_value(mrb, d));
  mrb_gc_arena_restore(mrb, ai);
  return k;
}

/* d rounded to prec significant digits: its digits without trailing zeros
 * (returns how many) and its decimal exponent. */
static int round_digits(double x, int prec, char digits[20], int *exp10)
{
  char e[40];
  snprintf(e, sizeof(e), "%.*e", prec - 1, x); /* [-]D.DDDDe[+-]XX */
  int nd = 0;
  const char *q = e + (e[0] == '-');
  for (; *q != 'e'; q++)
    if (*q != '.') digits[nd++] = *q;
  *exp10 = atoi(q + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  return nd;
}

static int reads_back(mrb_state *mrb, double d, const char *digits, int nd, int exp10)
{
  char t[40];
  snprintf(t, sizeof(t), "%s0.%.*se%d", d < 0 ? "-" : "", nd, digits, exp10 + 1);
  return kept(mrb, strtod(t, NULL)) == d;
}

/* Float#to_s's form ("0.1", "100.0", "1.0e+16", "1.5e-05") with the fewest
 * significant digits that read back (strtod, then as mruby keeps it) as d.
 * When mruby drops low bits, every double that it keeps as d is a
 * candidate: 0.1 is written "0.1", not "0.09999999999999998". */
static int format_float(mrb_state *mrb, char *out, size_t size, double d)
{
  /* Fast path for 1e-4 <= |d| < 1e15 (Float#to_s's fixed notation): the
   * fewest decimals k with an integer m such that m / 10^k reads back as d.
   * m < 2^53 and 10^k <= 10^17 are exact doubles, so that division is
   * rounded as strtod would round the text. */
  double a = fabs(d);
  if (a >= 1e-4 && a < 1e15) {
    double p10 = 1;
    for (int k = 0; k <= 17; k++, p10 *= 10) {
      double m = nearbyint(a * p10);
      if (m >= 9007199254740992.0) break;
      if (kept(mrb, d < 0 ? -(m / p10) : m / p10) != d) continue;
      char ds[24];
      int nd = 0, o = 0;
      for (uint64_t u = (uint64_t)m; nd == 0 || u; u /= 10) ds[nd++] = (char)('0' + u % 10);
      for (int l = 0, r = nd - 1; l < r; l++, r--) {
        char t = ds[l];
        ds[l] = ds[r];
        ds[r] = t;
      }
      if (d < 0) out[o++] = '-';
      if (nd <= k) { /* 0.00ddd */
        out[o++] = '0';
        out[o++] = '.';
        for (int z = nd; z < k; z++) out[o++] = '0';
        memcpy(out + o, ds, (size_t)nd);
        o += nd;
      } else {
        memcpy(out + o, ds, (size_t)(nd - k));
        o += nd - k;
        out[o++] = '.';
        if (k == 0) out[o++] = '0';
        memcpy(out + o, ds + nd - k, (size_t)k);
        o += k;
      }
      out[o] = '\0';
      return o;
    }
  }
  char digits[20], best[20];
  int nd = 0, exp10 = 0, best_nd = 0, best_exp = 0;
  uint64_t bits;
  memcpy(&bits, &d, sizeof(bits));
  for (int prec = 15; prec <= 17 && !best_nd; prec++) {
    for (uint64_t k = 0; k < 4; k++) {
      uint64_t b = bits | k;
      double x;
      memcpy(&x, &b, sizeof(x));
      if (k > 0 && kept(mrb, x) != d) break; /* this build keeps every bit */
      nd = round_digits(x, prec, digits, &exp10);
      if ((best_nd && nd >= best_nd) || !reads_back(mrb, d, digits, nd, exp10)) continue;
      memcpy(best, digits, (size_t)nd);
      best_nd = nd;
      best_exp = exp10;
      if (nd < prec) break; /* trailing zeros: short already */
    }
  }
  if (!best_nd) best_nd = round_digits(d, 17, best, &best_exp);
  char *o = out;
  size_t left = size;
#define EMIT(...) do { int k_ = snprintf(o, left, __VA_ARGS__); o += k_; left -= (size_t)k_; } while (0)
  if (signbit(d)) EMIT("-");
  if (best_exp < -4 || best_exp >= 16) {
    EMIT("%c.", best[0]);
    if (best_nd > 1) EMIT("%.*s", best_nd - 1, best + 1);
    else EMIT("0");
    EMIT("e%c%02d", best_exp < 0 ? '-' : '+', best_exp < 0 ? -best_exp : best_exp);
  } else if (best_exp < 0) {
    EMIT("0.");
    for (int z = -1; z > best_exp; z--) EMIT("0");
    EMIT("%.*s", best_nd, best);
  } else if (best_nd <= best_exp + 1) {
    EMIT("%.*s", best_nd, best);
    for (int z = best_nd; z <= best_exp; z++) EMIT("0");
    EMIT(".0");
  } else {
    EMIT("%.*s.%.*s", best_exp + 1, best, best_nd - best_exp - 1, best + best_exp + 1);
  }
#undef EMIT
  return (int)(o - out);
}

static mrb_value obj_to_json(mrb_state *mrb, mrb_value self);

/* 1 if v's class has a to_json other than the one this gem gives Object. */
static int has_own_to_json(mrb_state *mrb, mrb_value v)
{
  struct RClass *c = mrb_class(mrb, v);
  mrb_method_t m = mrb_method_search_vm(mrb, &c, mrb_intern_lit(mrb, "to_json"));
  if (MRB_METHOD_UNDEF_P(m)) return 0;
  return !(MRB_METHOD_FUNC_P(m) && MRB_METHOD_FUNC(m) == obj_to_json);
}

static void gen(writer_t *w, mrb_value v, int depth);

static void gen_key(writer_t *w, mrb_value k)
{
  mrb_state *mrb = w->mrb;
  if (mrb_symbol_p(k)) {
    mrb_int n;
    const char *s = mrb_sym_name_len(mrb, mrb_symbol(k), &n);
    put_string(w, s, n);
    return;
  }
  if (!mrb_string_p(k)) k = mrb_obj_as_string(mrb, k);
  put_string(w, RSTRING_PTR(k), RSTRING_LEN(k));
}

static void check_depth(writer_t *w, int depth)
{
  if (depth > w->max_depth) {
    char msg[64];
    snprintf(msg, sizeof(msg), "nesting of %d is too deep", depth);
    mrb_raise(w->mrb, json_error(w->mrb, "NestingError"), msg);
  }
}

static void gen(writer_t *w, mrb_value v, int depth)
{
  mrb_state *mrb = w->mrb;
  char num[40];
  switch (mrb_type(v)) {
  case MRB_TT_FALSE:
    if (mrb_nil_p(v)) put(w, "null", 4);
    else put(w, "false", 5);
    return;
  case MRB_TT_TRUE:
    put(w, "true", 4);
    return;
  case MRB_TT_INTEGER: {
    mrb_int i = mrb_integer(v);
    uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
    char *e = num + sizeof(num), *b = e;
    do *--b = (char)('0' + u % 10); while ((u /= 10) != 0);
    if (i < 0) *--b = '-';
    put(w, b, e - b);
    return;
  }
  case MRB_TT_FLOAT: {
    double d = mrb_float(v);
    if (isnan(d)) mrb_raise(mrb, json_error(mrb, "GeneratorError"), "NaN not allowed in JSON");
    if (isinf(d))
      mrb_raise(mrb, json_error(mrb, "GeneratorError"),
                d < 0 ? "-Infinity not allowed in JSON" : "Infinity not allowed in JSON");
    put(w, num, format_float(mrb, num, sizeof(num), d));
    return;
  }
  case MRB_TT_STRING:
    put_string(w, RSTRING_PTR(v), RSTRING_LEN(v));
    return;
  case MRB_TT_SYMBOL:
    gen_key(w, v);
    return;
  case MRB_TT_ARRAY: {
    check_depth(w, depth + 1);
    put_c(w, '[');
    int ai = mrb_gc_arena_save(mrb);
    for (mrb_int i = 0; i < RARRAY_LEN(v); i++) { /* re-read: a to_s may change v */
      if (i) put_c(w, ',');
      if (w->pretty) newline(w, depth + 1);
      gen(w, RARRAY_PTR(v)[i], depth + 1);
      mrb_gc_arena_restore(mrb, ai);
    }
    if (w->pretty && RARRAY_LEN(v) > 0) newline(w, depth);
    put_c(w, ']');
    return;
  }
  case MRB_TT_HASH: {
    check_depth(w, depth + 1);
    put_c(w, '{');
    int ai = mrb_gc_arena_save(mrb);
    /* Snapshots: a to_s or to_json called below may change the Hash. */
    mrb_value keys = mrb_hash_keys(mrb, v), vals = mrb_hash_values(mrb, v);
    int ai2 = mrb_gc_arena_save(mrb);
    mrb_int n = RARRAY_LEN(keys);
    for (mrb_int i = 0; i < n; i++) {
      if (i) put_c(w, ',');
      if (w->pretty) newline(w, depth + 1);
      gen_key(w, RARRAY_PTR(keys)[i]);
      if (w->pretty) put(w, ": ", 2);
      else put_c(w, ':');
      gen(w, RARRAY_PTR(vals)[i], depth + 1);
      mrb_gc_arena_restore(mrb, ai2);
    }
    mrb_gc_arena_restore(mrb, ai);
    if (w->pretty && n > 0) newline(w, depth);
    put_c(w, '}');
    return;
  }
  default:
    break;
  }
  /* Anything else: its own to_json if it has one (inserted as it returns
   * it), else its to_s as a JSON string (as CRuby's JSON). */
  if (has_own_to_json(mrb, v)) {
    mrb_value s = mrb_funcall(mrb, v, "to_json", 0);
    if (!mrb_string_p(s)) {
      char msg[256];
      snprintf(msg, sizeof(msg), "%s#to_json returned a %s, not a String", mrb_obj_classname(mrb, v),
               mrb_obj_classname(mrb, s));
      mrb_raise(mrb, E_TYPE_ERROR, msg);
    }
    put(w, RSTRING_PTR(s), RSTRING_LEN(s));
    return;
  }
  mrb_value s = mrb_obj_as_string(mrb, v);
  put_string(w, RSTRING_PTR(s), RSTRING_LEN(s));
}

mrb_value gw_json_generate(mrb_state *mrb, mrb_value v, int pretty, int max_nesting)
{
  writer_t w;
  w.mrb = mrb;
  w.capa = 256;
  w.str = mrb_str_new_capa(mrb, w.capa);
  mrb_str_resize(mrb, w.str, w.capa);
  w.ptr = RSTRING_PTR(w.str);
  w.len = 0;
  w.pretty = pretty;
  w.max_depth = max_nesting > 0 && max_nesting < GW_JSON_GENERATE_MAX_DEPTH ? max_nesting : GW_JSON_GENERATE_MAX_DEPTH;
  int ai = mrb_gc_arena_save(mrb);
  gen(&w, v, 0);
  mrb_gc_arena_restore(mrb, ai);
  mrb_str_resize(mrb, w.str, w.len);
  return w.str;
}

/* -- natives --------------------------------------------------------------- */

/* JSON._parse(str, symbolize_names, max_nesting) */
static mrb_value json_parse_m(mrb_state *mrb, mrb_value self)
{
  mrb_value str;
  mrb_bool sym;
  mrb_int max;
  (void)self;
  mrb_get_args(mrb, "Sbi", &str, &sym, &max);
  if (max < 0 || max > INT32_MAX) max = 0;
  /* No Ruby runs while YAJL reads str: its bytes cannot move meanwhile. */
  return gw_json_parse(mrb, RSTRING_PTR(str), (size_t)RSTRING_LEN(str), sym, (int)max);
}

/* JSON._generate(obj, pretty, max_nesting) */
static mrb_value json_generate_m(mrb_state *mrb, mrb_value self)
{
  mrb_value obj;
  mrb_bool pretty;
  mrb_int max;
  (void)self;
  mrb_get_args(mrb, "obi", &obj, &pretty, &max);
  if (max < 0 || max > INT32_MAX) max = 0;
  return gw_json_generate(mrb, obj, pretty, (int)max);
}

/* Object#to_json (and Hash's, Array's, String's, ...): JSON.generate(self). */
static mrb_value obj_to_json(mrb_state *mrb, mrb_value self)
{
  mrb_value *argv;
  mrb_int argc;
  mrb_get_args(mrb, "*", &argv, &argc); /* CRuby passes a state object: ignored */
  return gw_json_generate(mrb, self, 0, 100);
}

void mrb_mruby_gateway_json_gem_init(mrb_state *mrb)
{
  struct RClass *json = mrb_define_module(mrb, "JSON");
  struct RClass *base = mrb_define_class_under(mrb, json, "JSONError", mrb->eStandardError_class);
  struct RClass *perr = mrb_define_class_under(mrb, json, "ParserError", base);
  mrb_define_class_under(mrb, json, "NestingError", perr);
  mrb_define_class_under(mrb, json, "GeneratorError", base);
  mrb_define_module_function(mrb, json, "_parse", json_parse_m, MRB_ARGS_REQ(3));
  mrb_define_module_function(mrb, json, "_generate", json_generate_m, MRB_ARGS_REQ(3));
  mrb_define_method(mrb, mrb->object_class, "to_json", obj_to_json, MRB_ARGS_ANY());
}

void mrb_mruby_gateway_json_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
