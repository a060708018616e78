/* encoder.h - streaming compressors for HTTP content codings: gzip (zlib),
 * br (brotli) and zstd, behind one interface. Knows nothing of requests: it
 * turns input bytes into compressed bytes appended to an evbuffer.
 *
 * Contexts are reused: a freed encoder goes to a small per-process free list
 * (each worker is a process) and the next one of the same coding is reset
 * instead of allocated (zlib's deflateReset, ZSTD_CCtx_reset). Brotli has no
 * reset, so its encoders are made and destroyed each time. Memory per
 * encoder is bounded by the window the coding uses (capped below). */
#ifndef GW_ENCODER_H
#define GW_ENCODER_H

#include <stddef.h>

#include <event2/buffer.h>

typedef enum { GW_CODING_NONE = 0, GW_CODING_GZIP, GW_CODING_BR, GW_CODING_ZSTD, GW_CODING_COUNT } gw_coding_t;

/* How run() ends: go on (keep what is buffered), flush (everything so far
 * decodable by the client: Z_SYNC_FLUSH, BROTLI_OPERATION_FLUSH,
 * ZSTD_e_flush), or finish the stream. */
typedef enum { GW_ENC_CONTINUE, GW_ENC_FLUSH, GW_ENC_FINISH } gw_enc_mode_t;

typedef struct gw_encoder_s gw_encoder_t;

/* "gzip", "br", "zstd" (NULL for NONE). */
const char *gw_coding_name(gw_coding_t c);

/* An encoder for coding at level (the coding's own scale: gzip 1-9, br 0-11,
 * zstd 1-19); size_hint: the input's length when known, else -1 (smaller
 * inputs get smaller windows). NULL when out of memory. */
gw_encoder_t *gw_encoder_new(gw_coding_t coding, int level, long long size_hint);

/* Compresses in[0, len) and appends what the coding emits to out, ending as
 * mode says. Returns 0, or -1 (out of memory, a library error: the stream
 * is broken and must be dropped). */
int gw_encoder_run(gw_encoder_t *e, const void *in, size_t len, gw_enc_mode_t mode, struct evbuffer *out);

/* One step of the same into a caller's buffer: takes what it can from *in
 * (advanced, *inlen lowered) and writes out[0, *outlen) (set to the bytes
 * written). Returns 1 when it must be called again (out was full, or input
 * is left), 0 when mode's work is done, -1 on an error. */
int gw_encoder_step(gw_encoder_t *e, const void **in, size_t *inlen, gw_enc_mode_t mode, void *out, size_t *outlen);

/* Back to the free list (or freed). NULL is fine. */
void gw_encoder_free(gw_encoder_t *e);

#endif
