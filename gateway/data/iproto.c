/* iproto.c - Tarantool's binary protocol without sockets (iproto.h). */
#include <string.h>

#include <msgpack.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "iproto.h"

int gw_iproto_greeting(const char *g, size_t len, unsigned char salt[64], size_t *saltlen)
{
  if (len < GW_IPROTO_GREETING_SIZE || memcmp(g, "Tarantool ", 10) != 0) return -1;
  /* Line 2 (bytes 64..127): the base64 salt, then spaces and a newline. */
  const char *b64 = g + 64;
  size_t n = 0;
  while (n < 63 && b64[n] != ' ' && b64[n] != '\n' && b64[n] != '\0') n++;
  if (n < 28 || n % 4 != 0) return -1;
  unsigned char tmp[64];
  int out = EVP_DecodeBlock(tmp, (const unsigned char *)b64, (int)n);
  if (out < GW_IPROTO_SCRAMBLE_SIZE) return -1;
  size_t pad = (b64[n - 1] == '=') + (b64[n - 2] == '=');
  *saltlen = (size_t)out - pad;
  memcpy(salt, tmp, *saltlen);
  return 0;
}

void gw_iproto_scramble(const unsigned char *salt, const char *password, size_t plen,
                        unsigned char out[GW_IPROTO_SCRAMBLE_SIZE])
{
  unsigned char h1[SHA_DIGEST_LENGTH], h2[SHA_DIGEST_LENGTH], h3[SHA_DIGEST_LENGTH];
  SHA1((const unsigned char *)password, plen, h1);
  SHA1(h1, sizeof(h1), h2);
  unsigned char both[GW_IPROTO_SCRAMBLE_SIZE + SHA_DIGEST_LENGTH];
  memcpy(both, salt, GW_IPROTO_SCRAMBLE_SIZE);
  memcpy(both + GW_IPROTO_SCRAMBLE_SIZE, h2, sizeof(h2));
  SHA1(both, sizeof(both), h3);
  for (int i = 0; i < GW_IPROTO_SCRAMBLE_SIZE; i++) out[i] = h1[i] ^ h3[i];
}

static uint64_t be(const unsigned char *p, int n)
{
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

size_t gw_iproto_check(const char *buf, size_t len)
{
  const unsigned char *p = (const unsigned char *)buf;
  size_t off = 0;
  uint64_t need = 1; /* objects still to read */
  while (need > 0) {
    if (off >= len) return 0;
    unsigned c = p[off++];
    uint64_t skip = 0, items = 0;
    int lenbytes = 0, ext = 0, map = 0;
    need--;
    if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
    } else if (c <= 0x8f) {
      items = c & 0x0f;
      map = 1;
    } else if (c <= 0x9f) {
      items = c & 0x0f;
    } else if (c <= 0xbf) {
      skip = c & 0x1f;
    } else if (c == 0xc1) {
      return 0;
    } else if (c >= 0xc4 && c <= 0xc6) {
      lenbytes = 1 << (c - 0xc4);
    } else if (c >= 0xc7 && c <= 0xc9) {
      lenbytes = 1 << (c - 0xc7);
      ext = 1;
    } else if (c == 0xca) {
      skip = 4;
    } else if (c == 0xcb) {
      skip = 8;
    } else if (c >= 0xcc && c <= 0xcf) {
      skip = 1u << (c - 0xcc);
    } else if (c >= 0xd0 && c <= 0xd3) {
      skip = 1u << (c - 0xd0);
    } else if (c >= 0xd4 && c <= 0xd8) {
      skip = 1 + (1u << (c - 0xd4));
    } else if (c >= 0xd9 && c <= 0xdb) {
      lenbytes = 1 << (c - 0xd9);
    } else { /* 0xdc..0xdf: array 16/32, map 16/32 */
      if (len - off < (c & 1 ? 4u : 2u)) return 0;
      items = be(p + off, c & 1 ? 4 : 2);
      off += c & 1 ? 4 : 2;
      map = c >= 0xde;
    }
    if (lenbytes) {
      if (len - off < (size_t)lenbytes) return 0;
      skip = be(p + off, lenbytes) + (uint64_t)ext;
      off += (size_t)lenbytes;
    }
    if (skip > len - off) return 0;
    off += (size_t)skip;
    need += map ? items * 2 : items;
    if (need > len - off) return 0; /* each of them takes a byte at least */
  }
  return off;
}

int gw_iproto_frame(const char *buf, size_t len, size_t *prefix, size_t *plen)
{
  if (len == 0) return 0;
  const unsigned char *p = (const unsigned char *)buf;
  unsigned c = p[0];
  int n;
  if (c <= 0x7f) n = 0;
  else if (c >= 0xcc && c <= 0xcf) n = 1 << (c - 0xcc);
  else return -1;
  if (len < (size_t)n + 1) return 0;
  uint64_t v = n == 0 ? c : be(p + 1, n);
  if (v > GW_IPROTO_MAX_PACKET) return -1;
  *prefix = (size_t)n + 1;
  *plen = (size_t)v;
  return 1;
}

static uint32_t be32(const unsigned char *p, int n)
{
  return (uint32_t)be(p, n);
}

void gw_mp_next(const char **pp, gw_mp_t *t)
{
  const unsigned char *p = (const unsigned char *)*pp;
  unsigned c = *p++;
  t->ptr = NULL;
  t->len = 0;
  if (c <= 0x7f) {
    t->type = GW_MP_UINT;
    t->v.u = c;
  } else if (c >= 0xe0) {
    t->type = GW_MP_INT;
    t->v.i = (int8_t)c;
  } else if (c <= 0x8f) {
    t->type = GW_MP_MAP;
    t->len = c & 0x0f;
  } else if (c <= 0x9f) {
    t->type = GW_MP_ARRAY;
    t->len = c & 0x0f;
  } else if (c <= 0xbf) {
    t->type = GW_MP_STR;
    t->len = c & 0x1f;
  } else if (c == 0xc0) {
    t->type = GW_MP_NIL;
  } else if (c == 0xc2 || c == 0xc3) {
    t->type = GW_MP_BOOL;
    t->v.b = c == 0xc3;
  } else if (c >= 0xc4 && c <= 0xc6) {
    int n = 1 << (c - 0xc4);
    t->type = GW_MP_BIN;
    t->len = be32(p, n);
    p += n;
  } else if (c >= 0xc7 && c <= 0xc9) {
    int n = 1 << (c - 0xc7);
    t->type = GW_MP_EXT;
    t->len = be32(p, n);
    p += n + 1; /* and the ext type */
  } else if (c == 0xca) {
    uint32_t u = be32(p, 4);
    float f;
    memcpy(&f, &u, 4);
    t->type = GW_MP_FLOAT;
    t->v.f = f;
    p += 4;
  } else if (c == 0xcb) {
    uint64_t u = be(p, 8);
    memcpy(&t->v.f, &u, 8);
    t->type = GW_MP_FLOAT;
    p += 8;
  } else if (c >= 0xcc && c <= 0xcf) {
    int n = 1 << (c - 0xcc);
    t->type = GW_MP_UINT;
    t->v.u = be(p, n);
    p += n;
  } else if (c >= 0xd0 && c <= 0xd3) {
    int n = 1 << (c - 0xd0);
    uint64_t u = be(p, n);
    int64_t v = n == 1 ? (int8_t)u : n == 2 ? (int16_t)u : n == 4 ? (int32_t)u : (int64_t)u;
    p += n;
    if (v >= 0) {
      t->type = GW_MP_UINT;
      t->v.u = (uint64_t)v;
    } else {
      t->type = GW_MP_INT;
      t->v.i = v;
    }
  } else if (c >= 0xd4 && c <= 0xd8) {
    t->type = GW_MP_EXT;
    t->len = 1u << (c - 0xd4);
    p += 1;
  } else if (c >= 0xd9 && c <= 0xdb) {
    int n = 1 << (c - 0xd9);
    t->type = GW_MP_STR;
    t->len = be32(p, n);
    p += n;
  } else { /* 0xdc..0xdf (0xc1 never passes the check) */
    int n = c & 1 ? 4 : 2;
    t->type = c >= 0xde ? GW_MP_MAP : GW_MP_ARRAY;
    t->len = be32(p, n);
    p += n;
  }
  if (t->type == GW_MP_STR || t->type == GW_MP_BIN || t->type == GW_MP_EXT) {
    t->ptr = (const char *)p;
    p += t->len;
  }
  *pp = (const char *)p;
}

int gw_iproto_parse(const char *pkt, size_t len, gw_iproto_reply_t *out)
{
  size_t hlen = gw_iproto_check(pkt, len);
  if (hlen == 0) return -1;
  const char *p = pkt, *end = pkt + hlen;
  gw_mp_t m;
  gw_mp_next(&p, &m);
  if (m.type != GW_MP_MAP) return -1;
  int have_code = 0, have_sync = 0;
  for (uint32_t i = 0; i < m.len; i++) {
    gw_mp_t k, v;
    const char *key = p;
    gw_mp_next(&p, &k);
    if (k.type != GW_MP_UINT || (k.v.u != GW_IPROTO_KEY_CODE && k.v.u != GW_IPROTO_KEY_SYNC)) {
      p = key + gw_iproto_check(key, (size_t)(end - key)); /* the key and */
      p += gw_iproto_check(p, (size_t)(end - p));          /* its value, skipped */
      continue;
    }
    const char *val = p;
    gw_mp_next(&p, &v);
    p = val + gw_iproto_check(val, (size_t)(end - val));
    if (v.type != GW_MP_UINT) continue;
    if (k.v.u == GW_IPROTO_KEY_CODE) {
      out->code = v.v.u;
      have_code = 1;
    } else {
      out->sync = v.v.u;
      have_sync = 1;
    }
  }
  if (!have_code || !have_sync) return -1;
  out->body = pkt + hlen;
  out->body_len = len - hlen;
  if (out->body_len > 0 && gw_iproto_check(out->body, out->body_len) != out->body_len) return -1;
  return 0;
}

int gw_iproto_body_find(const char *body, size_t len, uint64_t key, const char **val, size_t *vlen)
{
  if (len == 0) return 0;
  const char *p = body, *end = body + len;
  gw_mp_t m, k;
  gw_mp_next(&p, &m);
  if (m.type != GW_MP_MAP) return 0;
  for (uint32_t i = 0; i < m.len; i++) {
    const char *kp = p;
    p = kp + gw_iproto_check(kp, (size_t)(end - kp));
    size_t n = gw_iproto_check(p, (size_t)(end - p));
    gw_mp_next(&kp, &k);
    if (k.type == GW_MP_UINT && k.v.u == key) {
      *val = p;
      *vlen = n;
      return 1;
    }
    p += n;
  }
  return 0;
}

int gw_iproto_buf_write(void *data, const char *buf, size_t len)
{
  return gw_buf_append(data, buf, len);
}

int gw_iproto_request(gw_buf_t *b, uint32_t type, uint64_t sync, const char *body, size_t body_len)
{
  size_t start = b->len;
  if (gw_buf_append(b, "\xce\0\0\0\0", 5) < 0) return -1;
  msgpack_packer pk;
  msgpack_packer_init(&pk, b, gw_iproto_buf_write);
  if (msgpack_pack_map(&pk, 2) < 0 || msgpack_pack_uint8(&pk, GW_IPROTO_KEY_CODE) < 0 ||
      msgpack_pack_uint32(&pk, type) < 0 || msgpack_pack_uint8(&pk, GW_IPROTO_KEY_SYNC) < 0 ||
      msgpack_pack_uint64(&pk, sync) < 0 || gw_buf_append(b, body, body_len) < 0) {
    b->len = start;
    return -1;
  }
  size_t n = b->len - start - 5;
  unsigned char *p = (unsigned char *)b->data + start + 1;
  p[0] = (unsigned char)(n >> 24);
  p[1] = (unsigned char)(n >> 16);
  p[2] = (unsigned char)(n >> 8);
  p[3] = (unsigned char)n;
  return 0;
}

int gw_iproto_auth_body(gw_buf_t *b, const char *user, const unsigned char scramble[GW_IPROTO_SCRAMBLE_SIZE])
{
  msgpack_packer pk;
  msgpack_packer_init(&pk, b, gw_iproto_buf_write);
  size_t ulen = strlen(user);
  if (msgpack_pack_map(&pk, 2) < 0 || msgpack_pack_uint8(&pk, GW_IPROTO_KEY_USER_NAME) < 0 ||
      msgpack_pack_str(&pk, ulen) < 0 || msgpack_pack_str_body(&pk, user, ulen) < 0 ||
      msgpack_pack_uint8(&pk, GW_IPROTO_KEY_TUPLE) < 0 || msgpack_pack_array(&pk, 2) < 0 ||
      msgpack_pack_str(&pk, 9) < 0 || msgpack_pack_str_body(&pk, "chap-sha1", 9) < 0 ||
      msgpack_pack_str(&pk, GW_IPROTO_SCRAMBLE_SIZE) < 0 ||
      msgpack_pack_str_body(&pk, scramble, GW_IPROTO_SCRAMBLE_SIZE) < 0)
    return -1;
  return 0;
}
