/* unit.h - the smallest test harness: CHECK(cond) counts a pass or prints
 * "file:line: CHECK(expr) failed" and counts a failure; UNIT_DONE() prints
 * "N passed, N failed" and is main's return value (non-zero on failure).
 * One test program per module (tools/unit/test_*.c), linked with only the
 * modules it tests: see `rake test:unit`. */
#ifndef GW_UNIT_H
#define GW_UNIT_H

#include <stdio.h>
#include <string.h>

static int unit_passed, unit_failed;

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (cond) {                                                                 \
      unit_passed++;                                                            \
    } else {                                                                    \
      unit_failed++;                                                            \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
    }                                                                           \
  } while (0)

static inline int unit_str_eq(const char *a, const char *b)
{
  return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* Strings equal (both non-NULL); each argument is evaluated once. */
#define CHECK_STR(a, b) CHECK(unit_str_eq((a), (b)))

#define UNIT_DONE()                                                             \
  (printf("%s: %d passed, %d failed\n", __FILE__, unit_passed, unit_failed),   \
   unit_failed ? 1 : 0)

#endif
