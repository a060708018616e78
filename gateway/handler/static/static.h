/* static.h - static files: the handler of a `root:` or `alias:` location,
 * and req.send_file(path) from any handler. */
#ifndef GW_STATIC_H
#define GW_STATIC_H

#include <stddef.h>
#include <sys/stat.h>

#include "filecache.h"
#include "handler.h"
#include "request.h"

typedef struct {
  const char *root;          /* absolute folder (root:, or alias: target) */
  int alias;                 /* 1: the location prefix is replaced by root; 0: the URI is appended */
  size_t prefix_len;         /* the location's path length (alias) */
  const char *const *index;  /* index file names, tried in order for ".../" */
  size_t nindex;
  int autoindex;             /* list a directory without an index (else 403) */
  int follow_symlinks;       /* 0: no symlink is followed beneath root */
  int gzip_static;           /* serve NAME.br / NAME.gz when the client accepts them */
  const char *const *types;  /* extension, type, extension, type... (overrides) */
  size_t ntypes;             /* pairs */
  const char *default_type;  /* NULL: application/octet-stream */
  gw_filecache_conf_t cache;
  gw_handler_t *fallback;    /* owned from now on (also on failure), or NULL: run when the file is missing */
  /* ruby_files: a request for a regular file whose name ends in ".rb"
   * runs it as a handler file (any method), never sends it: called with the
   * file as opened beneath the root (fd valid during the call), its path
   * for messages and its stat; it answers req. NULL: ".rb" is a file. */
  void (*ruby_file)(gw_request_t *req, const char *path, int fd, const struct stat *st);
} gw_static_conf_t;

/* NULL with err set ("root "x": No such file or directory") on failure. */
gw_handler_t *gw_static_handler_new(const gw_static_conf_t *conf, char *err, size_t errlen);

/* req.send_file(path): answers req with that file, with the full machinery
 * (conditional requests, ranges, caches). A relative path is taken beneath
 * the root of req's location when it serves files (no fallback then), else
 * it is refused (500); an absolute path is opened as is (symlinks followed:
 * the script chose it), regular files only. */
void gw_static_send_file(gw_request_t *req, const char *path, size_t len);

#endif
