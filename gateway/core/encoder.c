/* encoder.c - gzip, br and zstd streaming compressors (encoder.h), on zlib,
 * libbrotlienc and libzstd, with a per-process free list of contexts. */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_c_srcSizeHint: a parameter value, no static-only function */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <brotli/encode.h>
#include <zlib.h>
#include <zstd.h>

#include "encoder.h"

#define OUT_CHUNK (16 * 1024) /* output reserved in the evbuffer per step */
#define FREE_MAX 8            /* idle contexts kept per coding */
#define STREAM_WINDOW_LOG 19  /* br, zstd: a 512 KiB window when the size is unknown */

struct gw_encoder_s {
  gw_coding_t coding;
  int level;
  int wbits, memlevel;      /* gzip: the context's shape (reuse needs the same) */
  int used;                 /* zlib: run since the last reset */
  union {
    z_stream z;
    BrotliEncoderState *br;
    ZSTD_CCtx *zstd;
  } u;
};

static struct {
  gw_encoder_t *items[FREE_MAX];
  int n;
} spare[GW_CODING_COUNT];

const char *gw_coding_name(gw_coding_t c)
{
  switch (c) {
  case GW_CODING_GZIP: return "gzip";
  case GW_CODING_BR: return "br";
  case GW_CODING_ZSTD: return "zstd";
  default: return NULL;
  }
}

/* nginx's rule: a known small input gets a smaller window and hash (less to
 * allocate and to clear on reset), never below 512 bytes. */
static void gzip_shape(long long size_hint, int *wbits, int *memlevel)
{
  *wbits = 15;
  *memlevel = 8;
  if (size_hint < 0) return;
  while (size_hint < (1LL << (*wbits - 1)) && *wbits > 9) {
    (*wbits)--;
    if (*memlevel > 1) (*memlevel)--;
  }
}

static int log2_ceil(long long v)
{
  int n = 0;
  while (n < 62 && (1LL << n) < v) n++;
  return n;
}

static void destroy(gw_encoder_t *e)
{
  switch (e->coding) {
  case GW_CODING_GZIP: deflateEnd(&e->u.z); break;
  case GW_CODING_BR: BrotliEncoderDestroyInstance(e->u.br); break;
  case GW_CODING_ZSTD: ZSTD_freeCCtx(e->u.zstd); break;
  default: break;
  }
  free(e);
}

/* A spare encoder of this coding (gzip: of this shape), or NULL. */
static gw_encoder_t *take_spare(gw_coding_t coding, int wbits, int memlevel)
{
  for (int i = spare[coding].n - 1; i >= 0; i--) {
    gw_encoder_t *e = spare[coding].items[i];
    if (coding == GW_CODING_GZIP && (e->wbits != wbits || e->memlevel != memlevel)) continue;
    spare[coding].items[i] = spare[coding].items[--spare[coding].n];
    return e;
  }
  return NULL;
}

static gw_encoder_t *gzip_new(int level, long long size_hint)
{
  int wbits, memlevel;
  gzip_shape(size_hint, &wbits, &memlevel);
  gw_encoder_t *e = take_spare(GW_CODING_GZIP, wbits, memlevel);
  if (e) {
    if ((e->used && deflateReset(&e->u.z) != Z_OK) ||
        (e->level != level && deflateParams(&e->u.z, level, Z_DEFAULT_STRATEGY) != Z_OK)) {
      destroy(e);
      return NULL;
    }
    e->level = level;
    e->used = 0;
    return e;
  }
  if ((e = calloc(1, sizeof(*e))) == NULL) return NULL;
  e->coding = GW_CODING_GZIP;
  e->level = level;
  e->wbits = wbits;
  e->memlevel = memlevel;
  if (deflateInit2(&e->u.z, level, Z_DEFLATED, wbits + 16 /* a gzip wrapper */, memlevel, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    free(e);
    return NULL;
  }
  return e;
}

static gw_encoder_t *br_new(int level, long long size_hint)
{
  gw_encoder_t *e = calloc(1, sizeof(*e));
  if (e == NULL) return NULL;
  e->coding = GW_CODING_BR;
  e->level = level;
  if ((e->u.br = BrotliEncoderCreateInstance(NULL, NULL, NULL)) == NULL) {
    free(e);
    return NULL;
  }
  int lgwin = STREAM_WINDOW_LOG;
  if (size_hint >= 0) {
    lgwin = log2_ceil(size_hint);
    if (lgwin < BROTLI_MIN_WINDOW_BITS) lgwin = BROTLI_MIN_WINDOW_BITS;
    if (lgwin > BROTLI_MAX_WINDOW_BITS) lgwin = BROTLI_MAX_WINDOW_BITS;
    BrotliEncoderSetParameter(e->u.br, BROTLI_PARAM_SIZE_HINT,
                              size_hint > (1 << 30) ? 1u << 30 : (uint32_t)size_hint);
  }
  BrotliEncoderSetParameter(e->u.br, BROTLI_PARAM_QUALITY, (uint32_t)level);
  BrotliEncoderSetParameter(e->u.br, BROTLI_PARAM_LGWIN, (uint32_t)lgwin);
  return e;
}

static gw_encoder_t *zstd_new(int level, long long size_hint)
{
  gw_encoder_t *e = take_spare(GW_CODING_ZSTD, 0, 0);
  if (e) {
    ZSTD_CCtx_reset(e->u.zstd, ZSTD_reset_session_and_parameters);
  } else {
    if ((e = calloc(1, sizeof(*e))) == NULL) return NULL;
    e->coding = GW_CODING_ZSTD;
    if ((e->u.zstd = ZSTD_createCCtx()) == NULL) {
      free(e);
      return NULL;
    }
  }
  e->level = level;
  ZSTD_CCtx_setParameter(e->u.zstd, ZSTD_c_compressionLevel, level);
  if (size_hint >= 0 && size_hint < (1LL << 30))
    ZSTD_CCtx_setParameter(e->u.zstd, ZSTD_c_srcSizeHint, (int)size_hint);
  else
    ZSTD_CCtx_setParameter(e->u.zstd, ZSTD_c_windowLog, STREAM_WINDOW_LOG);
  return e;
}

gw_encoder_t *gw_encoder_new(gw_coding_t coding, int level, long long size_hint)
{
  switch (coding) {
  case GW_CODING_GZIP: return gzip_new(level, size_hint);
  case GW_CODING_BR: return br_new(level, size_hint);
  case GW_CODING_ZSTD: return zstd_new(level, size_hint);
  default: return NULL;
  }
}

void gw_encoder_free(gw_encoder_t *e)
{
  if (e == NULL) return;
  if (e->coding != GW_CODING_BR && spare[e->coding].n < FREE_MAX) {
    spare[e->coding].items[spare[e->coding].n++] = e;
    return;
  }
  destroy(e);
}

/* -- one step of each library: input in, output into a caller's buffer -- */

/* Each step compresses from *in (advanced past what it took) into out[0,
 * *outlen) (set to what it wrote); returns 1 when it must be called again
 * (the output was full), 0 when the mode's work is done, -1 on an error. */

static int step_gzip(gw_encoder_t *e, const uint8_t **in, size_t *inlen, gw_enc_mode_t mode, uint8_t *out,
                     size_t *outlen)
{
  z_stream *z = &e->u.z;
  int flush = mode == GW_ENC_FINISH ? Z_FINISH : mode == GW_ENC_FLUSH ? Z_SYNC_FLUSH : Z_NO_FLUSH;
  e->used = 1;
  z->next_in = (Bytef *)*in;
  z->avail_in = (uInt)*inlen;
  z->next_out = out;
  z->avail_out = (uInt)*outlen;
  int rc = deflate(z, flush);
  *outlen -= z->avail_out;
  *in = z->next_in;
  *inlen = z->avail_in;
  if (rc == Z_STREAM_ERROR) return -1;
  if (rc == Z_STREAM_END) return 0;
  return mode == GW_ENC_FINISH || z->avail_in > 0 || z->avail_out == 0;
}

static int step_br(gw_encoder_t *e, const uint8_t **in, size_t *inlen, gw_enc_mode_t mode, uint8_t *out,
                   size_t *outlen)
{
  BrotliEncoderOperation op = mode == GW_ENC_FINISH  ? BROTLI_OPERATION_FINISH
                              : mode == GW_ENC_FLUSH ? BROTLI_OPERATION_FLUSH
                                                     : BROTLI_OPERATION_PROCESS;
  size_t avail_out = *outlen;
  uint8_t *next_out = out;
  BROTLI_BOOL ok = BrotliEncoderCompressStream(e->u.br, op, inlen, in, &avail_out, &next_out, NULL);
  *outlen -= avail_out;
  if (!ok) return -1;
  if (*inlen > 0 || BrotliEncoderHasMoreOutput(e->u.br)) return 1;
  return mode == GW_ENC_FINISH && !BrotliEncoderIsFinished(e->u.br);
}

static int step_zstd(gw_encoder_t *e, const uint8_t **in, size_t *inlen, gw_enc_mode_t mode, uint8_t *out,
                     size_t *outlen)
{
  ZSTD_EndDirective end = mode == GW_ENC_FINISH ? ZSTD_e_end : mode == GW_ENC_FLUSH ? ZSTD_e_flush : ZSTD_e_continue;
  ZSTD_inBuffer ib = {*in, *inlen, 0};
  ZSTD_outBuffer ob = {out, *outlen, 0};
  size_t left = ZSTD_compressStream2(e->u.zstd, &ob, &ib, end);
  *outlen = ob.pos;
  if (ib.pos > 0) { /* *in may be NULL (nothing to add): no arithmetic on it */
    *in += ib.pos;
    *inlen -= ib.pos;
  }
  if (ZSTD_isError(left)) return -1;
  return end == ZSTD_e_continue ? *inlen > 0 : left != 0;
}

int gw_encoder_step(gw_encoder_t *e, const void **in, size_t *inlen, gw_enc_mode_t mode, void *out, size_t *outlen)
{
  const uint8_t **p = (const uint8_t **)in;
  switch (e->coding) {
  case GW_CODING_GZIP: return step_gzip(e, p, inlen, mode, out, outlen);
  case GW_CODING_BR: return step_br(e, p, inlen, mode, out, outlen);
  case GW_CODING_ZSTD: return step_zstd(e, p, inlen, mode, out, outlen);
  default: return -1;
  }
}

int gw_encoder_run(gw_encoder_t *e, const void *in, size_t len, gw_enc_mode_t mode, struct evbuffer *out)
{
  for (;;) {
    struct evbuffer_iovec v;
    if (evbuffer_reserve_space(out, OUT_CHUNK, &v, 1) < 1) return -1;
    size_t n = v.iov_len;
    int rc = gw_encoder_step(e, &in, &len, mode, v.iov_base, &n);
    v.iov_len = n;
    evbuffer_commit_space(out, &v, n ? 1 : 0);
    if (rc <= 0) return rc;
  }
}
