/* http1_server.h - one HTTP/1.1 client connection (server side): it parses requests
 * and implements their protocol side (request.h's gw_protocol_t). */
#ifndef GW_CONN_H
#define GW_CONN_H

#include <stdint.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <llhttp.h>

#include "head_scan.h"
#include "request.h"

typedef enum {
  GW_CONN_IDLE,        /* between requests: keep-alive timer */
  GW_CONN_HEAD,        /* reading a request head: header timer */
  GW_CONN_BODY,        /* reading a body: body timer */
  GW_CONN_BUSY,        /* a request is being handled; reading paused once buffered,
                          except for the rest of a body it streams (req.in.body_streaming) */
  GW_CONN_CLOSING      /* final response queued: flush, half-close, drain, close */
} gw_conn_state_t;

/* What a connection holds only while it has something to do: from the
 * first byte of a request until its response is flushed. Idle keep-alive
 * connections give it back (http1_server.c keeps a few for reuse), so waiting costs
 * only the gw_conn_t below. */
typedef struct gw_conn_active_s {
  llhttp_t parser;
  struct event write_ev;    /* assigned to write_owner on first use (http1_server.c) */
  struct gw_conn_s *write_owner;
  int writing;              /* write_ev is added */
  int flush_soon;           /* write_ev is made active to flush `out` (streaming) */
  struct evbuffer *out;     /* owned output */

  gw_request_t req;         /* the request being parsed or handled */
  int req_ready;            /* req is parsed completely and not yet started */
  int mid_message;          /* bytes were parsed since the last response (a stray empty
                               line, say): the parser is not known to be between two
                               messages, so the connection keeps it */
  /* parse bookkeeping for the current request head */
  size_t head_bytes, nheaders, ncontent_length, ntransfer_encoding, nhost;
  size_t host_index;        /* where the (last) Host field is in req.headers */
  gw_head_scan_t head_scan; /* line endings of the head checked so far */
  int last_cb;              /* which llhttp callback ran last (obs-fold detection) */
  const char *data_end;     /* end of the data given to llhttp_execute() */
  int value_at_data_end;    /* the last header-value span ended at data_end */
  char *hname; size_t hname_len, hname_cap; /* header name being parsed */
  char *hvalue; size_t hvalue_len, hvalue_cap;
  size_t max_body;          /* the request body limit of its location */
  size_t body_bytes;        /* request body bytes parsed so far */
  int error_status;         /* set by a parser callback that rejects the request */
  int stream_chunked;       /* the streamed response is chunk-encoded */
  int stream_keepalive;     /* ... and announced keep-alive */
  size_t stream_bytes;      /* bytes of it queued so far (access log) */
  size_t stream_head_bytes; /* ... of which its head */
  /* A file range queued after `out` (stream_file): sent with sendfile(2)
   * once `out` is written; nothing else is queued meanwhile. */
  int has_file;             /* file_fd is open and owned */
  int file_fd;
  long long file_off, file_left;
  struct gw_conn_active_s *next_spare; /* http1_server.c's cache of unused ones */
} gw_conn_active_t;

struct gw_conn_s {
  gw_context_t *ctx;
  gw_conn_active_t *a;      /* owned while busy (see above), else NULL */
  int fd;
  gw_conn_state_t state;
  struct event read_ev, timer_ev;
  int64_t deadline;         /* CLOCK_MONOTONIC_COARSE ms of the current timeout; 0: none */
  int64_t timer_at;         /* when timer_ev is armed to fire; 0: not armed */
  char *buf;                /* unparsed input: the worker's shared buffer while
                               inside a read callback, else owned (NULL when empty) */
  uint32_t len, pos, cap;   /* buf[pos, len) is not parsed yet (at most 64 KiB) */
  unsigned char reading:1;  /* read_ev is added */
  unsigned char close_after:1;/* close once the output is flushed */
  unsigned char read_whole:1; /* the last request was read to its end: that
                               close need not linger (nothing more to drain) */
  unsigned char dead:1;     /* closed; free when in_callback drops to 0 */
  unsigned char served:1;   /* a response went out: later heads get header_timeout */
  unsigned char tls:1;      /* TLS: the struct is http1_server.c's gw_conn_tls_t, whose
                               separately allocated gw_tls_conn_t does the I/O */
  unsigned char in_callback;/* depth of conn code on the stack: defer the free */
  char remote_addr[46];     /* the client's address as text (INET6_ADDRSTRLEN) */
  int remote_port;          /* ... and its port */
  char *balancer_addr;      /* owned: the socket peer's address when a PROXY protocol
                               header named the client (remote_addr); else NULL */
  gw_conn_t *next, *prev;   /* ctx->http1_conns */
};

/* Takes ownership of a freshly accepted socket from client; balancer: the
 * socket's peer when a PROXY protocol header named the client, else NULL. */
gw_conn_t *gw_conn_new(gw_context_t *ctx, int fd, const struct sockaddr *client, const struct sockaddr *balancer);

/* Worker stop: close now (fast) or once the current request is answered (graceful). */
void gw_conn_shutdown(gw_conn_t *c, int graceful);

#endif
