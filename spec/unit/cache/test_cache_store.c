/* test_cache_store.c - cache_store.c and cache_file.c: the index (insert,
 * lookup, replace, LRU eviction by memory and by max_size, purge, Vary
 * markers, purge_prefix, refresh), bodies in memory and in files read at an
 * offset, writers over the limits and on a failing disk, files corrupt,
 * truncated, removed or replaced underneath, the loader, the fill locks and
 * the zones.
 * unit: cache_store cache_loader cache_file shm_alloc shm_region shm_zone log -lcrypto -lz */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#include "cache_file.h"
#include "cache_store.h"
#include "shm_zone.h"
#include "unit.h"

#define MEM ((size_t)1 << 20)

static char dir[256];

static gw_cache_meta_t meta(int status)
{
  gw_cache_meta_t m = {.status = status, .stored_ms = 1000, .fresh_until_ms = 2000, .stale_while_revalidate_ms = 5,
                       .stale_if_error_ms = 7, .etag = "\"e1\"", .etag_len = 4, .last_modified = "Mon", .last_modified_len = 3};
  return m;
}

static int put(gw_cache_store_t *s, const char *key, const char *body, size_t len)
{
  gw_cache_meta_t m = meta(200);
  gw_cache_writer_t *w = gw_cache_store_begin(s, key, strlen(key), &m, "HTTP/1.1 200 OK\r\n\r\n", 19, -1);
  if (w == NULL) return -2;
  /* in pieces, as a body streams */
  for (size_t off = 0; off < len; off += 1000) {
    size_t n = len - off < 1000 ? len - off : 1000;
    if (gw_cache_writer_append(w, body + off, n) != 0) {
      gw_cache_writer_abort(w);
      return -3;
    }
  }
  return gw_cache_writer_commit(w);
}

/* The body bytes [off, off + len) of key as read through a handle, malloc'd
 * (NULL: a miss). */
static char *get(gw_cache_store_t *s, const char *key, uint64_t off, uint64_t len, uint64_t *body_len)
{
  gw_cache_handle_t *h = gw_cache_store_lookup(s, key, strlen(key));
  if (h == NULL) return NULL;
  *body_len = gw_cache_handle_body_length(h);
  if (len == UINT64_MAX) len = *body_len - off;
  struct evbuffer *b = evbuffer_new();
  char *out = NULL;
  if (gw_cache_handle_read(h, b, off, len) == 0) {
    gw_cache_handle_release(h); /* the buffer keeps its bytes */
    h = NULL;
    out = malloc(len + 1);
    CHECK_EQ_INT(evbuffer_remove(b, out, len + 1), (intmax_t)len);
  }
  gw_cache_handle_release(h);
  evbuffer_free(b);
  return out;
}

static int present(gw_cache_store_t *s, const char *key)
{
  gw_cache_handle_t *h = gw_cache_store_lookup(s, key, strlen(key));
  gw_cache_handle_release(h);
  return h != NULL;
}

static long count_files(const char *sub)
{
  char p[512];
  long n = 0;
  for (int i = 0; i < 256; i++) {
    snprintf(p, sizeof(p), "%s/%02x", dir, i);
    if (sub) snprintf(p, sizeof(p), "%s/%s", dir, sub);
    DIR *d = opendir(p);
    for (struct dirent *de; d && (de = readdir(d));) n += de->d_name[0] != '.';
    if (d) closedir(d);
    if (sub) break;
  }
  return n;
}

/* The file of key (what cache_store names it). */
static void path_of(const char *key, char out[512])
{
  unsigned char h[32];
  unsigned int n;
  EVP_Digest(key, strlen(key), h, &n, EVP_sha256(), NULL);
  char hx[65];
  for (int i = 0; i < 32; i++) snprintf(hx + 2 * i, 3, "%02x", h[i]);
  snprintf(out, 512, "%s/%.2s/%s", dir, hx, hx);
}

static gw_cache_store_t *fresh_store(void *mem, size_t size, const char *path, uint64_t max_size)
{
  gw_cache_store_t *s = gw_cache_store_format(mem, size, "t", path, max_size);
  CHECK(s != NULL);
  CHECK(gw_cache_store_load(s) >= 0);
  return s;
}

static void test_file_format(void)
{
  gw_cache_meta_t m = meta(404);
  m.vary = "accept";
  m.vary_len = 6;
  size_t n = gw_cache_file_header_size(3, &m, 5);
  char *b = malloc(n + 10);
  gw_cache_file_header_write(b, "key", 3, &m, "HEAD!", 5, 1234);
  gw_cache_file_header_t h;
  CHECK_EQ_INT(gw_cache_file_parse(b, n + 10, &h), 0);
  CHECK_MEM(h.key, h.klen, "key", 3);
  CHECK_MEM(h.head, h.head_len, "HEAD!", 5);
  CHECK_MEM(h.meta.vary, h.meta.vary_len, "accept", 6);
  CHECK_EQ_INT(h.meta.status, 404);
  CHECK_EQ_UINT(h.body_len, 1234);
  CHECK_EQ_UINT(h.header_len, n);
  CHECK_EQ_INT(gw_cache_file_parse(b, n - 1, &h), -1); /* short */
  for (size_t i = 0; i < n; i++) { /* every flipped byte is caught */
    b[i] ^= 0x20;
    if (!CHECK_EQ_INT(gw_cache_file_parse(b, n, &h), -1)) unit_note("byte %zu", i);
    b[i] ^= 0x20;
  }
  CHECK_EQ_UINT(gw_cache_file_header_size(0, &m, 5), 0);
  CHECK_EQ_UINT(gw_cache_file_header_size(GW_CACHE_KEY_MAX + 1, &m, 5), 0);
  free(b);
}

static void test_memory(void)
{
  void *mem = aligned_alloc(64, MEM);
  gw_cache_store_t *s = fresh_store(mem, MEM, NULL, 0);
  uint64_t bl;
  CHECK(get(s, "a", 0, 0, &bl) == NULL);
  CHECK_EQ_INT(put(s, "a", "hello world", 11), 0);
  char *got = get(s, "a", 0, UINT64_MAX, &bl);
  CHECK_MEM(got, bl, "hello world", 11);
  free(got);
  got = get(s, "a", 6, 5, &bl); /* a range */
  CHECK_MEM(got, 5, "world", 5);
  free(got);
  gw_cache_handle_t *h = gw_cache_store_lookup(s, "a", 1);
  struct evbuffer *b = evbuffer_new();
  CHECK_EQ_INT(gw_cache_handle_read(h, b, 6, 6), -1); /* past the end */
  CHECK_EQ_INT(gw_cache_handle_read(h, b, 12, 0), -1);
  const gw_cache_meta_t *m = gw_cache_handle_meta(h);
  CHECK_EQ_INT(m->status, 200);
  CHECK_MEM(m->etag, m->etag_len, "\"e1\"", 4);
  CHECK_MEM(m->last_modified, m->last_modified_len, "Mon", 3);
  CHECK_EQ_INT(m->fresh_until_ms, 2000);
  size_t hl;
  const char *head = gw_cache_handle_head(h, &hl);
  CHECK_MEM(head, hl, "HTTP/1.1 200 OK\r\n\r\n", 19);
  /* replaced: the handle keeps the old body */
  CHECK_EQ_INT(put(s, "a", "HELLO", 5), 0);
  CHECK_EQ_INT(gw_cache_handle_read(h, b, 0, 11), 0);
  gw_cache_handle_release(h);
  char tmp[16];
  CHECK_EQ_INT(evbuffer_remove(b, tmp, sizeof(tmp)), 11);
  CHECK_MEM(tmp, 11, "hello world", 11);
  evbuffer_free(b);
  got = get(s, "a", 0, UINT64_MAX, &bl);
  CHECK_MEM(got, bl, "HELLO", 5);
  free(got);
  /* an aborted writer leaves the entry as it was */
  gw_cache_meta_t mm = meta(200);
  gw_cache_writer_t *w = gw_cache_store_begin(s, "a", 1, &mm, "", 0, -1);
  gw_cache_writer_append(w, "xyz", 3);
  gw_cache_writer_abort(w);
  CHECK(present(s, "a"));

  /* refresh */
  mm.fresh_until_ms = 99999;
  CHECK_EQ_INT(gw_cache_store_refresh(s, "a", 1, &mm), 1);
  CHECK_EQ_INT(gw_cache_store_refresh(s, "zz", 2, &mm), 0);
  h = gw_cache_store_lookup(s, "a", 1);
  CHECK_EQ_INT(gw_cache_handle_meta(h)->fresh_until_ms, 99999);
  gw_cache_handle_release(h);

  /* LRU eviction by memory: a is used, so b goes first */
  char *big = malloc(60000);
  memset(big, 'x', 60000);
  gw_cache_stats_t st;
  CHECK_EQ_INT(put(s, "b", big, 40000), 0);
  int i;
  for (i = 0; i < 200; i++) {
    char k[16];
    snprintf(k, sizeof(k), "k%d", i);
    CHECK(present(s, "a"));
    CHECK_EQ_INT(put(s, k, big, 30000), 0);
    gw_cache_store_stats(s, &st);
    if (st.evictions) break;
  }
  CHECK(st.evictions > 0);
  CHECK(!present(s, "b"));
  CHECK(present(s, "a"));
  CHECK(st.mem_bytes <= st.mem_capacity);
  /* too large for memory without a path: not stored, known or not */
  CHECK(gw_cache_store_begin(s, "huge", 4, &mm, "", 0, 10 << 20) == NULL);
  char *huge = calloc(1, 2 << 20);
  CHECK_EQ_INT(put(s, "huge", huge, 2 << 20), -3);
  CHECK(!present(s, "huge"));
  free(huge);

  /* purge, purge_prefix, Vary markers */
  CHECK_EQ_INT(put(s, "/p/1", "1", 1), 0);
  CHECK_EQ_INT(put(s, "/p/2", "2", 1), 0);
  CHECK_EQ_INT(put(s, "/q/1", "3", 1), 0);
  CHECK_EQ_INT(gw_cache_store_purge_prefix(s, "/p/", 3), 2);
  CHECK(!present(s, "/p/1") && !present(s, "/p/2") && present(s, "/q/1"));
  CHECK_EQ_INT(gw_cache_store_purge(s, "/q/1", 4), 1);
  CHECK_EQ_INT(gw_cache_store_purge(s, "/q/1", 4), 0);
  gw_cache_meta_t vm = meta(200);
  vm.flags = GW_CACHE_VARIANTS;
  vm.vary = "accept-encoding";
  vm.vary_len = 15;
  w = gw_cache_store_begin(s, "/v", 2, &vm, "", 0, 0);
  CHECK_EQ_INT(gw_cache_writer_commit(w), 0);
  CHECK_EQ_INT(put(s, "/v\0gzip", "g", 1), 0); /* strlen: only "/v" */
  gw_cache_writer_t *vw = gw_cache_store_begin(s, "/v\0gzip", 7, &mm, "", 0, 1);
  gw_cache_writer_append(vw, "g", 1);
  CHECK_EQ_INT(gw_cache_writer_commit(vw), 0);
  vw = gw_cache_store_begin(s, "/vx", 3, &mm, "", 0, 1);
  CHECK_EQ_INT(gw_cache_writer_commit(vw), 0);
  h = gw_cache_store_lookup(s, "/v\0gzip", 7);
  CHECK(h != NULL);
  gw_cache_handle_release(h);
  CHECK_EQ_INT(put(s, "/v", "", 0), 0); /* a plain entry again... */
  w = gw_cache_store_begin(s, "/v", 2, &vm, "", 0, 0); /* ...and a marker */
  CHECK_EQ_INT(gw_cache_writer_commit(w), 0);
  h = gw_cache_store_lookup(s, "/v", 2);
  CHECK(h && (gw_cache_handle_meta(h)->flags & GW_CACHE_VARIANTS));
  CHECK(h && gw_cache_handle_meta(h)->vary_len == 15);
  gw_cache_handle_release(h);
  CHECK_EQ_INT(gw_cache_store_purge(s, "/v", 2), 2); /* the marker and its variant, not /vx */
  CHECK(present(s, "/vx"));
  long before = (long)(gw_cache_store_stats(s, &st), st.entries);
  CHECK_EQ_INT(gw_cache_store_purge_prefix(s, "", 0), before);
  gw_cache_store_stats(s, &st);
  CHECK_EQ_UINT(st.entries, 0);
  CHECK_EQ_UINT(st.mem_bytes, 0);
  gw_cache_store_note(s, 1);
  gw_cache_store_note(s, 0);
  gw_cache_store_note(s, 0);
  gw_cache_store_stats(s, &st);
  CHECK_EQ_UINT(st.hits, 1);
  CHECK_EQ_UINT(st.misses, 2);
  free(big);
  free(mem);
}

static void write_file(const char *p, const void *b, size_t n)
{
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0 && write(fd, b, n) == (ssize_t)n);
  close(fd);
}

static void test_files(void)
{
  void *mem = aligned_alloc(64, MEM);
  gw_cache_store_t *s = fresh_store(mem, MEM, dir, 3 << 20);
  size_t n = 1 << 20;
  char *body = malloc(n);
  for (size_t i = 0; i < n; i++) body[i] = (char)(i * 7 + i / 1000);
  CHECK_EQ_INT(put(s, "/big", body, n), 0);
  CHECK_EQ_INT(count_files(NULL), 1);
  CHECK_EQ_INT(count_files("tmp"), 0);
  uint64_t bl;
  char *got = get(s, "/big", 0, UINT64_MAX, &bl);
  CHECK_EQ_UINT(bl, n);
  CHECK(got && memcmp(got, body, n) == 0);
  free(got);
  got = get(s, "/big", 500000, 1000, &bl); /* a range of the file */
  CHECK(got && memcmp(got, body + 500000, 1000) == 0);
  free(got);
  { /* the file itself, for sendfile */
    gw_cache_handle_t *fh = gw_cache_store_lookup(s, "/big", 4);
    uint64_t boff = 0;
    int fd = gw_cache_handle_file(fh, &boff);
    gw_cache_handle_release(fh);
    char two[2];
    CHECK(fd >= 0 && pread(fd, two, 2, (off_t)(boff + 777)) == 2 && memcmp(two, body + 777, 2) == 0);
    if (fd >= 0) close(fd);
    CHECK_EQ_INT(put(s, "/tiny", "t", 1), 0);
    fh = gw_cache_store_lookup(s, "/tiny", 5);
    CHECK(fh && gw_cache_handle_file(fh, &boff) == -1); /* in memory */
    gw_cache_handle_release(fh);
    gw_cache_store_purge(s, "/tiny", 5);
  }
  /* a small body stays in memory */
  CHECK_EQ_INT(put(s, "/small", "tiny", 4), 0);
  CHECK_EQ_INT(count_files(NULL), 1);
  gw_cache_stats_t st;
  gw_cache_store_stats(s, &st);
  CHECK(st.disk_bytes > n && st.disk_bytes < n + 200);
  /* a known length above GW_CACHE_MEM_BODY_MAX goes to a file at once */
  gw_cache_meta_t m = meta(200);
  gw_cache_writer_t *w = gw_cache_store_begin(s, "/known", 6, &m, "H", 1, 100000);
  CHECK_EQ_INT(count_files("tmp"), 1);
  gw_cache_writer_append(w, body, 100000);
  CHECK_EQ_INT(gw_cache_writer_commit(w), 0);
  CHECK_EQ_INT(count_files("tmp"), 0);
  CHECK_EQ_INT(count_files(NULL), 2);
  /* an evicted or purged entry's body stays readable from a handle */
  gw_cache_handle_t *h = gw_cache_store_lookup(s, "/big", 4);
  CHECK_EQ_INT(gw_cache_store_purge(s, "/big", 4), 1);
  CHECK_EQ_INT(count_files(NULL), 1);
  struct evbuffer *b = evbuffer_new();
  CHECK_EQ_INT(gw_cache_handle_read(h, b, 0, n), 0);
  gw_cache_handle_release(h);
  got = malloc(n);
  CHECK_EQ_INT(evbuffer_remove(b, got, n), (intmax_t)n);
  CHECK(memcmp(got, body, n) == 0);
  free(got);
  evbuffer_free(b);
  /* LRU eviction by max_size (3 MiB): the coldest file goes */
  CHECK_EQ_INT(put(s, "/f1", body, n), 0);
  CHECK_EQ_INT(put(s, "/f2", body, n), 0);
  CHECK(present(s, "/known"));
  CHECK(present(s, "/f1"));
  CHECK_EQ_INT(put(s, "/f3", body, n), 0); /* /f2 is the coldest */
  CHECK(!present(s, "/f2"));
  CHECK(present(s, "/f1") && present(s, "/f3") && present(s, "/known") && present(s, "/small"));
  gw_cache_store_stats(s, &st);
  CHECK(st.disk_bytes <= 3 << 20);
  CHECK(st.evictions >= 1);
  CHECK_EQ_INT(count_files(NULL), 3);
  /* bigger than max_size: not stored, cleanly */
  char *four = calloc(1, 4 << 20);
  CHECK_EQ_INT(put(s, "/four", four, 4 << 20), -3);
  CHECK(gw_cache_store_begin(s, "/four", 5, &m, "", 0, 4 << 20) == NULL);
  free(four);
  CHECK_EQ_INT(count_files("tmp"), 0);
  CHECK(present(s, "/f1"));

  /* refresh rewrites the file's header */
  m.fresh_until_ms = 777777;
  CHECK_EQ_INT(gw_cache_store_refresh(s, "/f1", 3, &m), 1);

  /* the loader: a new region over the same path finds the files again */
  void *mem2 = aligned_alloc(64, MEM);
  char junk[512];
  snprintf(junk, sizeof(junk), "%s/tmp/leftover.1.2", dir);
  write_file(junk, "x", 1);
  gw_cache_store_t *s2 = gw_cache_store_format(mem2, MEM, "t", dir, 3 << 20);
  CHECK_EQ_INT(gw_cache_store_load(s2), 3);
  CHECK_EQ_INT(count_files("tmp"), 0);
  h = gw_cache_store_lookup(s2, "/f1", 3);
  CHECK(h != NULL);
  CHECK(h && gw_cache_handle_meta(h)->fresh_until_ms == 777777);
  CHECK(h && gw_cache_handle_body_length(h) == n);
  gw_cache_handle_release(h);
  got = get(s2, "/f3", 0, UINT64_MAX, &bl);
  CHECK(got && bl == n && memcmp(got, body, n) == 0);
  free(got);
  got = get(s2, "/known", 0, UINT64_MAX, &bl);
  CHECK(got && bl == 100000 && memcmp(got, body, 100000) == 0);
  free(got);
  CHECK(!present(s2, "/small")); /* memory entries do not outlive the region */

  /* faults: truncated, corrupt, removed, replaced underneath -> misses */
  char p1[512], p3[512], pk[512];
  path_of("/f1", p1);
  path_of("/f3", p3);
  path_of("/known", pk);
  CHECK_EQ_INT(truncate(p1, 5000), 0);
  CHECK(!present(s2, "/f1"));
  CHECK(access(p1, F_OK) != 0); /* the bad file removed */
  CHECK(!present(s2, "/f1"));
  int fd = open(p3, O_WRONLY);
  CHECK(pwrite(fd, "Z", 1, 100) == 1); /* a header byte */
  close(fd);
  CHECK(!present(s2, "/f3"));
  CHECK_EQ_INT(put(s2, "/f1", body, 70000), 0);
  CHECK_EQ_INT(put(s2, "/f3", body, 80000), 0);
  gw_cache_store_stats(s2, &st);
  uint64_t bad = st.bad_files;
  CHECK_EQ_INT(unlink(p3), 0);
  CHECK(!present(s2, "/f3"));
  /* another key's file (same size, valid) renamed over /known's */
  CHECK_EQ_INT(put(s2, "/other", body + 1, 100000), 0);
  char po[512];
  path_of("/other", po);
  CHECK_EQ_INT(rename(po, pk), 0);
  CHECK(!present(s2, "/known"));
  gw_cache_store_stats(s2, &st);
  CHECK_EQ_UINT(st.bad_files, bad + 2);
  /* corrupt files found by the loader are removed; others load */
  CHECK_EQ_INT(put(s2, "/good", body, 100000), 0);
  char pg[512];
  path_of("/good", pg);
  fd = open(pg, O_WRONLY);
  CHECK(pwrite(fd, "\0\0\0\0", 4, 0) == 4); /* the magic */
  close(fd);
  CHECK_EQ_INT(put(s2, "/good2", body, 100000), 0);
  char pg2[512];
  path_of("/good2", pg2);
  CHECK_EQ_INT(truncate(pg2, 99999), 0);
  char stray[512];
  snprintf(stray, sizeof(stray), "%s/00/not-ours", dir);
  write_file(stray, "x", 1);
  char wrongname[512];
  snprintf(wrongname, sizeof(wrongname), "%s/ab/ab%062d", dir, 0);
  write_file(wrongname, body, 1000); /* a hash name whose content is junk */
  void *mem3 = aligned_alloc(64, MEM);
  gw_cache_store_t *s3 = gw_cache_store_format(mem3, MEM, "t", dir, 3 << 20);
  long loaded = gw_cache_store_load(s3);
  CHECK_EQ_INT(loaded, 1); /* /f1 ( /known was replaced: its file is /other's under the wrong name) */
  CHECK(present(s3, "/f1"));
  CHECK(!present(s3, "/good") && !present(s3, "/good2") && !present(s3, "/other"));
  CHECK(access(pg, F_OK) != 0 && access(pg2, F_OK) != 0 && access(wrongname, F_OK) != 0);
  CHECK(access(stray, F_OK) == 0); /* not a cache file name: left alone */
  unlink(stray);

  /* a failing disk (here RLIMIT_FSIZE: EFBIG) aborts the write cleanly */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 200000;
  setrlimit(RLIMIT_FSIZE, &lim);
  CHECK_EQ_INT(put(s3, "/nospace", body, 300000), -3);
  w = gw_cache_store_begin(s3, "/nospace2", 9, &m, "", 0, -1);
  CHECK(w != NULL);
  CHECK_EQ_INT(gw_cache_writer_append(w, body, 300000), -1);
  CHECK_EQ_INT(gw_cache_writer_commit(w), -1);
  setrlimit(RLIMIT_FSIZE, &old);
  CHECK(!present(s3, "/nospace") && !present(s3, "/nospace2"));
  CHECK_EQ_INT(count_files("tmp"), 0);
  gw_cache_store_stats(s3, &st);
  CHECK(st.store_failures >= 2);
  CHECK(present(s3, "/f1"));
  gw_cache_store_purge_prefix(s3, "", 0);
  CHECK_EQ_INT(count_files(NULL), 0);
  free(body);
  free(mem);
  free(mem2);
  free(mem3);
}

static void test_locks(void)
{
  void *mem = aligned_alloc(64, MEM);
  gw_cache_store_t *s = fresh_store(mem, MEM, NULL, 0);
  uint64_t t1, t2, t3;
  CHECK_EQ_INT(gw_cache_store_lock(s, "k", 1, 10000, &t1), GW_CACHE_LOCK_OWNED);
  CHECK(t1 != 0);
  CHECK_EQ_INT(gw_cache_store_lock_held(s, "k", 1), 1);
  CHECK_EQ_INT(gw_cache_store_lock(s, "k", 1, 10000, &t2), GW_CACHE_LOCK_BUSY); /* the same worker too */
  CHECK_EQ_INT(gw_cache_store_lock(s, "other", 5, 10000, &t3), GW_CACHE_LOCK_OWNED);
  gw_cache_store_unlock(s, "k", 1, t1 + 1000); /* not its token */
  CHECK_EQ_INT(gw_cache_store_lock_held(s, "k", 1), 1);
  gw_cache_store_unlock(s, "k", 1, t1);
  CHECK_EQ_INT(gw_cache_store_lock_held(s, "k", 1), 0);
  /* a timed-out lock is taken over; its first owner cannot release it */
  CHECK_EQ_INT(gw_cache_store_lock(s, "t", 1, 1, &t1), GW_CACHE_LOCK_OWNED);
  usleep(5000);
  CHECK_EQ_INT(gw_cache_store_lock_held(s, "t", 1), 0);
  CHECK_EQ_INT(gw_cache_store_lock(s, "t", 1, 10000, &t2), GW_CACHE_LOCK_OWNED);
  gw_cache_store_unlock(s, "t", 1, t1);
  CHECK_EQ_INT(gw_cache_store_lock_held(s, "t", 1), 1);
  /* a lock whose owner died is taken over */
  void *shm = NULL;
  int fresh = 0;
  char err[128];
  shm = gw_shm_zone_declare("cache", "locks", MEM, "", &fresh, err, sizeof(err));
  gw_cache_store_t *z = gw_cache_store_format(shm, MEM, "t", NULL, 0);
  pid_t pid = fork();
  if (pid == 0) {
    uint64_t t;
    _exit(gw_cache_store_lock(z, "dead", 4, 60000, &t) == GW_CACHE_LOCK_OWNED ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_EQ_INT(gw_cache_store_lock_held(z, "dead", 4), 0);
  CHECK_EQ_INT(gw_cache_store_lock(z, "dead", 4, 10000, &t1), GW_CACHE_LOCK_OWNED);
  /* and a live one in another process is not */
  int up[2], down[2]; /* child -> parent: locked; parent -> child: done */
  CHECK_EQ_INT(pipe(up), 0);
  CHECK_EQ_INT(pipe(down), 0);
  pid = fork();
  if (pid == 0) {
    uint64_t t;
    int rc = gw_cache_store_lock(z, "live", 4, 60000, &t) == GW_CACHE_LOCK_OWNED ? 0 : 1;
    char c;
    if (write(up[1], "x", 1) != 1 || read(down[0], &c, 1) != 1) rc = 2;
    _exit(rc);
  }
  char c;
  CHECK(read(up[0], &c, 1) == 1);
  CHECK_EQ_INT(gw_cache_store_lock(z, "live", 4, 10000, &t1), GW_CACHE_LOCK_BUSY);
  CHECK_EQ_INT(gw_cache_store_lock_held(z, "live", 4), 1);
  CHECK(write(down[1], "y", 1) == 1);
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(up[0]);
  close(up[1]);
  close(down[0]);
  close(down[1]);
  gw_shm_zone_abort();
  free(mem);
}

static void test_zones(void)
{
  char err[256];
  char zdir[300];
  snprintf(zdir, sizeof(zdir), "%s/zone", dir);
  CHECK_EQ_INT(gw_cache_store_declare("api", 100, NULL, 0, err, sizeof(err)), -1);
  CHECK(strstr(err, "memory must be") != NULL);
  CHECK_EQ_INT(gw_cache_store_declare("api", MEM, zdir, 0, err, sizeof(err)), 0);
  CHECK_EQ_INT(gw_cache_store_declare("api", MEM, zdir, 0, err, sizeof(err)), -1);
  CHECK(strstr(err, "declared twice") != NULL);
  gw_shm_zone_commit();
  gw_cache_store_t *s = gw_cache_store_find("api");
  CHECK(s != NULL);
  const char *name = NULL;
  CHECK(gw_cache_store_at(0, &name) == s && name && strcmp(name, "api") == 0);
  CHECK(gw_cache_store_at(1, &name) == NULL);
  if (geteuid() == 0) { /* `user`: the folders the master made go to the workers' user, once */
    char sub[400];
    struct stat st;
    snprintf(sub, sizeof(sub), "%s/7f", zdir);
    gw_cache_store_hand_over(65534, 65534);
    CHECK(stat(sub, &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534);
    CHECK(stat(zdir, &st) == 0 && st.st_uid == 65534);
    CHECK_EQ_INT(chown(sub, 0, 0), 0);
    gw_cache_store_hand_over(65534, 65534);
    CHECK(stat(sub, &st) == 0 && st.st_uid == 0);
  }
  CHECK_EQ_INT(put(s, "/m", "mem", 3), 0);
  /* a reload with the same memory and path keeps the index, memory entries too */
  CHECK_EQ_INT(gw_cache_store_declare("api", MEM, zdir, 5 << 20, err, sizeof(err)), 0);
  gw_shm_zone_commit();
  CHECK(gw_cache_store_find("api") == s);
  CHECK(present(s, "/m"));
  gw_cache_stats_t st;
  gw_cache_store_stats(s, &st);
  CHECK_EQ_UINT(st.max_size, 5 << 20);
  /* another path: a new zone */
  char zdir2[320];
  snprintf(zdir2, sizeof(zdir2), "%s/zone2", dir);
  CHECK_EQ_INT(gw_cache_store_declare("api", MEM, zdir2, 0, err, sizeof(err)), 0);
  gw_shm_zone_commit();
  CHECK(!present(gw_cache_store_find("api"), "/m"));
  /* a path that cannot be made */
  CHECK_EQ_INT(gw_cache_store_declare("bad", MEM, "/proc/nope/cache", 0, err, sizeof(err)), -1);
  CHECK(strstr(err, "cannot create") != NULL);
  gw_shm_zone_abort();
  gw_shm_zone_commit(); /* nothing declared: all gone */
  CHECK(gw_cache_store_find("api") == NULL);
}

int main(void)
{
  snprintf(dir, sizeof(dir), "/tmp/gw-test-cache-store-%d", (int)getpid());
  test_file_format();
  test_memory();
  test_files();
  test_locks();
  test_zones();
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  CHECK_EQ_INT(system(cmd), 0);
  return unit_done();
}
