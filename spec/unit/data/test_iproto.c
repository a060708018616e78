/* test_iproto.c - iproto.c: the greeting's salt, the chap-sha1 scramble (a
 * vector computed with Ruby's Digest::SHA1), the msgpack check, framing,
 * the reply header, and request encoding read back.
 * unit: iproto buf -lmsgpackc -lcrypto */
#include <string.h>

#include "iproto.h"
#include "unit.h"

static char greeting[129];

static void make_greeting(const char *salt_b64)
{
  memset(greeting, ' ', 128);
  const char *l1 = "Tarantool 2.6.0 (Binary) 7b1d9c3e-0000-0000-0000-000000000000";
  memcpy(greeting, l1, strlen(l1));
  greeting[63] = '\n';
  memcpy(greeting + 64, salt_b64, strlen(salt_b64));
  greeting[127] = '\n';
}

int main(void)
{
  unsigned char salt[64];
  size_t saltlen = 0;
  make_greeting("c2FsdHNhbHRzYWx0c2FsdHNhbHRzYWx0c2FsdHNhbHQ=");
  CHECK(gw_iproto_greeting(greeting, 128, salt, &saltlen) == 0);
  CHECK_EQ_UINT(saltlen, 32);
  CHECK_MEM((const char *)salt, saltlen, "saltsaltsaltsaltsaltsaltsaltsalt", 32);
  CHECK(gw_iproto_greeting(greeting, 127, salt, &saltlen) == -1); /* short */
  make_greeting("c2FsdA==");                                      /* a salt too short to scramble */
  CHECK(gw_iproto_greeting(greeting, 128, salt, &saltlen) == -1);
  memcpy(greeting, "HTTP/1.1 ", 9);
  CHECK(gw_iproto_greeting(greeting, 128, salt, &saltlen) == -1);

  unsigned char out[GW_IPROTO_SCRAMBLE_SIZE];
  gw_iproto_scramble((const unsigned char *)"saltsaltsaltsaltsaltsaltsaltsalt", "secret", 6, out);
  CHECK_MEM((const char *)out, 20, "\xf0\x59\x4b\xb5\xf7\x5e\xac\x99\xbd\xd1\xde\x4d\xca\xa8\xac\xdb\x23\x3e\x7e\xab", 20);

  /* The check: lengths, truncation, counts beyond the bytes, 0xc1. */
  CHECK_EQ_UINT(gw_iproto_check("\x05", 1), 1);
  CHECK_EQ_UINT(gw_iproto_check("\x92\x01\xa2hi\xff", 6), 5);
  CHECK_EQ_UINT(gw_iproto_check("\x92\x01", 2), 0);
  CHECK_EQ_UINT(gw_iproto_check("\xdd\xff\xff\xff\xff\x00", 6), 0);
  CHECK_EQ_UINT(gw_iproto_check("\xc1", 1), 0);
  CHECK_EQ_UINT(gw_iproto_check("\x81\x30\xcb\x40\x09\x21\xfb\x00\x00\x00\x00", 11), 11);
  CHECK_EQ_UINT(gw_iproto_check("\xd6\x02\x01\x02\x03\x04", 6), 6); /* fixext 4 */
  CHECK_EQ_UINT(gw_iproto_check("\xc7\x02\x01\xaa\xbb", 5), 5);     /* ext 8 */
  CHECK_EQ_UINT(gw_iproto_check("\xc7\x02\x01\xaa", 4), 0);

  /* A request encoded, framed and parsed back (its header has the keys a reply has). */
  gw_buf_t b = GW_BUF_INIT;
  CHECK(gw_iproto_request(&b, GW_IPROTO_PING, 42, "\x80", 1) == 0);
  size_t prefix = 0, plen = 0;
  CHECK(gw_iproto_frame(b.data, b.len, &prefix, &plen) == 1);
  CHECK_EQ_UINT(prefix, 5);
  CHECK_EQ_UINT(prefix + plen, b.len);
  CHECK(gw_iproto_frame(b.data, 3, &prefix, &plen) == 0);
  gw_iproto_reply_t r;
  CHECK(gw_iproto_parse(b.data + 5, plen, &r) == 0);
  CHECK_EQ_UINT(r.code, GW_IPROTO_PING);
  CHECK_EQ_UINT(r.sync, 42);
  CHECK_EQ_UINT(r.body_len, 1);
  CHECK(gw_iproto_parse(b.data + 5, plen - 1, &r) == 0 && r.body_len == 0); /* no body */
  CHECK(gw_iproto_parse("\x81\x00\x00", 3, &r) == -1);                      /* no sync */
  CHECK(gw_iproto_parse("\x82\x00\x00\x01\x01\x81", 6, &r) == -1);          /* body cut */
  CHECK(gw_iproto_parse("\x82\x00\x00\x01\x01\x01\x01", 7, &r) == -1);      /* two bodies */
  CHECK(gw_iproto_frame("\xce\x7f\x00\x00\x00", 5, &prefix, &plen) == -1);  /* past the limit */
  CHECK(gw_iproto_frame("\xa1x", 2, &prefix, &plen) == -1);                 /* not an unsigned int */
  CHECK(gw_iproto_frame("\x05", 1, &prefix, &plen) == 1 && prefix == 1 && plen == 5);

  /* The reader: every family, values and where it stops. */
  {
    static const char obj[] = "\x9c\x05\xff\xcd\x01\x00\xd0\x85\xd1\x00\x07\xc0\xc3"
                              "\xa2hi\xc4\x01z\xd6\x02\x01\x02\x03\x04\xcb\x40\x09\x21\xfb\x54\x44\x2d\x18"
                              "\x81\x01\x90";
    const char *p = obj;
    gw_mp_t t;
    CHECK_EQ_UINT(gw_iproto_check(obj, sizeof(obj) - 1), sizeof(obj) - 1);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_ARRAY && t.len == 12);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_UINT && t.v.u == 5);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_INT && t.v.i == -1);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_UINT && t.v.u == 256);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_INT && t.v.i == -123);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_UINT && t.v.u == 7); /* int 16 holding 7 */
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_NIL);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_BOOL && t.v.b == 1);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_STR && t.len == 2 && memcmp(t.ptr, "hi", 2) == 0);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_BIN && t.len == 1 && t.ptr[0] == 'z');
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_EXT && t.len == 4 && t.ptr[0] == 1); /* fixext 4: data after the type byte */
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_FLOAT && t.v.f > 3.14159 && t.v.f < 3.1416);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_MAP && t.len == 1);
    gw_mp_next(&p, &t);
    gw_mp_next(&p, &t);
    CHECK(t.type == GW_MP_ARRAY && t.len == 0);
    CHECK(p == obj + sizeof(obj) - 1);

    /* A body's value by key; other keys (even containers) skipped. */
    static const char body[] = "\x83\x92\x01\x02\xa1x\x31\xa3" "err\x30\x91\x07";
    const char *v;
    size_t vlen;
    CHECK(gw_iproto_body_find(body, sizeof(body) - 1, GW_IPROTO_KEY_DATA, &v, &vlen) == 1);
    CHECK(vlen == 2 && memcmp(v, "\x91\x07", 2) == 0);
    CHECK(gw_iproto_body_find(body, sizeof(body) - 1, GW_IPROTO_KEY_ERROR, &v, &vlen) == 1 && vlen == 4);
    CHECK(gw_iproto_body_find(body, sizeof(body) - 1, 0x32, &v, &vlen) == 0);
    CHECK(gw_iproto_body_find("\x91\x30", 2, GW_IPROTO_KEY_DATA, &v, &vlen) == 0); /* not a map */
    CHECK(gw_iproto_body_find("", 0, GW_IPROTO_KEY_DATA, &v, &vlen) == 0);
  }

  b.len = 0;
  CHECK(gw_iproto_auth_body(&b, "gw", out) == 0);
  CHECK_EQ_UINT(gw_iproto_check(b.data, b.len), b.len);
  CHECK_MEM(b.data, 14, "\x82\x23\xa2gw\x21\x92\xa9" "chap-sha1", 14 + 0);
  gw_buf_dispose(&b);
  UNIT_DONE();
  return 0;
}
