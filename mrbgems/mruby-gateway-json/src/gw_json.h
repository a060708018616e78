/* gw_json.h - the JSON gem's two entry points in C, for its natives and for
 * spec/fuzz/fuzz_json.c. Both raise (JSON::ParserError, JSON::NestingError,
 * JSON::GeneratorError, or whatever a to_s/to_json they call raises). */
#ifndef GW_JSON_H
#define GW_JSON_H

#include <stddef.h>

#include <mruby.h>

/* The value of the JSON text s[0, len) (RFC 8259: any value at the top,
 * strict UTF-8, no comments, nothing after it but whitespace). Object keys
 * become frozen Strings, or Symbols with symbolize_names; max_nesting 0: no
 * depth limit. */
mrb_value gw_json_parse(mrb_state *mrb, const char *s, size_t len, int symbolize_names, int max_nesting);

/* v as JSON text, compact or in CRuby's pretty_generate layout (2 spaces).
 * max_nesting 0: GW_JSON_GENERATE_MAX_DEPTH, the generator recursing in C. */
#define GW_JSON_GENERATE_MAX_DEPTH 1000
mrb_value gw_json_generate(mrb_state *mrb, mrb_value v, int pretty, int max_nesting);

#endif
