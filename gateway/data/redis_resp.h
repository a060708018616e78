/* redis_resp.h - RESP, the Redis protocol's bytes (redis_resp.c): reply
 * objects and their reader, command encoding, and a batch's Cluster slot.
 * No sockets: the client is redis.h. */
#ifndef GW_REDIS_RESP_H
#define GW_REDIS_RESP_H

#include <stddef.h>

#include "buf.h"

/* A reply (REDIS_REPLY_* types of hiredis's read.h). */
typedef struct gw_redis_reply_s {
  int type;
  long long integer;                 /* INTEGER */
  char *str;                         /* STRING, STATUS, ERROR: len bytes + NUL */
  size_t len;
  size_t elements;                   /* ARRAY */
  struct gw_redis_reply_s **element;
} gw_redis_reply_t;

/* Limits on what a server may send: elements of one array, bytes buffered. */
#define GW_REDIS_MAX_ELEMENTS (1 << 20)
#define GW_REDIS_MAX_BUFFERED ((size_t)512 << 20)

/* Redis Cluster's hash slots. */
#define GW_REDIS_SLOTS 16384

/* RESP command building: appends "*argc\r\n" then each "$len\r\n...\r\n". */
int gw_redis_append_array(gw_buf_t *b, size_t argc);
int gw_redis_append_bulk(gw_buf_t *b, const char *s, size_t len);

/* Redis Cluster: the hash slot (0..16383) every keyed command of cmd (RESP
 * commands as gw_redis_append_* make them) maps to, -1 when none has a key,
 * -2 when two keys differ in slot. */
int gw_redis_commands_slot(const char *cmd, size_t len);

/* The reply parser as the client uses it: a hiredis reader with this
 * module's objects and limits. */
void *gw_redis_reader_new(void);
void gw_redis_reader_free(void *reader);
/* Feeds bytes; then gw_redis_reader_next() returns 1 with *out (free with
 * gw_redis_reply_free), 0 when more bytes are needed, -1 on a protocol
 * error (message in *err). */
int gw_redis_reader_feed(void *reader, const char *data, size_t len);
int gw_redis_reader_next(void *reader, gw_redis_reply_t **out, const char **err);
void gw_redis_reply_free(gw_redis_reply_t *r);
/* 1 when bytes or part of a reply wait in the reader (after the replies a
 * caller asked for: the server sent more than was asked). */
int gw_redis_reader_pending(void *reader);

/* 1 when the batch's first command only reads (safe to send again after a
 * broken connection: GET, HGETALL, ...). */
int gw_redis_commands_read_only(const char *cmd, size_t len);

#endif
