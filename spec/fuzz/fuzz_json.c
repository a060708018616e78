/* fuzz_json.c - libFuzzer target for JSON.parse (mrbgems/mruby-gateway-json:
 * YAJL's parser, our UTF-8 check and \u decoding) and JSON.generate, in one
 * mruby VM (Debian's libmruby, not instrumented; the gem's json.c is).
 *
 * Input: 1 control byte, then the JSON text.
 *   bit 0  symbolize_names
 *   bits 1-2  max_nesting: 100, 3, 0 (none), 1000
 * Checked, for every input:
 *   - parsing either returns a value or raises JSON::ParserError (or its
 *     NestingError); nothing else, no crash, no leak (LSan);
 *   - a value generates (or raises GeneratorError: Infinity from 1e400),
 *     the text parses again, and generating that gives the same text
 *     (a fixpoint: strings, numbers and structure survive a round trip);
 *   - pretty_generate's text parses to a value that generates the same;
 *   - nothing parses that is not well-formed UTF-8. */
#define FUZZ_NAME "fuzz_json"
#include <stdint.h>
#include <string.h>

#include <mruby.h>
#include <mruby/error.h>
#include <mruby/string.h>

#include "fuzz_common.h"
#include "../../mrbgems/mruby-gateway-json/src/gw_json.h"

void mrb_mruby_gateway_json_gem_init(mrb_state *mrb);

static mrb_state *mrb;
static struct RClass *parser_error, *generator_error;

typedef struct {
  const char *s;
  size_t n;
  int sym, max;
  mrb_value v;
  int pretty;
} job_t;

static mrb_value do_parse(mrb_state *m, void *ud)
{
  job_t *j = ud;
  return gw_json_parse(m, j->s, j->n, j->sym, j->max);
}

static mrb_value do_generate(mrb_state *m, void *ud)
{
  job_t *j = ud;
  return gw_json_generate(m, j->v, j->pretty, 0);
}

static int is_a(mrb_value exc, struct RClass *c)
{
  return mrb_obj_is_kind_of(mrb, exc, c);
}

static int valid_utf8(const unsigned char *s, size_t n)
{
  /* Independent of json.c's check: decode, reject overlong, surrogates, > U+10FFFF. */
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    if (c < 0x80) { i++; continue; }
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || c > 0xF4 || i + (size_t)len > n) return 0;
    uint32_t cp = c & (0x7F >> len);
    for (int k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return 0;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += (size_t)len;
  }
  return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  mrb = mrb_open();
  if (mrb == NULL) abort();
  mrb_mruby_gateway_json_gem_init(mrb);
  struct RClass *json = mrb_module_get(mrb, "JSON");
  parser_error = mrb_class_get_under(mrb, json, "ParserError");
  generator_error = mrb_class_get_under(mrb, json, "GeneratorError");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static unsigned long runs;
  if (size < 1) return 0;
  static const int maxes[] = { 100, 3, 0, 1000 };
  job_t j = { (const char *)data + 1, size - 1, data[0] & 1, maxes[(data[0] >> 1) & 3], mrb_nil_value(), 0 };
  int ai = mrb_gc_arena_save(mrb);
  mrb_bool err = FALSE;
  mrb_value v = mrb_protect_error(mrb, do_parse, &j, &err);
  if (err) {
    if (!is_a(v, parser_error)) FAIL("parse raised %s", mrb_obj_classname(mrb, v));
  } else {
    if (!valid_utf8((const unsigned char *)j.s, j.n)) FAIL("invalid UTF-8 parsed");
    j.v = v;
    mrb_value t1 = mrb_protect_error(mrb, do_generate, &j, &err);
    if (err) {
      if (!is_a(t1, generator_error)) FAIL("generate raised %s", mrb_obj_classname(mrb, t1));
    } else {
      job_t r = { RSTRING_PTR(t1), (size_t)RSTRING_LEN(t1), j.sym, 0, mrb_nil_value(), 0 };
      mrb_value v2 = mrb_protect_error(mrb, do_parse, &r, &err);
      if (err) FAIL("generated text does not parse: %.200s", RSTRING_PTR(t1));
      r.v = v2;
      mrb_value t2 = mrb_protect_error(mrb, do_generate, &r, &err);
      if (err || RSTRING_LEN(t2) != RSTRING_LEN(t1) || memcmp(RSTRING_PTR(t1), RSTRING_PTR(t2), (size_t)RSTRING_LEN(t1)))
        FAIL("generate(parse(generate(x))) differs: %.200s", RSTRING_PTR(t1));
      j.pretty = 1;
      mrb_value p = mrb_protect_error(mrb, do_generate, &j, &err);
      if (err) FAIL("pretty_generate raised where generate did not");
      job_t q = { RSTRING_PTR(p), (size_t)RSTRING_LEN(p), j.sym, 0, mrb_nil_value(), 0 };
      mrb_value v3 = mrb_protect_error(mrb, do_parse, &q, &err);
      if (err) FAIL("pretty text does not parse: %.200s", RSTRING_PTR(p));
      q.v = v3;
      mrb_value t3 = mrb_protect_error(mrb, do_generate, &q, &err);
      if (err || RSTRING_LEN(t3) != RSTRING_LEN(t1) || memcmp(RSTRING_PTR(t1), RSTRING_PTR(t3), (size_t)RSTRING_LEN(t1)))
        FAIL("pretty_generate does not read back as generate: %.200s", RSTRING_PTR(p));
    }
  }
  mrb->exc = NULL;
  mrb_gc_arena_restore(mrb, ai);
  if (++runs % 256 == 0) mrb_full_gc(mrb);
  return 0;
}
