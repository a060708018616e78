/* fuzz_cache_entry.c - libFuzzer target for the response cache's files
 * (cache_file.c, cache_store.c): what the loader and a lookup read from a
 * file under `path:`, which anything on the machine may have written.
 * Input: [mode] + a file's bytes. Mode bit 0: the harness first sets the
 * header's CRC-32 right (over what the header claims its length is), so
 * the fuzzer gets past the checksum to the fields; bit 1: the bytes are
 * also written as a cache file (under their key's hash name when they
 * parse), loaded into a store by the loader and looked up.
 * Checked on every input:
 *   - a parsed header lies inside the input and within the limits, and its
 *     key, strings and head point inside it;
 *   - written again (gw_cache_file_header_write), it is the same bytes;
 *   - a one-byte-shorter input never parses with the same header length;
 *   - the loader takes a file only if it is whole (header + body length =
 *     the file's size) and then a lookup gives exactly its body bytes;
 *     a file it refuses is removed;
 *   - no memory error (ASan/UBSan). */
#define FUZZ_NAME "fuzz_cache_entry"
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#include "cache_store.h"
#include "fuzz_common.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CRC_OFF 12 /* cache_file.c's fixed_t: magic, version, header_len, crc */
#define REGION ((size_t)4 << 20) /* its largest block holds the largest header */

static char dir[128];
static void *region;

static int inside(const char *p, size_t n, const uint8_t *b, size_t len)
{
  return n == 0 || (p >= (const char *)b && p + n <= (const char *)b + len);
}

static void fix_crc(uint8_t *b, size_t size)
{
  if (size < 16) return;
  uint32_t hlen, zero = 0;
  memcpy(&hlen, b + 8, 4);
  if (hlen > size || hlen < 16) hlen = (uint32_t)size;
  memcpy(b + CRC_OFF, &zero, 4);
  uint32_t crc = (uint32_t)crc32(0L, b, hlen);
  memcpy(b + CRC_OFF, &crc, 4);
}

/* Writes the file, loads a new store over dir, looks the key up. */
static void through_store(const uint8_t *b, size_t size, const gw_cache_file_header_t *h, int parsed)
{
  char name[65] = "00";
  if (parsed) {
    unsigned char hash[32];
    unsigned int n;
    EVP_Digest(h->key, h->klen, hash, &n, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++) snprintf(name + 2 * i, 3, "%02x", hash[i]);
  } else {
    memset(name, 'a', 64);
    name[64] = '\0';
  }
  char path[256];
  snprintf(path, sizeof(path), "%s/%.2s", dir, name);
  mkdir(dir, 0700);
  mkdir(path, 0700);
  snprintf(path, sizeof(path), "%s/%.2s/%s", dir, name, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || write(fd, b, size) != (ssize_t)size) FAIL("cannot write %s", path);
  close(fd);
  gw_cache_store_t *s = gw_cache_store_format(region, REGION, "t", dir, 0);
  long loaded = gw_cache_store_load(s);
  int whole = parsed && h->header_len + h->body_len == size;
  if (loaded != (whole ? 1 : 0)) FAIL("loaded %ld, a %s file", loaded, whole ? "whole" : "bad");
  if (!whole) {
    if (access(path, F_OK) == 0) FAIL("a refused file was left");
    return;
  }
  gw_cache_handle_t *hd = gw_cache_store_lookup(s, h->key, h->klen);
  if (hd == NULL) FAIL("a loaded entry is not found");
  if (gw_cache_handle_body_length(hd) != h->body_len) FAIL("body length changed");
  struct evbuffer *out = evbuffer_new();
  if (gw_cache_handle_read(hd, out, 0, h->body_len) != 0) FAIL("cannot read the body");
  gw_cache_handle_release(hd);
  size_t n = evbuffer_get_length(out);
  if (n != h->body_len || (n && memcmp(evbuffer_pullup(out, -1), b + h->header_len, n) != 0)) FAIL("a wrong body");
  evbuffer_free(out);
  gw_cache_store_purge_prefix(s, "", 0);
  if (access(path, F_OK) == 0) FAIL("a purged file was left");
}

static void cleanup(void)
{
  char cmd[160];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "fuzz_cache_entry: could not remove %s\n", dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  if (region == NULL) {
    gw_log_min_level = GW_LOG_CRIT; /* the loader's lines about bad files */
    snprintf(dir, sizeof(dir), "/tmp/gw-fuzz-cache-%d", (int)getpid());
    region = aligned_alloc(64, REGION);
    atexit(cleanup);
  }
  int mode = data[0];
  size--;
  uint8_t *b = malloc(size ? size : 1);
  memcpy(b, data + 1, size);
  if (mode & 1) fix_crc(b, size);
  gw_cache_file_header_t h;
  int parsed = gw_cache_file_parse(b, size, &h) == 0;
  if (parsed) {
    if (h.header_len > size) FAIL("header of %zu bytes in %zu", h.header_len, size);
    if (h.klen == 0 || h.klen > GW_CACHE_KEY_MAX || h.head_len > GW_CACHE_HEAD_MAX) FAIL("lengths over the limits");
    if (!inside(h.key, h.klen, b, h.header_len) || !inside(h.head, h.head_len, b, h.header_len) ||
        !inside(h.meta.etag, h.meta.etag_len, b, h.header_len) ||
        !inside(h.meta.last_modified, h.meta.last_modified_len, b, h.header_len) ||
        !inside(h.meta.vary, h.meta.vary_len, b, h.header_len))
      FAIL("a field outside the header");
    if (gw_cache_file_header_size(h.klen, &h.meta, h.head_len) != h.header_len) FAIL("size disagrees");
    uint8_t *again = malloc(h.header_len);
    gw_cache_file_header_write(again, h.key, h.klen, &h.meta, h.head, h.head_len, h.body_len);
    if (memcmp(again, b, h.header_len) != 0) FAIL("written again, the header differs");
    free(again);
    gw_cache_file_header_t h2;
    if (gw_cache_file_parse(b, h.header_len - 1, &h2) == 0) FAIL("a shorter input parses");
  }
  if (mode & 2) through_store(b, size, &h, parsed);
  free(b);
  return 0;
}
