/* cache_loader.c - the response cache's zones and loader (cache_store.h):
 * `cache :name, memory:, path:, max_size:` declared while the master reads
 * the config, the index of a zone mapped anew rebuilt from the files under
 * its path (as nginx's cache loader), and the folders it made handed over
 * to the workers' user. Runs in the master only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_file.h"
#include "cache_store.h"
#include "log.h"
#include "shm_zone.h"

#define MAX_FRESH 64

/* Zones mapped anew whose folders are still to be handed over (names). */
static char fresh[MAX_FRESH][64];
static size_t nfresh;

static int mkdir_p(const char *path, char *err, size_t errlen)
{
  char p[PATH_MAX];
  snprintf(p, sizeof(p), "%s", path);
  for (char *c = p + 1;; c++) {
    if (*c != '/' && *c != '\0') continue;
    char saved = *c;
    *c = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
      snprintf(err, errlen, "cannot create %s: %s", p, strerror(errno));
      return -1;
    }
    *c = saved;
    if (saved == '\0') break;
  }
  struct stat st;
  if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "%s is not a directory", p);
    return -1;
  }
  return 0;
}

/* 64 lower-case hex digits starting with the folder's two. */
static int is_hash_name(const char *name, const char *dir2)
{
  if (strlen(name) != 64 || name[0] != dir2[0] || name[1] != dir2[1]) return 0;
  for (const char *c = name; *c; c++)
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) return 0;
  return 1;
}

/* One file: into the index, or removed (logged). 1 added, 0 not. */
static int load_file(gw_cache_store_t *s, const char *path)
{
  const char *why = NULL;
  char *buf = NULL;
  gw_cache_file_header_t h;
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    why = strerror(errno);
  } else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else {
    size_t want = (uint64_t)st.st_size < gw_cache_file_header_max() ? (size_t)st.st_size : gw_cache_file_header_max();
    if ((buf = malloc(want ? want : 1)) == NULL) why = "out of memory";
    else if (pread(fd, buf, want, 0) != (ssize_t)want) why = "a short read";
    else if (gw_cache_file_parse(buf, want, &h) != 0) why = "not a cache file of this version, or corrupt";
    else if (h.header_len + h.body_len != (uint64_t)st.st_size) why = "truncated";
  }
  if (fd >= 0) close(fd);
  if (why == NULL) { /* a file under another key's name is not that key's */
    char own[PATH_MAX];
    gw_cache_store_file_path(s, h.key, h.klen, own);
    if (strcmp(own, path) != 0) why = "its key does not hash to its name";
  }
  int added = 0;
  if (why == NULL) {
    added = gw_cache_store_adopt(s, &h, (uint64_t)st.st_size, (uint64_t)st.st_ino);
    if (!added) unlink(path); /* over memory: or max_size: as an eviction */
  } else {
    gw_log_warn("cache %s: %s: %s; removed", gw_cache_store_name(s), path, why);
    gw_cache_store_note_bad_file(s);
    unlink(path);
  }
  free(buf);
  return added;
}

static long load(gw_cache_store_t *s, char *err, size_t errlen)
{
  const char *root = gw_cache_store_path(s);
  if (root[0] == '\0') return 0;
  char dir[PATH_MAX], file[PATH_MAX + 256];
  if (mkdir_p(root, err, errlen) != 0) return -1;
  snprintf(dir, sizeof(dir), "%s/tmp", root);
  if (mkdir_p(dir, err, errlen) != 0) return -1;
  DIR *d = opendir(dir);
  for (struct dirent *de; d && (de = readdir(d));) { /* a stopped server's unfinished writes */
    if (de->d_name[0] == '.') continue;
    snprintf(file, sizeof(file), "%s/%s", dir, de->d_name);
    unlink(file);
  }
  if (d) closedir(d);
  long n = 0;
  for (int i = 0; i < 256; i++) {
    char sub[3];
    snprintf(sub, sizeof(sub), "%02x", i);
    snprintf(dir, sizeof(dir), "%s/%s", root, sub);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
      snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
      return -1;
    }
    if ((d = opendir(dir)) == NULL) continue;
    for (struct dirent *de; (de = readdir(d));) {
      if (de->d_name[0] == '.') continue;
      snprintf(file, sizeof(file), "%s/%s", dir, de->d_name);
      if (!is_hash_name(de->d_name, sub)) {
        gw_log_warn("cache %s: %s: not a cache file name; left alone", gw_cache_store_name(s), file);
        continue;
      }
      n += load_file(s, file);
    }
    closedir(d);
  }
  return n;
}

long gw_cache_store_load(gw_cache_store_t *s)
{
  char err[PATH_MAX + 64];
  long n = load(s, err, sizeof(err));
  if (n < 0) gw_log_error("cache %s: %s", gw_cache_store_name(s), err);
  return n;
}

int gw_cache_store_declare(const char *name, size_t memory, const char *path, uint64_t max_size, char *err,
                           size_t errlen)
{
  if (memory < GW_CACHE_MIN_MEMORY || memory > GW_CACHE_MAX_MEMORY) {
    snprintf(err, errlen, "cache %s: memory must be from 256k to 2g", name);
    return -1;
  }
  if (path && path[0] == '\0') path = NULL;
  if (path && strlen(path) > GW_CACHE_PATH_MAX) {
    snprintf(err, errlen, "cache %s: the path is too long", name);
    return -1;
  }
  int is_new = 0;
  void *mem = gw_shm_zone_declare("cache", name, memory, path ? path : "", &is_new, err, errlen);
  if (mem == NULL) return -1;
  if (!is_new) { /* a reload: the same index; max_size may have changed */
    gw_cache_store_set_max_size(mem, max_size);
    return 0;
  }
  gw_cache_store_t *s = gw_cache_store_format(mem, memory, name, path, max_size);
  if (s == NULL) {
    snprintf(err, errlen, "cache %s: cannot make its index", name);
    return -1;
  }
  char why[PATH_MAX + 64];
  long n = load(s, why, sizeof(why));
  if (n < 0) {
    snprintf(err, errlen, "cache %s: %s", name, why);
    return -1;
  }
  if (n > 0) gw_log_notice("cache %s: %ld entries loaded from %s", name, n, gw_cache_store_path(s));
  if (path && nfresh < MAX_FRESH) snprintf(fresh[nfresh++], sizeof(fresh[0]), "%s", name);
  return 0;
}

gw_cache_store_t *gw_cache_store_find(const char *name)
{
  return gw_shm_zone_find("cache", name);
}

gw_cache_store_t *gw_cache_store_at(size_t i, const char **name)
{
  return gw_shm_zone_at("cache", i, name);
}

/* -- `user` ------------------------------------------------------------------- */

static uid_t owner_uid;
static gid_t owner_gid;

static int hand_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
  (void)type;
  (void)ftw;
  if ((st->st_uid != owner_uid || st->st_gid != owner_gid) && lchown(path, owner_uid, owner_gid) != 0)
    gw_log_warn("cache: cannot hand %s over to the workers' user: %s", path, strerror(errno));
  return 0;
}

void gw_cache_store_hand_over(uid_t uid, gid_t gid)
{
  owner_uid = uid;
  owner_gid = gid;
  for (size_t i = 0; i < nfresh; i++) {
    gw_cache_store_t *s = gw_cache_store_find(fresh[i]);
    if (s) nftw(gw_cache_store_path(s), hand_one, 16, FTW_PHYS);
  }
  nfresh = 0;
}
