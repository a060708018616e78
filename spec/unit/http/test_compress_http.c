/* test_compress_http.c - Accept-Encoding negotiation and media types for
 * compression on the fly (compress_http.c), and the encoders (encoder.c)
 * decoded back with zlib.
 *
 * unit: compress_http encoder -lz -lbrotlienc -lzstd
 */
#include <string.h>

#include <zlib.h>

#include "compress_http.h"
#include "unit.h"

static const gw_coding_t server[] = {GW_CODING_ZSTD, GW_CODING_BR, GW_CODING_GZIP};

static void picks(const char *ae, gw_coding_t want)
{
  gw_coding_t got = gw_compress_negotiate(ae, ae ? strlen(ae) : 0, server, 3);
  if (!CHECK_EQ_INT(got, want)) unit_note("Accept-Encoding: %s", ae ? ae : "(none)");
}

static void test_negotiate(void)
{
  picks(NULL, GW_CODING_NONE);
  picks("", GW_CODING_NONE);
  picks("gzip", GW_CODING_GZIP);
  picks("GZip", GW_CODING_GZIP);
  picks("x-gzip", GW_CODING_GZIP);
  picks("br", GW_CODING_BR);
  picks("zstd", GW_CODING_ZSTD);
  picks("gzip, deflate, br", GW_CODING_BR);          /* the server's order among the accepted */
  picks("gzip, deflate, br, zstd", GW_CODING_ZSTD);
  picks("gzip;q=1.0, br;q=0.1", GW_CODING_BR);        /* q > 0 accepts; the server's order decides */
  picks("br;q=0, gzip", GW_CODING_GZIP);              /* q=0 refuses */
  picks("br; q=0.000, zstd;Q=0 ,gzip", GW_CODING_GZIP);
  picks("gzip;q=0", GW_CODING_NONE);
  picks("deflate, compress", GW_CODING_NONE);
  picks("*", GW_CODING_ZSTD);
  picks("*;q=0", GW_CODING_NONE);
  picks("*;q=0.5, zstd;q=0", GW_CODING_BR);           /* a named coding beats "*" */
  picks("zstd;q=0, *", GW_CODING_BR);
  picks("identity", GW_CODING_NONE);
  picks("gzip;q=0.5, identity", GW_CODING_NONE);      /* identity preferred */
  picks("gzip, identity;q=0.5", GW_CODING_GZIP);
  picks("gzip, identity;q=0", GW_CODING_GZIP);
  picks("gzip;q=0.5, gzip;q=0", GW_CODING_NONE);      /* named twice: the stricter */
  picks("gzip;level=9;q=0.8", GW_CODING_GZIP);
  picks("gzip;q=bogus", GW_CODING_GZIP);              /* a malformed q reads as 1 */
  picks(",,, ,gzip,,", GW_CODING_GZIP);
  picks("gzipx, brr, zstd2", GW_CODING_NONE);
  gw_coding_t only_gzip[] = {GW_CODING_GZIP};
  CHECK_EQ_INT(gw_compress_negotiate("br, zstd", 8, only_gzip, 1), GW_CODING_NONE);
  CHECK_EQ_INT(gw_compress_negotiate("br, zstd, gzip", 14, only_gzip, 1), GW_CODING_GZIP);
}

static void matches(const char *ct, int want)
{
  char *const defaults[] = {"text/*", "application/json", "application/javascript", "image/svg+xml", "*/*+json",
                            "*/*+xml", "application/wasm"};
  if (!CHECK_EQ_INT(gw_compress_type_matches(ct, strlen(ct), defaults, 7), want)) unit_note("Content-Type: %s", ct);
}

static void test_types(void)
{
  matches("text/html", 1);
  matches("text/html; charset=utf-8", 1);
  matches("Text/CSS", 1);
  matches("text/event-stream", 1);
  matches("application/json", 1);
  matches("application/json;charset=utf-8", 1);
  matches("application/problem+json", 1);
  matches("application/atom+xml", 1);
  matches("image/svg+xml", 1);
  matches("application/wasm", 1);
  matches("image/png", 0);
  matches("application/octet-stream", 0);
  matches("application/jsonx", 0);
  matches("", 0);
  matches("; charset=utf-8", 0);
}

/* Inflates all of out (gzip) into back[cap]; returns inflate's code, the
 * bytes made in *made. */
static int inflate_all(struct evbuffer *out, char *back, size_t cap, int flush, size_t *made)
{
  z_stream z;
  memset(&z, 0, sizeof(z));
  inflateInit2(&z, 31);
  z.next_in = evbuffer_pullup(out, -1);
  z.avail_in = (uInt)evbuffer_get_length(out);
  z.next_out = (Bytef *)back;
  z.avail_out = (uInt)cap;
  int rc = inflate(&z, flush);
  *made = z.total_out;
  inflateEnd(&z);
  return rc;
}

/* gzip output decodes to the input, whole and after each flush. */
static void test_gzip_round_trip(void)
{
  char in[20000], back[sizeof(in)];
  for (size_t i = 0; i < sizeof(in); i++) in[i] = "abcabcabd\n"[i % 10] + (char)(i / 5000);
  for (int hint = 0; hint < 2; hint++) {
    for (int round = 0; round < 3; round++) { /* the second and third take a reused context */
      gw_encoder_t *e = gw_encoder_new(GW_CODING_GZIP, 1 + round * 4, hint ? (long long)sizeof(in) : -1);
      struct evbuffer *out = evbuffer_new();
      size_t made = 0;
      CHECK_EQ_INT(gw_encoder_run(e, in, 7000, GW_ENC_CONTINUE, out), 0);
      CHECK_EQ_INT(gw_encoder_run(e, NULL, 0, GW_ENC_FLUSH, out), 0);
      inflate_all(out, back, sizeof(back), Z_SYNC_FLUSH, &made);
      CHECK_EQ_INT(made, 7000); /* a flush makes everything so far decodable */
      CHECK_EQ_INT(gw_encoder_run(e, in + 7000, sizeof(in) - 7000, GW_ENC_FINISH, out), 0);
      gw_encoder_free(e);
      CHECK_EQ_INT(inflate_all(out, back, sizeof(back), Z_FINISH, &made), Z_STREAM_END);
      CHECK_EQ_INT(made, sizeof(in));
      CHECK(memcmp(back, in, sizeof(in)) == 0);
      CHECK(evbuffer_get_length(out) < sizeof(in) / 4);
      evbuffer_free(out);
    }
  }
  CHECK_STR(gw_coding_name(GW_CODING_BR), "br");
  CHECK(gw_coding_name(GW_CODING_NONE) == NULL);
}

int main(void)
{
  test_negotiate();
  test_types();
  test_gzip_round_trip();
  return unit_done();
}
