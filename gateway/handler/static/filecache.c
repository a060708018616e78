/* filecache.c - see filecache.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "filecache.h"
#include "static_http.h"
#include "timeutil.h"

struct gw_filecache_s {
  gw_filecache_conf_t conf;
  int rootfd;
  int follow;
  gw_file_t **buckets;
  size_t nbuckets;       /* a power of two */
  size_t count;
  size_t mem_used;
  gw_file_t lru;         /* list head: lru.lnext is the most recently used */
};

/* -1: not known yet, 1: openat2() works, 0: use the walk. */
static int have_openat2 = -1;

#define OPEN_FLAGS (O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)

/* Without openat2: each directory of the path opened with O_NOFOLLOW from
 * the root, then the last component (also O_NOFOLLOW): a symlink anywhere
 * fails with ELOOP (or ENOTDIR, which is reported as ELOOP). */
static int open_walk(int rootfd, const char *rel)
{
  char buf[4096];
  size_t n = strlen(rel);
  if (n >= sizeof(buf)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(buf, rel, n + 1);
  int dirfd = rootfd;
  char *p = buf;
  for (;;) {
    char *slash = strchr(p, '/');
    if (slash == NULL) break;
    *slash = '\0';
    int fd = openat(dirfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    if (fd < 0 && e == ENOTDIR) { /* a symlink, or a file used as a directory */
      struct stat st;
      if (fstatat(dirfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) e = ELOOP;
    }
    if (dirfd != rootfd) close(dirfd);
    if (fd < 0) {
      errno = e;
      return -1;
    }
    dirfd = fd;
    p = slash + 1;
  }
  int fd = openat(dirfd, *p ? p : ".", OPEN_FLAGS | O_NOFOLLOW);
  int e = errno;
  if (dirfd != rootfd) close(dirfd);
  errno = e;
  return fd;
}

static int open_rel(gw_filecache_t *fc, const char *rel)
{
  if (fc->rootfd == AT_FDCWD) return open(rel, OPEN_FLAGS); /* absolute paths (send_file) */
  while (*rel == '/') rel++;
  const char *r = *rel ? rel : ".";
  if (fc->follow) return openat(fc->rootfd, r, OPEN_FLAGS);
  if (have_openat2 != 0) {
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = OPEN_FLAGS;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
    int fd = have_openat2 < 0 && getenv("GATEWAY_NO_OPENAT2") ? (errno = ENOSYS, -1)
                                                               : (int)syscall(SYS_openat2, fc->rootfd, r, &how, sizeof(how));
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM && errno != E2BIG)) {
      have_openat2 = 1;
      return fd;
    }
    if (have_openat2 == 1) return fd; /* it worked before: a real EPERM */
    have_openat2 = 0;
  }
  return open_walk(fc->rootfd, r);
}

int gw_filecache_open(gw_filecache_t *fc, const char *rel)
{
  return open_rel(fc, rel);
}

static void clear(gw_filecache_t *fc, gw_file_t *f)
{
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  if (f->data_size) fc->mem_used -= f->data_size;
  free((char *)f->data);
  f->data = NULL;
  f->data_size = 0;
}

/* Opens rel into f (fd, stat, err, etag...); the memory copy is loaded by load_data(). */
static void fill(gw_filecache_t *fc, gw_file_t *f)
{
  f->err = 0;
  f->is_dir = 0;
  f->fd = open_rel(fc, f->key);
  if (f->fd < 0) {
    f->err = errno;
    return;
  }
  if (fstat(f->fd, &f->st) < 0) {
    f->err = errno;
    close(f->fd);
    f->fd = -1;
    return;
  }
  if (S_ISDIR(f->st.st_mode)) {
    f->is_dir = 1;
    close(f->fd);
    f->fd = -1;
  } else if (!S_ISREG(f->st.st_mode)) { /* FIFO, device, socket: never read */
    f->err = EACCES;
    close(f->fd);
    f->fd = -1;
    return;
  }
  f->etag_len = gw_static_etag(f->etag, sizeof(f->etag), f->st.st_mtim.tv_sec, (long long)f->st.st_size);
  f->last_modified_len = gw_static_http_date(f->last_modified, sizeof(f->last_modified), f->st.st_mtim.tv_sec);
}

static int same_file(const gw_file_t *a, const gw_file_t *b)
{
  if (a->err != b->err || a->is_dir != b->is_dir) return 0;
  if (a->err) return 1;
  return a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino && a->st.st_size == b->st.st_size &&
         a->st.st_mtim.tv_sec == b->st.st_mtim.tv_sec && a->st.st_mtim.tv_nsec == b->st.st_mtim.tv_nsec;
}

static void lru_unlink(gw_file_t *f)
{
  f->lprev->lnext = f->lnext;
  f->lnext->lprev = f->lprev;
}

static void lru_front(gw_filecache_t *fc, gw_file_t *f)
{
  f->lnext = fc->lru.lnext;
  f->lprev = &fc->lru;
  fc->lru.lnext->lprev = f;
  fc->lru.lnext = f;
}

static size_t hash_key(const char *k, size_t n)
{
  size_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 16777619u;
  return h;
}

static void table_remove(gw_filecache_t *fc, gw_file_t *f)
{
  gw_file_t **pp = &fc->buckets[hash_key(f->key, f->key_len) & (fc->nbuckets - 1)];
  while (*pp != f) pp = &(*pp)->hnext;
  *pp = f->hnext;
  lru_unlink(f);
  fc->count--;
  f->cached = 0;
}

static void entry_free(gw_filecache_t *fc, gw_file_t *f)
{
  clear(fc, f);
  free(f->key);
  free(f);
}

/* Reads a small regular file whole into memory, within the budget (the
 * least recently used unpinned copies are dropped to make room). */
static void load_data(gw_filecache_t *fc, gw_file_t *f)
{
  size_t size = (size_t)f->st.st_size;
  if (f->err || f->is_dir || f->fd < 0 || size > fc->conf.mem_max_file || size > fc->conf.mem_budget) return;
  for (gw_file_t *v = fc->lru.lprev; fc->mem_used + size > fc->conf.mem_budget && v != &fc->lru; v = v->lprev)
    if (v->data && !v->pinned && v != f) {
      fc->mem_used -= v->data_size;
      free((char *)v->data);
      v->data = NULL;
      v->data_size = 0;
    }
  if (fc->mem_used + size > fc->conf.mem_budget) return;
  char *buf = malloc(size ? size : 1);
  if (buf == NULL) return;
  size_t got = 0;
  while (got < size) {
    ssize_t n = pread(f->fd, buf + got, size - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  if (got != size) { /* it changed under us: serve it from the descriptor */
    free(buf);
    return;
  }
  f->data = buf;
  f->data_size = size;
  fc->mem_used += size;
}

gw_filecache_t *gw_filecache_new(const gw_filecache_conf_t *conf, int rootfd, int follow_symlinks)
{
  gw_filecache_t *fc = calloc(1, sizeof(*fc));
  if (fc == NULL) return NULL;
  fc->conf = *conf;
  fc->rootfd = rootfd;
  fc->follow = follow_symlinks;
  fc->lru.lnext = fc->lru.lprev = &fc->lru;
  if (conf->max_entries) {
    fc->nbuckets = 16;
    while (fc->nbuckets < conf->max_entries * 2) fc->nbuckets *= 2;
    fc->buckets = calloc(fc->nbuckets, sizeof(gw_file_t *));
    if (fc->buckets == NULL) {
      free(fc);
      return NULL;
    }
  }
  return fc;
}

void gw_filecache_free(gw_filecache_t *fc)
{
  if (fc == NULL) return;
  while (fc->lru.lnext != &fc->lru) {
    gw_file_t *f = fc->lru.lnext;
    table_remove(fc, f);
    entry_free(fc, f);
  }
  free(fc->buckets);
  free(fc);
}

static gw_file_t *oom_entry(void)
{
  static gw_file_t oom;
  oom.err = ENOMEM;
  oom.fd = -1;
  oom.cached = 1; /* never freed */
  return &oom;
}

gw_file_t *gw_filecache_get(gw_filecache_t *fc, const char *rel, size_t len)
{
  double now = gw_coarse_ms();
  if (fc->conf.max_entries) {
    size_t b = hash_key(rel, len) & (fc->nbuckets - 1);
    for (gw_file_t *f = fc->buckets[b]; f; f = f->hnext) {
      if (f->key_len != len || memcmp(f->key, rel, len) != 0) continue;
      if (now - f->checked_ms >= fc->conf.valid_ms && !f->pinned) {
        /* Check it again: the same file (inode, size, mtime) keeps its
         * descriptor and memory copy; a changed one is replaced. */
        gw_file_t fresh;
        memset(&fresh, 0, sizeof(fresh));
        fresh.key = f->key;
        fill(fc, &fresh);
        if (same_file(&fresh, f)) {
          if (fresh.fd >= 0) close(fresh.fd);
        } else {
          clear(fc, f);
          f->err = fresh.err;
          f->is_dir = fresh.is_dir;
          f->fd = fresh.fd;
          f->st = fresh.st;
          memcpy(f->etag, fresh.etag, sizeof(f->etag));
          f->etag_len = fresh.etag_len;
          memcpy(f->last_modified, fresh.last_modified, sizeof(f->last_modified));
          f->last_modified_len = fresh.last_modified_len;
          load_data(fc, f);
        }
        f->checked_ms = now;
      }
      if (fc->lru.lnext != f) {
        lru_unlink(f);
        lru_front(fc, f);
      }
      f->pinned++;
      return f;
    }
  }
  gw_file_t *f = calloc(1, sizeof(*f));
  if (f == NULL || (f->key = malloc(len + 1)) == NULL) {
    free(f);
    return oom_entry();
  }
  memcpy(f->key, rel, len);
  f->key[len] = '\0';
  f->key_len = len;
  f->fd = -1;
  fill(fc, f);
  f->checked_ms = now;
  f->pinned = 1;
  if (fc->conf.max_entries == 0) return f; /* freed by done() */
  /* Make room: the least recently used unpinned entries go. */
  for (gw_file_t *v = fc->lru.lprev; fc->count >= fc->conf.max_entries && v != &fc->lru;) {
    gw_file_t *prev = v->lprev;
    if (!v->pinned) {
      table_remove(fc, v);
      entry_free(fc, v);
    }
    v = prev;
  }
  size_t b = hash_key(rel, len) & (fc->nbuckets - 1);
  f->hnext = fc->buckets[b];
  fc->buckets[b] = f;
  lru_front(fc, f);
  fc->count++;
  f->cached = 1;
  load_data(fc, f);
  return f;
}

void gw_filecache_done(gw_filecache_t *fc, gw_file_t *f)
{
  if (f->err == ENOMEM && f == oom_entry()) return;
  f->pinned--;
  if (!f->cached && f->pinned == 0) entry_free(fc, f);
}

void gw_filecache_invalidate(gw_filecache_t *fc, gw_file_t *f)
{
  if (!f->cached) return;
  table_remove(fc, f); /* freed by done() once unpinned */
}
