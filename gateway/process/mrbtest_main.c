/* mrbtest_main.c - runs the gems' mruby-level tests (the .rb files under each gem's test/) in a
 * VM with every gem loaded, with mruby's assert style:
 *   assert('what it does') { assert_equal 1, x }
 * Prints "N passed, N failed" and exits non-zero on any failure. */
#include <stdio.h>
#include <stdlib.h>

#include <mruby.h>
#include <mruby/compile.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "gw_mruby.h"

static const char assert_lib[] =
  "$gw_passed = 0; $gw_failed = 0; $gw_file = ''\n"
  "class GwAssertionFailed < Exception; end\n"
  "def assert(name)\n"
  "  yield\n"
  "  $gw_passed += 1\n"
  "rescue Exception => e\n"
  "  $gw_failed += 1\n"
  "  puts \"FAIL #{$gw_file}: #{name}\\n    #{e.class}: #{e.message}\"\n"
  "  bt = e.backtrace\n"
  "  puts \"    #{bt[0, 3].join(\"\\n    \")}\" if bt && e.class != GwAssertionFailed\n"
  "end\n"
  "def assert_true(v, msg = nil) raise GwAssertionFailed, (msg || \"expected true, got #{v.inspect}\") unless v == true; end\n"
  "def assert_false(v, msg = nil) raise GwAssertionFailed, (msg || \"expected false, got #{v.inspect}\") unless v == false; end\n"
  "def assert_nil(v, msg = nil) raise GwAssertionFailed, (msg || \"expected nil, got #{v.inspect}\") unless v.nil?; end\n"
  "def assert_equal(a, b, msg = nil) raise GwAssertionFailed, (msg || \"expected #{a.inspect}, got #{b.inspect}\") unless a == b; end\n"
  "def assert_not_equal(a, b, msg = nil) raise GwAssertionFailed, (msg || \"expected something else than #{a.inspect}\") if a == b; end\n"
  "def assert_kind_of(c, v, msg = nil) raise GwAssertionFailed, (msg || \"expected a #{c}, got #{v.inspect}\") unless v.kind_of?(c); end\n"
  "def assert_include(c, v, msg = nil) raise GwAssertionFailed, (msg || \"expected #{c.inspect} to include #{v.inspect}\") unless c.include?(v); end\n"
  "def assert_raise(*classes)\n"
  "  begin\n"
  "    yield\n"
  "  rescue Exception => e\n"
  "    return e if classes.empty? || classes.any? { |c| e.kind_of?(c) }\n"
  "    raise GwAssertionFailed, \"expected #{classes.join(', ')}, got #{e.class}: #{e.message}\"\n"
  "  end\n"
  "  raise GwAssertionFailed, \"expected #{classes.join(', ')} to be raised, nothing was\"\n"
  "end\n";

int main(int argc, char **argv)
{
  char err[1024];
  mrb_state *mrb = gw_vm_open(err, sizeof(err));
  if (mrb == NULL) {
    fprintf(stderr, "%s\n", err);
    return 2;
  }
  mrb_load_string(mrb, assert_lib);
  int broken = 0;
  for (int i = 1; i < argc; i++) {
    FILE *fp = fopen(argv[i], "r");
    if (fp == NULL) {
      perror(argv[i]);
      broken = 1;
      continue;
    }
    mrb_gv_set(mrb, mrb_intern_lit(mrb, "$gw_file"), mrb_str_new_cstr(mrb, argv[i]));
    mrbc_context *cxt = mrbc_context_new(mrb);
    mrbc_filename(mrb, cxt, argv[i]);
    mrb_load_file_cxt(mrb, fp, cxt);
    mrbc_context_free(mrb, cxt);
    fclose(fp);
    if (mrb->exc) {
      mrb_print_error(mrb);
      mrb->exc = NULL;
      broken = 1;
    }
  }
  mrb_int passed = mrb_integer(mrb_gv_get(mrb, mrb_intern_lit(mrb, "$gw_passed")));
  mrb_int failed = mrb_integer(mrb_gv_get(mrb, mrb_intern_lit(mrb, "$gw_failed")));
  printf("mrbtest: %d passed, %d failed\n", (int)passed, (int)(failed + broken));
  gw_vm_close(mrb);
  return failed || broken ? 1 : 0;
}
