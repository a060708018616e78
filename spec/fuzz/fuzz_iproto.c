/* fuzz_iproto.c - libFuzzer target for the Tarantool client's reply path
 * (iproto.c): the greeting, the packet framing, the header decode, and the
 * msgpack check that runs before msgpack-c unpacks a body.
 *
 * The first byte picks what the rest is: even, a stream of reply packets as
 * a server would send them (framed and parsed one after another, as
 * tarantool.c does); odd, a greeting. Checked on every input:
 *   - gw_iproto_check never claims more bytes than it was given, and an
 *     object it accepts is unpacked by msgpack-c to exactly that length
 *     (or refused for nesting deeper than msgpack-c's stack), never found
 *     "cut short": the two agree on where an object ends;
 *   - gw_mp_next, walking a checked object token by token, ends exactly
 *     where the check says it does;
 *   - a parsed packet's body is one checked object or empty, within the
 *     packet, and a value found in it by key is one object within the body;
 *   - a greeting's salt is at least a scramble's length;
 *   - no leak (LSan), no memory error (ASan/UBSan). */
#define FUZZ_NAME "fuzz_iproto"
#include <stdint.h>
#include <string.h>

#include <msgpack.h>

#include "fuzz_common.h"
#include "iproto.h"

/* Walks one checked object with gw_mp_next: where it ends. */
static const char *walk(const char *p)
{
  uint64_t need = 1;
  while (need > 0) {
    gw_mp_t t;
    gw_mp_next(&p, &t);
    need--;
    if (t.type == GW_MP_ARRAY) need += t.len;
    else if (t.type == GW_MP_MAP) need += 2 * (uint64_t)t.len;
  }
  return p;
}

static void agree(const char *p, size_t len)
{
  size_t n = gw_iproto_check(p, len);
  if (n > len) FAIL("check claims %zu of %zu bytes", n, len);
  if (n == 0) return;
  if (walk(p) != p + n) FAIL("the reader and the check disagree on an object of %zu bytes", n);
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  size_t off = 0;
  msgpack_unpack_return rc = msgpack_unpack_next(&u, p, n, &off);
  if (rc == MSGPACK_UNPACK_SUCCESS && off != n) FAIL("check says %zu bytes, msgpack-c %zu", n, off);
  if (rc == MSGPACK_UNPACK_CONTINUE) FAIL("check accepted %zu bytes msgpack-c finds cut short", n);
  msgpack_unpacked_destroy(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  int greeting = data[0] & 1;
  const char *p = (const char *)data + 1;
  size_t len = size - 1;
  if (greeting) {
    unsigned char salt[64];
    size_t saltlen = 0;
    if (gw_iproto_greeting(p, len, salt, &saltlen) == 0) {
      if (saltlen < GW_IPROTO_SCRAMBLE_SIZE || saltlen > 64) FAIL("salt of %zu bytes", saltlen);
      unsigned char out[GW_IPROTO_SCRAMBLE_SIZE];
      gw_iproto_scramble(salt, "pw", 2, out);
    }
    return 0;
  }
  agree(p, len);
  size_t off = 0;
  while (off < len) {
    size_t prefix, plen;
    int rc = gw_iproto_frame(p + off, len - off, &prefix, &plen);
    if (rc <= 0) break;
    if (plen > GW_IPROTO_MAX_PACKET) FAIL("packet of %zu bytes", plen);
    if (len - off - prefix < plen) break;
    const char *pkt = p + off + prefix;
    gw_iproto_reply_t r;
    if (gw_iproto_parse(pkt, plen, &r) < 0) break;
    if (r.body < pkt || r.body + r.body_len != pkt + plen) FAIL("body outside its packet");
    if (r.body_len > 0 && gw_iproto_check(r.body, r.body_len) != r.body_len) FAIL("body not one checked object");
    agree(r.body, r.body_len);
    const char *v;
    size_t vlen;
    if (gw_iproto_body_find(r.body, r.body_len, GW_IPROTO_KEY_DATA, &v, &vlen) == 1 &&
        (v < r.body || v + vlen > r.body + r.body_len || walk(v) != v + vlen))
      FAIL("a body's value outside the body, or not one object");
    off += prefix + plen;
  }
  return 0;
}
