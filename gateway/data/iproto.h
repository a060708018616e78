/* iproto.h - Tarantool's binary protocol (iproto), the parts that need no
 * socket: the greeting and its salt, the chap-sha1 scramble, request framing
 * and the reply's framing and header, with msgpack checked (so a hostile
 * server cannot make a reader run past its bytes or allocate without limit)
 * and then read token by token in place (gw_mp_next: no unpacking into a
 * zone of objects).
 * Used by tarantool.c; exposed for the unit test and the fuzz target. */
#ifndef GW_IPROTO_H
#define GW_IPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define GW_IPROTO_GREETING_SIZE 128
#define GW_IPROTO_SCRAMBLE_SIZE 20
/* A reply longer than this is refused (the connection is closed). */
#define GW_IPROTO_MAX_PACKET ((size_t)64 << 20)

/* Request types, header and body keys (Tarantool's iproto_constants.h). */
enum {
  GW_IPROTO_SELECT = 1,
  GW_IPROTO_INSERT = 2,
  GW_IPROTO_REPLACE = 3,
  GW_IPROTO_UPDATE = 4,
  GW_IPROTO_DELETE = 5,
  GW_IPROTO_AUTH = 7,
  GW_IPROTO_EVAL = 8,
  GW_IPROTO_UPSERT = 9,
  GW_IPROTO_CALL = 10,
  GW_IPROTO_EXECUTE = 11,
  GW_IPROTO_PING = 64,
  GW_IPROTO_KEY_CODE = 0x00,
  GW_IPROTO_KEY_SYNC = 0x01,
  GW_IPROTO_KEY_USER_NAME = 0x23,
  GW_IPROTO_KEY_TUPLE = 0x21,
  GW_IPROTO_KEY_FUNCTION = 0x22,
  GW_IPROTO_KEY_EXPR = 0x27,
  GW_IPROTO_KEY_DATA = 0x30,
  GW_IPROTO_KEY_ERROR = 0x31,
  GW_IPROTO_KEY_METADATA = 0x32,
  GW_IPROTO_KEY_SQL_TEXT = 0x40,
  GW_IPROTO_KEY_SQL_BIND = 0x41,
  GW_IPROTO_KEY_SQL_INFO = 0x42,
  GW_IPROTO_ERROR_FLAG = 0x8000
};

/* The base64 salt of a 128-byte greeting, decoded into salt (at least
 * GW_IPROTO_SCRAMBLE_SIZE bytes are used); -1 if g is not a Tarantool greeting. */
int gw_iproto_greeting(const char *g, size_t len, unsigned char salt[64], size_t *saltlen);

/* chap-sha1: sha1(password) xor sha1(salt[0..20) + sha1(sha1(password))). */
void gw_iproto_scramble(const unsigned char *salt, const char *password, size_t plen,
                        unsigned char out[GW_IPROTO_SCRAMBLE_SIZE]);

/* The length of the first msgpack object of p[0..len) when it is well formed
 * and every container's count fits in the bytes left (each element takes at
 * least one); 0 when it is not (or is cut short). */
size_t gw_iproto_check(const char *p, size_t len);

/* One msgpack token of a checked object (gw_iproto_check accepted it, so
 * no bound is tested here): its type and scalar value, a string's bytes, or
 * a container's element count (map: pairs) whose elements follow. */
typedef enum {
  GW_MP_NIL, GW_MP_BOOL, GW_MP_UINT, GW_MP_INT, GW_MP_FLOAT,
  GW_MP_STR, GW_MP_BIN, GW_MP_EXT, GW_MP_ARRAY, GW_MP_MAP
} gw_mp_type_t;
typedef struct {
  gw_mp_type_t type;
  union {
    uint64_t u;
    int64_t i; /* negative integers only (msgpack's int family holding a value >= 0 reads as UINT) */
    double f;
    int b;
  } v;
  const char *ptr; /* STR, BIN, EXT: the data (EXT: after its type byte) */
  uint32_t len;    /* STR, BIN, EXT: bytes; ARRAY: elements; MAP: pairs */
} gw_mp_t;
/* Reads the token at *p into t and moves *p past it (past a string's bytes,
 * before a container's elements). */
void gw_mp_next(const char **p, gw_mp_t *t);

/* A packet at the start of buf: 1 with *prefix (the length prefix's bytes)
 * and *plen (the packet's), 0 when more bytes are needed, -1 when the prefix
 * is not a msgpack unsigned integer or plen exceeds GW_IPROTO_MAX_PACKET. */
int gw_iproto_frame(const char *buf, size_t len, size_t *prefix, size_t *plen);

/* A reply packet (after its prefix): the header's code and sync, and the
 * body (one checked msgpack object, or empty). -1 when malformed. */
typedef struct {
  uint64_t code;
  uint64_t sync;
  const char *body;
  size_t body_len;
} gw_iproto_reply_t;
int gw_iproto_parse(const char *pkt, size_t len, gw_iproto_reply_t *out);

/* The value under the unsigned key in a body (a checked map): 1 with
 * [*val, *val + *vlen) its bytes, 0 when there is none. */
int gw_iproto_body_find(const char *body, size_t len, uint64_t key, const char **val, size_t *vlen);

/* Appends a request: the 5-byte length prefix, the header {code, sync} and
 * body (body_len bytes of one msgpack map). -1 when out of memory. */
int gw_iproto_request(gw_buf_t *b, uint32_t type, uint64_t sync, const char *body, size_t body_len);

/* The body of AUTH (chap-sha1) for user with the scramble; -1 out of memory. */
int gw_iproto_auth_body(gw_buf_t *b, const char *user, const unsigned char scramble[GW_IPROTO_SCRAMBLE_SIZE]);

/* The msgpack-c packer's write callback appending to a gw_buf_t. */
int gw_iproto_buf_write(void *data, const char *buf, size_t len);

#endif
