/* pool.c - outgoing connections and the keep-alive pool keyed by address
 * (see pool.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "pool.h"
#include "timeutil.h"


struct gw_pool_key_s {
  gw_pool_key_t *next;         /* hash chain */
  unsigned hash;
  unsigned refs;               /* user references + connections */
  socklen_t addrlen;
  gw_sockaddr_t addr;          /* zero-padded, compared with memcmp */
  const void *tls;             /* TLS settings, or NULL for plain */
  char *name;                  /* owned TLS server name, "" for plain */
  unsigned char *proxy;        /* owned PROXY protocol header, or NULL */
  size_t proxy_len;
  gw_pool_conn_t *idle_head;   /* most recently parked first */
  gw_pool_conn_t *idle_tail;
  int idle_count;
};


/* ---- timeouts ---- */

/* Most timeouts share a handful of durations: use libevent's common-timeout
 * queues for them (O(1) add/remove instead of the min-heap). */
static const struct timeval *pool_timeout(gw_pool_t *pool, int ms, struct timeval *tmp)
{
  for (int i = 0; i < pool->ntcache; i++)
    if (pool->tcache[i].ms == ms) return pool->tcache[i].tv;
  *tmp = gw_timeval_from_ms(ms);
  if (pool->ntcache < GW_POOL_TIMEOUT_CACHE) {
    const struct timeval *tv = event_base_init_common_timeout(pool->base, tmp);
    if (tv != NULL) {
      pool->tcache[pool->ntcache].ms = ms;
      pool->tcache[pool->ntcache].tv = tv;
      pool->ntcache++;
      return tv;
    }
  }
  return tmp;
}

void gw_pool_conn_timer(gw_pool_conn_t *c, int ms)
{
  struct timeval tmp;
  event_add(&c->tev, pool_timeout(c->pool, ms, &tmp));
}

void gw_pool_conn_timer_stop(gw_pool_conn_t *c)
{
  event_del(&c->tev);
}

/* ---- keys ---- */

static unsigned bytes_hash(unsigned h, const void *bytes, size_t len)
{
  const unsigned char *p = bytes;
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

gw_pool_key_t *gw_pool_key_get(gw_pool_t *pool, const gw_sockaddr_t *addr, socklen_t len, const void *tls,
                               const char *name, const void *proxy, size_t proxy_len)
{
  if (tls == NULL || name == NULL) name = "";
  if (proxy == NULL) proxy_len = 0;
  unsigned h = bytes_hash(2166136261u, addr, len);
  if (tls != NULL) {
    h = bytes_hash(h, &tls, sizeof(tls));
    h = bytes_hash(h, name, strlen(name));
  }
  if (proxy_len > 0) h = bytes_hash(h, proxy, proxy_len);
  gw_pool_key_t **slot = &pool->buckets[h % GW_POOL_KEY_BUCKETS];
  for (gw_pool_key_t *k = *slot; k != NULL; k = k->next) {
    if (k->hash == h && k->addrlen == len && memcmp(&k->addr, addr, len) == 0 && k->tls == tls &&
        strcmp(k->name, name) == 0 && k->proxy_len == proxy_len &&
        (proxy_len == 0 || memcmp(k->proxy, proxy, proxy_len) == 0)) {
      k->refs++;
      return k;
    }
  }
  gw_pool_key_t *k = calloc(1, sizeof(*k));
  if (k == NULL) return NULL;
  if ((k->name = strdup(name)) == NULL || (proxy_len > 0 && (k->proxy = malloc(proxy_len)) == NULL)) {
    free(k->name);
    free(k);
    return NULL;
  }
  if (proxy_len > 0) memcpy(k->proxy, proxy, proxy_len);
  k->proxy_len = proxy_len;
  k->tls = tls;
  k->hash = h;
  k->refs = 1;
  k->addrlen = len;
  memcpy(&k->addr, addr, len);
  k->next = *slot;
  *slot = k;
  return k;
}

void gw_pool_key_put(gw_pool_t *pool, gw_pool_key_t *k)
{
  if (--k->refs > 0) return;
  gw_pool_key_t **slot = &pool->buckets[k->hash % GW_POOL_KEY_BUCKETS];
  while (*slot != k) slot = &(*slot)->next;
  *slot = k->next;
  free(k->name);
  free(k->proxy);
  free(k);
}

const gw_sockaddr_t *gw_pool_key_addr(const gw_pool_key_t *k, socklen_t *len)
{
  *len = k->addrlen;
  return &k->addr;
}

const void *gw_pool_key_tls(const gw_pool_key_t *k) { return k->tls; }

const char *gw_pool_key_name(const gw_pool_key_t *k) { return k->name; }

const unsigned char *gw_pool_key_proxy(const gw_pool_key_t *k, size_t *len)
{
  *len = k->proxy_len;
  return k->proxy;
}

/* ---- connections ---- */

static void idle_unlink(gw_pool_conn_t *c)
{
  gw_pool_key_t *k = c->key;
  if (c->prev) c->prev->next = c->next; else k->idle_head = c->next;
  if (c->next) c->next->prev = c->prev; else k->idle_tail = c->prev;
  c->prev = c->next = NULL;
  c->idle = 0;
  k->idle_count--;
  c->pool->idle--;
}

void gw_pool_close(gw_pool_conn_t *c)
{
  gw_pool_t *pool = c->pool;
  if (c->idle) idle_unlink(c);
  if (c->rev_added) event_del(&c->rev);
  if (c->wev_added) event_del(&c->wev);
  event_del(&c->tev);
  if (pool->ops.on_free) pool->ops.on_free(c); /* before the close: TLS may say goodbye */
  if (c->fd >= 0) close(c->fd); /* -1: the socket was taken (gw_client_detach) */
  gw_pool_key_put(pool, c->key);
  free(c);
}

void gw_pool_conn_read(gw_pool_conn_t *c, int on)
{
  if (on && !c->rev_added) {
    event_add(&c->rev, NULL);
    c->rev_added = 1;
  } else if (!on && c->rev_added) {
    event_del(&c->rev);
    c->rev_added = 0;
  }
}

void gw_pool_conn_write(gw_pool_conn_t *c, int on)
{
  if (on && !c->wev_added) {
    event_add(&c->wev, NULL);
    c->wev_added = 1;
  } else if (!on && c->wev_added) {
    event_del(&c->wev);
    c->wev_added = 0;
  }
}

void gw_pool_conn_kick_read(gw_pool_conn_t *c)
{
  event_active(&c->rev, EV_READ, 1);
}

void gw_pool_park(gw_pool_conn_t *c)
{
  gw_pool_t *pool = c->pool;
  gw_pool_key_t *k = c->key;
  if (pool->keepalive_max <= 0) {
    gw_pool_close(c);
    return;
  }
  gw_pool_conn_write(c, 0);
  gw_pool_conn_read(c, 1); /* a paused user may have turned it off */
  c->idle = 1;
  c->prev = NULL;
  c->next = k->idle_head;
  if (k->idle_head) k->idle_head->prev = c; else k->idle_tail = c;
  k->idle_head = c;
  k->idle_count++;
  pool->idle++;
  gw_pool_conn_timer(c, pool->idle_timeout_ms);
  if (k->idle_count > pool->keepalive_max) gw_pool_close(k->idle_tail);
}

gw_pool_conn_t *gw_pool_take(gw_pool_t *pool, gw_pool_key_t *k)
{
  (void)pool;
  gw_pool_conn_t *c = k->idle_head;
  if (c == NULL) return NULL;
  idle_unlink(c);
  event_del(&c->tev); /* the idle timer; the user starts its own */
  return c;
}

int gw_pool_conn_is_stale(gw_pool_conn_t *c)
{
  char b;
  ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0 && c->pool->ops.idle_check) return !c->pool->ops.idle_check(c);
  return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

int gw_pool_conn_error(gw_pool_conn_t *c)
{
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
  return err;
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
  (void)what;
  gw_pool_conn_t *c = arg;
  if (!c->idle) {
    c->pool->ops.on_read(c);
    return;
  }
  /* Idle: EOF, an error, or bytes nobody asked for. Drop it. */
  char b;
  ssize_t n = recv(fd, &b, 1, MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n > 0 && c->pool->ops.idle_check && c->pool->ops.idle_check(c)) return;
  gw_pool_close(c);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_pool_conn_t *c = arg;
  if (!c->idle) c->pool->ops.on_write(c);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  gw_pool_conn_t *c = arg;
  if (c->idle) gw_pool_close(c);
  else c->pool->ops.on_timeout(c);
}

int gw_pool_connect(gw_pool_t *pool, gw_pool_key_t *k, gw_pool_conn_t **out)
{
  *out = NULL;
  int fd = socket(k->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    gw_log_error("upstream: socket(): %s", strerror(errno));
    return -1;
  }
  if (k->addr.sa.sa_family != AF_UNIX) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  gw_pool_conn_t *c = calloc(1, pool->conn_size);
  if (c == NULL) {
    close(fd);
    return -1;
  }
  c->pool = pool;
  c->key = k;
  k->refs++;
  c->fd = fd;
  event_assign(&c->rev, pool->base, fd, EV_READ | EV_PERSIST, on_read, c);
  event_assign(&c->wev, pool->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
  evtimer_assign(&c->tev, pool->base, on_timeout, c);
  *out = c;
  int rc;
  do rc = connect(fd, &k->addr.sa, k->addrlen); while (rc < 0 && errno == EINTR);
  return rc == 0 ? 0 : errno;
}

/* ---- the pool ---- */

gw_pool_t *gw_pool_new(struct event_base *base, int keepalive_max, int idle_timeout_ms, const gw_pool_conn_ops_t *ops,
                       size_t conn_size)
{
  gw_pool_t *pool = calloc(1, sizeof(*pool));
  if (pool == NULL) return NULL;
  pool->base = base;
  pool->ops = *ops;
  pool->conn_size = conn_size < sizeof(gw_pool_conn_t) ? sizeof(gw_pool_conn_t) : conn_size;
  pool->keepalive_max = keepalive_max < 0 ? 0 : keepalive_max;
  pool->idle_timeout_ms = idle_timeout_ms > 0 ? idle_timeout_ms : 60000;
  return pool;
}

void gw_pool_free(gw_pool_t *pool)
{
  if (pool == NULL) return;
  for (int i = 0; i < GW_POOL_KEY_BUCKETS; i++) {
    gw_pool_key_t *k = pool->buckets[i];
    while (k != NULL) {
      gw_pool_key_t *next = k->next;
      k->refs++; /* keep k alive while its connections go */
      while (k->idle_head != NULL) gw_pool_close(k->idle_head);
      gw_pool_key_put(pool, k);
      k = next;
    }
  }
  free(pool);
}

int gw_pool_keepalive_max(const gw_pool_t *pool)
{
  return pool->keepalive_max;
}

unsigned long gw_pool_idle_count(const gw_pool_t *pool)
{
  return pool->idle;
}
