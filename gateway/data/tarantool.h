/* tarantool.h - a Tarantool client on the worker's loop: per address and
 * user a pool of connections, requests pipelined on them by sync id
 * (iproto.h frames them).
 *
 * Every operation ends exactly once through its callback, from a loop event,
 * never from inside gw_tnt_exec(); gw_tnt_cancel() stops it with no callback.
 * A connection that has sent a request whose reply nobody waits for any
 * more (a timeout, a cancel) takes no new request: it is closed as soon as
 * its other requests are answered, so a stale reply is never read as
 * someone else's. Bytes that are not iproto close the connection and fail
 * every request on it. */
#ifndef GW_TARANTOOL_H
#define GW_TARANTOOL_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

struct event_base;
typedef struct gw_tnt_s gw_tnt_t;
typedef struct gw_tnt_op_s gw_tnt_op_t;

typedef struct {
  const char *addr;     /* "IP:port", "localhost:port" or "unix:/path" */
  const char *user;     /* AUTH (chap-sha1) on each new connection, or NULL: guest */
  const char *password; /* NULL: empty */
  int pool;             /* connections at most; requests are pipelined on them */
} gw_tnt_params_t;

/* A client of p->addr on base (strings copied); NULL with err on a bad address. */
gw_tnt_t *gw_tnt_new(struct event_base *base, const gw_tnt_params_t *p, char *err, size_t errlen);
/* Closes its connections (call when no operation is left). */
void gw_tnt_free(gw_tnt_t *t);

/* An operation's end: err.kind GW_OK with the reply's code (0, or
 * 0x8000 | Tarantool's error code) and its body (one msgpack map, checked by
 * gw_iproto_check; valid during the call only), or a failure: a connect
 * error, GW_ERR_TIMEOUT, GW_ERR_CLOSED / GW_ERR_RESET, GW_ERR_BAD_RESPONSE. */
typedef void (*gw_tnt_done_cb)(gw_err_t err, uint64_t code, const char *body, size_t body_len, void *arg);

/* Sends a request of type with body (a msgpack map, copied), waits at most
 * timeout_ms for its reply (0: no limit). NULL when out of memory. */
gw_tnt_op_t *gw_tnt_exec(gw_tnt_t *t, uint32_t type, const char *body, size_t body_len, int timeout_ms,
                         gw_tnt_done_cb cb, void *arg);
/* Stops op (no callback afterwards); its connection is retired. */
void gw_tnt_cancel(gw_tnt_op_t *op);

const char *gw_tnt_addr(const gw_tnt_t *t);

#endif
