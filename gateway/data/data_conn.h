/* data_conn.h - the connection core of the data clients (redis.c,
 * tarantool.c; a new data protocol goes on it too): per address one pool
 * (gw_dpool_t) of non-blocking connections (gw_dconn_t) with their send and
 * receive buffers, the address's backoff and mark-down, and the requests
 * awaiting a reply on each connection (gw_dreq_t), in the order they were
 * sent, with their timeout and their deferred failure, and the line of
 * those waiting for a connection.
 *
 * The protocol owns the meaning: it embeds gw_dpool_t in its client,
 * gw_dconn_t (first) in its connection and gw_dreq_t in its operation, says
 * what a connection's events mean (gw_dconn_proto_t), frames what it
 * appends to c->out, consumes c->in, and matches each reply to a pending
 * request (the oldest: c->head, or by id: gw_dconn_find).
 *
 * Who owns what: the pool owns its connections (gw_dpool_dispose closes
 * them); a connection owns its socket, events and buffers and lists its
 * pending requests without owning them: the protocol's operation owns its
 * gw_dreq_t, and gw_dconn_close() leaves each one unattached (conn NULL),
 * so a protocol fails them first when it must. A connection closed while
 * its readable callback runs is freed when that callback returns. */
#ifndef GW_DATA_CONN_H
#define GW_DATA_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event_struct.h>

#include "addr.h"
#include "buf.h"
#include "error.h"

typedef struct gw_dpool_s gw_dpool_t;
typedef struct gw_dconn_s gw_dconn_t;
typedef struct gw_dreq_s gw_dreq_t;

/* A protocol's part. The messages are static strings (gw_err_t's msg). */
typedef struct {
  const char *name;       /* "redis": in messages */
  const char *refused;    /* "connection to redis refused" */
  const char *unreachable; /* "cannot connect to redis" */
  const char *closed;     /* "redis closed the connection" */
  const char *reset;      /* "connection to redis reset" */
  const char *down;       /* "redis is down (reconnecting with backoff)" */
  /* c's connect completed (the pool's backoff is reset, reads are armed);
   * c->out is sent after it returns. NULL: nothing to do. */
  void (*connected)(gw_dconn_t *c);
  /* New bytes in c->in from c->in_off: consume what is complete (advance
   * c->in_off); c may be closed meanwhile (c->closed), the rest is kept. */
  void (*readable)(gw_dconn_t *c);
  /* c failed (c->connecting: its connect; else the peer closed or reset it,
   * or a send failed): the protocol fails what c carries and closes c. */
  void (*failed)(gw_dconn_t *c, gw_err_t err);
  /* Frees what the protocol's part of c holds (c is being closed). */
  void (*dispose)(gw_dconn_t *c);
  /* A request's timer fired (its deferred failure, if any, is dropped). */
  void (*timed_out)(gw_dreq_t *q);
  /* A request's deferred failure (gw_dreq_fail_later) is due. */
  void (*fail)(gw_dreq_t *q, gw_err_t err);
} gw_dconn_proto_t;

/* Backoff of a failed connect: doubles from the first to the last pause. */
#define GW_DPOOL_BACKOFF_FIRST_MS 100
#define GW_DPOOL_BACKOFF_MAX_MS 2000

/* An address's connections. */
struct gw_dpool_s {
  struct event_base *base;
  const gw_dconn_proto_t *proto;
  gw_sockaddr_t sa;       /* salen 0: no address yet (a Sentinel's master) */
  socklen_t salen;
  int max, n;             /* connections at most; counted ones open */
  gw_dconn_t *conns;      /* every connection, counted or not */
  gw_dconn_t *idle;       /* a stack of idle ones (gw_dconn_idle_push) */
  gw_dreq_t *wait_head, *wait_tail; /* requests waiting for a connection (or an address) */
  double down_until_ms;   /* connects fail fast until then */
  int backoff_ms;
};

/* One connection. */
struct gw_dconn_s {
  gw_dpool_t *pool;
  gw_dconn_t *next, *prev;      /* in pool->conns */
  gw_dconn_t *next_idle;
  int fd;
  struct event rev, wev;
  struct event flush_ev;        /* gw_dconn_flush_soon's write */
  unsigned connecting : 1, counted : 1, idle : 1, flush_queued : 1, busy : 1, closed : 1;
  gw_buf_t in;                  /* received; in_off already consumed */
  size_t in_off;
  gw_buf_t out;                 /* to send; out_off already sent */
  size_t out_off;
  gw_dreq_t *head, *tail;       /* awaiting replies, oldest first */
  int npending;
};

/* A request awaiting its reply (embedded in the protocol's operation). */
struct gw_dreq_s {
  gw_dpool_t *pool;
  gw_dconn_t *conn;             /* the connection it was sent on, or NULL */
  gw_dreq_t *next, *prev;      /* in conn's pending list, or in the pool's line */
  uint64_t id;                  /* matched by id (gw_dconn_find), or unused */
  struct event timer, later;
  unsigned has_timer : 1, has_later : 1, waiting : 1;
  gw_err_t err;                 /* the deferred failure */
};

/* p for addr ("IP:port", "[v6]:port", "localhost:port", "unix:/path"; NULL:
 * none yet) with max connections (at least 1); -1 with err on a bad address. */
int gw_dpool_init(gw_dpool_t *p, struct event_base *base, const gw_dconn_proto_t *proto, const char *addr, int max,
                  char *err, size_t errlen);
/* Closes every connection of p (its requests are left unattached). */
void gw_dpool_dispose(gw_dpool_t *p);
/* A connect failed: connects fail fast (gw_dpool_is_down) for a pause that doubles. */
void gw_dpool_mark_down(gw_dpool_t *p);
int gw_dpool_is_down(const gw_dpool_t *p);
/* A new address (a Sentinel's new master): the backoff starts over. */
void gw_dpool_set_addr(gw_dpool_t *p, const gw_sockaddr_t *sa, socklen_t salen);
/* The most recently idled connection, taken off the stack; NULL: none. */
gw_dconn_t *gw_dpool_idle_pop(gw_dpool_t *p);
/* The counted connection with the fewest pending requests; NULL: none. */
gw_dconn_t *gw_dpool_least_loaded(gw_dpool_t *p);
/* q (on no connection) waits at the end of p's line. */
void gw_dpool_wait(gw_dpool_t *p, gw_dreq_t *q);
/* The first waiting request, taken out of the line; NULL: none. */
gw_dreq_t *gw_dpool_next_waiter(gw_dpool_t *p);
/* Every waiting request leaves the line and fails with err (gw_dreq_fail_later). */
void gw_dpool_fail_waiters(gw_dpool_t *p, gw_err_t err);

/* A new connection of size bytes (the protocol's struct, gw_dconn_t first),
 * connecting; counted: one of p's max (else a connection of its own, e.g. a
 * subscriber's). NULL with *err (the address is marked down when the
 * connect fails at once). */
gw_dconn_t *gw_dconn_open(gw_dpool_t *p, size_t size, int counted, gw_err_t *err);
/* Closes c now (no callback); its memory goes when its readable returns. */
void gw_dconn_close(gw_dconn_t *c);
/* c takes nothing new: it no longer counts as one of the pool's. */
void gw_dconn_uncount(gw_dconn_t *c);
/* c is idle: on top of the pool's stack (taken off by pop or close). */
void gw_dconn_idle_push(gw_dconn_t *c);
/* Sends what c->out holds. A send error is reported (proto->failed) only
 * when report_now; else from the write event, so a caller that must not
 * call back (an exec) never sees it. */
void gw_dconn_flush(gw_dconn_t *c, int report_now);
/* Sends c->out after the events already active in this loop iteration:
 * the requests made by every handler run meanwhile go out in one send. */
void gw_dconn_flush_soon(gw_dconn_t *c);

/* q awaits its reply on c (after the others). */
void gw_dconn_attach(gw_dconn_t *c, gw_dreq_t *q);
/* The pending request with id, or NULL. */
gw_dreq_t *gw_dconn_find(const gw_dconn_t *c, uint64_t id);

/* q of p; its timer (timeout_ms > 0) calls proto->timed_out. */
void gw_dreq_init(gw_dreq_t *q, gw_dpool_t *p, int timeout_ms);
/* q no longer awaits a reply on its connection (if any). */
void gw_dreq_detach(gw_dreq_t *q);
/* q leaves its pool's line (if it waits there). */
void gw_dreq_unwait(gw_dreq_t *q);
/* q's failure err goes to proto->fail from a loop event of its own. */
void gw_dreq_fail_later(gw_dreq_t *q, gw_err_t err);
/* q ends: its timer and deferred failure are stopped (call before its end
 * is delivered and before q is freed). */
void gw_dreq_stop(gw_dreq_t *q);

#endif
