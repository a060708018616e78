/* cache_store.h - the response cache's storage, shared by a server's workers
 * (`cache :api, memory: "64m", path: "/var/cache/gateway/api", max_size: "1g"`).
 *
 * It stores opaque entries under the caller's key bytes; it knows nothing of
 * HTTP (cache.c, the response stage, decides what to store, for how long,
 * and what a hit is). A zone is one region of shared memory mapped by the
 * master while it evaluates the config, before it forks (shm_zone.c, as the
 * shared dictionaries are), holding:
 *   - the index: one entry per key, found by the SHA-256 of the key bytes,
 *     keeping the full key (hash collisions are told apart; purge_prefix
 *     walks the keys), the metadata (gw_cache_meta_t), the stored response
 *     head and, for a small body, the body itself;
 *   - an LRU list over all entries, evicted from its cold end when the
 *     region (`memory:`) or the files' bytes (`max_size:`) would overflow;
 *   - the fill locks (collapsed forwarding) and the counters (stats).
 * A body larger than GW_CACHE_MEM_BODY_MAX (or any body, when the entry and
 * body would not fit one block of the region) lives in a file under `path:`,
 *   PATH/XX/<64 hex digits of the key's SHA-256>   (XX: its first two digits)
 * so a file name comes from the hash only, never from request data. A file
 * is written as PATH/tmp/<hash>.<pid>.<n> and renamed into place on commit.
 * Each file starts with a header: a magic, a version, the key, the
 * metadata, the head, the body's length and a checksum of all that header;
 * then the body (cache_file.c). At start (a zone mapped anew) the index is
 * rebuilt from those files (cache_loader.c, as nginx's cache loader); a reload that declares
 * the zone again with the same memory size and path keeps the region and
 * so the index; a file that fails its checks is removed with a log line.
 *
 * Integrity: a lookup of a file-backed entry opens the file and checks its
 * header (magic, version, checksum, the very key, the body length against
 * the file's size, the inode the index recorded). Any mismatch (truncated,
 * corrupt, removed or replaced underneath) is a miss, a log line and the
 * entry dropped: never a wrong or mixed body. The handle then keeps the
 * open file, so an eviction or purge meanwhile (which unlinks the file)
 * cannot change the body being sent.
 *
 * Vary: the store keeps `vary` (the request header names) as bytes and one
 * flag. The supported scheme: under the primary key, a marker entry with
 * GW_CACHE_VARIANTS set and meta.vary naming the headers, no body; each
 * variant under the primary key + '\0' + whatever the caller derives from
 * the listed headers' values. gw_cache_store_purge on a marker also purges
 * every key that starts with the primary key + '\0'.
 *
 * Times in gw_cache_meta_t are the wall clock in ms (CLOCK_REALTIME: they
 * outlive a restart in the files); the store does not interpret them. The
 * fill locks use CLOCK_MONOTONIC internally.
 *
 * Every operation takes the zone's robust process-shared lock (shm_region.c)
 * for a short time: copying in or out, and the renames, unlinks and header
 * rewrites that keep the index and the directory in step (a body is
 * written and read outside it); nothing here calls back into the caller. A
 * worker killed while holding it mid-change: the next locker empties the
 * index (the files are left to the loader of the next start), as shdict.c
 * does. */
#ifndef GW_CACHE_STORE_H
#define GW_CACHE_STORE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache_file.h" /* gw_cache_meta_t, the length limits */

struct evbuffer;

typedef struct gw_cache_store_s gw_cache_store_t;   /* a zone, in shared memory */
typedef struct gw_cache_handle_s gw_cache_handle_t; /* a lookup's result, worker-local */
typedef struct gw_cache_writer_s gw_cache_writer_t; /* an entry being stored, worker-local */

/* Smallest and largest `memory:`; longest `path:`. */
#define GW_CACHE_MIN_MEMORY ((size_t)256 << 10)
#define GW_CACHE_MAX_MEMORY ((size_t)1 << 31)
#define GW_CACHE_PATH_MAX 3900
/* With a `path:`, bodies above this go to a file; without one, a body is
 * stored in memory if its entry fits one block of the region (at most
 * 1 MiB and an eighth of the region), else not stored. */
#define GW_CACHE_MEM_BODY_MAX ((size_t)64 << 10)
/* The interval at which a request waiting for another's fill should poll
 * gw_cache_store_lock_held (nginx's proxy_cache_lock polls every 500 ms). */
#define GW_CACHE_LOCK_POLL_MS 20

/* What the status page shows (gw_cache_store_stats). */
typedef struct {
  uint64_t hits, misses;     /* counted by gw_cache_store_note */
  uint64_t stores;           /* entries committed */
  uint64_t store_failures;   /* writers aborted by a limit or a disk fault */
  uint64_t evictions;        /* entries evicted to make room (memory or max_size) */
  uint64_t purges;           /* entries removed by purge / purge_prefix */
  uint64_t bad_files;        /* files found truncated, corrupt, replaced or removed */
  uint64_t entries;          /* entries in the index now */
  uint64_t mem_bytes;        /* bytes of the region used by entries now */
  uint64_t mem_capacity;     /* bytes of the region usable for entries */
  uint64_t disk_bytes;       /* bytes of the entries' files now */
  uint64_t max_size;         /* the `max_size:` bound (0: none) */
} gw_cache_stats_t;

/* -- zones: named caches mapped by the master ------------------------------ */

/* Called while a config is evaluated (`cache :name, ...`): declares a zone
 * of memory bytes whose large bodies go under path (NULL: memory only; the
 * directory and its subdirectories are created) with at most max_size bytes
 * of files (0: no bound but the disk). A zone of the running config with
 * the same name, memory and path is kept with its entries (max_size takes
 * the new value); otherwise a new one is mapped and its index loaded from
 * path's files. Pending until the config loads (shm_zone.c's commit/abort,
 * called by gw_config_load). -1 with a message in err on failure. */
int gw_cache_store_declare(const char *name, size_t memory, const char *path, uint64_t max_size, char *err,
                           size_t errlen);
/* The zone named name (declared by the current config, or the one being
 * evaluated), or NULL. */
gw_cache_store_t *gw_cache_store_find(const char *name);
/* The i-th zone of the current config (for the status page) and its name,
 * or NULL past the last. */
gw_cache_store_t *gw_cache_store_at(size_t i, const char **name);

/* `user`: hands the folders and files under the path of every zone mapped
 * anew by the config just loaded (made and loaded by the master, as root)
 * over to uid/gid, their owner, so the workers can write and remove them
 * (as master.c does with the log files). Each zone once; failures are
 * logged. */
void gw_cache_store_hand_over(uid_t uid, gid_t gid);

/* -- the store on a region (the zones use these; so do the unit tests) ---- */

/* Lays a new empty store named name (for log lines; under 64 bytes) over
 * mem[0, size) (GW_CACHE_MIN_MEMORY <= size <= GW_CACHE_MAX_MEMORY, mem
 * aligned to 64). path as above (copied; at most GW_CACHE_PATH_MAX bytes).
 * NULL if a size or length is out of range. */
gw_cache_store_t *gw_cache_store_format(void *mem, size_t size, const char *name, const char *path,
                                        uint64_t max_size);
/* The loader (cache_loader.c): creates path's directories, removes stale
 * temp files and adds every valid file to the index (an invalid one is
 * removed, with a log line). The number of entries added, or -1 if path
 * cannot be created (logged). */
long gw_cache_store_load(gw_cache_store_t *s);

/* What the loader and the zones use (cache_loader.c): the store's path
 * ("": memory only) and name; the file key's body would be in; a valid
 * file found at that name joining the index (1; 0: the key is there
 * already, or no room under memory: or max_size:, counted as an eviction:
 * the loader removes the file); a bad file found; a reload's max_size
 * (evicting files past it). */
const char *gw_cache_store_path(const gw_cache_store_t *s);
const char *gw_cache_store_name(const gw_cache_store_t *s);
void gw_cache_store_file_path(gw_cache_store_t *s, const char *key, size_t klen, char out[PATH_MAX]);
int gw_cache_store_adopt(gw_cache_store_t *s, const gw_cache_file_header_t *h, uint64_t file_bytes, uint64_t ino);
void gw_cache_store_note_bad_file(gw_cache_store_t *s);
void gw_cache_store_set_max_size(gw_cache_store_t *s, uint64_t max_size);

/* -- lookups --------------------------------------------------------------- */

/* The entry for key, as a handle the caller releases, or NULL (absent, its
 * file failed the checks, or out of memory). Moves the entry to the LRU's
 * hot end. Counts nothing: see gw_cache_store_note. */
gw_cache_handle_t *gw_cache_store_lookup(gw_cache_store_t *s, const char *key, size_t klen);
/* The entry's metadata (strings valid until release). */
const gw_cache_meta_t *gw_cache_handle_meta(const gw_cache_handle_t *h);
/* The stored head bytes and their length (valid until release). */
const char *gw_cache_handle_head(const gw_cache_handle_t *h, size_t *len);
/* The body's length in bytes. */
uint64_t gw_cache_handle_body_length(const gw_cache_handle_t *h);
/* Appends body bytes [offset, offset + len) to out: a copy from the handle
 * for a body in memory; for a file, a file segment of that range
 * (evbuffer_add_file_segment: sent by sendfile when out drains to a
 * socket, else read into memory as it is added, so a large body is best
 * read in pieces or sent with gw_cache_handle_file; never mmap). 0, or -1
 * if the range is outside the body or the segment cannot be made. May be
 * called any number of times (a Range). */
int gw_cache_handle_read(gw_cache_handle_t *h, struct evbuffer *out, uint64_t offset, uint64_t len);
/* A body in a file: a new descriptor of that file (O_CLOEXEC, the caller's
 * to close) and in *offset where the body starts in it, so a protocol can
 * sendfile(2) a range of it (gw_request_stream_file: body bytes [a, a + n)
 * are file bytes [*offset + a, *offset + a + n)). -1 for a body in memory
 * (or no descriptor left): use gw_cache_handle_read. */
int gw_cache_handle_file(const gw_cache_handle_t *h, uint64_t *offset);
/* Frees the handle (buffers already filled from it keep their bytes). */
void gw_cache_handle_release(gw_cache_handle_t *h);

/* Counts a hit (hit 1) or a miss (hit 0) in the stats; the caller decides
 * which (an expired entry found is a miss to the status page). */
void gw_cache_store_note(gw_cache_store_t *s, int hit);

/* -- storing ------------------------------------------------------------- */

/* Starts storing key's entry with meta and head (copied). expected_len: the
 * body's length if known (Content-Length), else -1: a known length that
 * exceeds the limits fails here, and one above GW_CACHE_MEM_BODY_MAX goes
 * straight to a file. NULL if it cannot be stored (key, head or a string
 * too long; a known length too large; the temp file cannot be made). The
 * entry replaces key's current one only at commit; lookups meanwhile see
 * the old one. */
gw_cache_writer_t *gw_cache_store_begin(gw_cache_store_t *s, const char *key, size_t klen,
                                        const gw_cache_meta_t *meta, const char *head, size_t head_len,
                                        int64_t expected_len);
/* Appends body bytes (copied; an evbuffer is read, not drained). 0, or -1
 * once the writer has failed (the body grew past the limits, or a write
 * failed: ENOSPC, a short write — one log line): the writer then only
 * waits for gw_cache_writer_abort (commit would fail too). */
int gw_cache_writer_append(gw_cache_writer_t *w, const void *data, size_t len);
int gw_cache_writer_append_buffer(gw_cache_writer_t *w, struct evbuffer *body);
/* The body is complete: the entry replaces key's (evicting from the LRU's
 * cold end to fit memory and max_size). 0 stored, -1 not (failed earlier,
 * or cannot fit). Frees w either way. */
int gw_cache_writer_commit(gw_cache_writer_t *w);
/* Drops the entry being stored (its temp file removed). Frees w. */
void gw_cache_writer_abort(gw_cache_writer_t *w);

/* A 304 revalidation: meta's times (stored_ms, fresh_until_ms and both
 * windows) replace the entry's, in the index and in its file's header; its
 * status, validators, vary, head and body stay. 1 refreshed, 0 absent. */
int gw_cache_store_refresh(gw_cache_store_t *s, const char *key, size_t klen, const gw_cache_meta_t *meta);

/* -- removing -------------------------------------------------------------- */

/* Removes key's entry (and, for a GW_CACHE_VARIANTS marker, every key
 * starting with key + '\0'); its files are unlinked. The number removed. */
long gw_cache_store_purge(gw_cache_store_t *s, const char *key, size_t klen);
/* Removes every entry whose key starts with prefix (len 0: all). The number
 * removed. Walks the whole index under the lock. */
long gw_cache_store_purge_prefix(gw_cache_store_t *s, const char *prefix, size_t len);

/* -- fill locks (collapsed forwarding) ----------------------------------- */

/* The result of gw_cache_store_lock. */
#define GW_CACHE_LOCK_OWNED 1 /* the caller fetches and stores, then unlocks with *token */
#define GW_CACHE_LOCK_BUSY 0  /* another request (of any worker) is fetching key */

/* Tries to become key's filler for at most timeout_ms. BUSY while another
 * holder's lock has not timed out and its worker process is alive; a lock
 * whose time ran out, or whose owner died (kill(pid, 0): ESRCH), is taken
 * over. Requests of one worker are told apart too (the second one is BUSY).
 * OWNED with a nonzero *token on success; also OWNED (token 0, nothing to
 * unlock) if the lock table is full, so a fill is never refused. */
int gw_cache_store_lock(gw_cache_store_t *s, const char *key, size_t klen, int64_t timeout_ms, uint64_t *token);
/* 1 while key's lock is held (not timed out, owner alive), else 0: a waiter
 * polls this every GW_CACHE_LOCK_POLL_MS, then looks the key up (a filler
 * that stored nothing leaves a miss: the waiter may then lock in turn). */
int gw_cache_store_lock_held(gw_cache_store_t *s, const char *key, size_t klen);
/* Releases the lock if token is still its owner's (a lock taken over after
 * a timeout is not released by its first owner). token 0: nothing. */
void gw_cache_store_unlock(gw_cache_store_t *s, const char *key, size_t klen, uint64_t token);

/* -- stats ----------------------------------------------------------------- */

void gw_cache_store_stats(gw_cache_store_t *s, gw_cache_stats_t *out);

#endif
