/* redis.h - a Redis client on the worker's loop: a pool of connections per
 * address, one command batch in flight per connection, replies parsed by
 * hiredis's reader into gw_redis_reply_t trees (redis.c says why the reader
 * and not hiredis's async API).
 *
 * Every operation ends exactly once through its callback, from a loop
 * event, never from inside gw_redis_exec(); gw_redis_cancel() stops it with
 * no callback. A connection is reused only when everything it was sent has
 * been answered: a timeout, a cancel or a stray byte closes it. */
#ifndef GW_REDIS_H
#define GW_REDIS_H

#include <stddef.h>

#include "buf.h"
#include "error.h"

struct event_base;
typedef struct gw_redis_s gw_redis_t;
typedef struct gw_redis_op_s gw_redis_op_t;

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

typedef struct {
  const char *addr;      /* "IP:port", "[v6]:port", "localhost:port", "unix:/path", or
                          * "sentinel:NAME@host:port,host:port,...": the master that
                          * those Redis Sentinels name NAME (redis.c) */
  int db;                /* SELECTed on each new connection when > 0 */
  const char *password;  /* AUTH on each new connection, or NULL */
  int pool;              /* connections at most; more callers wait in line */
} gw_redis_params_t;

/* A client of p->addr on base (strings copied); NULL with err on a bad address. */
gw_redis_t *gw_redis_new(struct event_base *base, const gw_redis_params_t *p, char *err, size_t errlen);
/* Closes its connections; fails nothing (call when no operation is left). */
void gw_redis_free(gw_redis_t *r);

/* An operation's end: err.kind GW_OK and replies[0..n) (freed after the
 * call returns; an error reply is a reply, not an err), or the failure:
 * GW_ERR_TIMEOUT, a connect error, GW_ERR_CLOSED / GW_ERR_RESET, or
 * GW_ERR_BAD_RESPONSE (the server sent something that is not RESP). */
typedef void (*gw_redis_done_cb)(gw_err_t err, gw_redis_reply_t **replies, size_t n, void *arg);

/* Sends cmd (len bytes of RESP commands, copied) and waits for nreplies
 * replies, at most timeout_ms (0: no limit). NULL when out of memory. */
gw_redis_op_t *gw_redis_exec(gw_redis_t *r, const char *cmd, size_t len, size_t nreplies, int timeout_ms,
                             gw_redis_done_cb cb, void *arg);
/* Stops op (no callback afterwards); a connection it was using is closed. */
void gw_redis_cancel(gw_redis_op_t *op);

/* A subscriber: its own connection sending cmd (SUBSCRIBE ...), then every
 * reply to on_message until gw_redis_subscriber_free. A lost connection is
 * reopened (and cmd sent again) with a growing pause; on_state tells
 * (err.kind GW_OK: subscribed). */
typedef struct gw_redis_sub_s gw_redis_sub_t;
typedef void (*gw_redis_message_cb)(gw_redis_reply_t *reply, void *arg);
typedef void (*gw_redis_state_cb)(gw_err_t err, void *arg);
gw_redis_sub_t *gw_redis_subscribe(gw_redis_t *r, const char *cmd, size_t len, gw_redis_message_cb on_message,
                                   gw_redis_state_cb on_state, void *arg);
void gw_redis_subscriber_free(gw_redis_sub_t *s);

/* The address as given. */
const char *gw_redis_addr(const gw_redis_t *r);

/* RESP command building: appends "*argc\r\n" then each "$len\r\n...\r\n". */
int gw_redis_append_array(gw_buf_t *b, size_t argc);
int gw_redis_append_bulk(gw_buf_t *b, const char *s, size_t len);

/* Redis Cluster: the hash slot (0..16383) every keyed command of cmd (RESP
 * commands as gw_redis_append_* make them) maps to, -1 when none has a key,
 * -2 when two keys differ in slot. */
int gw_redis_commands_slot(const char *cmd, size_t len);

/* The reply parser as the client uses it (exposed for the fuzz target): a
 * hiredis reader with this module's objects and limits. */
void *gw_redis_reader_new(void);
void gw_redis_reader_free(void *reader);
/* Feeds bytes; then gw_redis_reader_next() returns 1 with *out (free with
 * gw_redis_reply_free), 0 when more bytes are needed, -1 on a protocol
 * error (message in *err). */
int gw_redis_reader_feed(void *reader, const char *data, size_t len);
int gw_redis_reader_next(void *reader, gw_redis_reply_t **out, const char **err);
void gw_redis_reply_free(gw_redis_reply_t *r);

#endif
