/* test_buf.c - buf.c: the growable byte buffer.
 * unit: buf */
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "unit.h"

int main(void)
{
  gw_buf_t b = GW_BUF_INIT;
  CHECK(gw_buf_append(&b, "", 0) == 0);
  CHECK(b.data == NULL && b.len == 0); /* nothing allocated for nothing */
  CHECK(gw_buf_append(&b, "abc", 3) == 0);
  CHECK(b.len == 3 && b.cap == 256 && memcmp(b.data, "abc", 3) == 0);
  char chunk[100];
  memset(chunk, 'x', sizeof(chunk));
  for (int i = 0; i < 10; i++) CHECK(gw_buf_append(&b, chunk, sizeof(chunk)) == 0);
  CHECK(b.len == 1003 && b.cap == 1024); /* doubled: 256, 512, 1024 */
  CHECK(memcmp(b.data, "abcxx", 5) == 0 && b.data[1002] == 'x');
  CHECK(gw_buf_reserve(&b, 21) == 0 && b.cap == 1024); /* fits */
  CHECK(gw_buf_reserve(&b, 22) == 0 && b.cap == 2048);
  CHECK(gw_buf_reserve(&b, SIZE_MAX) == -1); /* overflow: unchanged */
  CHECK(b.len == 1003 && b.cap == 2048);
  gw_buf_dispose(&b);
  CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
  CHECK(gw_buf_append(&b, "again", 5) == 0 && b.len == 5);
  gw_buf_dispose(&b);
  return UNIT_DONE();
}
