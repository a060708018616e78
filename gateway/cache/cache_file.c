/* cache_file.c - the response cache's file header (cache_file.h). */
#include <string.h>
#include <zlib.h>

#include "cache_file.h"

#define MAGIC 0x48435747u /* "GWCH" */

typedef struct {
  uint32_t magic, version;
  uint32_t header_len, crc;
  int64_t stored_ms, fresh_until_ms, swr_ms, sie_ms;
  uint64_t body_len;
  int32_t status;
  uint32_t flags;
  uint32_t klen, head_len, etag_len, lm_len, vary_len, reserved;
} fixed_t; /* no padding: 88 bytes */

_Static_assert(sizeof(fixed_t) == 88, "the file header's fixed part has no padding");

size_t gw_cache_file_header_size(size_t klen, const gw_cache_meta_t *meta, size_t head_len)
{
  if (klen == 0 || klen > GW_CACHE_KEY_MAX || head_len > GW_CACHE_HEAD_MAX || meta->etag_len > GW_CACHE_STR_MAX ||
      meta->last_modified_len > GW_CACHE_STR_MAX || meta->vary_len > GW_CACHE_STR_MAX)
    return 0;
  return sizeof(fixed_t) + klen + meta->etag_len + meta->last_modified_len + meta->vary_len + head_len;
}

size_t gw_cache_file_header_max(void)
{
  return sizeof(fixed_t) + GW_CACHE_KEY_MAX + 3 * GW_CACHE_STR_MAX + GW_CACHE_HEAD_MAX;
}

static char *put(char *p, const char *s, size_t n)
{
  if (n) memcpy(p, s, n);
  return p + n;
}

void gw_cache_file_header_write(void *buf, const char *key, size_t klen, const gw_cache_meta_t *meta,
                                const char *head, size_t head_len, uint64_t body_len)
{
  fixed_t f = {
      .magic = MAGIC,
      .version = GW_CACHE_FILE_VERSION,
      .header_len = (uint32_t)gw_cache_file_header_size(klen, meta, head_len),
      .stored_ms = meta->stored_ms,
      .fresh_until_ms = meta->fresh_until_ms,
      .swr_ms = meta->stale_while_revalidate_ms,
      .sie_ms = meta->stale_if_error_ms,
      .body_len = body_len,
      .status = meta->status,
      .flags = meta->flags,
      .klen = (uint32_t)klen,
      .head_len = (uint32_t)head_len,
      .etag_len = (uint32_t)meta->etag_len,
      .lm_len = (uint32_t)meta->last_modified_len,
      .vary_len = (uint32_t)meta->vary_len,
  };
  char *p = put(buf, (const char *)&f, sizeof(f));
  p = put(p, key, klen);
  p = put(p, meta->etag, meta->etag_len);
  p = put(p, meta->last_modified, meta->last_modified_len);
  p = put(p, meta->vary, meta->vary_len);
  put(p, head, head_len);
  f.crc = (uint32_t)crc32(0L, buf, f.header_len);
  memcpy((char *)buf + offsetof(fixed_t, crc), &f.crc, sizeof(f.crc));
}

int gw_cache_file_parse(const void *buf, size_t len, gw_cache_file_header_t *out)
{
  fixed_t f;
  if (len < sizeof(f)) return -1;
  memcpy(&f, buf, sizeof(f));
  if (f.magic != MAGIC || f.version != GW_CACHE_FILE_VERSION || f.klen == 0 || f.klen > GW_CACHE_KEY_MAX ||
      f.head_len > GW_CACHE_HEAD_MAX || f.etag_len > GW_CACHE_STR_MAX || f.lm_len > GW_CACHE_STR_MAX ||
      f.vary_len > GW_CACHE_STR_MAX || f.status < 100 || f.status > 999 || f.reserved != 0)
    return -1;
  size_t hlen = sizeof(f) + (size_t)f.klen + f.etag_len + f.lm_len + f.vary_len + f.head_len;
  if (f.header_len != hlen || hlen > len) return -1;
  /* the CRC over the header with its own field read as zero */
  static const uint32_t zero = 0;
  uLong crc = crc32(0L, buf, offsetof(fixed_t, crc));
  crc = crc32(crc, (const Bytef *)&zero, sizeof(zero));
  crc = crc32(crc, (const Bytef *)buf + offsetof(fixed_t, crc) + sizeof(zero),
              (uInt)(hlen - offsetof(fixed_t, crc) - sizeof(zero)));
  if ((uint32_t)crc != f.crc) return -1;
  const char *p = (const char *)buf + sizeof(f);
  memset(out, 0, sizeof(*out));
  out->key = p;
  out->klen = f.klen;
  p += f.klen;
  out->meta.etag = f.etag_len ? p : NULL;
  out->meta.etag_len = f.etag_len;
  p += f.etag_len;
  out->meta.last_modified = f.lm_len ? p : NULL;
  out->meta.last_modified_len = f.lm_len;
  p += f.lm_len;
  out->meta.vary = f.vary_len ? p : NULL;
  out->meta.vary_len = f.vary_len;
  p += f.vary_len;
  out->head = p;
  out->head_len = f.head_len;
  out->meta.status = f.status;
  out->meta.flags = f.flags;
  out->meta.stored_ms = f.stored_ms;
  out->meta.fresh_until_ms = f.fresh_until_ms;
  out->meta.stale_while_revalidate_ms = f.swr_ms;
  out->meta.stale_if_error_ms = f.sie_ms;
  out->body_len = f.body_len;
  out->header_len = hlen;
  return 0;
}
