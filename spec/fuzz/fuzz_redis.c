/* fuzz_redis.c - libFuzzer target for the Redis client's reply path
 * (redis_resp.c's glue around hiredis's reader: our reply objects, the limits on
 * array sizes and buffered bytes, the error reporting).
 *
 * The input is fed to two readers: whole, and in slices whose sizes come
 * from the first byte (1..8 bytes, then the rest). Checked on every input:
 *   - both give the same sequence of replies (type, integer, bytes, element
 *     count, recursively) and end the same way (an error or not);
 *   - every reply is well formed: strings NUL-terminated at len, arrays
 *     within GW_REDIS_MAX_ELEMENTS with no NULL element;
 *   - after an error the reader stays failed (a connection is closed then);
 *   - no leak (LSan), no memory error (ASan/UBSan). */
#define FUZZ_NAME "fuzz_redis"
#include <stdint.h>
#include <string.h>

#include <hiredis/read.h>

#include "fuzz_common.h"
#include "redis_resp.h"

#define MAX_REPLIES 64

static void check(const gw_redis_reply_t *r, int depth)
{
  if (depth > 16) FAIL("nested deeper than hiredis allows");
  switch (r->type) {
  case REDIS_REPLY_STRING:
  case REDIS_REPLY_STATUS:
  case REDIS_REPLY_ERROR:
    if (r->str == NULL || r->str[r->len] != '\0') FAIL("string not NUL-terminated");
    break;
  case REDIS_REPLY_ARRAY:
    if (r->elements > GW_REDIS_MAX_ELEMENTS) FAIL("array past the limit");
    for (size_t i = 0; i < r->elements; i++) {
      if (r->element[i] == NULL) FAIL("NULL element %zu", i);
      check(r->element[i], depth + 1);
    }
    break;
  case REDIS_REPLY_INTEGER:
  case REDIS_REPLY_NIL: break;
  default: FAIL("unknown type %d", r->type);
  }
}

static int same(const gw_redis_reply_t *a, const gw_redis_reply_t *b)
{
  if (a->type != b->type || a->integer != b->integer || a->len != b->len || a->elements != b->elements) return 0;
  if (a->len && memcmp(a->str, b->str, a->len) != 0) return 0;
  for (size_t i = 0; i < a->elements; i++)
    if (!same(a->element[i], b->element[i])) return 0;
  return 1;
}

/* Feeds data in slices (step 0: whole); collects replies; returns -1 on error. */
static int run(const uint8_t *data, size_t size, size_t step, gw_redis_reply_t **out, size_t *n)
{
  void *rd = gw_redis_reader_new();
  if (rd == NULL) FAIL("reader");
  int rc = 0;
  *n = 0;
  size_t off = 0;
  while (off < size && rc == 0) {
    size_t len = step == 0 || size - off < step ? size - off : step;
    if (gw_redis_reader_feed(rd, (const char *)data + off, len) < 0) {
      rc = -1;
      break;
    }
    off += len;
    for (;;) {
      gw_redis_reply_t *r;
      const char *err;
      int got = gw_redis_reader_next(rd, &r, &err);
      if (got < 0) {
        if (err == NULL || err[0] == '\0') FAIL("error without a message");
        if (gw_redis_reader_next(rd, &r, &err) >= 0) FAIL("the reader recovered from an error");
        rc = -1;
        break;
      }
      if (got == 0) break;
      check(r, 0);
      if (*n < MAX_REPLIES) out[(*n)++] = r;
      else gw_redis_reply_free(r);
    }
  }
  gw_redis_reader_free(rd);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  size_t step = (size_t)(data[0] & 7) + 1;
  data++;
  size--;
  gw_redis_reply_t *a[MAX_REPLIES], *b[MAX_REPLIES];
  size_t na, nb;
  int ra = run(data, size, 0, a, &na);
  int rb = run(data, size, step, b, &nb);
  if (ra != rb) FAIL("whole: %d, in slices of %zu: %d", ra, step, rb);
  if (na != nb) FAIL("whole: %zu replies, in slices: %zu", na, nb);
  for (size_t i = 0; i < na; i++)
    if (!same(a[i], b[i])) FAIL("reply %zu differs between whole and sliced", i);
  for (size_t i = 0; i < na; i++) gw_redis_reply_free(a[i]);
  for (size_t i = 0; i < nb; i++) gw_redis_reply_free(b[i]);
  return 0;
}
