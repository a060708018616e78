/* fuzz_common.h - what both fuzz targets share: the invariant check that
 * aborts (so libFuzzer keeps the input) and the UBSan options. Define
 * FUZZ_NAME ("fuzz_request", ...) before including. */
#ifndef GW_FUZZ_COMMON_H
#define GW_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#define FAIL(...)                                          \
  do {                                                     \
    fprintf(stderr, FUZZ_NAME ": invariant: ");            \
    fprintf(stderr, __VA_ARGS__);                          \
    fputc('\n', stderr);                                   \
    abort();                                               \
  } while (0)

/* UBSan: fatal, except what spec/fuzz/ubsan.supp lists (known findings). */
#ifndef FUZZ_UBSAN_SUPP
#define FUZZ_UBSAN_SUPP "spec/fuzz/ubsan.supp"
#endif
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
  return "print_stacktrace=1:halt_on_error=1:suppressions=" FUZZ_UBSAN_SUPP;
}

#endif
