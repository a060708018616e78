/* tools/probe.c: the ceiling of this machine for examples/async.rb's flow.
 *
 * A measuring instrument for `rake bench:contrast`, not a product. It runs
 * the data flow of examples/async.rb with no scripting at all, in plain C on
 * libevent 2.1, so that the gateway's non-blocking number can be read as a
 * share of what the same machine does with (close to) nothing but syscalls:
 *
 *   client --HTTP/1.1--> front :58080 --keep-alive pool--> backend :48080
 *                                                          (answers "done\n"
 *                                                           after a 10 ms timer)
 *
 *   build/probe [--front-port 58080] [--backend-port 48080]
 *               [--front-cpu N] [--backend-cpu N] [--upstream-port N]
 *
 * Build: gcc -std=c11 -O2 -Wall -Wextra -o build/probe tools/probe.c -levent
 * (`rake bench:probe_build`).
 *
 * Two processes, like the gateway's two single-worker servers: the parent
 * binds both listening sockets on 127.0.0.1 (so a busy port fails here, with
 * exit status 1), forks the backend and the front, each with its own
 * event_base and optionally pinned to one CPU (sched_setaffinity), then only
 * waits. SIGTERM or SIGINT to the parent is forwarded to both children, which
 * free everything and exit 0; the parent waits for them (KILL after 5 s). A
 * child that dies takes the other one and the parent down (exit 1); the
 * children get SIGTERM if the parent dies (PR_SET_PDEATHSIG).
 *
 * - backend: for each request (any method and target), a 10 ms libevent
 *   timer, then `200` with body "done\n". Its event_base has
 *   EVENT_BASE_FLAG_PRECISE_TIMER (libevent's cached coarse clock would fire
 *   10 ms timers early) and the timer is a common timeout (a queue, not the
 *   heap), armed against a freshly read clock.
 * - front: for each request (any target), `GET /mruby HTTP/1.1` on an idle
 *   pooled keep-alive connection to the backend (a new one when none is
 *   idle), then `200` with the backend's body. It has no timer, so its
 *   event_base goes without the precise timer (no timerfd_settime per loop
 *   round): this is a lower bound on cost.
 *
 * Cheapest path: raw events on non-blocking sockets, fixed per-connection
 * buffers, one read() and one write() per message, events armed once (no
 * epoll_ctl per request; a write event only when a write would block),
 * TCP_NODELAY. Parsing: the end of the head ("\r\n\r\n"), the HTTP version,
 * Connection, Content-Length (a request body is skipped; a response needs
 * one), Transfer-Encoding (refused). Pipelined requests are answered in
 * order, one at a time per connection. HTTP/1.0 keeps alive only with
 * `Connection: keep-alive` (ab -k). A pooled upstream connection that turns
 * out dead before answering is retried once on a new one; otherwise an
 * upstream failure gives the client a 502 and a close.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h> /* struct event embedded: no allocation per connection */

#define IN_CAP 8192                  /* a client's request head (+ body) */
#define UP_CAP 4096                  /* a backend response, head + body */
#define OUT_CAP (UP_CAP + 256)       /* one response to a client */
#define POOL_MAX 1024                /* idle upstream connections kept */
#define BACKEND_DELAY_US 10000       /* the backend's Async.sleep 10 */
#define BACKEND_BODY "done\n"

/* ------------------------------------------------------------------ lists */

struct link { struct link *prev, *next; };

static void link_init(struct link *h) { h->prev = h->next = h; }
static int link_empty(const struct link *h) { return h->next == h; }

static void link_add(struct link *h, struct link *l)
{
  l->next = h->next;
  l->prev = h;
  h->next->prev = l;
  h->next = l;
}

static void link_del(struct link *l)
{
  l->prev->next = l->next;
  l->next->prev = l->prev;
  link_init(l);
}

#define CONTAINER(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

/* ------------------------------------------------------------------ state */

enum role { FRONT, BACKEND };

struct upstream;

struct client {
  int fd;
  struct event rev, wev, timer; /* timer: the backend's 10 ms */
  struct link all;
  struct upstream *up;          /* front: the exchange this request waits on */
  int busy;                     /* a request taken, its response not produced yet */
  int keepalive, head;          /* of that request */
  int retried;                  /* front: a dead pooled connection was retried once */
  int wpending, paused;         /* write event armed; read event removed (input full) */
  size_t in_len, out_off, out_len;
  char in[IN_CAP];
  char out[OUT_CAP];
};

struct upstream {
  int fd;
  struct event rev, wev;
  struct link all, idle;        /* idle: linked while in the pool */
  struct client *c;             /* NULL: idle, or orphaned (client gone, answer still due) */
  int connecting, wpending, reused;
  size_t sent, len;
  char in[UP_CAP];
};

static enum role role;
static struct event_base *base;
static const struct timeval *delay_tv; /* the backend's common 10 ms timeout */
static struct sockaddr_in backend_addr;
static char upstream_req[128];
static size_t upstream_req_len;
static struct link clients, upstreams, pool;
static int pool_count;
static int listen_fd = -1;
static struct event *accept_ev, *accept_resume_ev;

static int client_next(struct client *c);
static int upstream_start(struct client *c);
static void upstream_free(struct upstream *u);

/* ---------------------------------------------------------------- parsing */

static void set_nodelay(int fd)
{
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int token_in(const char *v, size_t n, const char *tok)
{
  size_t tl = strlen(tok);
  size_t i = 0;
  while (i < n) {
    while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
    size_t s = i;
    while (i < n && v[i] != ',') i++;
    size_t e = i;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
    if (e - s == tl && strncasecmp(v + s, tok, tl) == 0) return 1;
  }
  return 0;
}

struct head {
  size_t len;          /* up to and including the blank line */
  int has_cl;
  size_t cl;
  int conn_close, conn_keepalive, chunked;
};

/* The header fields of p[0..h->len) after the first line (which ends at
 * line_end, its CRLF excluded). -1: malformed. */
static int parse_fields(const char *p, const char *line_end, struct head *h)
{
  const char *end = p + h->len - 2; /* the blank line's CRLF */
  const char *l = line_end + 2;
  while (l < end) {
    const char *eol = memmem(l, (size_t)(end - l) + 2, "\r\n", 2);
    if (eol == NULL) return -1;
    const char *colon = memchr(l, ':', (size_t)(eol - l));
    if (colon == NULL || colon == l) return -1;
    size_t nl = (size_t)(colon - l);
    const char *v = colon + 1;
    while (v < eol && (*v == ' ' || *v == '\t')) v++;
    size_t vl = (size_t)(eol - v);
    while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t')) vl--;
    if (nl == 14 && strncasecmp(l, "content-length", 14) == 0) {
      size_t cl = 0;
      if (h->has_cl || vl == 0 || vl > 9) return -1;
      for (size_t i = 0; i < vl; i++) {
        if (v[i] < '0' || v[i] > '9') return -1;
        cl = cl * 10 + (size_t)(v[i] - '0');
      }
      h->has_cl = 1;
      h->cl = cl;
    } else if (nl == 10 && strncasecmp(l, "connection", 10) == 0) {
      if (token_in(v, vl, "close")) h->conn_close = 1;
      if (token_in(v, vl, "keep-alive")) h->conn_keepalive = 1;
    } else if (nl == 17 && strncasecmp(l, "transfer-encoding", 17) == 0) {
      h->chunked = 1;
    }
    l = eol + 2;
  }
  return 0;
}

/* ---------------------------------------------------------------- clients */

static void client_close(struct client *c)
{
  event_del(&c->rev);
  event_del(&c->wev);
  event_del(&c->timer);
  close(c->fd);
  struct upstream *u = c->up;
  if (u) {
    /* The answer is still due: let it come and pool the connection, unless
     * the request is not (wholly) sent yet. */
    u->c = NULL;
    if (u->connecting || u->sent < upstream_req_len) upstream_free(u);
  }
  link_del(&c->all);
  free(c);
}

static char *put(char *o, const char *s, size_t n)
{
  memcpy(o, s, n);
  return o + n;
}
#define PUTS(o, lit) put((o), (lit), sizeof(lit) - 1)

static char *put_uint(char *o, size_t v)
{
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *o++ = tmp[--n];
  return o;
}

/* The response to the request being served, into c->out (empty: a request
 * is taken only when the previous response is out). */
static void client_build(struct client *c, int status, const char *body, size_t blen)
{
  char *o = c->out;
  if (status != 200) c->keepalive = 0;
  switch (status) {
  case 200: o = PUTS(o, "HTTP/1.1 200 OK\r\n"); break;
  case 400: o = PUTS(o, "HTTP/1.1 400 Bad Request\r\n"); break;
  case 413: o = PUTS(o, "HTTP/1.1 413 Content Too Large\r\n"); break;
  case 431: o = PUTS(o, "HTTP/1.1 431 Request Header Fields Too Large\r\n"); break;
  default: o = PUTS(o, "HTTP/1.1 502 Bad Gateway\r\n"); break;
  }
  o = PUTS(o, "Content-Type: text/plain\r\nContent-Length: ");
  o = put_uint(o, blen);
  o = c->keepalive ? PUTS(o, "\r\nConnection: keep-alive\r\n\r\n") : PUTS(o, "\r\nConnection: close\r\n\r\n");
  if (!c->head) o = put(o, body, blen);
  c->out_off = 0;
  c->out_len = (size_t)(o - c->out);
  c->busy = 0;
}

/* 1: all written; 0: the rest waits for the write event; -1: c is freed. */
static int client_flush(struct client *c)
{
  while (c->out_off < c->out_len) {
    ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!c->wpending) {
          event_add(&c->wev, NULL);
          c->wpending = 1;
        }
        return 0;
      }
      client_close(c);
      return -1;
    }
    c->out_off += (size_t)n;
  }
  c->out_off = c->out_len = 0;
  if (c->wpending) {
    event_del(&c->wev);
    c->wpending = 0;
  }
  if (!c->keepalive) {
    client_close(c);
    return -1;
  }
  return 1;
}

/* After a response went out: read again if input was full, take the next
 * (pipelined) request. -1: c is freed. */
static int client_continue(struct client *c)
{
  if (c->paused) {
    event_add(&c->rev, NULL);
    c->paused = 0;
  }
  return client_next(c);
}

/* Sends what client_build() put in c->out, then goes on. -1: c is freed. */
static int client_send(struct client *c)
{
  int r = client_flush(c);
  return r == 1 ? client_continue(c) : r;
}

static int client_respond(struct client *c, int status, const char *body, size_t blen)
{
  client_build(c, status, body, blen);
  return client_send(c);
}

static int client_error(struct client *c, int status)
{
  static const char msg[] = "error\n";
  c->busy = 1;
  return client_respond(c, status, msg, sizeof(msg) - 1);
}

/* Takes the next complete request from c->in, if any. -1: c is freed. */
static int client_next(struct client *c)
{
  if (c->busy || c->out_len || c->in_len == 0) return 0;
  c->head = 0;
  c->keepalive = 0;
  const char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
  if (end == NULL) return c->in_len == IN_CAP ? client_error(c, 431) : 0;
  struct head h = { .len = (size_t)(end - c->in) + 4 };
  const char *le = memmem(c->in, h.len, "\r\n", 2);
  size_t ll = (size_t)(le - c->in);
  c->head = ll > 5 && memcmp(c->in, "HEAD ", 5) == 0;
  if (ll < 14 || memcmp(le - 8, "HTTP/1.", 7) != 0 || (le[-1] != '0' && le[-1] != '1') ||
      parse_fields(c->in, le, &h) < 0 || h.chunked)
    return client_error(c, 400);
  if (h.has_cl && h.cl > IN_CAP - h.len) return client_error(c, 413);
  size_t total = h.len + (h.has_cl ? h.cl : 0);
  if (c->in_len < total) return 0; /* the rest of the body is on its way */
  c->keepalive = le[-1] == '1' ? !h.conn_close : (h.conn_keepalive && !h.conn_close);
  c->in_len -= total;
  if (c->in_len) memmove(c->in, c->in + total, c->in_len);
  c->busy = 1;
  c->retried = 0;
  if (role == FRONT) return upstream_start(c);
  event_base_update_cache_time(base); /* 10 ms from now, not from the loop's cached time */
  evtimer_add(&c->timer, delay_tv);
  return 0;
}

static void client_on_read(evutil_socket_t fd, short what, void *arg)
{
  struct client *c = arg;
  (void)what;
  if (c->in_len == IN_CAP) {
    event_del(&c->rev);
    c->paused = 1;
    return;
  }
  ssize_t n = read(fd, c->in + c->in_len, IN_CAP - c->in_len);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    client_close(c); /* an answer in progress is dropped */
    return;
  }
  c->in_len += (size_t)n;
  if (client_next(c) < 0) return;
  if (c->in_len == IN_CAP && !c->paused) {
    event_del(&c->rev); /* resumed when the response in progress is out */
    c->paused = 1;
  }
}

static void client_on_write(evutil_socket_t fd, short what, void *arg)
{
  struct client *c = arg;
  (void)fd;
  (void)what;
  if (client_flush(c) == 1) client_continue(c);
}

static void backend_on_timer(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  client_respond(arg, 200, BACKEND_BODY, sizeof(BACKEND_BODY) - 1);
}

static void accept_resume(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  (void)arg;
  event_add(accept_ev, NULL);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
  (void)what;
  (void)arg;
  for (int i = 0; i < 64; i++) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        /* out of descriptors: stop accepting for 100 ms rather than spin */
        static const struct timeval pause_tv = { 0, 100000 };
        fprintf(stderr, "probe: accept: %s (pausing 100 ms)\n", strerror(errno));
        event_del(accept_ev);
        evtimer_add(accept_resume_ev, &pause_tv);
      }
      return;
    }
    struct client *c = malloc(sizeof(*c));
    if (c == NULL) {
      close(fd);
      return;
    }
    memset(c, 0, offsetof(struct client, in)); /* not the buffers */
    c->fd = fd;
    set_nodelay(fd);
    event_assign(&c->rev, base, fd, EV_READ | EV_PERSIST, client_on_read, c);
    event_assign(&c->wev, base, fd, EV_WRITE | EV_PERSIST, client_on_write, c);
    evtimer_assign(&c->timer, base, backend_on_timer, c);
    link_add(&clients, &c->all);
    event_add(&c->rev, NULL);
  }
}

/* -------------------------------------------------------------- upstreams */

static void upstream_free(struct upstream *u)
{
  event_del(&u->rev);
  event_del(&u->wev);
  close(u->fd);
  if (!link_empty(&u->idle)) {
    link_del(&u->idle);
    pool_count--;
  }
  link_del(&u->all);
  free(u);
}

/* The exchange failed: retry once on a new connection if a pooled one was
 * found dead before it answered anything, else 502 (and close) the client.
 * -1: the client is freed. */
static int upstream_fail(struct upstream *u)
{
  struct client *c = u->c;
  int retry = u->reused && u->len == 0;
  upstream_free(u);
  if (c == NULL) return 0;
  c->up = NULL;
  if (retry && !c->retried) {
    c->retried = 1;
    return upstream_start(c);
  }
  return client_respond(c, 502, "bad gateway\n", 12);
}

/* Sends the rest of the request. 0: sent, or the rest waits for the write
 * event; 1: failed, u is freed (its client retried or answered); -1: failed
 * and the client is freed too. */
static int upstream_send(struct upstream *u)
{
  while (u->sent < upstream_req_len) {
    ssize_t n = write(u->fd, upstream_req + u->sent, upstream_req_len - u->sent);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!u->wpending) {
          event_add(&u->wev, NULL);
          u->wpending = 1;
        }
        return 0;
      }
      return upstream_fail(u) < 0 ? -1 : 1;
    }
    u->sent += (size_t)n;
  }
  if (u->wpending) {
    event_del(&u->wev);
    u->wpending = 0;
  }
  return 0;
}

static void upstream_on_write(evutil_socket_t fd, short what, void *arg)
{
  struct upstream *u = arg;
  (void)what;
  if (u->connecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
      upstream_fail(u);
      return;
    }
    u->connecting = 0;
  }
  upstream_send(u);
}

static void upstream_on_read(evutil_socket_t fd, short what, void *arg)
{
  struct upstream *u = arg;
  (void)what;
  if (!link_empty(&u->idle)) { /* an idle connection: EOF, or bytes nobody asked for */
    upstream_free(u);
    return;
  }
  ssize_t n = read(fd, u->in + u->len, UP_CAP - u->len);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    upstream_fail(u);
    return;
  }
  u->len += (size_t)n;
  const char *end = memmem(u->in, u->len, "\r\n\r\n", 4);
  if (end == NULL) {
    if (u->len == UP_CAP) upstream_fail(u);
    return;
  }
  struct head h = { .len = (size_t)(end - u->in) + 4 };
  const char *le = memmem(u->in, h.len, "\r\n", 2);
  if (le - u->in < 12 || memcmp(u->in, "HTTP/1.", 7) != 0 || u->in[8] != ' ' ||
      parse_fields(u->in, le, &h) < 0 || !h.has_cl || h.chunked || h.cl > UP_CAP - h.len) {
    upstream_fail(u);
    return;
  }
  size_t total = h.len + h.cl;
  if (u->len < total) return;
  int status = memcmp(u->in + 9, "200", 3) == 0 ? 200 : 502;
  int reuse = u->len == total && !h.conn_close && u->in[7] == '1';
  struct client *c = u->c;
  if (c) {
    c->up = NULL;
    u->c = NULL;
    client_build(c, status, u->in + h.len, h.cl); /* copied before u is reused */
  }
  if (reuse && pool_count < POOL_MAX) {
    u->len = 0;
    u->sent = 0;
    u->reused = 1;
    link_add(&pool, &u->idle);
    pool_count++;
  } else {
    upstream_free(u);
  }
  if (c) client_send(c);
}

static struct upstream *upstream_open(void)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return NULL;
  set_nodelay(fd);
  int r = connect(fd, (const struct sockaddr *)&backend_addr, sizeof(backend_addr));
  if (r < 0 && errno != EINPROGRESS) {
    close(fd);
    return NULL;
  }
  struct upstream *u = malloc(sizeof(*u));
  if (u == NULL) {
    close(fd);
    return NULL;
  }
  memset(u, 0, offsetof(struct upstream, in));
  u->fd = fd;
  link_init(&u->idle);
  event_assign(&u->rev, base, fd, EV_READ | EV_PERSIST, upstream_on_read, u);
  event_assign(&u->wev, base, fd, EV_WRITE | EV_PERSIST, upstream_on_write, u);
  link_add(&upstreams, &u->all);
  event_add(&u->rev, NULL);
  if (r < 0) {
    u->connecting = 1;
    u->wpending = 1;
    event_add(&u->wev, NULL);
  }
  return u;
}

/* Sends c's request to the backend. -1: c is freed. */
static int upstream_start(struct client *c)
{
  struct upstream *u = NULL;
  if (!link_empty(&pool) && !c->retried) { /* a retry takes a new connection */
    u = CONTAINER(pool.next, struct upstream, idle);
    link_del(&u->idle);
    pool_count--;
  } else if ((u = upstream_open()) == NULL) {
    return client_respond(c, 502, "bad gateway\n", 12);
  }
  u->c = c;
  c->up = u;
  if (u->connecting) return 0;
  return upstream_send(u) < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------- process */

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
  (void)sig;
  (void)what;
  (void)arg;
  event_base_loopbreak(base);
}

static int serve(enum role r, int lfd)
{
  role = r;
  listen_fd = lfd;
  link_init(&clients);
  link_init(&upstreams);
  link_init(&pool);
  struct event_config *cfg = event_config_new();
  if (cfg == NULL) return 2;
  event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
  if (r == BACKEND) event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
  base = event_base_new_with_config(cfg);
  event_config_free(cfg);
  if (base == NULL) {
    fprintf(stderr, "probe: cannot create an event_base\n");
    return 2;
  }
  if (r == BACKEND) {
    static const struct timeval d = { 0, BACKEND_DELAY_US };
    delay_tv = event_base_init_common_timeout(base, &d);
  }
  struct event *sterm = evsignal_new(base, SIGTERM, on_stop, NULL);
  struct event *sint = evsignal_new(base, SIGINT, on_stop, NULL);
  accept_ev = event_new(base, lfd, EV_READ | EV_PERSIST, on_accept, NULL);
  accept_resume_ev = evtimer_new(base, accept_resume, NULL);
  if (!sterm || !sint || !accept_ev || !accept_resume_ev) return 2;
  event_add(sterm, NULL);
  event_add(sint, NULL);
  event_add(accept_ev, NULL);

  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL); /* the parent blocked TERM, INT, CHLD */

  int rc = event_base_dispatch(base) < 0 ? 2 : 0;

  while (!link_empty(&clients)) client_close(CONTAINER(clients.next, struct client, all));
  while (!link_empty(&upstreams)) upstream_free(CONTAINER(upstreams.next, struct upstream, all));
  event_free(accept_ev);
  event_free(accept_resume_ev);
  event_free(sterm);
  event_free(sint);
  event_base_free(base);
  libevent_global_shutdown();
  close(lfd);
  return rc;
}

static int listen_on(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1024) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

static pid_t spawn(enum role r, int lfd, int other_fd, int cpu, pid_t parent)
{
  pid_t pid = fork();
  if (pid != 0) return pid;
  /* child */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(1); /* the parent died before prctl */
  close(other_fd);
  const char *name = r == FRONT ? "front" : "backend";
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0) {
      fprintf(stderr, "probe: %s: cannot pin to CPU %d: %s\n", name, cpu, strerror(errno));
      _exit(1);
    }
  }
  _exit(serve(r, lfd));
}

static void usage(FILE *f)
{
  fprintf(f, "usage: probe [--front-port N (58080)] [--backend-port N (48080)] "
             "[--front-cpu N] [--backend-cpu N] [--upstream-port N]\n"
             "  front 127.0.0.1:FRONT answers any request with the body of GET /mruby sent to\n"
             "  backend 127.0.0.1:BACKEND, which answers \"done\\n\" after 10 ms. TERM/INT: stop.\n"
             "  --upstream-port: the front uses another server's /mruby on 127.0.0.1:N instead\n"
             "  (e.g. ../shared/bench's nginx + Lua backend); the probe's own backend idles.\n");
}

static int int_arg(const char *opt, const char *v, int lo, int hi)
{
  char *end;
  long n = v ? strtol(v, &end, 10) : 0;
  if (v == NULL || *v == '\0' || *end != '\0' || n < lo || n > hi) {
    fprintf(stderr, "probe: %s needs an integer in %d..%d\n", opt, lo, hi);
    usage(stderr);
    exit(2);
  }
  return (int)n;
}

int main(int argc, char **argv)
{
  int front_port = 58080, backend_port = 48080, front_cpu = -1, backend_cpu = -1, upstream_port = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--front-port") == 0) front_port = int_arg(a, v, 1, 65535), i++;
    else if (strcmp(a, "--backend-port") == 0) backend_port = int_arg(a, v, 1, 65535), i++;
    else if (strcmp(a, "--front-cpu") == 0) front_cpu = int_arg(a, v, 0, CPU_SETSIZE - 1), i++;
    else if (strcmp(a, "--backend-cpu") == 0) backend_cpu = int_arg(a, v, 0, CPU_SETSIZE - 1), i++;
    else if (strcmp(a, "--upstream-port") == 0) upstream_port = int_arg(a, v, 1, 65535), i++;
    else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "probe: unknown argument %s\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (front_port == backend_port) {
    fprintf(stderr, "probe: the front and backend ports must differ\n");
    return 2;
  }

  signal(SIGPIPE, SIG_IGN);
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  backend_addr.sin_family = AF_INET;
  if (upstream_port == 0) upstream_port = backend_port;
  backend_addr.sin_port = htons((uint16_t)upstream_port);
  backend_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  upstream_req_len = (size_t)snprintf(upstream_req, sizeof(upstream_req),
                                      "GET /mruby HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", upstream_port);

  int bfd = listen_on(backend_port);
  if (bfd < 0) {
    fprintf(stderr, "probe: cannot listen on 127.0.0.1:%d: %s\n", backend_port, strerror(errno));
    return 1;
  }
  int ffd = listen_on(front_port);
  if (ffd < 0) {
    fprintf(stderr, "probe: cannot listen on 127.0.0.1:%d: %s\n", front_port, strerror(errno));
    close(bfd);
    return 1;
  }

  /* Signals are taken with sigtimedwait(); the children unblock them. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, NULL);

  pid_t self = getpid();
  pid_t kids[2];
  kids[0] = spawn(BACKEND, bfd, ffd, backend_cpu, self);
  kids[1] = kids[0] > 0 ? spawn(FRONT, ffd, bfd, front_cpu, self) : -1;
  int fork_errno = errno;
  close(bfd);
  close(ffd);
  int live = (kids[0] > 0) + (kids[1] > 0);
  int rc = 0;
  if (live < 2) {
    fprintf(stderr, "probe: fork: %s\n", strerror(fork_errno));
    rc = 1;
  } else {
    fprintf(stderr, "probe: backend 127.0.0.1:%d pid %d cpu %d, front 127.0.0.1:%d pid %d cpu %d (-1: not pinned)\n",
            backend_port, (int)kids[0], backend_cpu, front_port, (int)kids[1], front_cpu);
  }

  /* Wait: a signal to forward, or a child that ended. */
  int stopping = rc != 0;
  struct timespec deadline = { 0, 0 };
  if (stopping) {
    for (int i = 0; i < 2; i++)
      if (kids[i] > 0) kill(kids[i], SIGTERM);
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 5;
  }
  while (live > 0) {
    struct timespec tmo = { 1, 0 };
    int sig = sigtimedwait(&set, NULL, &tmo);
    if (sig == SIGTERM || sig == SIGINT) {
      if (!stopping) {
        stopping = 1;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += 5;
      }
      for (int i = 0; i < 2; i++)
        if (kids[i] > 0) kill(kids[i], SIGTERM);
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (int i = 0; i < 2; i++) {
        if (pid != kids[i]) continue;
        kids[i] = -1;
        live--;
        if (!stopping || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          if (!stopping) {
            fprintf(stderr, "probe: the %s (pid %d) ended unexpectedly (%s %d): stopping\n",
                    i ? "front" : "backend", (int)pid, WIFSIGNALED(status) ? "signal" : "exit",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
          }
          rc = 1;
        }
        if (!stopping) {
          stopping = 1;
          clock_gettime(CLOCK_MONOTONIC, &deadline);
          deadline.tv_sec += 5;
          for (int j = 0; j < 2; j++)
            if (kids[j] > 0) kill(kids[j], SIGTERM);
        }
      }
    }
    if (stopping && live > 0) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec > deadline.tv_sec) {
        for (int i = 0; i < 2; i++)
          if (kids[i] > 0) kill(kids[i], SIGKILL);
        rc = 1;
      }
    }
  }
  return rc;
}
