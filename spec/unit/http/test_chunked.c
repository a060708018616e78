/* test_chunked.c - the chunked transfer coding writer (gateway/http/chunked.c):
 * exact bytes, and round trips through llhttp's decoder in response mode.
 * unit: chunked llhttp */
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>
#include <llhttp.h>

#include "chunked.h"
#include "unit.h"

/* out's content as a string (caller frees), and its length; drains out. */
static char *take(struct evbuffer *out, size_t *len)
{
  *len = evbuffer_get_length(out);
  char *s = malloc(*len + 1);
  evbuffer_remove(out, s, *len);
  s[*len] = '\0';
  return s;
}

static char *pattern(size_t n)
{
  char *p = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) p[i] = (char)(i * 31 + (i >> 8) + 7); /* every byte value, CR and LF too */
  return p;
}

/* One chunk of n bytes: checks the size line, the data and the CRLF. */
static void check_one(size_t n, const char *size_line)
{
  struct evbuffer *out = evbuffer_new();
  char *data = pattern(n);
  size_t ret = gw_chunked_add(out, data, n);
  size_t len;
  char *s = take(out, &len);
  size_t sl = strlen(size_line);
  CHECK_EQ_UINT(ret, len);
  CHECK_EQ_UINT(len, sl + n + 2);
  if (len == sl + n + 2) {
    CHECK_MEM(s, sl, size_line, sl);
    if (!CHECK(memcmp(s + sl, data, n) == 0)) unit_note("size %zu: data differs", n);
    CHECK_MEM(s + sl + n, 2, "\r\n", 2);
  }
  free(s);
  free(data);
  evbuffer_free(out);
}

static void test_exact_bytes(void)
{
  check_one(1, "1\r\n");
  check_one(9, "9\r\n");
  check_one(10, "a\r\n");
  check_one(15, "f\r\n");
  check_one(16, "10\r\n");
  check_one(255, "ff\r\n");
  check_one(256, "100\r\n");
  check_one(4096, "1000\r\n");
  check_one(4095, "fff\r\n");
  check_one(1 << 20, "100000\r\n");
  check_one(0xabcdef, "abcdef\r\n"); /* lowercase, every letter */

  struct evbuffer *out = evbuffer_new();
  size_t len;
  /* nothing for an empty piece, NULL data or not */
  CHECK_EQ_UINT(gw_chunked_add(out, "x", 0), 0);
  CHECK_EQ_UINT(gw_chunked_add(out, NULL, 0), 0);
  CHECK_EQ_UINT(evbuffer_get_length(out), 0);
  CHECK_EQ_UINT(gw_chunked_end(out), 5);
  char *s = take(out, &len);
  CHECK_MEM(s, len, "0\r\n\r\n", 5);
  free(s);
  /* pieces back to back, after what out already held (a response head) */
  evbuffer_add(out, "HEAD\r\n\r\n", 8);
  CHECK_EQ_UINT(gw_chunked_add(out, "hello", 5), 10);
  CHECK_EQ_UINT(gw_chunked_add(out, "", 0), 0);
  CHECK_EQ_UINT(gw_chunked_add(out, "\r\n0\r\n\r\n", 7), 12); /* data that looks like framing */
  CHECK_EQ_UINT(gw_chunked_end(out), 5);
  s = take(out, &len);
  static const char want[] = "HEAD\r\n\r\n5\r\nhello\r\n7\r\n\r\n0\r\n\r\n\r\n0\r\n\r\n";
  CHECK_MEM(s, len, want, sizeof(want) - 1);
  free(s);
  evbuffer_free(out);
}

static void test_add_buffer(void)
{
  struct evbuffer *out = evbuffer_new(), *src = evbuffer_new();
  size_t len;
  /* src in many small chains */
  for (int i = 0; i < 100; i++) evbuffer_add_printf(src, "%03d,", i);
  evbuffer_add_reference(src, "REF", 3, NULL, NULL);
  CHECK_EQ_UINT(evbuffer_get_length(src), 403);
  /* part of it */
  CHECK_EQ_UINT(gw_chunked_add_buffer(out, src, 8), 3 + 8 + 2);
  CHECK_EQ_UINT(evbuffer_get_length(src), 395);
  char *s = take(out, &len);
  CHECK_MEM(s, len, "8\r\n000,001,\r\n", 13);
  free(s);
  /* nothing asked, or nothing there: nothing written */
  CHECK_EQ_UINT(gw_chunked_add_buffer(out, src, 0), 0);
  CHECK_EQ_UINT(evbuffer_get_length(out), 0);
  CHECK_EQ_UINT(evbuffer_get_length(src), 395);
  /* more than src holds: what it holds */
  CHECK_EQ_UINT(gw_chunked_add_buffer(out, src, 100000), 5 + 395 + 2);
  CHECK_EQ_UINT(evbuffer_get_length(src), 0);
  s = take(out, &len);
  CHECK_MEM(s, 5, "18b\r\n", 5);
  CHECK_MEM(s + 5, 4, "002,", 4);
  CHECK_MEM(s + len - 7, 7, "9,REF\r\n", 7);
  free(s);
  CHECK_EQ_UINT(gw_chunked_add_buffer(out, src, 10), 0);
  CHECK_EQ_UINT(evbuffer_get_length(out), 0);
  /* a big src, several chains, moved in odd-sized chunks */
  char *data = pattern(300000);
  for (size_t at = 0; at < 300000; at += 7000) evbuffer_add(src, data + at, at + 7000 <= 300000 ? 7000 : 300000 - at);
  size_t total = 0;
  while (evbuffer_get_length(src) > 0) total += gw_chunked_add_buffer(out, src, 65537);
  CHECK_EQ_UINT(total, evbuffer_get_length(out));
  s = take(out, &len);
  CHECK_MEM(s, 7, "10001\r\n", 7);
  CHECK(memcmp(s + 7, data, 65537) == 0);
  CHECK_MEM(s + 7 + 65537, 2, "\r\n", 2);
  free(s);
  free(data);
  evbuffer_free(src);
  evbuffer_free(out);
}

/* -- round trips: llhttp decodes what we wrote ---------------------------- */

typedef struct {
  char *body;
  size_t body_len, body_cap;
  size_t chunks[64]; /* sizes from the chunk headers, the last chunk's 0 included */
  size_t nchunks;
  int complete;
} decoded_t;

static int on_body(llhttp_t *p, const char *at, size_t len)
{
  decoded_t *d = p->data;
  if (d->body_len + len > d->body_cap) {
    d->body_cap = (d->body_len + len) * 2;
    d->body = realloc(d->body, d->body_cap);
  }
  memcpy(d->body + d->body_len, at, len);
  d->body_len += len;
  return 0;
}

static int on_chunk_header(llhttp_t *p)
{
  decoded_t *d = p->data;
  if (d->nchunks < 64) d->chunks[d->nchunks] = (size_t)p->content_length;
  d->nchunks++;
  return 0;
}

static int on_message_complete(llhttp_t *p)
{
  ((decoded_t *)p->data)->complete = 1;
  return 0;
}

/* Parses "HTTP/1.1 200 OK" + a chunked head + wire, fed in pieces of
 * `piece` bytes. Returns llhttp's result. */
static llhttp_errno_t decode(const char *wire, size_t len, size_t piece, decoded_t *d)
{
  llhttp_settings_t settings;
  llhttp_settings_init(&settings);
  settings.on_body = on_body;
  settings.on_chunk_header = on_chunk_header;
  settings.on_message_complete = on_message_complete;
  llhttp_t parser;
  llhttp_init(&parser, HTTP_RESPONSE, &settings);
  memset(d, 0, sizeof(*d));
  parser.data = d;
  static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  llhttp_errno_t err = llhttp_execute(&parser, head, sizeof(head) - 1);
  for (size_t at = 0; at < len && err == HPE_OK; at += piece)
    err = llhttp_execute(&parser, wire + at, len - at < piece ? len - at : piece);
  return err;
}

static void round_trip(const size_t *sizes, size_t n, size_t piece)
{
  struct evbuffer *out = evbuffer_new(), *src = evbuffer_new();
  size_t total = 0, queued = 0;
  for (size_t i = 0; i < n; i++) total += sizes[i];
  char *data = pattern(total);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) { /* alternate the two writers */
    if (i % 2 == 0) {
      queued += gw_chunked_add(out, data + at, sizes[i]);
    } else {
      evbuffer_add(src, data + at, sizes[i]);
      queued += gw_chunked_add_buffer(out, src, sizes[i]);
    }
    at += sizes[i];
  }
  queued += gw_chunked_end(out);
  size_t len;
  char *wire = take(out, &len);
  CHECK_EQ_UINT(queued, len);
  decoded_t d;
  llhttp_errno_t err = decode(wire, len, piece, &d);
  int ok = CHECK_EQ_INT(err, HPE_OK);
  ok &= CHECK(d.complete);
  ok &= CHECK_MEM(d.body, d.body_len, data, total);
  /* one chunk per non-empty piece, in order, then the last chunk */
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (sizes[i] > 0 && k < 64) {
      if (d.chunks[k] != sizes[i]) ok = CHECK(!"a chunk size differs");
      k++;
    }
  ok &= CHECK_EQ_UINT(d.nchunks, k + 1);
  ok &= CHECK_EQ_UINT(d.chunks[k < 64 ? k : 63], 0);
  if (!ok) unit_note("%zu pieces of %zu bytes in all, decoded in pieces of %zu", n, total, piece);
  free(d.body);
  free(wire);
  free(data);
  evbuffer_free(src);
  evbuffer_free(out);
}

static void test_round_trips(void)
{
  static const size_t one[][1] = {{1}, {15}, {16}, {255}, {4096}, {1 << 20}};
  for (size_t i = 0; i < 6; i++) {
    round_trip(one[i], 1, 1 << 30);
    round_trip(one[i], 1, 1);
    round_trip(one[i], 1, 3);
  }
  static const size_t mixed[] = {1, 0, 15, 16, 0, 255, 4096, 1 << 20, 2, 0, 17, 65535, 65536};
  for (size_t piece = 1; piece < 12; piece++) round_trip(mixed, sizeof(mixed) / sizeof(mixed[0]), piece * 997);
  static const size_t empty[] = {0, 0, 0};
  round_trip(empty, 3, 1); /* only the last chunk */
  round_trip(empty, 0, 1);
  /* every size up to 300, each alone, decoded a byte at a time */
  for (size_t n = 1; n <= 300; n++) round_trip(&n, 1, 1);
}

int main(void)
{
  test_exact_bytes();
  test_add_buffer();
  test_round_trips();
  return unit_done();
}
