/* websocket.c - one server-side WebSocket connection (see websocket.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event_struct.h>

#include "log.h"
#include "timeutil.h"
#include "websocket.h"
#include "ws_frame.h"

#define READ_SIZE (16 * 1024)
#define READS_PER_EVENT 4 /* then other connections get their turn */

struct gw_ws_s {
  int fd;                   /* the socket, -1 for a socketless end (an HTTP/2 stream) */
  const gw_io_t *io;        /* the end's layer (TLS, a stream), or NULL: a plain socket */
  void *ioc;                /* owned: io's state */
  unsigned open : 1;        /* the end is ours (not closed yet) */
  struct event rev, wev, tev;
  struct evbuffer *out;     /* owned: frames not written yet */
  gw_ws_parser_t parser;
  const gw_ws_events_t *events;
  void *arg;
  uint8_t *held;            /* owned: bytes read past a message on_message kept */
  size_t held_len;
  int64_t last;             /* CLOCK_MONOTONIC_COARSE ms of the last byte moved */
  int64_t close_at;         /* when a close handshake gives up; 0: none */
  int timeout_ms;
  unsigned reading : 1;     /* rev is added */
  unsigned writing : 1;     /* wev is added */
  unsigned paused : 1;      /* on_message kept its message */
  unsigned msg_held : 1;    /* ... which is the parser's current message */
  unsigned close_sent : 1;
  unsigned close_received : 1;
  unsigned shut_after_flush : 1; /* close the socket once `out` is written */
  unsigned closed_told : 1; /* on_closed was called */
  unsigned above_high : 1;  /* output went above the high water mark */
  unsigned released : 1;
  int busy;                 /* depth of our callbacks on the stack: defer the free */
  char peer[48];
  char *protocol;           /* owned, or NULL */
  gw_ws_t *next, *prev;     /* all connections, for gw_ws_close_all */
};

static gw_ws_t *all;
static unsigned long nws;

static void ws_free(gw_ws_t *ws)
{
  if (ws->events && ws->events->on_free) ws->events->on_free(ws->arg);
  if (ws->out) evbuffer_free(ws->out);
  gw_ws_parser_free(&ws->parser);
  free(ws->held);
  free(ws->protocol);
  if (ws->prev) ws->prev->next = ws->next;
  else all = ws->next;
  if (ws->next) ws->next->prev = ws->prev;
  nws--;
  free(ws);
}

static void maybe_free(gw_ws_t *ws)
{
  if (ws->busy == 0 && ws->released && !ws->open) ws_free(ws);
}

static void tell_closed(gw_ws_t *ws, int code)
{
  if (ws->closed_told) return;
  ws->closed_told = 1;
  if (ws->events && ws->events->on_closed) ws->events->on_closed(ws->arg, code);
}

/* Closes the socket (the struct stays until released). */
static void shut(gw_ws_t *ws, int code)
{
  if (!ws->open) return;
  event_del(&ws->rev);
  event_del(&ws->wev);
  event_del(&ws->tev);
  ws->reading = ws->writing = 0;
  if (ws->io && ws->io->watch) ws->io->watch(ws->ioc, NULL, NULL);
  gw_byte_end_t e = {ws->fd, ws->io, ws->ioc};
  gw_byte_end_drop(&e); /* close_notify (RST_STREAM) while the socket is open, then the socket */
  ws->io = NULL;
  ws->ioc = NULL;
  ws->fd = -1;
  ws->open = 0;
  evbuffer_drain(ws->out, evbuffer_get_length(ws->out));
  tell_closed(ws, code);
}

static void arm_timer(gw_ws_t *ws, int64_t ms)
{
  struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
  evtimer_add(&ws->tev, &tv);
}

static void set_reading(gw_ws_t *ws, int on)
{
  if (!ws->open) return;
  if (ws->fd >= 0 && on && !ws->reading) event_add(&ws->rev, NULL);
  else if (ws->fd >= 0 && !on && ws->reading) event_del(&ws->rev);
  ws->reading = on ? 1 : 0;
  /* Decrypted bytes OpenSSL holds (a stream's DATA) raise no socket event: read them now. */
  if (on && ws->io && ws->io->pending(ws->ioc)) event_active(&ws->rev, EV_READ, 0);
}

/* Input is read while the owner takes messages and the output has room:
 * a peer that sends pings but reads nothing cannot grow the pong queue. */
static int may_read(const gw_ws_t *ws)
{
  return !ws->paused && !ws->shut_after_flush && evbuffer_get_length(ws->out) <= GW_WS_HIGH_WATER;
}

static void want_write(gw_ws_t *ws)
{
  if (ws->open && !ws->writing) {
    if (ws->fd >= 0) event_add(&ws->wev, NULL);
    else event_active(&ws->wev, EV_WRITE, 0); /* a socketless end: try now, its layer wakes us when full */
    ws->writing = 1;
  }
}

static void queue_frame(gw_ws_t *ws, int opcode, const void *data, size_t len)
{
  uint8_t head[GW_WS_MAX_HEAD];
  size_t hl = gw_ws_frame_head(head, 1, opcode, len);
  evbuffer_add(ws->out, head, hl);
  if (len) evbuffer_add(ws->out, data, len);
  if (evbuffer_get_length(ws->out) > GW_WS_HIGH_WATER) ws->above_high = 1;
  want_write(ws);
}

static void queue_close(gw_ws_t *ws, int code, const char *reason, size_t len)
{
  if (ws->close_sent || !ws->open) return;
  ws->close_sent = 1;
  uint8_t payload[GW_WS_MAX_CONTROL];
  size_t n = 0;
  if (code != GW_WS_NO_STATUS) {
    payload[0] = (uint8_t)(code >> 8);
    payload[1] = (uint8_t)code;
    if (len > GW_WS_MAX_CONTROL - 2) len = GW_WS_MAX_CONTROL - 2;
    if (len) memcpy(payload + 2, reason, len);
    n = 2 + len;
  }
  queue_frame(ws, GW_WS_CLOSE, payload, n);
  ws->close_at = gw_coarse_ms() + GW_WS_CLOSE_TIMEOUT_MS;
  arm_timer(ws, ws->timeout_ms < GW_WS_CLOSE_TIMEOUT_MS ? ws->timeout_ms : GW_WS_CLOSE_TIMEOUT_MS);
}

/* Writes what is queued; the socket may be closed after. */
static void flush(gw_ws_t *ws)
{
  while (ws->open && evbuffer_get_length(ws->out) > 0) {
    int n = ws->io ? ws->io->write(ws->ioc, ws->out) : evbuffer_write(ws->out, ws->fd);
    if (n > 0) {
      ws->last = gw_coarse_ms();
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    shut(ws, 1006); /* the peer is gone */
    return;
  }
  if (!ws->open) return;
  size_t left = evbuffer_get_length(ws->out);
  if (left == 0 && ws->writing) {
    if (ws->fd >= 0) event_del(&ws->wev);
    ws->writing = 0;
  }
  if (left == 0 && ws->shut_after_flush) {
    shut(ws, ws->parser.error_code ? ws->parser.error_code : ws->parser.close_code);
    return;
  }
  if (!ws->reading && left < GW_WS_LOW_WATER && may_read(ws)) set_reading(ws, 1); /* room again */
  if (ws->above_high && left < GW_WS_LOW_WATER) {
    ws->above_high = 0;
    if (ws->events && ws->events->on_drain) ws->events->on_drain(ws->arg);
  }
}

/* Offers the parser's current message; 0 when the owner kept it. */
static int deliver(gw_ws_t *ws)
{
  gw_ws_parser_t *p = &ws->parser;
  if (ws->close_sent || ws->close_received) return 1; /* closing: dropped */
  if (ws->events == NULL || ws->events->on_message == NULL ||
      !ws->events->on_message(ws->arg, p->msg, p->msg_len, p->msg_binary)) {
    ws->paused = 1;
    ws->msg_held = 1;
    return 0;
  }
  gw_ws_parser_trim(p);
  return 1;
}

/* Parses data; what follows a kept message is held for gw_ws_resume(). */
static void feed(gw_ws_t *ws, const uint8_t *data, size_t len)
{
  gw_ws_parser_t *p = &ws->parser;
  size_t i = 0;
  while (i < len && ws->open && !ws->shut_after_flush) {
    size_t used;
    gw_ws_event_t ev = gw_ws_parse(p, data + i, len - i, &used);
    i += used;
    switch (ev) {
    case GW_WS_EV_NONE: break;
    case GW_WS_EV_MESSAGE:
      if (!deliver(ws)) {
        if (i < len) {
          uint8_t *h = malloc(len - i);
          if (h == NULL) {
            shut(ws, 1006);
            return;
          }
          memcpy(h, data + i, len - i);
          free(ws->held);
          ws->held = h;
          ws->held_len = len - i;
        }
        return;
      }
      break;
    case GW_WS_EV_PING:
      if (!ws->close_sent) queue_frame(ws, GW_WS_PONG, p->ctl, p->ctl_len);
      break;
    case GW_WS_EV_PONG: break;
    case GW_WS_EV_CLOSE:
      ws->close_received = 1;
      /* Echo its code (none: an empty close), then close the socket. */
      queue_close(ws, p->close_code, NULL, 0);
      ws->shut_after_flush = 1;
      tell_closed(ws, p->close_code);
      break;
    case GW_WS_EV_ERROR:
      gw_log_info("websocket %s: %s: closing with %d", ws->peer, p->error, p->error_code);
      queue_close(ws, p->error_code, p->error, strlen(p->error));
      ws->shut_after_flush = 1;
      tell_closed(ws, p->error_code);
      break;
    }
  }
}

/* A read through the end's layer into buf, as read(2). */
static ssize_t layer_read(gw_ws_t *ws, uint8_t *buf, size_t len)
{
  static struct evbuffer *in; /* the worker's, reused: empty between calls */
  if (in == NULL && (in = evbuffer_new()) == NULL) {
    errno = ENOMEM;
    return -1;
  }
  int n = ws->io->read(ws->ioc, in, len);
  if (n > 0) n = evbuffer_remove(in, buf, (size_t)n);
  return n;
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_ws_t *ws = arg;
  ws->busy++;
  if (ws->msg_held) { /* gw_ws_resume(): the kept message first, then what came after it */
    ws->msg_held = 0;
    ws->paused = 0;
    deliver(ws);
  }
  if (!ws->paused && ws->held) {
    uint8_t *h = ws->held;
    size_t n = ws->held_len;
    ws->held = NULL;
    feed(ws, h, n); /* may hold a new remainder */
    free(h);
  }
  uint8_t buf[READ_SIZE];
  for (int k = 0; k < READS_PER_EVENT && ws->open && may_read(ws); k++) {
    ssize_t n = ws->io ? layer_read(ws, buf, sizeof(buf)) : read(ws->fd, buf, sizeof(buf));
    if (n > 0) {
      ws->last = gw_coarse_ms();
      feed(ws, buf, (size_t)n);
      if ((size_t)n < sizeof(buf) && !(ws->io && ws->open && ws->io->pending(ws->ioc))) break;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    shut(ws, 1006); /* EOF or reset without a close frame */
    break;
  }
  if (ws->open) {
    set_reading(ws, may_read(ws));
    flush(ws);
  }
  ws->busy--;
  maybe_free(ws);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_ws_t *ws = arg;
  ws->busy++;
  flush(ws);
  ws->busy--;
  maybe_free(ws);
}

/* The idle timer (and the close handshake's): activity pushes it on. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_ws_t *ws = arg;
  int64_t now = gw_coarse_ms();
  int64_t left = ws->last + ws->timeout_ms - now;
  if (ws->close_at && ws->close_at - now < left) left = ws->close_at - now;
  if (left > 0) {
    arm_timer(ws, left);
    return;
  }
  ws->busy++;
  gw_log_info("websocket %s: %s", ws->peer, ws->close_at ? "no close frame in time: closed" : "idle timeout: closed");
  shut(ws, 1006);
  ws->busy--;
  maybe_free(ws);
}

gw_ws_t *gw_ws_new(struct event_base *base, const gw_byte_end_t *end, const char *peer, struct evbuffer *to_client,
                   struct evbuffer *from_client, size_t max_message, int idle_timeout_ms, const char *protocol)
{
  gw_ws_t *ws = calloc(1, sizeof(*ws));
  if (ws == NULL || (ws->out = evbuffer_new()) == NULL || (protocol && (ws->protocol = strdup(protocol)) == NULL)) {
    if (ws && ws->out) evbuffer_free(ws->out);
    free(ws);
    gw_byte_end_drop(end);
    return NULL;
  }
  int fd = end->fd;
  ws->fd = fd;
  ws->io = end->io;
  ws->ioc = end->ioc;
  ws->open = 1;
  snprintf(ws->peer, sizeof(ws->peer), "%s", peer ? peer : "-");
  if (ws->io == &gw_tls_io) gw_tls_conn_set_peer(ws->ioc, ws->peer); /* it keeps the pointer: ours lives as long */
  gw_ws_parser_init(&ws->parser, max_message ? max_message : GW_WS_DEFAULT_MAX_MESSAGE);
  ws->timeout_ms = idle_timeout_ms > 0 ? idle_timeout_ms : GW_WS_DEFAULT_TIMEOUT_MS;
  ws->last = gw_coarse_ms();
  ws->next = all;
  if (all) all->prev = ws;
  all = ws;
  nws++;
  event_assign(&ws->rev, base, fd, EV_READ | EV_PERSIST, on_read, ws);
  event_assign(&ws->wev, base, fd, EV_WRITE | EV_PERSIST, on_write, ws);
  evtimer_assign(&ws->tev, base, on_timer, ws);
  if (ws->io && ws->io->watch) ws->io->watch(ws->ioc, &ws->rev, &ws->wev);
  arm_timer(ws, ws->timeout_ms);
  if (to_client) evbuffer_add_buffer(ws->out, to_client);
  if (evbuffer_get_length(ws->out)) want_write(ws);
  if (from_client && evbuffer_get_length(from_client)) { /* parsed once someone listens */
    size_t n = evbuffer_get_length(from_client);
    if ((ws->held = malloc(n)) != NULL) {
      evbuffer_remove(from_client, ws->held, n);
      ws->held_len = n;
    }
  }
  ws->paused = 1; /* until gw_ws_set_events() */
  return ws;
}

void gw_ws_set_events(gw_ws_t *ws, const gw_ws_events_t *events, void *arg)
{
  ws->events = events;
  ws->arg = arg;
  if (events && ws->paused && !ws->msg_held && ws->open) { /* the first listener: bytes read early, then the socket */
    ws->paused = 0;
    set_reading(ws, may_read(ws)); /* and what OpenSSL decrypted past the handshake */
    if (ws->held) event_active(&ws->rev, EV_READ, 0); /* bytes read with the handshake */
  }
}

void *gw_ws_events_arg(const gw_ws_t *ws)
{
  return ws->events ? ws->arg : NULL;
}

int gw_ws_send(gw_ws_t *ws, int binary, const char *data, size_t len)
{
  if (!ws->open || ws->close_sent || ws->close_received) return -1;
  queue_frame(ws, binary ? GW_WS_BINARY : GW_WS_TEXT, data, len);
  return 0;
}

size_t gw_ws_queued(const gw_ws_t *ws)
{
  return evbuffer_get_length(ws->out);
}

void gw_ws_close(gw_ws_t *ws, int code, const char *reason, size_t len)
{
  if (!ws->open || ws->close_sent) return;
  queue_close(ws, code, reason, len);
  if (ws->close_received) ws->shut_after_flush = 1;
  else if (ws->paused && ws->open) gw_ws_resume(ws); /* read on, for the peer's close frame */
}

int gw_ws_is_open(const gw_ws_t *ws)
{
  return ws->open && !ws->close_sent && !ws->close_received;
}

void gw_ws_resume(gw_ws_t *ws)
{
  if (!ws->open || !ws->paused) return;
  if (ws->msg_held || ws->held) {
    if (!ws->msg_held) ws->paused = 0;
    event_active(&ws->rev, EV_READ, 0); /* delivered from the loop */
  } else {
    ws->paused = 0;
    set_reading(ws, may_read(ws));
  }
}

const char *gw_ws_protocol(const gw_ws_t *ws)
{
  return ws->protocol;
}

void gw_ws_release(gw_ws_t *ws)
{
  ws->released = 1;
  gw_ws_close(ws, GW_WS_NORMAL, NULL, 0); /* reads on for the peer's close frame, dropping messages */
  maybe_free(ws);
}

int gw_ws_released(const gw_ws_t *ws)
{
  return ws->released;
}

unsigned long gw_ws_count(void)
{
  return nws;
}

void gw_ws_close_all(void)
{
  for (int guard = 0; all != NULL && guard < 10000000; guard++) {
    gw_ws_t *ws = all;
    ws->closed_told = 1; /* no Ruby runs at worker exit: on_free only */
    if (ws->open) { /* 1001 going away (and what is queued before it), if the end takes it now */
      queue_close(ws, GW_WS_GOING_AWAY, NULL, 0);
      if (ws->io) ws->io->write(ws->ioc, ws->out);
      else evbuffer_write(ws->out, ws->fd);
    }
    shut(ws, 1001);
    ws_free(ws);
  }
}
