/* pool.h - outgoing connections and the keep-alive pool of idle ones, keyed
 * by destination address, on a worker's event_base.
 *
 * The one pool type of the outbound HTTP side: a worker has one per
 * protocol (HTTP/1.1 and FastCGI through pooled_exchange.c, whose state and
 * counters live in it too; HTTP/2's sockets and keys, http2_client.c), the
 * protocol implied by the instance.
 *
 * Knows nothing of HTTP: a user (http1_client.c, fcgi_client.c through
 * pooled_exchange.c, http2_client.c) embeds a
 * gw_pool_conn_t as the first member of its own connection struct, has the
 * pool open it (non-blocking connect) or take an idle one, drives its socket
 * through the functions below, and parks it again when a response ended
 * cleanly. The pool owns the socket's events: while a connection is in use
 * they call the user's ops; while it is idle the pool handles them itself
 * (any readiness means EOF, an error or stray bytes: the connection is
 * closed; so is one idle for idle_timeout_ms, or past keepalive_max per key).
 *
 * Keys (the binary sockaddr, so "::1" and "0::1" share one, plus the TLS
 * settings and server name of an HTTPS upstream, so a TLS connection is never
 * handed to a plain request or to another name; and the PROXY protocol header
 * a connection starts with, so one that announced client A never carries a
 * request of client B) are counted references: a key lives while some user
 * request or connection holds it. */
#ifndef GW_POOL_H
#define GW_POOL_H

#include <stddef.h>
#include <sys/socket.h>
#include <event2/event_struct.h>

#include "addr.h"

typedef struct gw_pool_s gw_pool_t;
typedef struct gw_pool_key_s gw_pool_key_t;
typedef struct gw_pool_conn_s gw_pool_conn_t;

/* Called while a connection is in use (never while idle), from the loop. */
typedef struct {
  void (*on_read)(gw_pool_conn_t *c);    /* readable (or gw_pool_conn_kick_read) */
  void (*on_write)(gw_pool_conn_t *c);   /* writable; while connecting: connect finished or failed */
  void (*on_timeout)(gw_pool_conn_t *c); /* the timer of gw_pool_conn_timer expired */
  void (*on_free)(gw_pool_conn_t *c);    /* optional: the connection is being freed (by
                                            gw_pool_close, or by the pool when idle), its
                                            socket still open; release what the user struct
                                            holds, not the struct itself */
  int (*idle_check)(gw_pool_conn_t *c);  /* optional: an idle connection's socket has bytes;
                                            1 if they were the transport's own (a TLS session
                                            ticket) and it is still good, 0 to drop it */
} gw_pool_conn_ops_t;

#define GW_POOL_KEY_BUCKETS 64
#define GW_POOL_TIMEOUT_CACHE 8

struct gw_px_ops_s;

/* One pool: the only pool type of the outbound HTTP side. The first block is
 * pool.c's (read-only for others); the second is the exchange core's
 * (pooled_exchange.c) and its protocol's, unused by http2_client.c, which
 * drives its multiplexed connections itself and never parks them. */
struct gw_pool_s {
  struct event_base *base;
  gw_pool_conn_ops_t ops;
  size_t conn_size;
  int keepalive_max;
  int idle_timeout_ms;
  unsigned long idle;          /* idle connections right now */
  gw_pool_key_t *buckets[GW_POOL_KEY_BUCKETS];
  struct {
    int ms;
    const struct timeval *tv;
  } tcache[GW_POOL_TIMEOUT_CACHE];
  int ntcache;
  /* pooled_exchange.c */
  const struct gw_px_ops_s *px; /* the protocol over the connections */
  void *proto;                 /* the protocol's own state for this pool, or NULL */
  int cb_depth;                /* > 0 while a user callback runs */
  int free_pending;            /* freed from inside one: finished when it returns */
  unsigned long live, opened, reused, retried;
  unsigned long tls_handshakes, tls_resumed; /* the protocol's TLS (an HTTPS upstream) */
};

/* The first member of the user's connection struct (fields read-only for it). */
struct gw_pool_conn_s {
  gw_pool_t *pool;
  gw_pool_key_t *key;          /* held (one reference) while the connection lives */
  gw_pool_conn_t *prev, *next; /* the key's idle list */
  int fd;
  unsigned idle : 1;           /* parked in the pool */
  unsigned rev_added : 1;
  unsigned wev_added : 1;
  struct event rev, wev, tev;
};


/* One per worker. keepalive_max: idle connections kept per key (0: none,
 * gw_pool_park closes); idle_timeout_ms (> 0, else 60000): an idle connection
 * is closed after this long. conn_size: bytes of the user's connection struct
 * (>= sizeof(gw_pool_conn_t)); ops is copied. NULL when out of memory. */
gw_pool_t *gw_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms, const gw_pool_conn_ops_t *ops,
                       size_t conn_size);

/* Closes every idle connection and frees the pool and its unreferenced keys.
 * Connections in use must have been closed first. */
void gw_pool_free(gw_pool_t *pool);

int gw_pool_keepalive_max(const gw_pool_t *pool);
/* Idle connections right now. */
unsigned long gw_pool_idle_count(const gw_pool_t *pool);

/* The key of addr (len bytes, at most sizeof(gw_sockaddr_t)) and, for a TLS
 * upstream, its settings (tls, compared as a pointer) and server name (copied;
 * NULL for plain), and the PROXY protocol header its connections start with
 * (proxy_len bytes, copied; NULL/0: none), with one more reference; NULL when
 * out of memory. Give it back with gw_pool_key_put. */
gw_pool_key_t *gw_pool_key_get(gw_pool_t *pool, const gw_sockaddr_t *addr, socklen_t len, const void *tls,
                               const char *name, const void *proxy, size_t proxy_len);
/* What the key was made with. */
const gw_sockaddr_t *gw_pool_key_addr(const gw_pool_key_t *k, socklen_t *len);
const void *gw_pool_key_tls(const gw_pool_key_t *k);
const char *gw_pool_key_name(const gw_pool_key_t *k); /* "" for plain */
const unsigned char *gw_pool_key_proxy(const gw_pool_key_t *k, size_t *len); /* NULL, *len 0: none */
void gw_pool_key_put(gw_pool_t *pool, gw_pool_key_t *k);

/* The most recently parked idle connection to k, now in use (its read event
 * still armed, no timer), or NULL. */
gw_pool_conn_t *gw_pool_take(gw_pool_t *pool, gw_pool_key_t *k);

/* A new connection to k: a non-blocking socket (TCP_NODELAY for TCP) and
 * connect(2) started. Returns 0 (connected already), EINPROGRESS (the user
 * waits for on_write; nothing is armed yet), or another errno (connect
 * failed: *out is set, the user closes it). *out is NULL when the socket (the
 * error is logged) or the memory could not be had; the result is then -1. */
int gw_pool_connect(gw_pool_t *pool, gw_pool_key_t *k, gw_pool_conn_t **out);

/* The error of a finished non-blocking connect: 0, or an errno
 * (EINPROGRESS/EINTR: not finished yet). */
int gw_pool_conn_error(gw_pool_conn_t *c);

/* Back into the pool after a clean exchange: write event off, read event on
 * (idle readiness means the peer went away), idle timer started. Closes it
 * instead when the pool keeps no connections, and closes the key's oldest
 * when more than keepalive_max are idle. */
void gw_pool_park(gw_pool_conn_t *c);

/* Closes and frees c (in use or idle): events deleted, socket closed, on_free
 * called, key reference dropped. */
void gw_pool_close(gw_pool_conn_t *c);

/* Event control for a connection in use. */
void gw_pool_conn_read(gw_pool_conn_t *c, int on);
void gw_pool_conn_write(gw_pool_conn_t *c, int on);
void gw_pool_conn_timer(gw_pool_conn_t *c, int ms); /* (re)starts it */
void gw_pool_conn_timer_stop(gw_pool_conn_t *c);
/* on_read from the loop soon, as if readable (never from inside this call). */
void gw_pool_conn_kick_read(gw_pool_conn_t *c);

/* 1 if an idle connection just taken visibly died (EOF, error or stray
 * bytes; idle_check decides about bytes) without the loop having noticed
 * yet. One syscall when nothing is there. */
int gw_pool_conn_is_stale(gw_pool_conn_t *c);

#endif
