/* resolver.c - asynchronous host name resolution: c-ares on the worker's event loop.
 *
 * c-ares never runs on its own: its socket-state callback (on_sock_state)
 * keeps one read and one write event per c-ares socket, those events call
 * ares_process_fd(), and a single timer is re-armed from ares_timeout() after
 * every call into c-ares (rearm), so retransmissions and timeouts happen
 * while the loop serves everything else.
 *
 * Cache: one entry per lower-cased name, holding either up to
 * GW_RESOLVER_MAX_ADDRS addresses of one family (handed out round-robin) or a
 * static error, valid until expires_ms. A lookup of a name with no fresh entry
 * joins the entry's waiters; the first waiter starts the entry's one c-ares
 * query and later ones wait for it (an expired entry is not served stale).
 * The query asks for A records only, then AAAA only when there is no A
 * record, which keeps one query per name in the common case and is immune to
 * servers that drop AAAA queries. Entries are dropped only when idle (no
 * query, no waiters), when the table is full.
 *
 * Re-entrancy: user callbacks run only from on_deliver, the handle's own
 * event, activated by gw_resolve() (literals, cache hits) or by on_addrinfo.
 * c-ares callbacks only update entries and activate delivery events, so a
 * user callback (cancel, a new lookup, even gw_resolver_free) never runs
 * beneath c-ares; and on_deliver touches nothing of the resolver once the
 * user callback has been called. A c-ares socket record closed while its own
 * event is being dispatched is freed after ares_process_fd returns. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <ares.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "addr.h"
#include "log.h"
#include "resolver.h"

#define GW_RESOLVER_BUCKETS 1024     /* power of two */
#define GW_RESOLVER_MAX_ENTRIES 4096
#define GW_RESOLVER_MAX_ADDRS 16     /* addresses kept per name */
#define GW_RESOLVER_MAX_NAME 255

#define DEFAULT_TIMEOUT_MS 2000
#define DEFAULT_TRIES 2
#define DEFAULT_MIN_TTL_S 1
#define DEFAULT_MAX_TTL_S 3600
#define DEFAULT_NEGATIVE_TTL_S 1

static const gw_err_t ERR_NOT_FOUND = {GW_ERR_DNS_NOT_FOUND, "host not found"};
static const gw_err_t ERR_TIMEOUT = {GW_ERR_DNS_TIMEOUT, "DNS server did not answer"};
static const gw_err_t ERR_SERVER = {GW_ERR_DNS_FAILURE, "DNS server failure"};
static const gw_err_t ERR_BAD_NAME = {GW_ERR_BAD_NAME, "invalid host name"};
static const gw_err_t ERR_BAD_PORT = {GW_ERR_BAD_NAME, "invalid port"};
static const gw_err_t ERR_FAILED = {GW_ERR_DNS_FAILURE, "DNS lookup failed"};
static const gw_err_t ERR_NONE = {GW_OK, NULL};

typedef union {
  struct sockaddr sa;
  struct sockaddr_in in4;
  struct sockaddr_in6 in6;
} resolver_addr_t;

typedef struct resolver_sock_s {
  struct resolver_sock_s *next;
  gw_resolver_t *r;
  ares_socket_t fd;
  unsigned closed : 1;         /* c-ares closed it while its event was being dispatched */
  struct event rev, wev;
} resolver_sock_t;

typedef struct resolver_entry_s {
  struct resolver_entry_s *next; /* hash chain */
  gw_resolver_t *r;
  unsigned hash;
  int family;                  /* being asked: AF_INET, then AF_INET6 if there is no A record */
  unsigned querying : 1;       /* a c-ares lookup holds this entry as its argument */
  unsigned resolved : 1;       /* addrs or err below is an answer, valid until expires_ms */
  gw_err_t err;                /* cached failure, or GW_OK with naddrs > 0 */
  resolver_addr_t *addrs;      /* port 0; owned */
  unsigned naddrs;
  unsigned rr;                 /* next address handed out */
  double expires_ms;           /* gw_now_ms() clock */
  gw_resolve_t *waiters;       /* lookups waiting for the query in flight */
  char name[];                 /* lower-cased */
} resolver_entry_t;

struct gw_resolve_s {
  gw_resolver_t *r;
  gw_resolve_t *next, **pprev; /* in an entry's waiters or in r->ready; pprev NULL: in none */
  gw_resolve_cb cb;
  void *arg;
  int port;
  unsigned delivering : 1;     /* inside its own callback: cancel is a no-op */
  gw_err_t err;                /* GW_OK, or why it failed */
  socklen_t addrlen;
  resolver_addr_t addr;
  struct event ev;             /* deferred delivery */
};

struct gw_resolver_s {
  struct event_base *base;
  ares_channel channel;
  unsigned library_ok : 1;
  unsigned channel_ok : 1;
  unsigned freeing : 1;        /* inside gw_resolver_free: c-ares callbacks are ignored */
  struct event timer;
  resolver_sock_t *socks;
  resolver_sock_t *dispatching; /* socket whose event is running ares_process_fd */
  resolver_entry_t **buckets;
  unsigned long nentries;
  gw_resolve_t *ready;         /* results waiting for their event to run */
  int min_ttl_s, max_ttl_s, negative_ttl_s;
  gw_resolver_stats_t stats;
};

static void q_link(gw_resolve_t **head, gw_resolve_t *q)
{
  q->next = *head;
  if (*head) (*head)->pprev = &q->next;
  *head = q;
  q->pprev = head;
}

static void q_unlink(gw_resolve_t *q)
{
  if (!q->pprev) return;
  *q->pprev = q->next;
  if (q->next) q->next->pprev = q->pprev;
  q->next = NULL;
  q->pprev = NULL;
}

/* ---- driving c-ares from the loop ---- */

static void rearm(gw_resolver_t *r)
{
  struct timeval tv, *tvp;
  if (r->freeing) return;
  tvp = ares_timeout(r->channel, NULL, &tv);
  if (tvp)
    evtimer_add(&r->timer, tvp);
  else
    evtimer_del(&r->timer);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
  gw_resolver_t *r = arg;
  (void)fd;
  (void)what;
  ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
  rearm(r);
}

static void on_sock(evutil_socket_t fd, short what, void *arg)
{
  resolver_sock_t *s = arg;
  gw_resolver_t *r = s->r;
  r->dispatching = s;
  ares_process_fd(r->channel, (what & EV_READ) ? (ares_socket_t)fd : ARES_SOCKET_BAD,
                  (what & EV_WRITE) ? (ares_socket_t)fd : ARES_SOCKET_BAD);
  r->dispatching = NULL;
  if (s->closed) free(s);
  rearm(r);
}

/* c-ares opens, changes the interest of, or (readable == writable == 0) closes a socket.
 * Called from inside ares_getaddrinfo, ares_process_fd and ares_destroy. */
static void on_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
  gw_resolver_t *r = data;
  resolver_sock_t *s, **sp;
  for (sp = &r->socks; (s = *sp) != NULL; sp = &s->next)
    if (s->fd == fd) break;

  if (!readable && !writable) {
    if (!s) return;
    event_del(&s->rev);
    event_del(&s->wev);
    *sp = s->next;
    if (s == r->dispatching)
      s->closed = 1;
    else
      free(s);
    return;
  }
  if (!s) {
    s = calloc(1, sizeof(*s));
    if (!s) {
      /* The query cannot see its answer; the timer still times it out. */
      gw_log_error("resolver: out of memory watching a DNS socket");
      return;
    }
    s->r = r;
    s->fd = fd;
    event_assign(&s->rev, r->base, fd, EV_READ | EV_PERSIST, on_sock, s);
    event_assign(&s->wev, r->base, fd, EV_WRITE | EV_PERSIST, on_sock, s);
    s->next = r->socks;
    r->socks = s;
  }
  if (readable)
    event_add(&s->rev, NULL);
  else
    event_del(&s->rev);
  if (writable)
    event_add(&s->wev, NULL);
  else
    event_del(&s->wev);
}

/* ---- the cache ---- */

static unsigned name_hash(const char *name)
{
  unsigned h = 2166136261u;
  for (; *name; name++) h = (h ^ (unsigned char)*name) * 16777619u;
  return h;
}

static resolver_entry_t **bucket_of(gw_resolver_t *r, unsigned hash)
{
  return &r->buckets[hash & (GW_RESOLVER_BUCKETS - 1)];
}

static resolver_entry_t *entry_find(gw_resolver_t *r, const char *name, unsigned hash)
{
  for (resolver_entry_t *e = *bucket_of(r, hash); e; e = e->next)
    if (e->hash == hash && strcmp(e->name, name) == 0) return e;
  return NULL;
}

static void entry_free(resolver_entry_t *e)
{
  free(e->addrs);
  free(e);
}

/* Drops idle entries: expired ones first; if the table is still full, any
 * idle one until it is three quarters full. */
static void cache_sweep(gw_resolver_t *r, double now)
{
  for (int pass = 0; pass < 2 && r->nentries >= GW_RESOLVER_MAX_ENTRIES; pass++) {
    for (unsigned b = 0; b < GW_RESOLVER_BUCKETS; b++) {
      resolver_entry_t *e, **ep = &r->buckets[b];
      while ((e = *ep) != NULL) {
        int idle = !e->querying && !e->waiters;
        int drop = idle && (pass == 1 ? r->nentries > GW_RESOLVER_MAX_ENTRIES * 3 / 4
                                      : !e->resolved || now >= e->expires_ms);
        if (drop) {
          *ep = e->next;
          entry_free(e);
          r->nentries--;
        } else {
          ep = &e->next;
        }
      }
    }
  }
}

static resolver_entry_t *entry_new(gw_resolver_t *r, const char *name, size_t len, unsigned hash, double now)
{
  if (r->nentries >= GW_RESOLVER_MAX_ENTRIES) cache_sweep(r, now);
  resolver_entry_t *e = calloc(1, sizeof(*e) + len + 1);
  if (!e) return NULL;
  memcpy(e->name, name, len + 1);
  e->r = r;
  e->hash = hash;
  resolver_entry_t **bp = bucket_of(r, hash);
  e->next = *bp;
  *bp = e;
  r->nentries++;
  return e;
}

/* ---- results ---- */

static void set_port(resolver_addr_t *a, int port)
{
  if (a->sa.sa_family == AF_INET)
    a->in4.sin_port = htons((uint16_t)port);
  else
    a->in6.sin6_port = htons((uint16_t)port);
}

static void schedule(gw_resolve_t *q)
{
  q_link(&q->r->ready, q);
  event_active(&q->ev, EV_TIMEOUT, 1);
}

static void take_answer(gw_resolve_t *q, resolver_entry_t *e)
{
  if (e->err.kind != GW_OK) {
    q->err = e->err;
    return;
  }
  q->addr = e->addrs[e->rr++ % e->naddrs];
  q->addrlen = q->addr.sa.sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  set_port(&q->addr, q->port);
}

static void on_deliver(evutil_socket_t fd, short what, void *arg)
{
  gw_resolve_t *q = arg;
  (void)fd;
  (void)what;
  q_unlink(q);
  q->delivering = 1;
  /* The callback may free the resolver: only q is touched afterwards. */
  if (q->err.kind != GW_OK)
    q->cb(q->err, NULL, 0, q->arg);
  else
    q->cb(ERR_NONE, &q->addr.sa, q->addrlen, q->arg);
  free(q);
}

static gw_err_t status_error(int status)
{
  switch (status) {
  case ARES_ENOTFOUND:
  case ARES_ENODATA:
  case ARES_ENONAME:
    return ERR_NOT_FOUND;
  case ARES_ETIMEOUT:
    return ERR_TIMEOUT;
  case ARES_ESERVFAIL:
  case ARES_EREFUSED:
  case ARES_ECONNREFUSED: /* what c-ares reports once every server refused, failed or was unreachable */
    return ERR_SERVER;
  case ARES_EBADNAME:
  case ARES_EBADSTR:
    return ERR_BAD_NAME;
  default:
    return ERR_FAILED;
  }
}

static void on_addrinfo(void *arg, int status, int timeouts, struct ares_addrinfo *res);
static void finish_entry(resolver_entry_t *e, int status, const resolver_addr_t *found, unsigned n, long ttl);

/* 1 if name is `label` or ends in ".label" (a trailing dot allowed). */
static int in_domain(const char *name, const char *label)
{
  size_t n = strlen(name), l = strlen(label);
  if (n > 0 && name[n - 1] == '.') n--; /* "localhost." */
  return (n == l && strncasecmp(name, label, l) == 0) ||
         (n > l + 1 && name[n - l - 1] == '.' && strncasecmp(name + n - l, label, l) == 0);
}

/* Special-use names (RFC 6761) never go to DNS: "invalid" and "*.invalid"
 * do not exist (§6.4: answered at once, not after a DNS server's silence);
 * "localhost" and "*.localhost" (§6.3) are what the hosts file maps them
 * to, else the loopback address (containers and minimal systems often have
 * no /etc/hosts). */
static void start_query(resolver_entry_t *e, int family)
{
  if (in_domain(e->name, "invalid")) {
    e->family = family;
    finish_entry(e, ARES_ENOTFOUND, NULL, 0, 0);
    return;
  }
  if (family == AF_INET && in_domain(e->name, "localhost")) {
    struct hostent *he = NULL;
    if (ares_gethostbyname_file(e->r->channel, e->name, AF_INET, &he) == ARES_SUCCESS) {
      ares_free_hostent(he); /* mapped there: ares_getaddrinfo reads the file first */
    } else {
      resolver_addr_t loopback;
      memset(&loopback, 0, sizeof(loopback));
      loopback.in4.sin_family = AF_INET;
      loopback.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      e->family = AF_INET;
      finish_entry(e, ARES_SUCCESS, &loopback, 1, e->r->max_ttl_s);
      return;
    }
  }
  struct ares_addrinfo_hints hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = ARES_AI_NOSORT;
  e->family = family;
  e->querying = 1;
  /* May call on_addrinfo before returning (/etc/hosts); results are deferred anyway. */
  ares_getaddrinfo(e->r->channel, e->name, NULL, &hints, on_addrinfo, e);
}

static void on_addrinfo(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
  resolver_entry_t *e = arg;
  gw_resolver_t *r = e->r;
  resolver_addr_t found[GW_RESOLVER_MAX_ADDRS];
  unsigned n = 0;
  long ttl = LONG_MAX;
  (void)timeouts;

  if (r->freeing) { /* ARES_EDESTRUCTION from ares_destroy */
    if (res) ares_freeaddrinfo(res);
    return;
  }
  if (status == ARES_SUCCESS && res) {
    for (struct ares_addrinfo_node *nd = res->nodes; nd; nd = nd->ai_next) {
      if (nd->ai_family != e->family || !nd->ai_addr) continue;
      if (nd->ai_family == AF_INET && nd->ai_addrlen < (ares_socklen_t)sizeof(struct sockaddr_in)) continue;
      if (nd->ai_family == AF_INET6 && nd->ai_addrlen < (ares_socklen_t)sizeof(struct sockaddr_in6)) continue;
      if (nd->ai_ttl < ttl) ttl = nd->ai_ttl;
      if (n == GW_RESOLVER_MAX_ADDRS) continue;
      memset(&found[n], 0, sizeof(found[n]));
      if (nd->ai_family == AF_INET)
        memcpy(&found[n].in4, nd->ai_addr, sizeof(struct sockaddr_in));
      else
        memcpy(&found[n].in6, nd->ai_addr, sizeof(struct sockaddr_in6));
      n++;
    }
    /* An answer through a CNAME is valid no longer than the CNAME. */
    for (struct ares_addrinfo_cname *c = res->cnames; c; c = c->next)
      if (c->ttl < ttl) ttl = c->ttl;
  }
  if (res) ares_freeaddrinfo(res);
  if (status == ARES_SUCCESS && n == 0) status = ARES_ENODATA;

  if ((status == ARES_ENODATA || status == ARES_ENOTFOUND) && e->family == AF_INET) {
    start_query(e, AF_INET6); /* no A record: try AAAA (may complete right here, re-entering) */
    return;
  }
  finish_entry(e, status, found, n, ttl);
}

/* Caches the answer (or the failure) and hands it to every waiter. */
static void finish_entry(resolver_entry_t *e, int status, const resolver_addr_t *found, unsigned n, long ttl)
{
  gw_resolver_t *r = e->r;
  e->querying = 0;
  double now = gw_now_ms();
  if (status == ARES_SUCCESS) {
    resolver_addr_t *addrs = malloc(n * sizeof(*addrs));
    if (addrs) {
      memcpy(addrs, found, n * sizeof(*addrs));
      free(e->addrs);
      e->addrs = addrs;
      e->naddrs = n;
      e->rr = 0;
      e->err = ERR_NONE;
      if (ttl < r->min_ttl_s) ttl = r->min_ttl_s;
      if (ttl > r->max_ttl_s) ttl = r->max_ttl_s;
      e->expires_ms = now + (double)ttl * 1000.0;
      gw_log_debug("resolver: %s: %u address(es), ttl %lds", e->name, n, ttl);
    } else {
      status = ARES_ENOMEM;
    }
  }
  if (status != ARES_SUCCESS) {
    free(e->addrs);
    e->addrs = NULL;
    e->naddrs = 0;
    e->err = status_error(status);
    e->expires_ms = now + (double)r->negative_ttl_s * 1000.0;
    r->stats.failures++;
    if (status == ARES_ETIMEOUT) r->stats.timeouts++;
    gw_log_info("resolver: %s: %s (%s)", e->name, e->err.msg, ares_strerror(status));
  }
  e->resolved = 1;

  /* Deliver in arrival order (waiters are linked newest first). */
  gw_resolve_t *q, *fifo = NULL;
  while ((q = e->waiters) != NULL) {
    q_unlink(q);
    q->next = fifo;
    fifo = q;
  }
  while ((q = fifo) != NULL) {
    fifo = q->next;
    q->next = NULL;
    take_answer(q, e);
    schedule(q);
  }
}

/* 1: host is an IP literal, now in q->addr (port 0); -1: neither a literal nor a name
 * (a bad "[...]", or a ':' that is not IPv6, e.g. a zone "%eth0"); 0: a name. */
static int parse_literal(gw_resolve_t *q, const char *host, size_t len)
{
  gw_sockaddr_t a;
  socklen_t alen = 0;
  memset(&q->addr, 0, sizeof(q->addr));
  int lit = gw_addr_parse_literal(host, len, &a, &alen);
  if (lit == 1) {
    memcpy(&q->addr, &a, alen);
    q->addrlen = alen;
  }
  return lit;
}

/* ---- public API ---- */

gw_resolve_t *gw_resolve(gw_resolver_t *r, const char *host, int port, gw_resolve_cb cb, void *arg)
{
  gw_resolve_t *q = calloc(1, sizeof(*q));
  if (!q) return NULL;
  q->r = r;
  q->cb = cb;
  q->arg = arg;
  q->port = port;
  event_assign(&q->ev, r->base, -1, 0, on_deliver, q);
  r->stats.lookups++;

  size_t len = host ? strlen(host) : 0;
  if (port < 0 || port > 65535) {
    q->err = ERR_BAD_PORT;
    schedule(q);
    return q;
  }
  if (len == 0 || len > GW_RESOLVER_MAX_NAME) {
    q->err = ERR_BAD_NAME;
    schedule(q);
    return q;
  }
  int lit = parse_literal(q, host, len);
  if (lit != 0) {
    if (lit < 0)
      q->err = ERR_BAD_NAME;
    else
      set_port(&q->addr, port);
    schedule(q);
    return q;
  }

  char name[GW_RESOLVER_MAX_NAME + 1];
  for (size_t i = 0; i <= len; i++) {
    char c = host[i];
    name[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
  }
  unsigned hash = name_hash(name);
  double now = gw_now_ms();
  resolver_entry_t *e = entry_find(r, name, hash);
  if (e && e->resolved && !e->querying && now < e->expires_ms) {
    r->stats.cache_hits++;
    take_answer(q, e);
    schedule(q);
    return q;
  }
  if (!e && !(e = entry_new(r, name, len, hash, now))) {
    free(q);
    return NULL;
  }
  q_link(&e->waiters, q);
  if (!e->querying) {
    start_query(e, AF_INET);
    rearm(r);
  }
  return q;
}

void gw_resolve_cancel(gw_resolve_t *q)
{
  if (!q || q->delivering) return;
  q_unlink(q);
  event_del(&q->ev);
  free(q);
}

gw_resolver_t *gw_resolver_new(struct event_base *base, const gw_resolver_config_t *cfg, char *err, size_t errlen)
{
  static char lookups[] = "fb"; /* /etc/hosts, then DNS */
  gw_resolver_config_t defaults;
  struct ares_options opts;
  int rc;

  if (!cfg) {
    memset(&defaults, 0, sizeof(defaults));
    cfg = &defaults;
  }
  gw_resolver_t *r = calloc(1, sizeof(*r));
  if (!r || !(r->buckets = calloc(GW_RESOLVER_BUCKETS, sizeof(*r->buckets)))) {
    snprintf(err, errlen, "resolver: out of memory");
    goto fail;
  }
  r->base = base;
  r->min_ttl_s = cfg->min_ttl_s > 0 ? cfg->min_ttl_s : DEFAULT_MIN_TTL_S;
  r->max_ttl_s = cfg->max_ttl_s > 0 ? cfg->max_ttl_s : DEFAULT_MAX_TTL_S;
  if (r->max_ttl_s < r->min_ttl_s) r->max_ttl_s = r->min_ttl_s;
  r->negative_ttl_s = cfg->negative_ttl_s > 0 ? cfg->negative_ttl_s : DEFAULT_NEGATIVE_TTL_S;
  evtimer_assign(&r->timer, base, on_timeout, r);

  if ((rc = ares_library_init(ARES_LIB_INIT_ALL)) != ARES_SUCCESS) {
    snprintf(err, errlen, "resolver: c-ares initialisation failed: %s", ares_strerror(rc));
    goto fail;
  }
  r->library_ok = 1;

  memset(&opts, 0, sizeof(opts));
  opts.sock_state_cb = on_sock_state;
  opts.sock_state_cb_data = r;
  opts.timeout = cfg->timeout_ms > 0 ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
  opts.tries = cfg->tries > 0 ? cfg->tries : DEFAULT_TRIES;
  opts.lookups = lookups;
  rc = ares_init_options(&r->channel, &opts,
                         ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS);
  if (rc != ARES_SUCCESS) {
    snprintf(err, errlen, "resolver: c-ares initialisation failed: %s", ares_strerror(rc));
    goto fail;
  }
  r->channel_ok = 1;

  if (cfg->servers && cfg->servers[0] && (rc = ares_set_servers_ports_csv(r->channel, cfg->servers)) != ARES_SUCCESS) {
    snprintf(err, errlen, "resolver: bad DNS servers \"%s\": %s", cfg->servers, ares_strerror(rc));
    goto fail;
  }
  return r;

fail:
  gw_resolver_free(r);
  return NULL;
}

void gw_resolver_free(gw_resolver_t *r)
{
  gw_resolve_t *q;
  if (!r) return;
  r->freeing = 1;
  while ((q = r->ready) != NULL) {
    q_unlink(q);
    event_del(&q->ev);
    free(q);
  }
  if (r->buckets) {
    for (unsigned b = 0; b < GW_RESOLVER_BUCKETS; b++)
      for (resolver_entry_t *e = r->buckets[b]; e; e = e->next)
        while ((q = e->waiters) != NULL) {
          q_unlink(q);
          free(q);
        }
  }
  /* Ends every query (on_addrinfo ignores them: freeing) and reports every socket closed. */
  if (r->channel_ok) ares_destroy(r->channel);
  if (r->library_ok) ares_library_cleanup();
  if (r->base) evtimer_del(&r->timer);
  while (r->socks) { /* none left unless c-ares skipped a close report */
    resolver_sock_t *s = r->socks;
    r->socks = s->next;
    event_del(&s->rev);
    event_del(&s->wev);
    free(s);
  }
  if (r->buckets) {
    for (unsigned b = 0; b < GW_RESOLVER_BUCKETS; b++) {
      resolver_entry_t *e = r->buckets[b];
      while (e) {
        resolver_entry_t *next = e->next;
        entry_free(e);
        e = next;
      }
    }
    free(r->buckets);
  }
  free(r);
}

void gw_resolver_stats(const gw_resolver_t *r, gw_resolver_stats_t *out)
{
  *out = r->stats;
  out->cache_entries = r->nentries;
}
