/* unit.h - the C unit tests' harness: check macros that count, and a summary.
 *
 * A test is one file, spec/unit/FOLDER/test_NAME.c (FOLDER mirrors gateway/), with its own main() that calls
 * its checks and ends with `return unit_done();`. A comment line
 *
 *   unit: router headers
 *
 * (inside a C comment) names the gateway/NAME.c modules it is linked against
 * (`llhttp` for Debian's llhttp sources, `-lNAME` for a library); see
 * spec/unit/unit.rake. A failed check prints "file:line: expression" and the
 * values involved on stderr and the test goes on; unit_done() prints
 * "N passed, N failed" and returns the exit status (1 if any failed).
 *
 * Every CHECK* is an expression worth 1 (passed) or 0 (failed), so a loop can
 * say which case failed:  if (!CHECK_EQ_INT(got, want)) unit_note("split %zu", i);
 * After UNIT_MAX_REPORTS failures, further ones are only counted. */
#ifndef GW_UNIT_H
#define GW_UNIT_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define UNIT_MAX_REPORTS 50

static unsigned long unit_passed, unit_failed;

__attribute__((unused)) static int unit_reporting(void)
{
  return unit_failed <= UNIT_MAX_REPORTS;
}

/* Counts one failure; 1 when it should be reported. */
__attribute__((unused)) static int unit_fail(const char *file, int line, const char *expr)
{
  unit_failed++;
  if (unit_failed == UNIT_MAX_REPORTS + 1) fprintf(stderr, "(more failures: only counted from here)\n");
  if (!unit_reporting()) return 0;
  fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, expr);
  return 1;
}

/* Extra context for the failure just reported (printf format). */
__attribute__((format(printf, 1, 2), unused)) static void unit_note(const char *fmt, ...)
{
  if (!unit_reporting()) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("    ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* Prints up to 200 bytes of p, C-escaped, in quotes. */
__attribute__((unused)) static void unit_print_bytes(const char *label, const void *p, size_t len)
{
  const unsigned char *s = p;
  fprintf(stderr, "    %s (%zu bytes): ", label, len);
  if (s == NULL) {
    fputs("NULL\n", stderr);
    return;
  }
  fputc('"', stderr);
  for (size_t i = 0; i < len && i < 200; i++) {
    unsigned char c = s[i];
    if (c == '\r') fputs("\\r", stderr);
    else if (c == '\n') fputs("\\n", stderr);
    else if (c == '"' || c == '\\') fprintf(stderr, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f) fprintf(stderr, "\\x%02x", c);
    else fputc(c, stderr);
  }
  fputs(len > 200 ? "\"...\n" : "\"\n", stderr);
}

__attribute__((unused)) static int unit_check(int ok, const char *file, int line, const char *expr)
{
  if (ok) unit_passed++;
  else unit_fail(file, line, expr);
  return ok;
}

__attribute__((unused)) static int unit_check_int(intmax_t a, intmax_t b, const char *file, int line,
                                                  const char *expr)
{
  if (a == b) {
    unit_passed++;
    return 1;
  }
  if (unit_fail(file, line, expr)) fprintf(stderr, "    got %" PRIdMAX ", want %" PRIdMAX "\n", a, b);
  return 0;
}

__attribute__((unused)) static int unit_check_uint(uintmax_t a, uintmax_t b, const char *file, int line,
                                                   const char *expr)
{
  if (a == b) {
    unit_passed++;
    return 1;
  }
  if (unit_fail(file, line, expr)) fprintf(stderr, "    got %" PRIuMAX ", want %" PRIuMAX "\n", a, b);
  return 0;
}

__attribute__((unused)) static int unit_check_str(const char *a, const char *b, const char *file, int line,
                                                  const char *expr)
{
  if (a == b || (a != NULL && b != NULL && strcmp(a, b) == 0)) {
    unit_passed++;
    return 1;
  }
  if (unit_fail(file, line, expr)) {
    unit_print_bytes("got ", a, a ? strlen(a) : 0);
    unit_print_bytes("want", b, b ? strlen(b) : 0);
  }
  return 0;
}

__attribute__((unused)) static int unit_check_mem(const void *a, size_t alen, const void *b, size_t blen,
                                                  const char *file, int line, const char *expr)
{
  if (alen == blen && (alen == 0 || memcmp(a, b, alen) == 0)) {
    unit_passed++;
    return 1;
  }
  if (unit_fail(file, line, expr)) {
    size_t i = 0;
    while (i < alen && i < blen && ((const char *)a)[i] == ((const char *)b)[i]) i++;
    fprintf(stderr, "    first difference at byte %zu\n", i);
    unit_print_bytes("got ", a, alen);
    unit_print_bytes("want", b, blen);
  }
  return 0;
}

/* cond is true. */
#define CHECK(cond) unit_check(!!(cond), __FILE__, __LINE__, #cond)
/* Integers equal, compared as intmax_t (CHECK_EQ_UINT: as uintmax_t). */
#define CHECK_EQ_INT(got, want) \
  unit_check_int((intmax_t)(got), (intmax_t)(want), __FILE__, __LINE__, #got " == " #want)
#define CHECK_EQ_UINT(got, want) \
  unit_check_uint((uintmax_t)(got), (uintmax_t)(want), __FILE__, __LINE__, #got " == " #want)
/* NUL-terminated strings equal (both NULL counts as equal). */
#define CHECK_EQ_STR(got, want) unit_check_str((got), (want), __FILE__, __LINE__, #got " == " #want)
/* got_len bytes at got equal want_len bytes at want (lengths too). */
#define CHECK_MEM(got, got_len, want, want_len) \
  unit_check_mem((got), (got_len), (want), (want_len), __FILE__, __LINE__, \
                 #got "[" #got_len "] == " #want "[" #want_len "]")

/* Prints "N passed, N failed" on stdout; the exit status for main. */
__attribute__((unused)) static int unit_done(void)
{
  fflush(stderr);
  printf("%lu passed, %lu failed\n", unit_passed, unit_failed);
  fflush(stdout);
  return unit_failed ? 1 : 0;
}

/* Shorter names some tests use. */
#define CHECK_STR(a, b) CHECK_EQ_STR((a), (b))
#define UNIT_DONE() unit_done()

#endif
