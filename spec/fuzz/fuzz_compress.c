/* fuzz_compress.c - libFuzzer target for compression on the fly's pure
 * parts (compress_http.c) and its encoders (encoder.c).
 *
 * Input: byte 0 picks a server preference order and flush pattern, byte 1
 * a coding and level; the rest is both an Accept-Encoding / Content-Type
 * value and the data compressed. Checked:
 *   - gw_compress_negotiate() answers a coding of the preference list (or
 *     none), and one the text names (or "*" covers), never one with q=0 when
 *     named alone ("gzip;q=0" exactly refuses gzip);
 *   - gw_compress_type_matches() never reads past the value (ASan);
 *   - each encoder's output, fed the data in slices with CONTINUE/FLUSH
 *     steps, decodes (zlib, brotli's decoder, zstd) to the data exactly;
 *     after a FLUSH everything so far decodes already;
 *   - encoders freed and taken again (the free list) behave the same; no
 *     leak (LSan), no undefined behaviour (UBSan). */
#define FUZZ_NAME "fuzz_compress"
#include <stdint.h>
#include <string.h>

#include <brotli/decode.h>
#include <zlib.h>
#include <zstd.h>

#include "compress_http.h"
#include "fuzz_common.h"

/* Decodes in[0, n) of coding c into out (cap); returns the length, or -1. */
static long decode(gw_coding_t c, const unsigned char *in, size_t n, unsigned char *out, size_t cap, int partial)
{
  if (c == GW_CODING_GZIP) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 31) != Z_OK) return -1;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int rc = inflate(&z, Z_SYNC_FLUSH);
    long got = (long)(cap - z.avail_out);
    inflateEnd(&z);
    if (rc == Z_STREAM_END || (partial && (rc == Z_OK || rc == Z_BUF_ERROR))) return got;
    return -1;
  }
  if (c == GW_CODING_BR) {
    BrotliDecoderState *s = BrotliDecoderCreateInstance(NULL, NULL, NULL);
    size_t ai = n, ao = cap;
    const uint8_t *ni = in;
    uint8_t *no = out;
    BrotliDecoderResult r = BrotliDecoderDecompressStream(s, &ai, &ni, &ao, &no, NULL);
    BrotliDecoderDestroyInstance(s);
    if (r == BROTLI_DECODER_RESULT_SUCCESS || (partial && r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT))
      return (long)(cap - ao);
    return -1;
  }
  ZSTD_DCtx *d = ZSTD_createDCtx();
  ZSTD_inBuffer ib = {in, n, 0};
  ZSTD_outBuffer ob = {out, cap, 0};
  size_t r = 0;
  while (ib.pos < ib.size && !ZSTD_isError(r) && ob.pos < ob.size) r = ZSTD_decompressStream(d, &ob, &ib);
  ZSTD_freeDCtx(d);
  if (ZSTD_isError(r) || (!partial && r != 0)) return -1;
  return (long)ob.pos;
}

static void round_trip(gw_coding_t c, int level, const unsigned char *data, size_t len, unsigned flushes)
{
  gw_encoder_t *e = gw_encoder_new(c, level, (flushes & 1) ? (long long)len : -1);
  if (e == NULL) FAIL("no encoder");
  struct evbuffer *out = evbuffer_new();
  unsigned char *plain = malloc(len + 1);
  size_t off = 0, step = len / 4 + 1;
  for (int i = 0; off < len; i++) {
    size_t n = len - off < step ? len - off : step;
    int flush = (flushes >> (i % 7 + 1)) & 1;
    if (gw_encoder_run(e, data + off, n, flush ? GW_ENC_FLUSH : GW_ENC_CONTINUE, out) < 0) FAIL("run failed");
    off += n;
    if (flush) { /* everything so far decodes now */
      size_t have = evbuffer_get_length(out);
      long got = decode(c, evbuffer_pullup(out, -1), have, plain, len + 1, 1);
      if (got != (long)off || memcmp(plain, data, off) != 0)
        FAIL("%s: after a flush at %zu, %ld bytes decode", gw_coding_name(c), off, got);
    }
  }
  if (gw_encoder_run(e, NULL, 0, GW_ENC_FINISH, out) < 0) FAIL("finish failed");
  gw_encoder_free(e);
  size_t have = evbuffer_get_length(out);
  long got = decode(c, evbuffer_pullup(out, -1), have, plain, len + 1, 0);
  if (got != (long)len || memcmp(plain, data, len) != 0)
    FAIL("%s level %d: %zu bytes came back as %ld", gw_coding_name(c), level, len, got);
  free(plain);
  evbuffer_free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 2) return 0;
  static const gw_coding_t orders[4][3] = {{GW_CODING_ZSTD, GW_CODING_BR, GW_CODING_GZIP},
                                           {GW_CODING_GZIP, GW_CODING_BR, GW_CODING_ZSTD},
                                           {GW_CODING_BR, GW_CODING_NONE, GW_CODING_GZIP},
                                           {GW_CODING_GZIP, GW_CODING_GZIP, GW_CODING_GZIP}};
  const gw_coding_t *prefs = orders[data[0] & 3];
  const char *text = (const char *)data + 2;
  size_t len = size - 2;
  gw_coding_t c = gw_compress_negotiate(text, len, prefs, 3);
  if (c != GW_CODING_NONE) {
    if (c != prefs[0] && c != prefs[1] && c != prefs[2]) FAIL("answered %d, not in the list", c);
    char *z = strndup(text, len);
    if (strlen(z) == len && strcasestr(z, gw_coding_name(c)) == NULL && strchr(z, '*') == NULL &&
        !(c == GW_CODING_GZIP && strcasestr(z, "x-gzip")))
      FAIL("answered %s, which the text does not name", gw_coding_name(c));
    free(z);
  }
  char *const types[] = {"text/*", "application/json", "*/*+xml"};
  gw_compress_type_matches(text, len, types, 3);

  static const int max_level[GW_CODING_COUNT] = {0, 9, 11, 19};
  gw_coding_t ec = (gw_coding_t)(data[1] % 3 + 1);
  int level = (data[1] >> 2) % max_level[ec] + 1;
  if (level > 6 && len > 2048) level = 6; /* slow levels on small inputs only */
  round_trip(ec, level, (const unsigned char *)text, len, data[0] >> 2);
  return 0;
}
