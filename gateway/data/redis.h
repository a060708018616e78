/* redis.h - a Redis client on the worker's loop: a pool of connections per
 * address, one command batch in flight per connection, replies parsed by
 * hiredis's reader into gw_redis_reply_t trees (redis_resp.h; redis.c says
 * why the reader and not hiredis's async API), on the data clients'
 * connection core (data_conn.h).
 *
 * Every operation ends exactly once through its callback, from a loop
 * event, never from inside gw_redis_exec(); gw_redis_cancel() stops it with
 * no callback. A connection is reused only when everything it was sent has
 * been answered: a timeout, a cancel or a stray byte closes it. */
#ifndef GW_REDIS_H
#define GW_REDIS_H

#include <stddef.h>

#include "buf.h"
#include "data_conn.h"
#include "error.h"
#include "redis_resp.h"

struct event_base;
typedef struct gw_redis_s gw_redis_t;
typedef struct gw_redis_op_s gw_redis_op_t;

typedef struct {
  const char *addr;      /* "IP:port", "[v6]:port", "localhost:port", "unix:/path";
                          * behind Sentinel: redis_sentinel.h; a Cluster's:
                          * redis_cluster.h */
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

/* A client of one server whose address a finder gives (redis_sentinel.c):
 * find is called (again) whenever the address is wanted and unknown (one
 * question at a time is the finder's business); free when the client is. */
typedef struct {
  void (*find)(void *state);
  void (*free)(void *state);
} gw_redis_finder_t;
/* p's db, password, pool; p->addr as given (messages). NULL with err
 * (state is then the caller's to free). */
gw_redis_t *gw_redis_new_found(struct event_base *base, const gw_redis_params_t *p, const gw_redis_finder_t *finder,
                               void *state, char *err, size_t errlen);
/* The finder's answer: the server is at sa (addr: it as text, why: for the
 * log when it moved); waiting calls go. */
void gw_redis_found(gw_redis_t *r, const gw_sockaddr_t *sa, socklen_t len, const char *addr, const char *why);
/* The finder has no answer: waiting calls fail with err. */
void gw_redis_not_found(gw_redis_t *r, gw_err_t err);

/* A client that hands every call to a router (redis_cluster.c) instead of
 * connections of its own. The router's operations are handed out as
 * gw_redis_op_t: each begins with a gw_dreq_t of the client's pool
 * (gw_redis_pool), whose protocol is proto (their timeouts and deferred
 * failures); gw_redis_cancel and gw_redis_free come back to it. */
typedef struct {
  const gw_dconn_proto_t *proto;
  gw_redis_op_t *(*exec)(void *state, const char *cmd, size_t len, size_t nreplies, int timeout_ms,
                         gw_redis_done_cb cb, void *arg);
  void (*cancel)(gw_redis_op_t *op);
  gw_redis_t *(*subscriber)(void *state); /* the client a subscriber of this one uses */
  void (*free)(void *state);
} gw_redis_router_t;
/* addr: as given (messages); NULL when out of memory. */
gw_redis_t *gw_redis_new_router(struct event_base *base, const char *addr, const gw_redis_router_t *router, void *state);
gw_dpool_t *gw_redis_pool(gw_redis_t *r);

#endif
