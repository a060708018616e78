/* pooled_exchange.h - the life of one request to an upstream server over a
 * pooled connection, shared by the HTTP/1 client (http1_client.c) and the
 * FastCGI client (fcgi_client.c), which plug in their protocol as a small
 * ops table (request framing, response parsing) and own nothing else.
 *
 * What the core does, once: take a keep-alive connection from pool.c (one
 * that died unnoticed is dropped first when the request could not be resent)
 * or connect (non-blocking, connect timeout); send the serialised request
 * (`wire`, kept so a retry can resend it) and then a streamed body from the
 * caller's evbuffer, framed by the protocol, with on_body_sent back-pressure;
 * read with a timeout that does not run while paused; pause/resume (bytes
 * kept by the protocol are delivered from the loop, never inside resume);
 * cancel from inside the protocol's user callbacks (freed once they
 * returned); the done callback deferred to the loop when a failure is found
 * inside a start call; one retry on a dead pooled connection when that is
 * safe; a connection parked again only when the protocol says the exchange
 * ended exactly at the end of what was read, with all of the request sent.
 *
 * Layout: the pool is pool.c's gw_pool_t (the protocol's ops and its own
 * per-pool state in it); the protocol embeds gw_px_conn_t and gw_px_t as the
 * first members of its connection and request structs, and allocates them
 * (the request with its wire bytes behind it). */
#ifndef GW_POOLED_EXCHANGE_H
#define GW_POOLED_EXCHANGE_H

#include <stddef.h>
#include <sys/types.h>
#include <event2/buffer.h>
#include <event2/event_struct.h>

#include "error.h"
#include "pool.h"

typedef struct gw_px_conn_s gw_px_conn_t;
typedef struct gw_px_s gw_px_t;

typedef enum { GW_PX_CONNECTING, GW_PX_HANDSHAKE, GW_PX_ACTIVE, GW_PX_IDLE } gw_px_state_t;

/* A transport under the protocol (TLS for an HTTPS upstream); NULL: the socket. */
typedef struct {
  ssize_t (*write)(gw_px_conn_t *c, const void *buf, size_t n); /* as send(2) */
  int (*write_buffer)(gw_px_conn_t *c, struct evbuffer *out);   /* as evbuffer_write() */
} gw_px_io_t;

struct gw_px_conn_s {
  gw_pool_conn_t pc;           /* first: the socket, its events, its key, its pool */
  gw_px_t *x;                  /* while CONNECTING / HANDSHAKE / ACTIVE */
  const gw_px_io_t *io;        /* NULL: plain socket */
  gw_px_state_t state;
  unsigned served : 1;         /* completed an exchange: a reused connection */
};

/* The protocol's parts. Those marked optional may be NULL. */
typedef struct gw_px_ops_s {
  const char *name;            /* in logs: "upstream", "FastCGI" */
  gw_err_t err_reset, err_premature, err_timeout;
  /* connections */
  int (*conn_init)(gw_px_conn_t *c);   /* a new connection: its parser state; -1 out of memory */
  int (*connected)(gw_px_conn_t *c);   /* optional: connect(2) done; 1 when it took over
                                          (TLS handshake; gw_px_conn_ready() later) */
  void (*handshake)(gw_px_conn_t *c);  /* optional: an event while GW_PX_HANDSHAKE */
  void (*handshake_timeout)(gw_px_conn_t *c); /* optional: the connect timer ran out in it */
  void (*attach)(gw_px_conn_t *c);     /* optional: a request starts on c (reset the parser) */
  void (*conn_park)(gw_px_conn_t *c);  /* optional: c goes idle: drop what it kept */
  void (*conn_free)(gw_px_conn_t *c);  /* optional: as gw_pool_conn_ops_t.on_free */
  int (*idle_check)(gw_pool_conn_t *c);/* optional: as gw_pool_conn_ops_t.idle_check */
  /* reading: the protocol's loop reads and parses, and ends the exchange
   * with gw_px_finish / gw_px_fail / gw_px_abandon / gw_px_io_failed */
  void (*readable)(gw_px_conn_t *c);
  int (*kept)(gw_px_conn_t *c);        /* bytes kept across a pause, or below the socket: 1 to
                                          have readable() called from the loop on resume */
  /* requests */
  size_t (*frame_body)(gw_px_t *x);    /* a streamed body: move what body_src holds into
                                          body_out, framed (set body_ended at its end);
                                          returns the bytes taken */
  void (*reset)(gw_px_t *x);           /* optional: before a retry */
  void (*done)(gw_px_t *x, gw_err_t err); /* the user's callback */
  void (*free)(gw_px_t *x);            /* frees the request (its own parts, then the struct) */
  void (*proto_free)(void *proto);     /* optional: frees the pool's proto state (its
                                          connections are closed already) */
} gw_px_ops_t;


struct gw_px_s {
  gw_pool_t *pool;
  gw_pool_key_t *key;          /* the destination, held while the request lives */
  gw_px_conn_t *conn;
  void *arg;                   /* the user's, for on_body_sent */
  const char *label;           /* the server in logs after ops->name ("unix:/run/php.sock"), or NULL */
  struct event dev;            /* a failure found inside a start call, reported from the loop
                                  (assigned only then: see deferred) */
  gw_err_t err;
  int connect_timeout_ms, timeout_ms;
  unsigned idempotent : 1;     /* may be resent once after a dead pooled connection */
  unsigned no_retry : 1;       /* never resent, never on a pooled connection (an upgrade) */
  unsigned read_timer : 1;     /* every read restarts the timeout (else: the whole exchange) */
  unsigned no_keepalive : 1;   /* the connection is closed after it */
  unsigned retried : 1;
  unsigned starting : 1;       /* inside a start call: failures are deferred */
  unsigned got_bytes : 1;      /* a response byte arrived on this attempt */
  unsigned paused : 1;
  unsigned in_cb : 1;          /* inside the protocol's on_head/on_body call */
  unsigned cancelled : 1;      /* cancelled from inside it */
  unsigned send_stopped : 1;   /* the server stopped reading the request (answered early) */
  unsigned deferred : 1;       /* dev was made active (a failure reported from the loop) */
  /* a streamed request body */
  unsigned body_complete : 1;  /* the caller put all of it into body_src */
  unsigned body_taken : 1;     /* some of it left body_src: no retry */
  unsigned body_ended : 1;     /* all of it is framed into body_out */
  struct evbuffer *body_src;   /* borrowed from the caller */
  struct evbuffer *body_out;   /* owned: framed, not written yet */
  void (*on_body_sent)(void *arg);
  struct event sent_ev;        /* on_body_sent from the loop */
  const char *wire;            /* the serialised request (in the protocol's allocation) */
  size_t wire_len, wire_off;
};

/* A pool (pool.c) of connections carrying ops's protocol; proto is the
 * protocol's own state (freed with ops->proto_free). NULL when out of memory. */
gw_pool_t *gw_px_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms, const gw_px_ops_t *ops,
                          size_t conn_size, void *proto);
/* Frees it now, or once the running callback returned. NULL is fine. */
void gw_px_pool_release(gw_pool_t *p);

/* Fills the core's part of a new request (x zeroed by the caller). Streamed
 * body: body_src set; then body_out is allocated here. -1 out of memory. */
int gw_px_init(gw_px_t *x, gw_pool_t *p, void *arg, struct evbuffer *body_src, void (*on_body_sent)(void *arg));
/* Starts it: key taken from the caller (NULL: a bad request, which fails
 * from the loop with err). Never calls back from inside. */
void gw_px_start(gw_px_t *x, gw_pool_key_t *key, gw_err_t err);

/* The end of an exchange, each the last thing its caller does. finish:
 * ops->done, then free; the connection is parked when keep (and the pool
 * keeps connections), else closed. fail: as finish without keep, deferred
 * to the loop when inside a start call. abandon: no callback. */
void gw_px_finish(gw_px_t *x, gw_err_t err, int keep);
void gw_px_fail(gw_px_t *x, gw_err_t err);
void gw_px_abandon(gw_px_t *x);
/* A read or write failed (errno e, 0 for EOF): a retry when that is safe,
 * else the matching failure. */
void gw_px_io_failed(gw_px_conn_t *c, int e);
/* EOF before the response ended: 1 when the request was resent (the caller
 * returns), else 0 (the caller reports it). */
int gw_px_retry_on_eof(gw_px_conn_t *c);

/* Around the protocol's user callbacks: enter, call, then leave returns 1
 * when the request was cancelled meanwhile (it is abandoned there: touch
 * nothing). */
static inline void gw_px_enter_cb(gw_px_t *x)
{
  x->pool->cb_depth++;
  x->in_cb = 1;
}
int gw_px_leave_cb(gw_px_t *x);

/* A response byte arrived (restarts the read timeout when it runs per read). */
static inline void gw_px_got_bytes(gw_px_conn_t *c)
{
  c->x->got_bytes = 1;
  if (c->x->read_timer) gw_pool_conn_timer(&c->pc, c->x->timeout_ms);
}
/* The protocol's handshake is done (GW_PX_HANDSHAKE): the request goes out. */
void gw_px_conn_ready(gw_px_conn_t *c);
/* 1 when every byte of the request went out. */
static inline int gw_px_all_sent(const gw_px_t *x)
{
  return x->wire_off == x->wire_len && !x->send_stopped &&
         (x->body_src == NULL || (x->body_ended && evbuffer_get_length(x->body_out) == 0));
}

/* The public operations of both clients. */
void gw_px_cancel(gw_px_t *x);
void gw_px_pause(gw_px_t *x);
void gw_px_resume(gw_px_t *x);
void gw_px_body_more(gw_px_t *x, int complete);

#endif
