/* cache_store.c - the response cache's storage (cache_store.h): an index in
 * a shared region, small bodies beside it, large ones in files. The loader
 * and the zones are cache_loader.c's.
 *
 * Layout of a region, every link a 32-bit offset from its start (0: none):
 *   header (the lock, the LRU ends, the counters, the fill locks, the path)
 *   | buckets (uint32 each) | the buddy allocator's map and arena
 *   (shm_alloc.c). An entry is one block: entry_t, then the key, the ETag,
 *   the Last-Modified, the Vary names, the head and, for a body in memory,
 *   the body.
 *
 * Files are renamed into place, unlinked (evicted, purged, replaced) and
 * their headers rewritten (refresh) under the lock, so the index and the
 * directory never disagree about which file is a key's: a commit of one
 * worker cannot be unlinked by another's late eviction of the same name.
 * Bodies are written and read outside it.
 *
 * The lock and the LRU list are shm_region.c's (as shdict.c's): a worker
 * killed mid-change leaves the next locker to empty the index (its files
 * are then found again by the next start's loader). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#include "cache_file.h"
#include "cache_store.h"
#include "log.h"
#include "shm_alloc.h"
#include "shm_region.h"
#include "shm_zone.h"

#define MAGIC 0x47575343u /* "GWSC" */
#define HASH_LEN 32
#define NLOCKS 512

typedef struct {
  uint8_t hash[16];
  int32_t pid;
  int32_t unused;
  int64_t expires_ms; /* CLOCK_MONOTONIC */
  uint64_t token;     /* 0: a free slot */
} lock_slot_t;

struct gw_cache_store_s {
  uint32_t magic;
  gw_shm_table_t t;
  uint64_t max_size, disk_bytes, count;
  uint64_t hits, misses, stores, store_failures, evictions, purges, bad_files, recoveries;
  uint64_t next_token, tmp_seq;
  lock_slot_t locks[NLOCKS];
  char name[64];
  char path[GW_CACHE_PATH_MAX + 1]; /* "": memory only */
};

typedef struct {
  gw_shm_link_t lru;      /* first: its LRU neighbours */
  uint32_t hnext;         /* next entry in its bucket */
  uint8_t order, in_file;
  uint16_t unused;
  uint8_t hash[HASH_LEN]; /* SHA-256 of the key */
  int32_t status;
  uint32_t flags;
  uint32_t klen, head_len, etag_len, lm_len, vary_len, unused2;
  int64_t stored_ms, fresh_until_ms, swr_ms, sie_ms;
  uint64_t body_len;      /* after the head, or in the file */
  uint64_t file_bytes;    /* the file's size (0: in memory) */
  uint64_t ino;           /* the file's inode when it was stored */
} entry_t;

struct gw_cache_handle_s {
  gw_cache_meta_t meta;
  const char *key;
  size_t klen;
  const char *head;
  size_t head_len;
  uint64_t body_len;
  const char *body;                  /* in memory: into this allocation */
  int fd;                            /* a file: its descriptor (the handle's), else -1 */
  uint64_t body_off;                 /* a file: where the body starts in it */
};                                   /* then the copied bytes */

struct gw_cache_writer_s {
  gw_cache_store_t *s;
  uint8_t hash[HASH_LEN];
  char *hdr;                /* the file header, written with body length 0 */
  gw_cache_file_header_t h; /* hdr parsed: the key, the meta and its strings, the head */
  char *body;               /* the body while in memory */
  size_t blen, bcap;
  int fd;                   /* the temp file once spilled, else -1 */
  char tmp[PATH_MAX];
  uint64_t total;           /* body bytes appended */
  uint64_t limit;           /* the most body bytes it may hold */
  int failed;
};

#define AT(s, off) ((void *)((char *)(s) + (off)))
#define ENTRY(s, off) ((entry_t *)AT(s, off))

static uint32_t *buckets(gw_cache_store_t *s)
{
  return gw_shm_table_buckets(&s->t, s);
}

static char *entry_key(entry_t *e)
{
  return (char *)(e + 1);
}

/* The bytes after the entry header: key, strings, head and a memory body. */
static size_t entry_tail(const entry_t *e)
{
  return (size_t)e->klen + e->etag_len + e->lm_len + e->vary_len + e->head_len + (e->in_file ? 0 : e->body_len);
}

static void key_hash(const char *k, size_t klen, uint8_t out[HASH_LEN])
{
  static EVP_MD *md; /* fetched once per process */
  if (md == NULL) md = EVP_MD_fetch(NULL, "SHA256", NULL);
  unsigned int n = 0;
  if (md == NULL || !EVP_Digest(k, klen, out, &n, md, NULL)) memset(out, 0, HASH_LEN); /* never with OpenSSL's default provider */
}

static uint32_t bucket_of(gw_cache_store_t *s, const uint8_t *hash)
{
  uint32_t h;
  memcpy(&h, hash, sizeof(h));
  return h & (s->t.nbuckets - 1);
}

static void hex(const uint8_t *hash, char out[2 * HASH_LEN + 1])
{
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < HASH_LEN; i++) {
    out[2 * i] = digits[hash[i] >> 4];
    out[2 * i + 1] = digits[hash[i] & 15];
  }
  out[2 * HASH_LEN] = '\0';
}

/* PATH/XX/<hex>: from the hash only. */
static void file_name(gw_cache_store_t *s, const uint8_t *hash, char out[PATH_MAX])
{
  char h[2 * HASH_LEN + 1];
  hex(hash, h);
  snprintf(out, PATH_MAX, "%s/%.2s/%s", s->path, h, h);
}

static int64_t mono_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* -- the lock -------------------------------------------------------------- */

static void reset(gw_cache_store_t *s)
{
  gw_shm_table_reset(&s->t, s);
  s->count = s->disk_bytes = 0;
  memset(s->locks, 0, sizeof(s->locks));
}

/* Takes the lock; a holder that died mid-change leaves the index emptied. */
static void lock(gw_cache_store_t *s)
{
  if (gw_shm_lock(&s->t.lock)) {
    reset(s);
    s->recoveries++;
    gw_log_error("cache %s: a worker died while changing the index: emptied", s->name);
  }
}

static void unlock(gw_cache_store_t *s)
{
  gw_shm_unlock(&s->t.lock);
}

/* -- the index (under the lock) --------------------------------------------- */

static uint32_t find(gw_cache_store_t *s, const uint8_t *hash, const char *k, size_t klen)
{
  for (uint32_t off = buckets(s)[bucket_of(s, hash)]; off; off = ENTRY(s, off)->hnext) {
    entry_t *e = ENTRY(s, off);
    if (memcmp(e->hash, hash, HASH_LEN) == 0 && e->klen == klen && memcmp(entry_key(e), k, klen) == 0) return off;
  }
  return 0;
}

/* Drops the entry; unlink_file: its file too (not when a new file of the
 * same key has just been renamed over it). */
static void entry_remove(gw_cache_store_t *s, uint32_t off, int unlink_file)
{
  entry_t *e = ENTRY(s, off);
  uint32_t *link = &buckets(s)[bucket_of(s, e->hash)];
  while (*link != off) link = &ENTRY(s, *link)->hnext;
  *link = e->hnext;
  gw_shm_list_unlink(s, &s->t.lru, off);
  s->count--;
  if (e->in_file) {
    s->disk_bytes -= e->file_bytes;
    if (unlink_file) {
      char path[PATH_MAX];
      file_name(s, e->hash, path);
      if (unlink(path) != 0 && errno != ENOENT) gw_log_warn("cache %s: unlink %s: %s", s->name, path, strerror(errno));
    }
  }
  gw_shm_free(&s->t.alloc, s, off, e->order);
}

/* Evicts the coldest entries with a file until need more file bytes fit
 * max_size: 0, or -1 if they cannot. */
static int evict_for_disk(gw_cache_store_t *s, uint64_t need)
{
  if (s->max_size == 0) return 0;
  if (need > s->max_size) return -1;
  uint32_t off = s->t.lru.tail;
  while (s->disk_bytes + need > s->max_size && off) {
    uint32_t prev = ENTRY(s, off)->lru.prev;
    if (ENTRY(s, off)->in_file) {
      entry_remove(s, off, 1);
      s->evictions++;
    }
    off = prev;
  }
  return s->disk_bytes + need > s->max_size ? -1 : 0;
}

/* A new entry for hash/key (absent now) from the fields of h, evicting from
 * the LRU's cold end until its block fits: its offset, or 0. The caller
 * fills the body of a memory entry. */
static uint32_t insert(gw_cache_store_t *s, const uint8_t *hash, const gw_cache_file_header_t *h, uint64_t body_len,
                       int in_file)
{
  size_t need = sizeof(entry_t) + h->klen + h->meta.etag_len + h->meta.last_modified_len + h->meta.vary_len +
                h->head_len + (in_file ? 0 : body_len);
  if (need > gw_shm_alloc_max(&s->t.alloc)) return 0;
  uint32_t order = gw_shm_order(need);
  uint32_t off;
  while ((off = gw_shm_alloc(&s->t.alloc, s, order)) == 0) {
    if (s->t.lru.tail == 0) return 0;
    entry_remove(s, s->t.lru.tail, 1);
    s->evictions++;
  }
  entry_t *e = ENTRY(s, off);
  memset(e, 0, sizeof(*e));
  e->order = (uint8_t)order;
  e->in_file = (uint8_t)in_file;
  memcpy(e->hash, hash, HASH_LEN);
  e->status = h->meta.status;
  e->flags = h->meta.flags;
  e->klen = (uint32_t)h->klen;
  e->head_len = (uint32_t)h->head_len;
  e->etag_len = (uint32_t)h->meta.etag_len;
  e->lm_len = (uint32_t)h->meta.last_modified_len;
  e->vary_len = (uint32_t)h->meta.vary_len;
  e->stored_ms = h->meta.stored_ms;
  e->fresh_until_ms = h->meta.fresh_until_ms;
  e->swr_ms = h->meta.stale_while_revalidate_ms;
  e->sie_ms = h->meta.stale_if_error_ms;
  e->body_len = body_len;
  char *p = entry_key(e);
  const struct {
    const char *s;
    size_t n;
  } parts[] = {{h->key, h->klen},
               {h->meta.etag, h->meta.etag_len},
               {h->meta.last_modified, h->meta.last_modified_len},
               {h->meta.vary, h->meta.vary_len},
               {h->head, h->head_len}};
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    if (parts[i].n) memcpy(p, parts[i].s, parts[i].n);
    p += parts[i].n;
  }
  uint32_t *bucket = &buckets(s)[bucket_of(s, hash)];
  e->hnext = *bucket;
  *bucket = off;
  gw_shm_list_push_head(s, &s->t.lru, off);
  s->count++;
  return off;
}

/* The entry's fields as a parsed header (pointing into the region). */
static void entry_view(entry_t *e, gw_cache_file_header_t *h)
{
  char *p = entry_key(e);
  memset(h, 0, sizeof(*h));
  h->key = p;
  h->klen = e->klen;
  p += e->klen;
  h->meta.etag = e->etag_len ? p : NULL;
  h->meta.etag_len = e->etag_len;
  p += e->etag_len;
  h->meta.last_modified = e->lm_len ? p : NULL;
  h->meta.last_modified_len = e->lm_len;
  p += e->lm_len;
  h->meta.vary = e->vary_len ? p : NULL;
  h->meta.vary_len = e->vary_len;
  p += e->vary_len;
  h->head = p;
  h->head_len = e->head_len;
  h->meta.status = e->status;
  h->meta.flags = e->flags;
  h->meta.stored_ms = e->stored_ms;
  h->meta.fresh_until_ms = e->fresh_until_ms;
  h->meta.stale_while_revalidate_ms = e->swr_ms;
  h->meta.stale_if_error_ms = e->sie_ms;
  h->body_len = e->body_len;
}

/* -- the region -------------------------------------------------------------- */

gw_cache_store_t *gw_cache_store_format(void *mem, size_t size, const char *name, const char *path, uint64_t max_size)
{
  if (size < GW_CACHE_MIN_MEMORY || size > GW_CACHE_MAX_MEMORY) return NULL;
  if ((path && strlen(path) > GW_CACHE_PATH_MAX) || strlen(name) >= sizeof(((gw_cache_store_t *)mem)->name)) return NULL;
  gw_cache_store_t *s = mem;
  memset(s, 0, sizeof(*s));
  s->max_size = max_size;
  snprintf(s->path, sizeof(s->path), "%s", path ? path : "");
  size_t plen = strlen(s->path);
  while (plen > 1 && s->path[plen - 1] == '/') s->path[--plen] = '\0';
  snprintf(s->name, sizeof(s->name), "%s", name);
  if (gw_shm_table_init(&s->t, s, sizeof(*s), size, 1024) != 0) return NULL;
  s->magic = MAGIC;
  return s;
}

/* -- lookups ----------------------------------------------------------------- */

/* key's file failed a check: if the index still has the entry that file
 * was (same inode), it went bad underneath: the entry is dropped (the file
 * too when it is the bad one), with a log line, and 1 is returned. Else 0:
 * the entry was replaced or removed meanwhile by the store itself, and the
 * lookup is simply done again. */
static int drop_bad(gw_cache_store_t *s, const uint8_t *hash, const char *k, size_t klen, uint64_t ino,
                    int unlink_file, const char *path, const char *why)
{
  lock(s);
  uint32_t off = find(s, hash, k, klen);
  int bad = off && ENTRY(s, off)->in_file && ENTRY(s, off)->ino == ino;
  if (bad) {
    s->bad_files++;
    entry_remove(s, off, unlink_file);
  }
  unlock(s);
  if (bad) gw_log_warn("cache %s: %s: %s; a miss", s->name, path, why);
  return bad;
}

/* A file-backed handle: opens and checks the file, keeps its body as a
 * segment. 0; -1: the file went bad (logged, the entry dropped); -2: the
 * entry changed meanwhile (look it up again). */
static int open_body(gw_cache_store_t *s, gw_cache_handle_t *h, const uint8_t *hash, uint64_t ino,
                     uint64_t file_bytes)
{
  char path[PATH_MAX];
  file_name(s, hash, path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const char *why = errno == ENOENT ? "removed underneath" : strerror(errno);
    return drop_bad(s, hash, h->key, h->klen, ino, 0, path, why) ? -1 : -2;
  }
  struct stat st = {0};
  const char *why = NULL;
  char *buf = NULL;
  uint64_t hdr_len = file_bytes - h->body_len;
  gw_cache_file_header_t fh;
  if (fstat(fd, &st) != 0) why = strerror(errno);
  else if ((uint64_t)st.st_ino != ino) why = "replaced underneath";
  else if ((uint64_t)st.st_size != file_bytes) why = "truncated or grown underneath";
  else if (hdr_len > gw_cache_file_header_max() || (buf = malloc(hdr_len)) == NULL) why = "a bad header length";
  else if (pread(fd, buf, hdr_len, 0) != (ssize_t)hdr_len) why = "a short read";
  else if (gw_cache_file_parse(buf, hdr_len, &fh) != 0 || fh.header_len != hdr_len) why = "a corrupt header";
  else if (fh.klen != h->klen || memcmp(fh.key, h->key, h->klen) != 0) why = "another key's file";
  else if (fh.body_len != h->body_len) why = "another body length";
  free(buf);
  if (why) {
    close(fd);
    return drop_bad(s, hash, h->key, h->klen, ino, (uint64_t)st.st_ino == ino, path, why) ? -1 : -2;
  }
  h->fd = fd;
  h->body_off = hdr_len;
  return 0;
}

static gw_cache_handle_t *lookup(gw_cache_store_t *s, const uint8_t *hash, const char *key, size_t klen, int *raced)
{
  lock(s);
  uint32_t off = find(s, hash, key, klen);
  if (off == 0) {
    unlock(s);
    return NULL;
  }
  gw_shm_list_unlink(s, &s->t.lru, off);
  gw_shm_list_push_head(s, &s->t.lru, off);
  entry_t *e = ENTRY(s, off);
  size_t tail = entry_tail(e);
  gw_cache_handle_t *h = malloc(sizeof(*h) + tail);
  if (h == NULL) {
    unlock(s);
    return NULL;
  }
  memset(h, 0, sizeof(*h));
  h->fd = -1;
  gw_cache_file_header_t view;
  entry_view(e, &view);
  memcpy(h + 1, entry_key(e), tail);
  int in_file = e->in_file;
  uint64_t ino = e->ino, file_bytes = e->file_bytes;
  unlock(s);
  /* the same fields, rebased onto the copy */
  const char *base = (const char *)(h + 1);
  const char *from = view.key;
#define REBASE(p) ((p) ? base + ((p) - from) : NULL)
  h->meta = view.meta;
  h->meta.etag = REBASE(view.meta.etag);
  h->meta.last_modified = REBASE(view.meta.last_modified);
  h->meta.vary = REBASE(view.meta.vary);
  h->key = base;
  h->klen = view.klen;
  h->head = REBASE(view.head);
  h->head_len = view.head_len;
#undef REBASE
  h->body_len = view.body_len;
  if (!in_file) {
    h->body = h->head + h->head_len;
    return h;
  }
  int rc = open_body(s, h, hash, ino, file_bytes);
  if (rc != 0) {
    *raced = rc == -2;
    free(h);
    return NULL;
  }
  return h;
}

gw_cache_handle_t *gw_cache_store_lookup(gw_cache_store_t *s, const char *key, size_t klen)
{
  if (klen == 0 || klen > GW_CACHE_KEY_MAX) return NULL;
  uint8_t hash[HASH_LEN];
  key_hash(key, klen, hash);
  int raced = 0;
  gw_cache_handle_t *h = lookup(s, hash, key, klen, &raced);
  if (h == NULL && raced) h = lookup(s, hash, key, klen, &raced); /* once: it changed between two steps */
  return h;
}

const gw_cache_meta_t *gw_cache_handle_meta(const gw_cache_handle_t *h)
{
  return &h->meta;
}

const char *gw_cache_handle_head(const gw_cache_handle_t *h, size_t *len)
{
  *len = h->head_len;
  return h->head;
}

uint64_t gw_cache_handle_body_length(const gw_cache_handle_t *h)
{
  return h->body_len;
}

int gw_cache_handle_read(gw_cache_handle_t *h, struct evbuffer *out, uint64_t offset, uint64_t len)
{
  if (offset > h->body_len || len > h->body_len - offset) return -1;
  if (len == 0) return 0;
  if (h->fd >= 0) {
    /* A segment of just this range (one of the whole body would be read
     * whole into memory for a buffer that does not drain to a socket): sent
     * by sendfile to a socket, else read; never mmap (a file truncated
     * underneath would be a SIGBUS). */
    int fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct evbuffer_file_segment *seg =
        evbuffer_file_segment_new(fd, (ev_off_t)(h->body_off + offset), (ev_off_t)len,
                                  EVBUF_FS_CLOSE_ON_FREE | EVBUF_FS_DISABLE_MMAP | EVBUF_FS_DISABLE_LOCKING);
    if (seg == NULL) {
      close(fd);
      return -1;
    }
    int rc = evbuffer_add_file_segment(out, seg, 0, (ev_off_t)len);
    evbuffer_file_segment_free(seg); /* out holds its own reference */
    return rc;
  }
  return evbuffer_add(out, h->body + offset, (size_t)len);
}

int gw_cache_handle_file(const gw_cache_handle_t *h, uint64_t *offset)
{
  if (h->fd < 0) return -1;
  *offset = h->body_off;
  return fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
}

void gw_cache_handle_release(gw_cache_handle_t *h)
{
  if (h == NULL) return;
  if (h->fd >= 0) close(h->fd);
  free(h);
}

void gw_cache_store_note(gw_cache_store_t *s, int hit)
{
  __atomic_fetch_add(hit ? &s->hits : &s->misses, 1, __ATOMIC_RELAXED);
}

/* -- storing ------------------------------------------------------------------- */

static void writer_fail(gw_cache_writer_t *w, const char *why)
{
  if (w->failed) return;
  w->failed = 1;
  __atomic_fetch_add(&w->s->store_failures, 1, __ATOMIC_RELAXED);
  if (why) gw_log_error("cache %s: storing %.*s: %s; not stored", w->s->name, (int)(w->h.klen > 200 ? 200 : w->h.klen),
                        w->h.key, why);
}

/* Writes it all: 0, or -1 (the writer failed, logged). A short write with
 * no error is a full disk. */
static int write_all(gw_cache_writer_t *w, const char *p, size_t n)
{
  while (n > 0) {
    ssize_t k = write(w->fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      char why[PATH_MAX + 64];
      snprintf(why, sizeof(why), "writing %s: %s", w->tmp, k < 0 ? strerror(errno) : strerror(ENOSPC));
      writer_fail(w, why);
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* The body goes to a temp file from now on. 0, or -1 (failed). */
static int spill(gw_cache_writer_t *w)
{
  gw_cache_store_t *s = w->s;
  char h[2 * HASH_LEN + 1];
  hex(w->hash, h);
  unsigned long long seq = __atomic_fetch_add(&s->tmp_seq, 1, __ATOMIC_RELAXED);
  snprintf(w->tmp, sizeof(w->tmp), "%s/tmp/%s.%ld.%llu", s->path, h, (long)getpid(), seq);
  w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (w->fd < 0) {
    char why[PATH_MAX + 64];
    snprintf(why, sizeof(why), "creating %s: %s", w->tmp, strerror(errno));
    writer_fail(w, why);
    return -1;
  }
  if (write_all(w, w->hdr, w->h.header_len) != 0 || write_all(w, w->body, w->blen) != 0) return -1;
  free(w->body);
  w->body = NULL;
  w->blen = w->bcap = 0;
  return 0;
}

gw_cache_writer_t *gw_cache_store_begin(gw_cache_store_t *s, const char *key, size_t klen,
                                        const gw_cache_meta_t *meta, const char *head, size_t head_len,
                                        int64_t expected_len)
{
  size_t hlen = gw_cache_file_header_size(klen, meta, head_len);
  if (hlen == 0) return NULL;
  size_t fixed = sizeof(entry_t) + hlen; /* an upper bound of the entry without a body */
  uint64_t limit;
  if (s->path[0]) limit = s->max_size ? (s->max_size > hlen ? s->max_size - hlen : 0) : UINT64_MAX;
  else limit = gw_shm_alloc_max(&s->t.alloc) > fixed ? gw_shm_alloc_max(&s->t.alloc) - fixed : 0;
  if (fixed > gw_shm_alloc_max(&s->t.alloc) || (expected_len >= 0 && (uint64_t)expected_len > limit)) {
    __atomic_fetch_add(&s->store_failures, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  gw_cache_writer_t *w = calloc(1, sizeof(*w));
  if (w == NULL || (w->hdr = malloc(hlen)) == NULL) {
    free(w);
    return NULL;
  }
  w->s = s;
  w->fd = -1;
  w->limit = limit;
  key_hash(key, klen, w->hash);
  gw_cache_file_header_write(w->hdr, key, klen, meta, head, head_len, 0);
  gw_cache_file_parse(w->hdr, hlen, &w->h); /* cannot fail: just written */
  if (s->path[0] && expected_len > (int64_t)GW_CACHE_MEM_BODY_MAX && spill(w) != 0) {
    gw_cache_writer_abort(w);
    return NULL;
  }
  return w;
}

int gw_cache_writer_append(gw_cache_writer_t *w, const void *data, size_t len)
{
  if (w->failed) return -1;
  if (len > w->limit - w->total) {
    writer_fail(w, NULL); /* over the limits: not worth a log line */
    return -1;
  }
  w->total += len;
  if (w->fd < 0 && w->s->path[0] && w->blen + len > GW_CACHE_MEM_BODY_MAX && spill(w) != 0) return -1;
  if (w->fd >= 0) return write_all(w, data, len);
  if (w->blen + len > w->bcap) {
    size_t cap = w->bcap ? w->bcap : 4096;
    while (cap < w->blen + len) cap *= 2;
    char *b = realloc(w->body, cap);
    if (b == NULL) {
      writer_fail(w, "out of memory");
      return -1;
    }
    w->body = b;
    w->bcap = cap;
  }
  if (len) memcpy(w->body + w->blen, data, len);
  w->blen += len;
  return 0;
}

int gw_cache_writer_append_buffer(gw_cache_writer_t *w, struct evbuffer *body)
{
  int n = evbuffer_peek(body, -1, NULL, NULL, 0);
  if (n <= 0) return w->failed ? -1 : 0;
  struct evbuffer_iovec vs[16];
  struct evbuffer_iovec *v = n <= 16 ? vs : malloc((size_t)n * sizeof(*v));
  if (v == NULL) {
    writer_fail(w, "out of memory");
    return -1;
  }
  evbuffer_peek(body, -1, NULL, v, n);
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) rc = gw_cache_writer_append(w, v[i].iov_base, v[i].iov_len);
  if (v != vs) free(v);
  return rc;
}

static void writer_free(gw_cache_writer_t *w)
{
  if (w->fd >= 0) {
    close(w->fd);
    unlink(w->tmp);
  }
  free(w->hdr);
  free(w->body);
  free(w);
}

void gw_cache_writer_abort(gw_cache_writer_t *w)
{
  if (w == NULL) return;
  writer_free(w);
}

/* A memory entry replaces key's: 0 or -1. */
static int commit_memory(gw_cache_writer_t *w)
{
  gw_cache_store_t *s = w->s;
  lock(s);
  uint32_t old = find(s, w->hash, w->h.key, w->h.klen);
  if (old) entry_remove(s, old, 1);
  uint32_t off = insert(s, w->hash, &w->h, w->blen, 0);
  if (off) {
    entry_t *e = ENTRY(s, off);
    if (w->blen) memcpy((char *)entry_key(e) + entry_tail(e) - w->blen, w->body, w->blen);
    s->stores++;
  }
  unlock(s);
  return off ? 0 : -1;
}

/* The temp file gets its final header and is renamed into place as key's
 * entry: 0 or -1. */
static int commit_file(gw_cache_writer_t *w)
{
  gw_cache_store_t *s = w->s;
  gw_cache_file_header_write(w->hdr, w->h.key, w->h.klen, &w->h.meta, w->h.head, w->h.head_len, w->total);
  struct stat st;
  if (pwrite(w->fd, w->hdr, w->h.header_len, 0) != (ssize_t)w->h.header_len || fstat(w->fd, &st) != 0) {
    char why[PATH_MAX + 64];
    snprintf(why, sizeof(why), "writing %s: %s", w->tmp, strerror(errno ? errno : ENOSPC));
    writer_fail(w, why);
    return -1;
  }
  gw_cache_file_parse(w->hdr, w->h.header_len, &w->h); /* the same bytes, rewritten */
  uint64_t file_bytes = (uint64_t)st.st_size;
  if (file_bytes != w->h.header_len + w->total) {
    writer_fail(w, "the file's size is not what was written");
    return -1;
  }
  char path[PATH_MAX];
  file_name(s, w->hash, path);
  lock(s);
  uint32_t old = find(s, w->hash, w->h.key, w->h.klen);
  int old_file = old && ENTRY(s, old)->in_file;
  if (old) entry_remove(s, old, 0); /* its file: the rename replaces it */
  uint32_t off = 0;
  int rc = -1;
  const char *why = "does not fit max_size";
  if (evict_for_disk(s, file_bytes) == 0) {
    why = "the index is full";
    off = insert(s, w->hash, &w->h, w->total, 1);
  }
  if (off) {
    int renamed = rename(w->tmp, path);
    if (renamed != 0 && errno == ENOENT) { /* its directory removed underneath */
      char dir[PATH_MAX];
      snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(path, '/') - path), path);
      mkdir(dir, 0700);
      renamed = rename(w->tmp, path);
    }
    if (renamed == 0) {
      entry_t *e = ENTRY(s, off);
      e->file_bytes = file_bytes;
      e->ino = (uint64_t)st.st_ino;
      s->disk_bytes += file_bytes;
      s->stores++;
      rc = 0;
    } else {
      why = strerror(errno);
      entry_remove(s, off, 0);
    }
  }
  if (rc != 0 && old_file) unlink(path); /* key's old file, out of the index now */
  unlock(s);
  if (rc != 0) {
    char msg[PATH_MAX + 64];
    snprintf(msg, sizeof(msg), "renaming %s: %s", w->tmp, why);
    writer_fail(w, msg);
    return -1;
  }
  close(w->fd);
  w->fd = -1; /* renamed: writer_free must not unlink it */
  return 0;
}

int gw_cache_writer_commit(gw_cache_writer_t *w)
{
  gw_cache_store_t *s = w->s;
  int rc = -1;
  if (!w->failed) {
    size_t need = sizeof(entry_t) + w->h.header_len + w->blen;
    if (w->fd < 0 && need > gw_shm_alloc_max(&s->t.alloc) && s->path[0]) spill(w);
    if (!w->failed) rc = w->fd >= 0 ? commit_file(w) : commit_memory(w);
    if (rc != 0) writer_fail(w, NULL); /* counted once: commit_file logged its cause */
  }
  writer_free(w);
  return rc;
}

/* -- refresh and purge --------------------------------------------------------- */

int gw_cache_store_refresh(gw_cache_store_t *s, const char *key, size_t klen, const gw_cache_meta_t *meta)
{
  if (klen == 0 || klen > GW_CACHE_KEY_MAX) return 0;
  uint8_t hash[HASH_LEN];
  key_hash(key, klen, hash);
  lock(s);
  uint32_t off = find(s, hash, key, klen);
  if (off) {
    entry_t *e = ENTRY(s, off);
    e->stored_ms = meta->stored_ms;
    e->fresh_until_ms = meta->fresh_until_ms;
    e->swr_ms = meta->stale_while_revalidate_ms;
    e->sie_ms = meta->stale_if_error_ms;
    gw_shm_list_unlink(s, &s->t.lru, off);
    gw_shm_list_push_head(s, &s->t.lru, off);
    if (e->in_file) { /* the loader of the next start sees the new times */
      gw_cache_file_header_t v;
      entry_view(e, &v);
      size_t hlen = e->file_bytes - e->body_len;
      char *buf = malloc(hlen);
      char path[PATH_MAX];
      file_name(s, e->hash, path);
      int fd = buf ? open(path, O_WRONLY | O_CLOEXEC) : -1;
      struct stat st;
      if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_ino == e->ino) {
        gw_cache_file_header_write(buf, v.key, v.klen, &v.meta, v.head, v.head_len, v.body_len);
        if (pwrite(fd, buf, hlen, 0) != (ssize_t)hlen)
          gw_log_warn("cache %s: refreshing %s: %s", s->name, path, strerror(errno ? errno : ENOSPC));
      }
      if (fd >= 0) close(fd);
      free(buf);
    }
  }
  unlock(s);
  return off ? 1 : 0;
}

static long remove_prefix(gw_cache_store_t *s, const char *prefix, size_t len)
{
  long n = 0;
  for (uint32_t off = s->t.lru.head; off;) {
    entry_t *e = ENTRY(s, off);
    uint32_t next = e->lru.next;
    if (e->klen >= len && memcmp(entry_key(e), prefix, len) == 0) {
      entry_remove(s, off, 1);
      n++;
    }
    off = next;
  }
  return n;
}

long gw_cache_store_purge(gw_cache_store_t *s, const char *key, size_t klen)
{
  if (klen == 0 || klen > GW_CACHE_KEY_MAX) return 0;
  uint8_t hash[HASH_LEN];
  key_hash(key, klen, hash);
  long n = 0;
  lock(s);
  uint32_t off = find(s, hash, key, klen);
  if (off) {
    int marker = (ENTRY(s, off)->flags & GW_CACHE_VARIANTS) != 0;
    entry_remove(s, off, 1);
    n = 1;
    if (marker) {
      char variants[GW_CACHE_KEY_MAX + 1];
      memcpy(variants, key, klen);
      variants[klen] = '\0';
      n += remove_prefix(s, variants, klen + 1);
    }
  }
  s->purges += (uint64_t)n;
  unlock(s);
  return n;
}

long gw_cache_store_purge_prefix(gw_cache_store_t *s, const char *prefix, size_t len)
{
  lock(s);
  long n = remove_prefix(s, prefix, len);
  s->purges += (uint64_t)n;
  unlock(s);
  return n;
}

/* -- fill locks ------------------------------------------------------------------ */

/* Whether the slot's holder still holds it: within its time, its process
 * alive (a process of ours that is not this one may have died). */
static int slot_live(const lock_slot_t *l, int64_t now)
{
  if (l->token == 0 || l->expires_ms <= now) return 0;
  if (l->pid != (int32_t)getpid() && kill(l->pid, 0) != 0 && errno == ESRCH) return 0;
  return 1;
}

static lock_slot_t *slot_find(gw_cache_store_t *s, const uint8_t *hash)
{
  for (int i = 0; i < NLOCKS; i++)
    if (s->locks[i].token && memcmp(s->locks[i].hash, hash, sizeof(s->locks[i].hash)) == 0) return &s->locks[i];
  return NULL;
}

int gw_cache_store_lock(gw_cache_store_t *s, const char *key, size_t klen, int64_t timeout_ms, uint64_t *token)
{
  uint8_t hash[HASH_LEN];
  key_hash(key, klen, hash);
  int64_t now = mono_ms();
  *token = 0;
  lock(s);
  lock_slot_t *l = slot_find(s, hash);
  if (l && slot_live(l, now)) {
    unlock(s);
    return GW_CACHE_LOCK_BUSY;
  }
  for (int i = 0; l == NULL && i < NLOCKS; i++)
    if (!slot_live(&s->locks[i], now)) l = &s->locks[i];
  if (l) { /* a free slot, or one whose holder timed out or died */
    memcpy(l->hash, hash, sizeof(l->hash));
    l->pid = (int32_t)getpid();
    l->expires_ms = now + (timeout_ms > 0 ? timeout_ms : 1);
    l->token = ++s->next_token;
    *token = l->token;
  }
  unlock(s);
  return GW_CACHE_LOCK_OWNED;
}

int gw_cache_store_lock_held(gw_cache_store_t *s, const char *key, size_t klen)
{
  uint8_t hash[HASH_LEN];
  key_hash(key, klen, hash);
  int64_t now = mono_ms();
  lock(s);
  lock_slot_t *l = slot_find(s, hash);
  int held = l && slot_live(l, now);
  unlock(s);
  return held;
}

void gw_cache_store_unlock(gw_cache_store_t *s, const char *key, size_t klen, uint64_t token)
{
  if (token == 0) return;
  uint8_t hash[HASH_LEN];
  key_hash(key, klen, hash);
  lock(s);
  lock_slot_t *l = slot_find(s, hash);
  if (l && l->token == token) l->token = 0;
  unlock(s);
}

/* -- stats ---------------------------------------------------------------------- */

void gw_cache_store_stats(gw_cache_store_t *s, gw_cache_stats_t *out)
{
  lock(s);
  out->hits = s->hits;
  out->misses = s->misses;
  out->stores = s->stores;
  out->store_failures = s->store_failures;
  out->evictions = s->evictions;
  out->purges = s->purges;
  out->bad_files = s->bad_files;
  out->entries = s->count;
  out->mem_capacity = gw_shm_alloc_capacity(&s->t.alloc);
  out->mem_bytes = out->mem_capacity - s->t.alloc.free_bytes;
  out->disk_bytes = s->disk_bytes;
  out->max_size = s->max_size;
  unlock(s);
}

/* -- for the loader and the zones (cache_loader.c) ------------------------------ */

const char *gw_cache_store_path(const gw_cache_store_t *s)
{
  return s->path;
}

const char *gw_cache_store_name(const gw_cache_store_t *s)
{
  return s->name;
}

void gw_cache_store_file_path(gw_cache_store_t *s, const char *key, size_t klen, char out[PATH_MAX])
{
  uint8_t hash[HASH_LEN];
  key_hash(key, klen, hash);
  file_name(s, hash, out);
}

int gw_cache_store_adopt(gw_cache_store_t *s, const gw_cache_file_header_t *h, uint64_t file_bytes, uint64_t ino)
{
  uint8_t hash[HASH_LEN];
  key_hash(h->key, h->klen, hash);
  lock(s);
  uint32_t off = 0;
  if (find(s, hash, h->key, h->klen) == 0 && evict_for_disk(s, file_bytes) == 0) off = insert(s, hash, h, h->body_len, 1);
  if (off) {
    ENTRY(s, off)->file_bytes = file_bytes;
    ENTRY(s, off)->ino = ino;
    s->disk_bytes += file_bytes;
  } else {
    s->evictions++;
  }
  unlock(s);
  return off ? 1 : 0;
}

void gw_cache_store_note_bad_file(gw_cache_store_t *s)
{
  __atomic_fetch_add(&s->bad_files, 1, __ATOMIC_RELAXED);
}

void gw_cache_store_set_max_size(gw_cache_store_t *s, uint64_t max_size)
{
  lock(s);
  s->max_size = max_size;
  evict_for_disk(s, 0);
  unlock(s);
}
