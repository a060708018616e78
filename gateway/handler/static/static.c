/* static.c - serves files: the handler of `root:`/`alias:` locations and
 * req.send_file(). The URI is decoded and normalised once
 * (uri_path.c), the file opened beneath the root and cached
 * (filecache.c), and the response built with conditional requests
 * (ETag, Last-Modified -> 304), ranges (206, several as multipart/byteranges;
 * 416), precompressed
 * siblings (gzip_static) and HEAD.
 *
 * How the body leaves, cheapest first: a file held in memory is the
 * response's inline body (one write with its head); a small one is read
 * into the response buffer; a large one is handed to the protocol as a file
 * range (gw_protocol_t.stream_file: sendfile(2) over HTTP/1.1) - or, where a
 * protocol cannot take one, read in 64 KiB pieces into stream_body with its
 * back-pressure; a sub-request (no streaming) gets it whole, up to 64 MiB.
 * Nothing is mmap()ed, so a file truncated while it is sent ends that
 * response early and never faults the worker. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <llhttp.h>

#include "log.h"
#include "mime.h"
#include "static.h"
#include "static_http.h"
#include "uri_path.h"

#define SMALL_READ (64 * 1024)          /* read into the response up to this */
#define PIECE (64 * 1024)               /* streamed reads without stream_file */
#define SUBREQUEST_MAX (64LL << 20)     /* a sub-request collects the body whole */

typedef struct {
  gw_handler_t super;
  char *root;               /* owned */
  int rootfd;               /* owned O_PATH descriptor of root; AT_FDCWD for the absolute one */
  int alias;
  size_t prefix_len;
  char **index;             /* owned */
  size_t nindex;
  int autoindex, gzip_static;
  gw_mime_t *types;         /* owned overrides, or NULL */
  char *default_type;       /* owned */
  gw_handler_t *fallback;   /* owned, or NULL */
  gw_filecache_t *cache;    /* owned */
  void (*ruby_file)(gw_request_t *req, const char *path, int fd, const struct stat *st); /* or NULL */
} gw_static_t;

/* ruby_files: a name ending in ".rb" is a handler file. */
static int is_ruby_file(const gw_static_t *h, const char *name, size_t len)
{
  return h->ruby_file && len > 3 && memcmp(name + len - 3, ".rb", 3) == 0;
}

/* Runs it: the path named for its errors is the folder's and the name. */
static void run_ruby_file(gw_static_t *h, gw_request_t *req, const gw_file_t *f, const char *rel, size_t len)
{
  char path[4096];
  snprintf(path, sizeof(path), "%s%s%.*s", h->root, rel[0] == '/' ? "" : "/", (int)len, rel);
  h->ruby_file(req, path, f->fd, &f->st);
}

/* The system's MIME table, loaded once per process (kept until exit). */
static gw_mime_t *system_types;

static void on_req(gw_handler_t *self, gw_request_t *req);

static const char *content_type(const gw_static_t *h, const char *name, size_t len)
{
  const char *t = h->types ? gw_mime_lookup(h->types, name, len) : NULL;
  if (t == NULL && system_types) t = gw_mime_lookup(system_types, name, len);
  return t ? t : h->default_type;
}

static void add_header(gw_request_t *req, const char *name, const char *value, size_t vlen)
{
  gw_headers_add(&req->resp.headers, name, strlen(name), value, vlen);
}

/* GET or HEAD (a sub-request has only the method's name). */
static int get_or_head(const gw_request_t *req)
{
  if (req->in.method_id >= 0) return req->in.method_id == HTTP_GET || req->in.method_id == HTTP_HEAD;
  return strcmp(req->in.method, "GET") == 0 || strcmp(req->in.method, "HEAD") == 0;
}

static void respond(gw_request_t *req, int status)
{
  gw_request_simple_response(req, status, NULL);
  gw_request_finish(req);
}

/* -- bodies that stream without stream_file ----------------------------------- */

/* A multipart/byteranges body (several ranges of one file): each part is
 * its header text, then its range of the file; the closing boundary ends it. */
typedef struct {
  gw_range_t *ranges;       /* owned */
  size_t n;
  long long size;           /* the file's, for Content-Range */
  char boundary[24];
  char *ctype;              /* owned: the file's type, in each part's header */
} multipart_t;

/* Appends part i's header (i == n: the closing boundary) to out. */
static void part_text(const multipart_t *m, size_t i, struct evbuffer *out)
{
  const gw_range_t *r = i < m->n ? &m->ranges[i] : NULL;
  size_t n = gw_range_part_head(NULL, 0, m->boundary, m->ctype, r, m->size);
  char small[512], *t = n < sizeof(small) ? small : malloc(n + 1);
  if (t == NULL) return;
  gw_range_part_head(t, n + 1, m->boundary, m->ctype, r, m->size);
  evbuffer_add(out, t, n);
  if (t != small) free(t);
}

static void multipart_free(multipart_t *m)
{
  if (m == NULL) return;
  free(m->ranges);
  free(m->ctype);
  free(m);
}

typedef struct {
  gw_pending_t pending;     /* registered with the request: an abort frees it */
  gw_request_t *req;
  int fd;
  long long off, left;      /* the file range being sent */
  multipart_t *parts;       /* owned, or NULL: one range */
  size_t next;              /* parts: the next part's header to send (n: the closing one; n + 1: done) */
} pump_t;

static void pump_free(pump_t *p)
{
  close(p->fd);
  multipart_free(p->parts);
  free(p);
}

static void pump_cancel(gw_pending_t *pending)
{
  pump_free((pump_t *)pending);
}

/* Multipart: the next part's header goes out and its range becomes the one
 * being sent. Returns stream_data's answer, or 2 when all parts are sent. */
static int pump_next_part(pump_t *p)
{
  multipart_t *m = p->parts;
  if (m == NULL || p->next > m->n) return 2;
  struct evbuffer *text = evbuffer_new();
  if (text == NULL) return -2;
  part_text(m, p->next, text);
  if (p->next < m->n) {
    p->off = m->ranges[p->next].start;
    p->left = m->ranges[p->next].len;
  }
  p->next++;
  size_t n = evbuffer_get_length(text);
  int r = gw_request_stream_data(p->req, (const char *)evbuffer_pullup(text, -1), n);
  evbuffer_free(text);
  return r;
}

static void pump_run(gw_request_t *req)
{
  pump_t *p = req->handler.drain_arg;
  char buf[PIECE];
  for (;;) {
    int r;
    if (p->left > 0) {
      size_t want = p->left < PIECE ? (size_t)p->left : PIECE;
      ssize_t n = pread(p->fd, buf, want, (off_t)p->off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) { /* shorter than it was: cut the response short */
        gw_log_warn("%.*s: the file ended %lld bytes early (truncated while sent?)", (int)req->in.path_len, req->in.target,
                    p->left);
        break;
      }
      p->off += n;
      p->left -= n;
      r = gw_request_stream_data(req, buf, (size_t)n);
    } else if ((r = pump_next_part(p)) == 2) {
      gw_request_pending_remove(&p->pending);
      pump_free(p);
      gw_request_stream_end(req, 1);
      return;
    } else if (r == -2) {
      break; /* out of memory */
    }
    if (r < 0) return; /* aborted: p was cancelled (freed) with it */
    if (r > 0) { /* over the high water mark: wait for on_drain */
      req->handler.on_drain = pump_run;
      return;
    }
  }
  gw_request_pending_remove(&p->pending);
  pump_free(p);
  gw_request_stream_end(req, 0);
}

/* -- one file's response ----------------------------------------------------- */

static int if_range_holds(const gw_request_t *req, const gw_file_t *f)
{
  const gw_header_t *ir = gw_headers_find(&req->in.headers, "if-range");
  if (ir == NULL) return 1;
  if (ir->value_len > 0 && ir->value[0] == '"') /* an entity-tag: strong comparison */
    return ir->value_len == f->etag_len && memcmp(ir->value, f->etag, f->etag_len) == 0;
  time_t t = gw_static_http_date_parse(ir->value, ir->value_len);
  return t >= 0 && t == f->st.st_mtim.tv_sec;
}

static int not_modified(const gw_request_t *req, const gw_file_t *f)
{
  const gw_header_t *inm = gw_headers_find(&req->in.headers, "if-none-match");
  if (inm) return gw_static_etag_match(inm->value, inm->value_len, f->etag, f->etag_len);
  const gw_header_t *ims = gw_headers_find(&req->in.headers, "if-modified-since");
  if (ims == NULL) return 0;
  time_t t = gw_static_http_date_parse(ims->value, ims->value_len);
  return t >= 0 && f->st.st_mtim.tv_sec <= t;
}

/* The precompressed sibling the client accepts (NAME.br, then NAME.gz), or NULL. */
static gw_file_t *precompressed(gw_static_t *h, gw_request_t *req, const char *rel, size_t len, const char **coding)
{
  const gw_header_t *ae = gw_headers_find(&req->in.headers, "accept-encoding");
  if (ae == NULL) return NULL;
  static const char *const codings[2][2] = {{"br", ".br"}, {"gzip", ".gz"}};
  char name[4096];
  if (len + 4 > sizeof(name)) return NULL;
  for (int i = 0; i < 2; i++) {
    if (!gw_static_accepts(ae->value, ae->value_len, codings[i][0])) continue;
    memcpy(name, rel, len);
    memcpy(name + len, codings[i][1], 4);
    gw_file_t *z = gw_filecache_get(h->cache, name, len + 3);
    if (z->err == 0 && !z->is_dir) {
      *coding = codings[i][0];
      return z;
    }
    gw_filecache_done(h->cache, z);
  }
  return NULL;
}

/* Several ranges of b: 206 multipart/byteranges as nginx writes it (each
 * part: CRLF, --boundary, Content-Type, Content-Range, a blank line, the
 * bytes; then CRLF --boundary-- CRLF), with its exact Content-Length.
 * Small bodies, files in memory and sub-requests are built whole; others
 * are read part by part into the stream (bounded memory). Owns rs. */
static void serve_multipart(gw_static_t *h, gw_request_t *req, gw_file_t *b, const char *ctype, gw_range_t *rs,
                            size_t n)
{
  multipart_t *m = calloc(1, sizeof(*m));
  if (m == NULL || (m->ctype = strdup(ctype)) == NULL) {
    free(m);
    free(rs);
    respond(req, 503);
    return;
  }
  m->ranges = rs;
  m->n = n;
  m->size = (long long)b->st.st_size;
  gw_range_boundary(m->boundary, sizeof(m->boundary));
  long long total = 0;
  for (size_t i = 0; i < n; i++)
    total += (long long)gw_range_part_head(NULL, 0, m->boundary, m->ctype, &rs[i], m->size) + rs[i].len;
  total += (long long)gw_range_part_head(NULL, 0, m->boundary, m->ctype, NULL, m->size);
  req->resp.status = 206;
  gw_headers_remove(&req->resp.headers, "content-type");
  char ct[80];
  add_header(req, "Content-Type", ct,
             (size_t)snprintf(ct, sizeof(ct), "multipart/byteranges; boundary=%s", m->boundary));
  if (req->in.head) {
    req->resp.head_length = total;
    multipart_free(m);
    gw_request_finish(req);
    return;
  }
  if (b->data || total <= SMALL_READ || !gw_request_can_stream(req)) {
    int failed = total > SUBREQUEST_MAX;
    if (failed) gw_log_error("%.*s: %lld bytes: too large for a sub-request", (int)req->in.path_len, req->in.target, total);
    for (size_t i = 0; i <= n && !failed; i++) {
      part_text(m, i, req->resp.body);
      if (i == n) break;
      if (b->data) {
        evbuffer_add(req->resp.body, b->data + rs[i].start, (size_t)rs[i].len);
      } else if (gw_request_body_add_file(req, b->fd, rs[i].start, rs[i].len) < 0) {
        gw_log_error("%.*s: the file changed while it was read", (int)req->in.path_len, req->in.target);
        gw_filecache_invalidate(h->cache, b);
        failed = 1;
      }
    }
    multipart_free(m);
    if (failed) respond(req, 500);
    else gw_request_finish(req);
    return;
  }
  int fd = dup(b->fd); /* the cache keeps its own */
  pump_t *p = fd >= 0 ? calloc(1, sizeof(*p)) : NULL;
  if (p == NULL) {
    if (fd >= 0) close(fd);
    multipart_free(m);
    respond(req, 503);
    return;
  }
  p->req = req;
  p->fd = fd;
  p->parts = m;
  gw_request_pending_add(req, &p->pending, pump_cancel);
  req->handler.drain_arg = p;
  gw_request_stream_begin(req, total);
  pump_run(req);
}

/* Answers req with the regular file f (found at rel). */
static void serve_file(gw_static_t *h, gw_request_t *req, gw_file_t *f, const char *rel, size_t rel_len)
{
  if (f->type == NULL) f->type = content_type(h, rel, rel_len); /* by name: the entry's for good */
  const char *ctype = f->type;
  const char *coding = NULL;
  gw_file_t *z = h->gzip_static ? precompressed(h, req, rel, rel_len, &coding) : NULL;
  gw_file_t *b = z ? z : f; /* what is sent */
  long long size = (long long)b->st.st_size;
  if (req->resp.status == 0) req->resp.status = 200;
  gw_request_head_replace(req); /* the file's Content-Type; earlier fields stay */
  add_header(req, "Content-Type", ctype, strlen(ctype));
  add_header(req, "Last-Modified", b->last_modified, b->last_modified_len);
  add_header(req, "ETag", b->etag, b->etag_len);
  if (h->gzip_static) add_header(req, "Vary", "Accept-Encoding", 15);
  if (coding) add_header(req, "Content-Encoding", coding, strlen(coding));
  long long off = 0, len = size;
  if (not_modified(req, b)) {
    req->resp.status = 304;
    evbuffer_drain(req->resp.body, evbuffer_get_length(req->resp.body));
    gw_request_finish(req);
    goto done;
  }
  int max_ranges = req->handler.location ? req->handler.location->max_ranges : 100;
  if (max_ranges > 0) add_header(req, "Accept-Ranges", "bytes", 5);
  const gw_header_t *range = req->resp.status == 200 && max_ranges > 0 ? gw_headers_find(&req->in.headers, "range") : NULL;
  if (range && if_range_holds(req, b)) {
    char cr[80];
    gw_range_t one, *rs = max_ranges == 1 ? &one : malloc((size_t)max_ranges * sizeof(*rs));
    size_t n = 0;
    gw_range_kind_t kind = rs ? gw_static_range_parse(range->value, range->value_len, size, rs, (size_t)max_ranges, &n)
                              : GW_RANGE_NONE;
    switch (kind) {
    case GW_RANGE_SINGLE:
      off = rs[0].start;
      len = rs[0].len;
      req->resp.status = 206;
      add_header(req, "Content-Range", cr,
                 (size_t)snprintf(cr, sizeof(cr), "bytes %lld-%lld/%lld", off, off + len - 1, size));
      break;
    case GW_RANGE_MULTI:
      serve_multipart(h, req, b, ctype, rs, n); /* owns rs */
      goto done;
    case GW_RANGE_UNSATISFIABLE:
      req->resp.status = 416;
      add_header(req, "Content-Range", cr, (size_t)snprintf(cr, sizeof(cr), "bytes */%lld", size));
      if (rs != &one) free(rs);
      gw_request_finish(req);
      goto done;
    default: /* none, malformed, too many: the whole file */
      break;
    }
    if (rs != &one) free(rs);
  }
  if (req->in.head) {
    req->resp.head_length = len;
    gw_request_finish(req);
  } else if (b->data) { /* in memory: borrowed until the protocol copied it (b stays pinned) */
    req->resp.inline_body = b->data + off;
    req->resp.inline_len = (size_t)len;
    gw_request_finish(req);
  } else if (len <= SMALL_READ || !gw_request_can_stream(req)) {
    if (len > SUBREQUEST_MAX) {
      gw_log_error("%.*s: %lld bytes: too large for a sub-request", (int)req->in.path_len, req->in.target, len);
      respond(req, 500);
    } else if (gw_request_body_add_file(req, b->fd, off, len) < 0) {
      gw_log_error("%.*s: the file changed while it was read", (int)req->in.path_len, req->in.target);
      gw_filecache_invalidate(h->cache, b);
      respond(req, 500);
    } else {
      gw_request_finish(req);
    }
  } else {
    int fd = dup(b->fd); /* the cache keeps its own */
    if (fd < 0) {
      respond(req, 503);
      goto done;
    }
    gw_request_stream_begin(req, len);
    if (gw_request_can_stream_file(req)) { /* never for a body being compressed: that one is read */
      gw_request_stream_file(req, fd, off, len);
      goto done;
    }
    pump_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
      close(fd);
      gw_request_stream_end(req, 0);
      goto done;
    }
    p->req = req;
    p->fd = fd;
    p->off = off;
    p->left = len;
    gw_request_pending_add(req, &p->pending, pump_cancel);
    req->handler.drain_arg = p;
    pump_run(req);
  }
done:
  if (z) gw_filecache_done(h->cache, z);
}

/* -- directories ---------------------------------------------------------- */

static void put_html(struct evbuffer *out, const char *s)
{
  for (; *s; s++) {
    switch (*s) {
    case '<': evbuffer_add(out, "&lt;", 4); break;
    case '>': evbuffer_add(out, "&gt;", 4); break;
    case '&': evbuffer_add(out, "&amp;", 5); break;
    case '"': evbuffer_add(out, "&quot;", 6); break;
    default: evbuffer_add(out, s, 1);
    }
  }
}

static void put_href(struct evbuffer *out, const char *s)
{
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c))
      evbuffer_add(out, s, 1);
    else
      evbuffer_add_printf(out, "%%%02X", c);
  }
}

/* autoindex: the entries as a plain HTML list (names only, sorted; hidden
 * files left out; at most 10,000). */
static void list_dir(gw_static_t *h, gw_request_t *req, const char *rel)
{
  int fd = gw_filecache_open(h->cache, rel);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (d == NULL) {
    if (fd >= 0) close(fd);
    respond(req, 403);
    return;
  }
  struct dirent **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; n < 10000 && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      struct dirent **nn = realloc(names, cap * sizeof(*nn));
      if (nn == NULL) break;
      names = nn;
    }
    size_t sz = sizeof(struct dirent);
    names[n] = malloc(sz);
    if (names[n] == NULL) break;
    memcpy(names[n], e, sz);
    n++;
  }
  closedir(d);
  for (size_t i = 1; i < n; i++) /* insertion sort: small lists */
    for (size_t j = i; j > 0 && strcmp(names[j - 1]->d_name, names[j]->d_name) > 0; j--) {
      struct dirent *t = names[j];
      names[j] = names[j - 1];
      names[j - 1] = t;
    }
  struct evbuffer *out = req->resp.body;
  evbuffer_add_printf(out, "<!DOCTYPE html>\n<html><head><title>Index of ");
  put_html(out, rel);
  evbuffer_add_printf(out, "</title></head><body><h1>Index of ");
  put_html(out, rel);
  evbuffer_add_printf(out, "</h1><ul>\n<li><a href=\"../\">../</a></li>\n");
  for (size_t i = 0; i < n; i++) {
    int dir = names[i]->d_type == DT_DIR;
    evbuffer_add(out, "<li><a href=\"", 13);
    put_href(out, names[i]->d_name);
    evbuffer_add_printf(out, "%s\">", dir ? "/" : "");
    put_html(out, names[i]->d_name);
    evbuffer_add_printf(out, "%s</a></li>\n", dir ? "/" : "");
    free(names[i]);
  }
  free(names);
  evbuffer_add_printf(out, "</ul></body></html>\n");
  req->resp.status = 200;
  gw_request_head_replace(req);
  add_header(req, "Content-Type", "text/html; charset=utf-8", 24);
  gw_request_finish(req);
}

/* -- a path beneath the root ------------------------------------------------ */

static int missing(int err)
{
  return err == ENOENT || err == ENOTDIR || err == ENAMETOOLONG;
}

/* Not there: the fallback (when allowed), else 404. */
static void not_found(gw_static_t *h, gw_request_t *req, int may_fallback)
{
  if (may_fallback && h->fallback) {
    h->fallback->on_req(h->fallback, req);
    return;
  }
  respond(req, 404);
}

static void refused(gw_request_t *req, const char *rel, int err)
{
  gw_log_info("%s %.*s: %s: refused (%s)", req->in.method, (int)req->in.path_len, req->in.target, rel,
              err == ELOOP ? "a symlink" : err == EACCES ? "not a regular file, or no permission" : strerror(err));
  respond(req, 403);
}

/* may_fallback: 1 for a request's own URI, 0 for req.send_file (no
 * fallback, and a directory is refused rather than redirected). */
static void serve_path(gw_static_t *h, gw_request_t *req, char *rel, size_t len, int may_fallback)
{
  if (rel[len - 1] == '/') { /* a directory: its index, or its listing */
    char name[4096];
    for (size_t i = 0; i < h->nindex; i++) {
      size_t il = strlen(h->index[i]);
      if (len + il + 1 > sizeof(name)) break;
      memcpy(name, rel, len);
      memcpy(name + len, h->index[i], il + 1);
      gw_file_t *f = gw_filecache_get(h->cache, name, len + il);
      if (f->err == 0 && !f->is_dir) {
        if (may_fallback && is_ruby_file(h, name, len + il)) run_ruby_file(h, req, f, name, len + il);
        else serve_file(h, req, f, name, len + il);
        gw_filecache_done(h->cache, f);
        return;
      }
      gw_filecache_done(h->cache, f);
    }
    gw_file_t *d = gw_filecache_get(h->cache, rel, len);
    int err = d->err, is_dir = d->is_dir;
    gw_filecache_done(h->cache, d);
    if (missing(err) || (err == 0 && !is_dir)) not_found(h, req, may_fallback);
    else if (err) refused(req, rel, err);
    else if (h->autoindex) list_dir(h, req, rel);
    else refused(req, rel, EACCES);
    return;
  }
  gw_file_t *f = gw_filecache_get(h->cache, rel, len);
  if (missing(f->err)) {
    gw_filecache_done(h->cache, f);
    not_found(h, req, may_fallback);
  } else if (f->err) {
    int err = f->err;
    gw_filecache_done(h->cache, f);
    if (err == ENOMEM) respond(req, 503);
    else refused(req, rel, err);
  } else if (f->is_dir && !may_fallback) { /* send_file("dir"): not a file */
    gw_filecache_done(h->cache, f);
    refused(req, rel, EISDIR);
  } else if (f->is_dir) { /* "/dir": to "/dir/", as nginx */
    gw_filecache_done(h->cache, f);
    char *loc = malloc(req->in.target_len + 2);
    if (loc == NULL) {
      respond(req, 503);
      return;
    }
    memcpy(loc, req->in.target, req->in.path_len);
    loc[req->in.path_len] = '/';
    memcpy(loc + req->in.path_len + 1, req->in.target + req->in.path_len, req->in.target_len - req->in.path_len);
    gw_request_simple_response(req, 301, NULL);
    add_header(req, "Location", loc, req->in.target_len + 1);
    free(loc);
    gw_request_finish(req);
  } else if (may_fallback && is_ruby_file(h, rel, len)) {
    run_ruby_file(h, req, f, rel, len);
    gw_filecache_done(h->cache, f);
  } else {
    serve_file(h, req, f, rel, len);
    gw_filecache_done(h->cache, f);
  }
}

static void on_req(gw_handler_t *self, gw_request_t *req)
{
  gw_static_t *h = (gw_static_t *)self;
  if (!get_or_head(req) && !is_ruby_file(h, req->in.target, req->in.path_len)) {
    gw_request_simple_response(req, 405, NULL);
    add_header(req, "Allow", "GET, HEAD", 9);
    gw_request_finish(req);
    return;
  }
  const char *p = req->in.target;
  size_t n = req->in.path_len;
  if (h->alias) { /* the location prefix is replaced by the folder */
    size_t skip = h->prefix_len < n ? h->prefix_len : n;
    p += skip;
    n -= skip;
  }
  char small[2048];
  char *rel = n + 2 <= sizeof(small) ? small : malloc(n + 2);
  if (rel == NULL) {
    respond(req, 503);
    return;
  }
  ssize_t len = gw_uri_path_decode(p, n, rel, n + 2);
  if (len < 0) {
    gw_log_info("%s %.*s: a path that may not reach the file system", req->in.method, (int)req->in.path_len, req->in.target);
    respond(req, 400);
  } else {
    serve_path(h, req, rel, (size_t)len, 1);
  }
  if (rel != small) free(rel);
}

static void dispose(gw_handler_t *self)
{
  gw_static_t *h = (gw_static_t *)self;
  gw_filecache_free(h->cache);
  if (h->rootfd >= 0 && h->rootfd != AT_FDCWD) close(h->rootfd);
  for (size_t i = 0; i < h->nindex; i++) free(h->index[i]);
  free(h->index);
  gw_mime_free(h->types);
  free(h->default_type);
  free(h->root);
  if (h->fallback) h->fallback->dispose(h->fallback);
  free(h);
}

gw_handler_t *gw_static_handler_new(const gw_static_conf_t *conf, char *err, size_t errlen)
{
  gw_static_t *h = calloc(1, sizeof(*h));
  if (h == NULL) {
    if (conf->fallback) conf->fallback->dispose(conf->fallback);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  h->super = (gw_handler_t){.name = "static", .on_req = on_req, .dispose = dispose};
  h->fallback = conf->fallback;
  h->ruby_file = conf->ruby_file;
  h->rootfd = -1;
  if (system_types == NULL) system_types = gw_mime_load(NULL);
  h->root = strdup(conf->root);
  h->alias = conf->alias;
  h->prefix_len = conf->prefix_len;
  h->autoindex = conf->autoindex;
  h->gzip_static = conf->gzip_static;
  h->default_type = strdup(conf->default_type ? conf->default_type : "application/octet-stream");
  h->index = calloc(conf->nindex + 1, sizeof(char *));
  if (h->root == NULL || h->default_type == NULL || h->index == NULL) goto oom;
  for (size_t i = 0; i < conf->nindex; i++) {
    if ((h->index[i] = strdup(conf->index[i])) == NULL) goto oom;
    h->nindex++;
  }
  if (conf->ntypes) {
    h->types = gw_mime_load("/dev/null"); /* the built-in ones, replaced by the overrides below */
    if (h->types == NULL) goto oom;
    for (size_t i = 0; i < conf->ntypes; i++)
      if (gw_mime_set(h->types, conf->types[2 * i], strlen(conf->types[2 * i]), conf->types[2 * i + 1]) < 0) goto oom;
  }
  if (strcmp(conf->root, "/") == 0 && conf->follow_symlinks && conf->nindex == 0 && !conf->alias) {
    h->rootfd = AT_FDCWD; /* send_file's absolute paths */
  } else {
    h->rootfd = open(conf->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (h->rootfd < 0) {
      snprintf(err, errlen, "%s \"%s\": %s", conf->alias ? "alias" : "root", conf->root, strerror(errno));
      dispose(&h->super);
      return NULL;
    }
  }
  h->cache = gw_filecache_new(&conf->cache, h->rootfd, conf->follow_symlinks);
  if (h->cache == NULL) goto oom;
  return &h->super;
oom:
  snprintf(err, errlen, "out of memory");
  dispose(&h->super);
  return NULL;
}

/* -- req.send_file ---------------------------------------------------------- */

/* Absolute paths from scripts: opened as given, no index, a small cache. */
static gw_static_t *absolute_files(void)
{
  static gw_handler_t *abs;
  if (abs == NULL) {
    gw_static_conf_t c = {.root = "/", .follow_symlinks = 1,
                          .cache = {.max_entries = 1000, .valid_ms = 1000, .mem_max_file = 64 * 1024,
                                    .mem_budget = 16 << 20}};
    char err[256];
    abs = gw_static_handler_new(&c, err, sizeof(err));
  }
  return (gw_static_t *)abs;
}

void gw_static_send_file(gw_request_t *req, const char *path, size_t n)
{
  gw_handler_t *lh = req->handler.location ? req->handler.location->handler : NULL;
  gw_static_t *h = lh && lh->on_req == on_req ? (gw_static_t *)lh : NULL;
  if (n > 0 && path[0] == '/') {
    h = absolute_files();
  } else if (h == NULL) {
    gw_log_error("%s %.*s: req.send_file(\"%.*s\"): a relative path needs a location with root: or alias:",
                 req->in.method, (int)req->in.path_len, req->in.target, (int)n, path);
    respond(req, 500);
    return;
  }
  if (h == NULL || n == 0) {
    respond(req, n == 0 ? 404 : 503);
    return;
  }
  if (!get_or_head(req)) {
    gw_request_simple_response(req, 405, NULL);
    add_header(req, "Allow", "GET, HEAD", 9);
    gw_request_finish(req);
    return;
  }
  char *rel = malloc(n + 2);
  if (rel == NULL) {
    respond(req, 503);
    return;
  }
  ssize_t len = gw_uri_path_clean(path, n, rel, n + 2);
  if (len < 0) {
    gw_log_error("req.send_file(\"%.*s\"): a path with control bytes, a backslash or a \"..\" above the root",
                 (int)n, path);
    respond(req, 500);
  } else {
    serve_path(h, req, rel, (size_t)len, 0);
  }
  free(rel);
}
