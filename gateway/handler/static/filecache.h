/* filecache.h - files opened beneath a root directory, and two caches of
 * them: open descriptors with their stat results (nginx's open_file_cache:
 * revalidated every valid_ms, at most max_entries, least recently used out
 * first), and the whole content of small files in memory (up to
 * mem_max_file bytes each and mem_budget in all), so a small file costs no
 * system call but the write. Results that are errors (missing, refused) are
 * cached too, for the same time.
 *
 * Opening never leaves the root: with follow_symlinks off, openat2() with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it (checked at
 * the first call), else a walk from the root with O_NOFOLLOW on every
 * component; either way no symlink is followed. Files are opened with
 * O_NONBLOCK and fstat()ed before anything reads them, so a FIFO never
 * blocks the worker. Per worker process; no threads. */
#ifndef GW_FILECACHE_H
#define GW_FILECACHE_H

#include <stddef.h>
#include <sys/stat.h>

typedef struct gw_filecache_s gw_filecache_t;

typedef struct gw_file_s {
  int err;              /* 0, or an errno: ENOENT/ENOTDIR (missing), ELOOP (a symlink), EACCES (not a
                           regular file or directory, or refused), ENXIO (a socket)... */
  int is_dir;           /* a directory (err 0, fd -1) */
  int fd;               /* O_RDONLY of a regular file, owned by the cache; -1 otherwise */
  struct stat st;
  const char *data;     /* the whole content when it is held in memory, else NULL */
  char etag[40];        /* "mtime-size" in hex, quoted (nginx's) */
  size_t etag_len;
  char last_modified[32];
  size_t last_modified_len;
  const char *type;     /* the cache's user's: the content type it found for this name once, or NULL */
  /* -- the cache's own -- */
  char *key;            /* owned: the path relative to the root */
  size_t key_len;
  double checked_ms;
  int pinned;           /* in use between gw_filecache_get() and gw_filecache_done() */
  int cached;           /* in the table (else freed by done()) */
  size_t data_size;     /* bytes of `data` counted in the budget */
  struct gw_file_s *hnext, *lprev, *lnext;
} gw_file_t;

typedef struct {
  size_t max_entries;   /* open-file cache size; 0: open every time */
  int valid_ms;         /* how long a result is trusted before it is checked again */
  size_t mem_max_file;  /* largest file held in memory; 0: none */
  size_t mem_budget;    /* bytes of file content held in all */
} gw_filecache_conf_t;

/* rootfd: an O_PATH/O_DIRECTORY descriptor of the root (borrowed: the
 * caller closes it after gw_filecache_free), or AT_FDCWD for absolute paths
 * (then follow_symlinks should be 1). NULL when out of memory. */
gw_filecache_t *gw_filecache_new(const gw_filecache_conf_t *conf, int rootfd, int follow_symlinks);
void gw_filecache_free(gw_filecache_t *fc);

/* The file at rel (normalised, e.g. "/a/b.css"; "/" is the root itself),
 * from the cache or opened now. Never NULL (an out-of-memory result has
 * err ENOMEM). Valid, and its fd open, until gw_filecache_done(). */
gw_file_t *gw_filecache_get(gw_filecache_t *fc, const char *rel, size_t len);
void gw_filecache_done(gw_filecache_t *fc, gw_file_t *f);

/* The entry is stale (a read came up short): drop it from the cache. */
void gw_filecache_invalidate(gw_filecache_t *fc, gw_file_t *f);

/* Opens rel beneath the root as the cache would (no caching): a descriptor
 * the caller owns, or -1 with errno set. */
int gw_filecache_open(gw_filecache_t *fc, const char *rel);

#endif
