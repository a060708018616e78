/* cache.c - the response cache's HTTP side: lookup before the handler,
 * the store writer beside the response, revalidation, stale answers and
 * collapsed forwarding (see cache.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "cache.h"
#include "log.h"
#include "static_http.h"
#include "stats.h"

typedef enum {
  M_HIT,   /* answered from the store: nothing to store */
  M_FILL,  /* the handler runs; its response may be stored */
  M_PASS   /* the handler runs; nothing is stored (bypass, HEAD) */
} fill_mode_t;

typedef struct cache_req_s {
  gw_request_t *req;
  const gw_cache_conf_t *cf;
  void (*handler)(gw_request_t *req);
  fill_mode_t mode;
  char *pkey;               /* owned: the primary key */
  size_t pklen;
  char *vkey;               /* owned: the variant's key (the primary key + '\0' + the Vary values), or NULL */
  size_t vklen;
  gw_cache_handle_t *old;   /* an expired entry found: revalidated, or served stale (owned) */
  gw_cache_writer_t *writer;/* the response being stored, or NULL */
  uint64_t token;           /* the fill lock's (0: none held) */
  int locked;
  int revalidating;         /* we sent If-None-Match / If-Modified-Since upstream */
  int replaced;             /* a streamed response is answered by `old` instead: its body is dropped */
  int lock_given_up;        /* waited lock_timeout for another fill: fetch without the lock */
  /* waiting for another request's fill (lock: true) */
  gw_pending_t pending;
  struct event tick;
  int waiting;
  double deadline_ms;       /* CLOCK_MONOTONIC ms */
  struct cache_req_s *wnext, *wprev; /* this worker's waiters */
} cache_req_t;

/* This worker's requests waiting for a fill (woken when one of ours ends). */
static cache_req_t waiters = {.wnext = &waiters, .wprev = &waiters};

static int64_t wall_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static const char *key_of(const cache_req_t *st, size_t *len)
{
  *len = st->vkey ? st->vklen : st->pklen;
  return st->vkey ? st->vkey : st->pkey;
}

/* -- config ------------------------------------------------------------------ */

gw_cache_conf_t *gw_cache_conf_new(const char *zone, char *err, size_t errlen)
{
  gw_cache_store_t *s = gw_cache_store_find(zone);
  if (s == NULL) {
    snprintf(err, errlen, "no cache zone %s", zone);
    return NULL;
  }
  gw_cache_conf_t *c = calloc(1, sizeof(*c));
  if (c == NULL || (c->zone = strdup(zone)) == NULL) {
    free(c);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  c->store = s;
  for (int i = 0; i < GW_CC_VALID_SLOTS; i++) c->valid[i] = -1;
  c->lock_timeout_ms = 5000;
  c->status_header = 1;
  return c;
}

void gw_cache_conf_free(gw_cache_conf_t *c)
{
  if (c == NULL) return;
  if (c->prepare) c->prepare->dispose(c->prepare);
  free(c->zone);
  free(c);
}

/* -- the fill lock and its waiters --------------------------------------------- */

static void wake_waiters(const cache_req_t *st);

static void unlock(cache_req_t *st)
{
  if (!st->locked) return;
  st->locked = 0;
  gw_cache_store_unlock(st->cf->store, st->pkey, st->pklen, st->token);
  st->token = 0;
  wake_waiters(st);
}

static void stop_waiting(cache_req_t *st)
{
  if (!st->waiting) return;
  st->waiting = 0;
  event_del(&st->tick);
  gw_request_pending_remove(&st->pending);
  st->wprev->wnext = st->wnext;
  st->wnext->wprev = st->wprev;
  st->wnext = st->wprev = NULL;
}

/* The request went away while it waited: the wait stops (the state itself
 * goes with the request, through the hooks' free). */
static void on_wait_cancel(gw_pending_t *p)
{
  cache_req_t *st = (cache_req_t *)((char *)p - offsetof(cache_req_t, pending));
  p->next = p->prev = p; /* already off the request's list */
  st->waiting = 0;
  event_del(&st->tick);
  st->wprev->wnext = st->wnext;
  st->wnext->wprev = st->wprev;
  st->wnext = st->wprev = NULL;
}

static void look(cache_req_t *st);

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
  cache_req_t *st = arg;
  (void)fd;
  (void)what;
  double now = gw_now_ms();
  if (now < st->deadline_ms && gw_cache_store_lock_held(st->cf->store, st->pkey, st->pklen)) {
    struct timeval tv = {0, GW_CACHE_LOCK_POLL_MS * 1000};
    evtimer_add(&st->tick, &tv);
    return;
  }
  if (now >= st->deadline_ms) {
    st->lock_given_up = 1;
    gw_log_warn("cache %s: %s %.*s: waited %d ms for another request's fill; fetching", st->cf->zone,
                st->req->in.method, (int)st->req->in.path_len, st->req->in.target, st->cf->lock_timeout_ms);
  }
  stop_waiting(st);
  look(st); /* filled meanwhile: a hit; else our turn to fill */
}

/* Waits for the fill another request (of any worker) is doing. */
static void wait_fill(cache_req_t *st)
{
  gw_request_t *req = st->req;
  if (st->deadline_ms == 0) st->deadline_ms = gw_now_ms() + st->cf->lock_timeout_ms;
  evtimer_assign(&st->tick, req->ctx->base, on_tick, st);
  struct timeval tv = {0, GW_CACHE_LOCK_POLL_MS * 1000};
  evtimer_add(&st->tick, &tv);
  gw_request_pending_add(req, &st->pending, on_wait_cancel);
  st->waiting = 1;
  st->wnext = waiters.wnext;
  st->wprev = &waiters;
  waiters.wnext->wprev = st;
  waiters.wnext = st;
}

/* A fill of ours ended: this worker's waiters for the key look again now. */
static void wake_waiters(const cache_req_t *st)
{
  for (cache_req_t *w = waiters.wnext; w != &waiters; w = w->wnext)
    if (w->cf->store == st->cf->store && w->pklen == st->pklen && memcmp(w->pkey, st->pkey, st->pklen) == 0)
      event_active(&w->tick, EV_TIMEOUT, 0);
}

/* -- answering from the store -------------------------------------------------- */

/* Replaces the response's head with the stored one (status, fields, Age:
 * the seconds since stored_ms); the fields set before the content (a
 * phase's) stay, as for any head. */
static void stored_head(gw_request_t *req, gw_cache_handle_t *h, int64_t stored_ms)
{
  const gw_cache_meta_t *m = gw_cache_handle_meta(h);
  gw_request_head_replace(req);
  req->resp.status = m->status;
  req->resp.text_plain = 0;
  req->resp.inline_body = NULL;
  size_t len;
  const char *p = gw_cache_handle_head(h, &len), *end = p + len;
  while (p < end) { /* "Name: value\r\n" lines */
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = eol ? eol : end;
    const char *colon = memchr(p, ':', (size_t)(line_end - p));
    if (colon) {
      const char *v = colon + 1, *ve = line_end;
      while (v < ve && *v == ' ') v++;
      if (ve > v && ve[-1] == '\r') ve--;
      gw_headers_add(&req->resp.headers, p, (size_t)(colon - p), v, (size_t)(ve - v));
    }
    p = eol ? eol + 1 : end;
  }
  int64_t age = (wall_ms() - stored_ms) / 1000;
  char a[24];
  gw_headers_add(&req->resp.headers, "Age", 3, a, (size_t)snprintf(a, sizeof(a), "%lld", (long long)(age > 0 ? age : 0)));
}

/* The client's own conditional fields against the stored validators. */
static int not_modified(const gw_request_t *req, const gw_cache_meta_t *m)
{
  if (m->status != 200) return 0;
  const gw_header_t *inm = gw_headers_find(&req->in.headers, "if-none-match");
  if (inm) return m->etag_len > 0 && gw_static_etag_match(inm->value, inm->value_len, m->etag, m->etag_len);
  const gw_header_t *ims = gw_headers_find(&req->in.headers, "if-modified-since");
  if (ims == NULL || m->last_modified_len == 0) return 0;
  time_t since = gw_static_http_date_parse(ims->value, ims->value_len);
  time_t lm = gw_static_http_date_parse(m->last_modified, m->last_modified_len);
  return since != (time_t)-1 && lm != (time_t)-1 && lm <= since;
}

/* The body of the 206 for the client's Range, or 0 when the whole body is
 * sent (no Range, not a 200, an If-Range that no longer holds...). */
static int serve_range(gw_request_t *req, gw_cache_handle_t *h, const gw_cache_meta_t *m)
{
  int max = req->handler.location ? req->handler.location->max_ranges : 0;
  const gw_header_t *range = gw_headers_find(&req->in.headers, "range");
  if (range == NULL || max <= 0 || m->status != 200) return 0;
  const gw_header_t *ir = gw_headers_find(&req->in.headers, "if-range");
  if (ir && !(m->etag_len == ir->value_len && memcmp(m->etag, ir->value, ir->value_len) == 0 &&
              !(ir->value_len > 1 && ir->value[0] == 'W')))
    return 0; /* If-Range names another version (a date: taken as not matching, as nginx) */
  long long size = (long long)gw_cache_handle_body_length(h);
  gw_range_t one, *rs = max == 1 ? &one : malloc((size_t)max * sizeof(*rs));
  if (rs == NULL) return 0;
  size_t n = 0;
  gw_range_kind_t kind = gw_static_range_parse(range->value, range->value_len, size, rs, (size_t)max, &n);
  int done = 1;
  char v[128];
  if (kind == GW_RANGE_UNSATISFIABLE) {
    gw_request_simple_response(req, 416, NULL);
    gw_headers_add(&req->resp.headers, "Content-Range", 13, v, (size_t)snprintf(v, sizeof(v), "bytes */%lld", size));
  } else if (kind == GW_RANGE_SINGLE) {
    req->resp.status = 206;
    gw_headers_add(&req->resp.headers, "Content-Range", 13, v,
                   (size_t)snprintf(v, sizeof(v), "bytes %lld-%lld/%lld", rs[0].start, rs[0].start + rs[0].len - 1, size));
    if (gw_cache_handle_read(h, req->resp.body, (uint64_t)rs[0].start, (uint64_t)rs[0].len) < 0) done = -1;
  } else if (kind == GW_RANGE_MULTI) {
    const gw_header_t *ct = gw_headers_find(&req->resp.headers, "content-type");
    char ctype[256];
    snprintf(ctype, sizeof(ctype), "%.*s", ct ? (int)ct->value_len : 24, ct ? ct->value : "application/octet-stream");
    char boundary[24];
    gw_range_boundary(boundary, sizeof(boundary));
    for (size_t i = 0; i <= n && done > 0; i++) {
      char part[512];
      size_t pl = gw_range_part_head(part, sizeof(part), boundary, ctype, i < n ? &rs[i] : NULL, size);
      evbuffer_add(req->resp.body, part, pl);
      if (i < n && gw_cache_handle_read(h, req->resp.body, (uint64_t)rs[i].start, (uint64_t)rs[i].len) < 0) done = -1;
    }
    req->resp.status = 206;
    gw_headers_remove(&req->resp.headers, "content-type");
    gw_headers_add(&req->resp.headers, "Content-Type", 12, v,
                   (size_t)snprintf(v, sizeof(v), "multipart/byteranges; boundary=%s", boundary));
  } else {
    done = 0;
  }
  if (rs != &one) free(rs);
  return done;
}

/* Answers req with h (a fresh entry, or a stale one that may serve). */
static void answer(cache_req_t *st, gw_cache_handle_t *h, const char *status)
{
  gw_request_t *req = st->req;
  const gw_cache_meta_t *m = gw_cache_handle_meta(h);
  st->mode = M_HIT;
  req->cache.status = status;
  req->filter.applied = 1; /* stored as the filters left it */
  evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
  stored_head(req, h, m->stored_ms);
  int rc = 0;
  if (not_modified(req, m)) {
    req->resp.status = 304;
  } else if ((rc = serve_range(req, h, m)) == 0) {
    if (gw_cache_handle_read(h, req->resp.body, 0, gw_cache_handle_body_length(h)) < 0) rc = -1;
  }
  gw_stats_self->cache_hits++;
  gw_stats_self->cache_hit_bytes += evbuffer_get_length(req->resp.body);
  gw_cache_handle_release(h);
  if (h == st->old) st->old = NULL;
  if (rc < 0) { /* the store checked the file when it was opened: this is memory running out */
    gw_log_error("cache %s: %.*s: the stored body could not be read", st->cf->zone, (int)req->in.path_len, req->in.target);
    gw_request_simple_response(req, 500, NULL);
  }
  gw_request_finish(req);
}

/* -- going to the handler -------------------------------------------------------- */

/* The client's conditional and Range fields are its own business with the
 * cache; the upstream gets none (as nginx's proxy_cache): a full response
 * that can be stored. */
static void strip_client_fields(gw_request_t *req)
{
  static const char *const names[] = {"if-none-match", "if-modified-since", "if-match", "if-unmodified-since",
                                      "if-range", "range"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) gw_headers_remove(&req->in.headers, names[i]);
}

/* The handler runs (a miss, an expired entry, a bypass). */
static void fetch(cache_req_t *st, fill_mode_t mode, const char *status)
{
  gw_request_t *req = st->req;
  st->mode = mode;
  req->cache.status = status;
  if (mode != M_FILL) {
    st->handler(req);
    return;
  }
  gw_cache_store_note(st->cf->store, 0);
  gw_stats_self->cache_misses++;
  strip_client_fields(req);
  if (st->old) { /* revalidate with its validators */
    const gw_cache_meta_t *m = gw_cache_handle_meta(st->old);
    if (m->etag_len) gw_headers_add(&req->in.headers, "If-None-Match", 13, m->etag, m->etag_len);
    if (m->last_modified_len)
      gw_headers_add(&req->in.headers, "If-Modified-Since", 17, m->last_modified, m->last_modified_len);
    st->revalidating = m->etag_len || m->last_modified_len;
  }
  st->handler(req);
}

/* The variant key for this request: the primary key, '\0', then for each
 * header named in vary ("a,b") its value and '\n'. 0, or -1 out of memory. */
static int make_vkey(cache_req_t *st, const char *vary, size_t vlen)
{
  size_t cap = st->pklen + 1 + 64, len = 0;
  char *k = malloc(cap);
  if (k == NULL) return -1;
  memcpy(k, st->pkey, st->pklen);
  len = st->pklen;
  k[len++] = '\0';
  const char *p = vary, *end = vary + vlen;
  while (p < end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *ne = comma ? comma : end;
    while (p < ne && (*p == ' ' || *p == '\t')) p++;
    const char *nend = ne;
    while (nend > p && (nend[-1] == ' ' || nend[-1] == '\t')) nend--;
    char name[128];
    size_t nl = (size_t)(nend - p) < sizeof(name) - 1 ? (size_t)(nend - p) : sizeof(name) - 1;
    memcpy(name, p, nl);
    name[nl] = '\0';
    for (size_t i = 0; i < st->req->in.headers.count; i++) {
      const gw_header_t *h = &st->req->in.headers.items[i];
      if (nl == 0 || strcasecmp(h->name, name) != 0) continue;
      if (len + h->value_len + 2 > cap) {
        cap = (len + h->value_len + 2) * 2;
        char *nk = realloc(k, cap);
        if (nk == NULL) {
          free(k);
          return -1;
        }
        k = nk;
      }
      memcpy(k + len, h->value, h->value_len);
      len += h->value_len;
      k[len++] = ',';
    }
    if (len + 1 > cap) {
      char *nk = realloc(k, cap *= 2);
      if (nk == NULL) {
        free(k);
        return -1;
      }
      k = nk;
    }
    k[len++] = '\n';
    p = comma ? comma + 1 : end;
  }
  free(st->vkey);
  st->vkey = k;
  st->vklen = len;
  return 0;
}

/* The entry for this request (through a Vary marker), or NULL. */
static gw_cache_handle_t *find(cache_req_t *st)
{
  gw_cache_handle_t *h = gw_cache_store_lookup(st->cf->store, st->pkey, st->pklen);
  if (h == NULL) return NULL;
  const gw_cache_meta_t *m = gw_cache_handle_meta(h);
  if (!(m->flags & GW_CACHE_VARIANTS)) return h;
  int rc = make_vkey(st, m->vary, m->vary_len);
  gw_cache_handle_release(h);
  return rc == 0 ? gw_cache_store_lookup(st->cf->store, st->vkey, st->vklen) : NULL;
}

/* -- stale-while-revalidate: a refresh in the background ------------------------
 *
 * A request of our own, made from the client's (method, target, header
 * fields), runs the location's phases and handler like any other; its
 * response goes to the store (the hooks above) and nowhere else: this
 * protocol drops it, then frees the request on the next loop turn. */

typedef struct refresher_s {
  gw_request_t req;
  struct event done;        /* frees it once its response ended */
  char addr[64];            /* the client's address (the client may be gone meanwhile) */
  struct refresher_s *next, *prev; /* this worker's refreshes (gw_cache_close_all) */
} refresher_t;

/* This worker's refreshes in flight: no connection holds them, so the
 * worker's teardown ends them (gw_cache_close_all). */
static refresher_t refreshers = {.next = &refreshers, .prev = &refreshers};

static void refresher_free(refresher_t *r)
{
  r->prev->next = r->next;
  r->next->prev = r->prev;
  event_del(&r->done);
  gw_request_dispose(&r->req); /* cancels what it still waits for; the lock and writer go (cache_free) */
  free(r);
}

static void on_refresher_done(evutil_socket_t fd, short what, void *arg)
{
  (void)fd;
  (void)what;
  refresher_free(arg);
}

void gw_cache_close_all(void)
{
  while (refreshers.next != &refreshers) refresher_free(refreshers.next);
}

static void refresher_over(gw_request_t *req)
{
  refresher_t *r = req->proto_ctx;
  static const struct timeval now = {0, 0};
  evtimer_add(&r->done, &now); /* not inside request.c's call into us */
}

static void refresher_head(gw_request_t *req, long long length)
{
  (void)req;
  (void)length;
}

static int refresher_body(gw_request_t *req, const char *data, size_t len)
{
  (void)req;
  (void)data;
  (void)len;
  return 0;
}

static void refresher_end(gw_request_t *req, int complete)
{
  (void)complete;
  refresher_over(req);
}

static const gw_protocol_t refresher_protocol = {
  .send = refresher_over, .stream_head = refresher_head, .stream_body = refresher_body, .stream_end = refresher_end};

/* Starts refreshing st's expired entry in the background, the fill lock
 * st holds handed over. 0, or -1 (out of memory: st keeps its lock). */
static int refresh_in_background(cache_req_t *st)
{
  gw_request_t *c = st->req;
  refresher_t *r = calloc(1, sizeof(*r));
  cache_req_t *bst = calloc(1, sizeof(*bst));
  char *target = malloc(c->in.target_len + 1);
  char *pkey = malloc(st->pklen + 1);
  if (r == NULL || bst == NULL || target == NULL || pkey == NULL) {
    free(r);
    free(bst);
    free(target);
    free(pkey);
    return -1;
  }
  gw_request_t *req = &r->req;
  gw_request_init(req, c->ctx, c->server, &refresher_protocol, r);
  evtimer_assign(&r->done, c->ctx->base, on_refresher_done, r);
  r->next = refreshers.next;
  r->prev = &refreshers;
  refreshers.next->prev = r;
  refreshers.next = r;
  req->in.method = c->in.method;
  req->in.method_id = c->in.method_id;
  memcpy(target, c->in.target, c->in.target_len + 1);
  req->in.target = target;
  req->in.target_len = c->in.target_len;
  req->in.target_cap = c->in.target_len + 1;
  gw_request_split_target(req);
  req->in.http_major = 1;
  req->in.http_minor = 1;
  snprintf(r->addr, sizeof(r->addr), "%s", c->client.remote_addr ? c->client.remote_addr : "127.0.0.1");
  req->client.remote_addr = r->addr;
  req->in.start_ms = gw_now_ms();
  gw_headers_copy(&req->in.headers, &c->in.headers);
  memcpy(pkey, st->pkey, st->pklen + 1);
  bst->req = req;
  bst->cf = st->cf;
  bst->pkey = pkey;
  bst->pklen = st->pklen;
  bst->locked = st->locked; /* the lock is the refresher's now */
  bst->token = st->token;
  st->locked = 0;
  st->token = 0;
  bst->old = find(bst); /* its own handle: revalidated, or kept if the upstream fails */
  req->cache.hooks = &gw_cache_hooks;
  req->cache.state = bst; /* cache_lookup sees a refresh, not a lookup */
  gw_log_info("cache %s: %.*s: refreshing in the background", st->cf->zone, (int)c->in.path_len, c->in.target);
  gw_request_start(req);
  return 0;
}

/* A stale entry may answer while another request refreshes it. */
static int may_serve_updating(const cache_req_t *st, const gw_cache_meta_t *m, int64_t now)
{
  return st->cf->stale_updating || now < m->fresh_until_ms + m->stale_while_revalidate_ms;
}

/* Looks the key up and answers, waits, or runs the handler. */
static void look(cache_req_t *st)
{
  gw_cache_handle_t *h = find(st);
  int64_t now = wall_ms();
  if (h && now < gw_cache_handle_meta(h)->fresh_until_ms) {
    gw_cache_store_note(st->cf->store, 1);
    answer(st, h, "HIT");
    return;
  }
  if (st->old) gw_cache_handle_release(st->old);
  st->old = h; /* expired (or NULL) */
  if (st->req->in.head) { /* a HEAD's answer has no body to store: it passes */
    fetch(st, M_PASS, h ? "EXPIRED" : "MISS");
    return;
  }
  /* Within its stale-while-revalidate window: served stale at once while a
   * request of our own refreshes it (or another one already does). */
  if (h && now < gw_cache_handle_meta(h)->fresh_until_ms + gw_cache_handle_meta(h)->stale_while_revalidate_ms) {
    int r = gw_cache_store_lock(st->cf->store, st->pkey, st->pklen, st->cf->lock_timeout_ms, &st->token);
    st->locked = r == GW_CACHE_LOCK_OWNED && st->token != 0;
    if (r == GW_CACHE_LOCK_BUSY || refresh_in_background(st) == 0) {
      gw_cache_store_note(st->cf->store, 1);
      answer(st, h, r == GW_CACHE_LOCK_BUSY ? "UPDATING" : "STALE");
      return;
    }
    fetch(st, M_FILL, "EXPIRED"); /* out of memory for the refresher: this request refreshes it */
    return;
  }
  /* An expired entry is always refreshed under the lock, so others can tell
   * it is being refreshed; a missing one only with lock: true. */
  if ((st->cf->lock || h) && !st->lock_given_up) {
    int r = gw_cache_store_lock(st->cf->store, st->pkey, st->pklen, st->cf->lock_timeout_ms, &st->token);
    if (r == GW_CACHE_LOCK_BUSY) {
      if (h && may_serve_updating(st, gw_cache_handle_meta(h), now)) {
        gw_cache_store_note(st->cf->store, 1);
        answer(st, h, "UPDATING");
        return;
      }
      if (st->cf->lock) {
        wait_fill(st);
        return;
      }
    } else {
      st->locked = st->token != 0;
    }
  }
  fetch(st, M_FILL, h ? "EXPIRED" : "MISS");
}

/* The default key: "SCHEME://HOST/TARGET" (nginx's $scheme$proxy_host$request_uri, with the Host). */
static int default_key(cache_req_t *st)
{
  gw_request_t *req = st->req;
  const gw_header_t *host = gw_headers_find(&req->in.headers, "host");
  const char *scheme = req->client.tls ? "https" : "http";
  size_t hl = host ? host->value_len : 0;
  st->pklen = strlen(scheme) + 3 + hl + req->in.target_len;
  if ((st->pkey = malloc(st->pklen + 1)) == NULL) return -1;
  snprintf(st->pkey, st->pklen + 1, "%s://%.*s%.*s", scheme, (int)hl, host ? host->value : "", (int)req->in.target_len,
           req->in.target);
  for (size_t i = 0; i < hl; i++) /* host names are case-insensitive */
    if (st->pkey[strlen(scheme) + 3 + i] >= 'A' && st->pkey[strlen(scheme) + 3 + i] <= 'Z')
      st->pkey[strlen(scheme) + 3 + i] += 32;
  return 0;
}

static void start(cache_req_t *st)
{
  gw_request_t *req = st->req;
  if (req->cache.bypass) {
    fetch(st, M_PASS, "BYPASS");
    return;
  }
  if (req->cache.key) {
    st->pkey = malloc(req->cache.key_len + 1);
    if (st->pkey) memcpy(st->pkey, req->cache.key, req->cache.key_len + 1);
    st->pklen = req->cache.key_len;
  } else if (default_key(st) < 0) {
    st->pkey = NULL;
  }
  if (st->pkey == NULL || st->pklen > GW_CACHE_KEY_MAX) {
    if (st->pkey) gw_log_warn("cache %s: a key of %zu bytes (at most %d): not cached", st->cf->zone, st->pklen, GW_CACHE_KEY_MAX);
    fetch(st, M_PASS, "MISS");
    return;
  }
  look(st);
}

/* The key:/bypass: lambdas ran. */
static void after_prepare(gw_request_t *req, int verdict, void *arg)
{
  (void)arg;
  if (verdict == GW_STEP_NEXT) {
    start(req->cache.state);
    return;
  }
  if (verdict == GW_STEP_FAILED) gw_request_simple_response(req, 500, NULL);
  gw_request_finish(req);
}

static void cache_lookup(gw_request_t *req, void (*handler)(gw_request_t *req))
{
  const gw_cache_conf_t *cf = req->handler.location->cache;
  cache_req_t *bst = req->cache.state;
  if (bst) { /* a refresh in the background (refresh_in_background) */
    bst->handler = handler;
    if (bst->cf != cf) { /* routed elsewhere meanwhile (a reload): nothing to refresh here */
      bst->mode = M_PASS;
      handler(req);
      return;
    }
    fetch(bst, M_FILL, "EXPIRED");
    return;
  }
  if ((strcmp(req->in.method, "GET") != 0 && strcmp(req->in.method, "HEAD") != 0) || req->in.websocket_connect ||
      gw_headers_find(&req->in.headers, "upgrade")) {
    handler(req); /* only GET and HEAD are cached; never a protocol upgrade (a WebSocket handshake) */
    return;
  }
  cache_req_t *st = calloc(1, sizeof(*st));
  if (st == NULL) {
    handler(req);
    return;
  }
  st->req = req;
  st->cf = cf;
  st->handler = handler;
  st->mode = M_PASS;
  req->cache.hooks = &gw_cache_hooks;
  req->cache.state = st;
  if (cf->prepare) cf->prepare->run(cf->prepare, req, after_prepare, NULL);
  else start(st);
}

/* -- the handler's response ------------------------------------------------------- */

/* The response head as stored: its fields but the framing, hop-by-hop and
 * per-answer ones ("Name: value\r\n" each), and but those the phases set
 * before the content (the first resp_headers_kept: each request that the
 * entry answers sets its own). Never Set-Cookie: a response carrying it is
 * stored only with store_set_cookie:, and then without it (one client's
 * cookie is not every client's; nginx's proxy_ignore_headers Set-Cookie with
 * proxy_hide_header Set-Cookie for the hits). */
static struct evbuffer *head_bytes(const gw_request_t *req)
{
  struct evbuffer *b = evbuffer_new();
  if (b == NULL) return NULL;
  for (size_t i = req->resp.headers_kept; i < req->resp.headers.count; i++) {
    const gw_header_t *h = &req->resp.headers.items[i];
    if (gw_header_is_hop_by_hop(h->name, h->name_len) || strcasecmp(h->name, "content-length") == 0 ||
        strcasecmp(h->name, "age") == 0 || strcasecmp(h->name, "x-cache-status") == 0 ||
        strcasecmp(h->name, "set-cookie") == 0)
      continue;
    evbuffer_add(b, h->name, h->name_len);
    evbuffer_add(b, ": ", 2);
    evbuffer_add(b, h->value, h->value_len);
    evbuffer_add(b, "\r\n", 2);
  }
  if (req->resp.text_plain && !gw_headers_find(&req->resp.headers, "content-type"))
    evbuffer_add_printf(b, "Content-Type: text/plain; charset=utf-8\r\n");
  return b;
}

/* The response's Vary names, lowercased and comma-separated, into out. */
static size_t vary_names(const gw_request_t *req, char *out, size_t cap)
{
  size_t n = 0;
  for (size_t i = 0; i < req->resp.headers.count; i++) {
    const gw_header_t *h = &req->resp.headers.items[i];
    if (strcasecmp(h->name, "vary") != 0) continue;
    if (n && n < cap) out[n++] = ',';
    for (size_t j = 0; j < h->value_len && n < cap; j++)
      out[n++] = h->value[j] >= 'A' && h->value[j] <= 'Z' ? h->value[j] + 32 : h->value[j];
  }
  return n < cap ? n : 0; /* too long: not a usable list */
}

/* Starts storing the response (its head is final): a writer, or nothing
 * when it may not be stored. length: the body's if known, else -1. */
static void begin_store(cache_req_t *st, long long length)
{
  gw_request_t *req = st->req;
  int status = req->resp.status ? req->resp.status : 200;
  gw_cache_rules_t rules = {st->cf->valid, st->cf->store_set_cookie};
  gw_cache_verdict_t v;
  int64_t now = wall_ms();
  gw_cache_decide(status, &req->resp.headers, &req->in.headers, (time_t)(now / 1000), &rules, &v);
  if (!v.storable) return;
  char vary[GW_CACHE_STR_MAX];
  size_t vlen = vary_names(req, vary, sizeof(vary));
  gw_cache_meta_t m = {0};
  m.status = status;
  m.stored_ms = now - v.age_s * 1000;
  m.fresh_until_ms = m.stored_ms + v.fresh_s * 1000;
  m.stale_while_revalidate_ms = v.stale_while_revalidate_s * 1000;
  m.stale_if_error_ms = v.stale_if_error_s * 1000;
  const gw_header_t *etag = gw_headers_find(&req->resp.headers, "etag");
  const gw_header_t *lm = gw_headers_find(&req->resp.headers, "last-modified");
  if (etag && etag->value_len <= GW_CACHE_STR_MAX) m.etag = etag->value, m.etag_len = etag->value_len;
  if (lm && lm->value_len <= GW_CACHE_STR_MAX) m.last_modified = lm->value, m.last_modified_len = lm->value_len;
  if (vlen > 0) { /* the marker names the headers; the variant is stored under its own key */
    gw_cache_meta_t mk = m;
    mk.flags = GW_CACHE_VARIANTS;
    mk.vary = vary;
    mk.vary_len = vlen;
    mk.etag = mk.last_modified = NULL;
    mk.etag_len = mk.last_modified_len = 0;
    gw_cache_writer_t *w = gw_cache_store_begin(st->cf->store, st->pkey, st->pklen, &mk, "", 0, 0);
    if (w == NULL || gw_cache_writer_commit(w) < 0 || make_vkey(st, vary, vlen) < 0) return;
  } else {
    free(st->vkey);
    st->vkey = NULL;
  }
  struct evbuffer *head = head_bytes(req);
  if (head == NULL) return;
  size_t klen, hlen = evbuffer_get_length(head);
  const char *key = key_of(st, &klen);
  st->writer = gw_cache_store_begin(st->cf->store, key, klen, &m, (const char *)evbuffer_pullup(head, -1), hlen,
                                    length);
  evbuffer_free(head);
}

/* Ends the store: the entry goes in when complete, else it is dropped. */
static void end_store(cache_req_t *st, int complete)
{
  gw_cache_writer_t *w = st->writer;
  st->writer = NULL;
  if (w && complete) gw_cache_writer_commit(w);
  else if (w) gw_cache_writer_abort(w);
  unlock(st);
}

/* A 304 to our conditional request: the entry is fresh again (received
 * now). Returns its new stored_ms. */
static int64_t refresh(cache_req_t *st)
{
  gw_request_t *req = st->req;
  const gw_cache_meta_t *om = gw_cache_handle_meta(st->old);
  gw_cache_rules_t rules = {NULL, 1};
  gw_cache_verdict_t v;
  int64_t now = wall_ms();
  gw_cache_decide(200, &req->resp.headers, NULL, (time_t)(now / 1000), &rules, &v);
  gw_cache_meta_t m = *om;
  m.stored_ms = now - (v.storable ? v.age_s * 1000 : 0);
  /* the 304's own freshness if it gives one, else the entry's old lifetime */
  int64_t life = v.storable ? v.fresh_s * 1000 : om->fresh_until_ms - om->stored_ms;
  m.fresh_until_ms = m.stored_ms + (life > 0 ? life : 0);
  size_t klen;
  const char *key = key_of(st, &klen);
  gw_cache_store_refresh(st->cf->store, key, klen, &m);
  return m.stored_ms;
}

/* The handler's answer is an error a stale entry may replace. */
static int stale_instead(const cache_req_t *st, int status)
{
  if (st->old == NULL || status < 500) return 0;
  const gw_cache_meta_t *m = gw_cache_handle_meta(st->old);
  int64_t now = wall_ms();
  if (now < m->fresh_until_ms + m->stale_if_error_ms && status <= 504) return 1;
  if (st->cf->stale_timeout && status == 504) return 1;
  return st->cf->stale_error && (status == 500 || status == 502 || status == 503);
}

/* The stored head replaces the handler's: status REVALIDATED or STALE. */
static void take_old_head(cache_req_t *st, const char *status)
{
  gw_request_t *req = st->req;
  int64_t stored_ms = gw_cache_handle_meta(st->old)->stored_ms;
  if (strcmp(status, "REVALIDATED") == 0) stored_ms = refresh(st);
  else gw_log_warn("cache %s: %.*s: the upstream answered %d; serving the stale entry", st->cf->zone,
                   (int)req->in.path_len, req->in.target, req->resp.status);
  stored_head(req, st->old, stored_ms);
  req->cache.status = status;
}

static void status_header(gw_request_t *req)
{
  const cache_req_t *st = req->cache.state;
  if (!st->cf->status_header || req->cache.status == NULL) return;
  gw_headers_remove(&req->resp.headers, "x-cache-status");
  gw_headers_add(&req->resp.headers, "X-Cache-Status", 14, req->cache.status, strlen(req->cache.status));
}

/* Which stored answer replaces the handler's, or NULL. */
static const char *replacement(const cache_req_t *st)
{
  int status = st->req->resp.status ? st->req->resp.status : 200;
  if (st->mode != M_FILL || st->old == NULL) return NULL;
  if (st->revalidating && status == 304) return "REVALIDATED";
  if (stale_instead(st, status)) return "STALE";
  return NULL;
}

static void cache_whole(gw_request_t *req)
{
  cache_req_t *st = req->cache.state;
  const char *rep = replacement(st);
  if (rep) {
    take_old_head(st, rep);
    evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
    req->resp.inline_body = NULL;
    if (gw_cache_handle_read(st->old, req->resp.body, 0, gw_cache_handle_body_length(st->old)) < 0)
      gw_request_simple_response(req, 500, NULL);
    unlock(st);
  } else if (st->mode == M_FILL) {
    size_t len = req->resp.inline_body ? req->resp.inline_len : evbuffer_get_length(req->resp.body);
    begin_store(st, (long long)len);
    if (st->writer) {
      int rc = req->resp.inline_body ? gw_cache_writer_append(st->writer, req->resp.inline_body, len)
                                : gw_cache_writer_append_buffer(st->writer, req->resp.body);
      end_store(st, rc == 0);
    }
    unlock(st);
  }
  st->mode = M_HIT; /* done: nothing more to store */
  status_header(req);
}

static long long cache_head(gw_request_t *req, long long length)
{
  cache_req_t *st = req->cache.state;
  const char *rep = replacement(st);
  if (rep) {
    take_old_head(st, rep);
    st->replaced = 1;
    length = (long long)gw_cache_handle_body_length(st->old);
  } else if (st->mode == M_FILL) {
    begin_store(st, length);
    if (st->writer == NULL) unlock(st);
  }
  status_header(req);
  return length;
}

static int cache_data(gw_request_t *req, const char *data, size_t len)
{
  cache_req_t *st = req->cache.state;
  if (st->replaced) return 1;
  if (st->writer && gw_cache_writer_append(st->writer, data, len) < 0) end_store(st, 0);
  return 0;
}

static int cache_end(gw_request_t *req, int complete, int (*emit)(gw_request_t *req, const char *data, size_t len))
{
  cache_req_t *st = req->cache.state;
  if (st->replaced) { /* the stored body instead of the handler's */
    st->replaced = 0;
    unlock(st);
    struct evbuffer *b = evbuffer_new();
    int ok = b && !req->in.head && gw_cache_handle_read(st->old, b, 0, gw_cache_handle_body_length(st->old)) == 0;
    int n = ok ? evbuffer_peek(b, -1, NULL, NULL, 0) : 0;
    struct evbuffer_iovec *v = n > 0 ? calloc((size_t)n, sizeof(*v)) : NULL;
    if (v) evbuffer_peek(b, -1, NULL, v, n);
    int rc = 1;
    for (int i = 0; v && i < n && rc >= 0; i++) rc = emit(req, v[i].iov_base, v[i].iov_len);
    free(v);
    if (b) evbuffer_free(b);
    return rc < 0 ? -1 : (ok || req->in.head);
  }
  end_store(st, complete);
  st->mode = M_HIT;
  return complete;
}

static void cache_free(gw_request_t *req)
{
  cache_req_t *st = req->cache.state;
  req->cache.state = NULL;
  stop_waiting(st);
  if (st->writer) gw_cache_writer_abort(st->writer); /* cut short, or the client left */
  st->writer = NULL;
  unlock(st);
  if (st->old) gw_cache_handle_release(st->old);
  free(st->pkey);
  free(st->vkey);
  free(st);
}

const gw_cache_hooks_t gw_cache_hooks = {.lookup = cache_lookup,
                                         .whole = cache_whole,
                                         .head = cache_head,
                                         .data = cache_data,
                                         .end = cache_end,
                                         .free = cache_free};
