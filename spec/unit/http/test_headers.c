/* test_headers.c - the header-field list (gateway/http/headers.c).
 * unit: headers */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"
#include "unit.h"

static int add(gw_headers_t *h, const char *name, const char *value)
{
  return gw_headers_add(h, name, strlen(name), value, strlen(value));
}

static void test_add_find(void)
{
  gw_headers_t h;
  gw_headers_init(&h);
  CHECK_EQ_UINT(h.count, 0);
  CHECK(gw_headers_find(&h, "Host") == NULL);
  CHECK_EQ_INT(add(&h, "Host", "example.com"), 0);
  CHECK_EQ_INT(add(&h, "Content-Type", "text/plain"), 0);
  CHECK_EQ_INT(add(&h, "X-Empty", ""), 0);
  CHECK_EQ_UINT(h.count, 3);

  gw_header_t *f = gw_headers_find(&h, "host");
  CHECK(f == &h.items[0]);
  CHECK(gw_headers_find(&h, "HOST") == f);
  CHECK(gw_headers_find(&h, "hOsT") == f);
  CHECK_EQ_STR(f->name, "Host"); /* the name as given */
  CHECK_EQ_UINT(f->name_len, 4);
  CHECK_EQ_STR(f->value, "example.com");
  CHECK_EQ_UINT(f->value_len, 11);
  f = gw_headers_find(&h, "content-type");
  CHECK(f != NULL && strcmp(f->value, "text/plain") == 0);
  f = gw_headers_find(&h, "x-empty");
  CHECK(f != NULL && f->value_len == 0 && f->value[0] == '\0');
  /* a prefix or an extension of a name is another name */
  CHECK(gw_headers_find(&h, "Hos") == NULL);
  CHECK(gw_headers_find(&h, "Hosts") == NULL);
  CHECK(gw_headers_find(&h, "Content-Typ") == NULL);
  CHECK(gw_headers_find(&h, "") == NULL);

  /* the first of several fields with one name */
  CHECK_EQ_INT(add(&h, "HOST", "second"), 0);
  CHECK_EQ_STR(gw_headers_find(&h, "host")->value, "example.com");

  /* copies, not the caller's bytes; NUL-terminated even when the input is not */
  char name[] = "X-Abc-extra", value[] = "v1v2v3";
  CHECK_EQ_INT(gw_headers_add(&h, name, 5, value, 2), 0);
  name[0] = 'Y';
  value[0] = 'w';
  f = gw_headers_find(&h, "x-abc");
  CHECK(f != NULL);
  if (f) {
    CHECK_EQ_STR(f->name, "X-Abc");
    CHECK_EQ_STR(f->value, "v1");
  }
  /* bytes that are not text are kept as they are */
  CHECK_EQ_INT(gw_headers_add(&h, "Bin", 3, "a\0b", 3), 0);
  f = gw_headers_find(&h, "bin");
  CHECK(f != NULL && f->value_len == 3 && memcmp(f->value, "a\0b", 4) == 0);
  gw_headers_dispose(&h);
  CHECK_EQ_UINT(h.count, 0);
  CHECK(h.items == NULL && h.blocks == NULL);
}

static void test_remove(void)
{
  gw_headers_t h;
  gw_headers_init(&h);
  add(&h, "A", "1");
  add(&h, "Connection", "close");
  add(&h, "B", "2");
  add(&h, "connection", "x");
  add(&h, "CONNECTION", "y");
  add(&h, "C", "3");
  gw_headers_remove(&h, "Connection");
  CHECK_EQ_UINT(h.count, 3);
  CHECK(gw_headers_find(&h, "connection") == NULL);
  /* the others keep their order (and their bytes) */
  const char *want[] = {"A", "B", "C"}, *want_v[] = {"1", "2", "3"};
  for (size_t i = 0; i < 3 && i < h.count; i++) {
    CHECK_EQ_STR(h.items[i].name, want[i]);
    CHECK_EQ_STR(h.items[i].value, want_v[i]);
  }
  gw_headers_remove(&h, "absent");
  CHECK_EQ_UINT(h.count, 3);
  gw_headers_remove(&h, "a");
  gw_headers_remove(&h, "C");
  CHECK_EQ_UINT(h.count, 1);
  CHECK_EQ_STR(h.items[0].name, "B");
  gw_headers_remove(&h, "b");
  CHECK_EQ_UINT(h.count, 0);
  gw_headers_remove(&h, "b"); /* on an empty list */
  CHECK_EQ_UINT(h.count, 0);
  CHECK_EQ_INT(add(&h, "D", "4"), 0); /* still usable */
  CHECK_EQ_STR(gw_headers_find(&h, "d")->value, "4");
  gw_headers_dispose(&h);
  /* on a list that never had a field */
  gw_headers_init(&h);
  gw_headers_remove(&h, "x");
  gw_headers_clear(&h);
  gw_headers_dispose(&h);
  CHECK(h.items == NULL && h.blocks == NULL && h.count == 0);
}

static void test_clear_keeps_memory(void)
{
  gw_headers_t h;
  gw_headers_init(&h);
  char name[32], value[64];
  for (int i = 0; i < 100; i++) { /* several blocks and array growths */
    snprintf(name, sizeof(name), "X-Field-%d", i);
    snprintf(value, sizeof(value), "value number %d", i);
    CHECK_EQ_INT(add(&h, name, value), 0);
  }
  gw_header_t *items = h.items;
  void *newest = h.blocks;
  size_t cap = h.cap;
  CHECK(cap >= 100);
  gw_headers_clear(&h);
  CHECK_EQ_UINT(h.count, 0);
  CHECK(h.items == items); /* the array is kept */
  CHECK_EQ_UINT(h.cap, cap);
  CHECK(h.blocks == newest); /* and the newest block */
  CHECK(gw_headers_find(&h, "X-Field-0") == NULL);
  /* the next request's fields fit in what was kept: no new block */
  for (int i = 0; i < 10; i++) {
    snprintf(name, sizeof(name), "Y-%d", i);
    CHECK_EQ_INT(add(&h, name, "again"), 0);
  }
  CHECK(h.blocks == newest);
  CHECK(h.items == items);
  CHECK_EQ_UINT(h.count, 10);
  CHECK_EQ_STR(gw_headers_find(&h, "y-9")->value, "again");
  /* clear twice, and dispose after clear */
  gw_headers_clear(&h);
  gw_headers_clear(&h);
  CHECK_EQ_UINT(h.count, 0);
  gw_headers_dispose(&h);
  CHECK(h.items == NULL && h.blocks == NULL && h.cap == 0);
  /* a disposed list is reusable */
  CHECK_EQ_INT(add(&h, "Z", "z"), 0);
  CHECK_EQ_STR(gw_headers_find(&h, "z")->value, "z");
  gw_headers_dispose(&h);
}

static void test_growth(void)
{
  gw_headers_t h;
  gw_headers_init(&h);
  char name[32], value[64];
  enum { N = 1000 };
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof(name), "X-%d", i);
    snprintf(value, sizeof(value), "%d-%d", i, i * 7);
    if (!CHECK_EQ_INT(add(&h, name, value), 0)) break;
  }
  CHECK_EQ_UINT(h.count, N);
  /* every field, including the first ones, survived the array's and the
   * blocks' growth */
  int bad = 0;
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof(name), "x-%d", i);
    snprintf(value, sizeof(value), "%d-%d", i, i * 7);
    gw_header_t *f = gw_headers_find(&h, name);
    if (f == NULL || f != &h.items[i] || strcmp(f->value, value) != 0 || f->value_len != strlen(value)) bad++;
  }
  CHECK_EQ_INT(bad, 0);
  gw_headers_dispose(&h);
}

static void test_long_values(void)
{
  gw_headers_t h;
  gw_headers_init(&h);
  size_t sizes[] = {255, 256, 257, 1000, 4096, 70000, 10, 300000};
  char *big = malloc(300001);
  for (size_t i = 0; i < 300000; i++) big[i] = (char)('a' + i % 26);
  CHECK_EQ_INT(add(&h, "First", "small"), 0);
  const char *first_value = h.items[0].value;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    char name[32];
    snprintf(name, sizeof(name), "Big-%zu", i);
    CHECK_EQ_INT(gw_headers_add(&h, name, strlen(name), big, sizes[i]), 0);
  }
  /* a long name too */
  CHECK_EQ_INT(gw_headers_add(&h, big, 5000, "v", 1), 0);
  CHECK_EQ_STR(h.items[0].value, "small");
  CHECK(h.items[0].value == first_value); /* never moved */
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    gw_header_t *f = &h.items[1 + i];
    CHECK_MEM(f->value, f->value_len, big, sizes[i]);
    CHECK_EQ_INT(f->value[f->value_len], '\0');
  }
  gw_header_t *ln = &h.items[h.count - 1];
  CHECK_MEM(ln->name, ln->name_len, big, 5000);
  CHECK_EQ_STR(ln->value, "v");
  /* clear keeps the newest block, however big; the rest are freed (ASan's
   * leak check sees the dispose) */
  void *newest = h.blocks;
  gw_headers_clear(&h);
  CHECK(h.blocks == newest);
  CHECK_EQ_INT(gw_headers_add(&h, "After", 5, big, 100000), 0);
  CHECK_MEM(h.items[0].value, h.items[0].value_len, big, 100000);
  gw_headers_dispose(&h);
  free(big);
}

static void test_copy(void)
{
  gw_headers_t a, b;
  gw_headers_init(&a);
  gw_headers_init(&b);
  add(&a, "One", "1");
  add(&a, "Two", "2");
  add(&b, "Zero", "0");
  CHECK_EQ_INT(gw_headers_copy(&b, &a), 0);
  CHECK_EQ_UINT(b.count, 3);
  CHECK_EQ_STR(b.items[0].name, "Zero");
  CHECK_EQ_STR(b.items[1].name, "One");
  CHECK_EQ_STR(b.items[2].value, "2");
  /* deep: the copy outlives its source */
  CHECK(b.items[1].name != a.items[0].name);
  gw_headers_dispose(&a);
  CHECK_EQ_STR(gw_headers_find(&b, "one")->value, "1");
  CHECK_EQ_STR(gw_headers_find(&b, "two")->value, "2");
  /* NULL and empty sources add nothing */
  CHECK_EQ_INT(gw_headers_copy(&b, NULL), 0);
  CHECK_EQ_INT(gw_headers_copy(&b, &a), 0);
  CHECK_EQ_UINT(b.count, 3);
  /* many fields */
  gw_headers_t c;
  gw_headers_init(&c);
  for (int i = 0; i < 200; i++) {
    char n[16];
    snprintf(n, sizeof(n), "N%d", i);
    add(&c, n, n);
  }
  CHECK_EQ_INT(gw_headers_copy(&b, &c), 0);
  CHECK_EQ_UINT(b.count, 203);
  CHECK_EQ_STR(b.items[202].value, "N199");
  gw_headers_dispose(&c);
  gw_headers_dispose(&b);
}

static void test_is_token(void)
{
  CHECK(gw_is_token("GET", 3));
  CHECK(gw_is_token("Content-Type", 12));
  CHECK(gw_is_token("x", 1));
  CHECK(gw_is_token("!#$%&'*+-.^_`|~09azAZ", 21));
  CHECK(!gw_is_token("", 0));
  CHECK(!gw_is_token("GET", 0));
  CHECK(gw_is_token("GE T", 2)); /* only len bytes count */
  /* every byte outside tchar is refused, alone and inside a name */
  const char *tchars = "!#$%&'*+-.^_`|~0123456789"
                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  int wrong = 0;
  for (int c = 0; c < 256; c++) {
    char one = (char)c;
    char in[3] = {'a', (char)c, 'b'};
    int want = c != 0 && strchr(tchars, c) != NULL;
    if (gw_is_token(&one, 1) != want || gw_is_token(in, 3) != want) {
      wrong++;
      if (wrong < 5) fprintf(stderr, "    byte 0x%02x\n", c);
    }
  }
  CHECK_EQ_INT(wrong, 0);
}

static void test_have_token(void)
{
  gw_headers_t h;
  gw_headers_init(&h);
  CHECK(!gw_headers_have_token(&h, "connection", "upgrade"));
  gw_headers_add(&h, "Connection", 10, "keep-alive, Upgrade", 19);
  gw_headers_add(&h, "Upgrade", 7, " websocket ,h2c", 15);
  gw_headers_add(&h, "connection", 10, "\tHTTP2-Settings\t", 16);
  CHECK(gw_headers_have_token(&h, "connection", "upgrade"));
  CHECK(gw_headers_have_token(&h, "CONNECTION", "keep-alive"));
  CHECK(gw_headers_have_token(&h, "connection", "http2-settings")); /* a repeated field is the same list */
  CHECK(gw_headers_have_token(&h, "upgrade", "websocket"));
  CHECK(gw_headers_have_token(&h, "upgrade", "H2C"));
  CHECK(!gw_headers_have_token(&h, "upgrade", "h2"));        /* whole tokens only */
  CHECK(!gw_headers_have_token(&h, "upgrade", "websocket ,h2c"));
  CHECK(!gw_headers_have_token(&h, "connection", "keep"));
  CHECK(!gw_headers_have_token(&h, "te", "trailers"));
  gw_headers_dispose(&h);
}

static void test_field_is_safe(void)
{
  CHECK(gw_header_field_is_safe("X-A", 3, "value", 5));
  CHECK(gw_header_field_is_safe("X-A", 3, "", 0));
  static const char odd[] = "tab\there, spaces ok; \x7f \x80\xff";
  CHECK(gw_header_field_is_safe("X-A", 3, odd, sizeof(odd) - 1));
  /* CR, LF or NUL anywhere in the value */
  const char bad[] = {'\r', '\n', '\0'};
  for (size_t i = 0; i < sizeof(bad); i++) {
    char v[5] = {'a', 'b', 'c', 'd', 'e'};
    for (size_t at = 0; at < sizeof(v); at++) {
      char w[5];
      memcpy(w, v, 5);
      w[at] = bad[i];
      if (!CHECK(!gw_header_field_is_safe("X", 1, w, 5))) unit_note("byte 0x%02x at %zu", bad[i], at);
    }
    CHECK(!gw_header_field_is_safe("X", 1, &bad[i], 1));
  }
  CHECK(!gw_header_field_is_safe("X", 1, "a\r\nSet-Cookie: x", 16));
  /* other control bytes up to CR are fine in a value */
  for (int c = 1; c < 0x20; c++) {
    char v[3] = {'a', (char)c, 'b'};
    int want = c != '\r' && c != '\n';
    if (!CHECK_EQ_INT(gw_header_field_is_safe("X", 1, v, 3), want)) unit_note("byte 0x%02x", c);
  }
  /* only value_len bytes are looked at */
  CHECK(gw_header_field_is_safe("X", 1, "ok\r\n", 2));
  /* the name must be a token */
  CHECK(!gw_header_field_is_safe("", 0, "v", 1));
  CHECK(!gw_header_field_is_safe("X A", 3, "v", 1));
  CHECK(!gw_header_field_is_safe("X:", 2, "v", 1));
  CHECK(!gw_header_field_is_safe("X\r\n", 3, "v", 1));
  CHECK(!gw_header_field_is_safe("X\0", 2, "v", 1));
}

/* gw_header_is_hop_by_hop: the RFC 9110 §7.6.1 fields and the older
 * proxy ones, any case; end-to-end fields, prefixes and longer names not. */
static void test_hop_by_hop(void)
{
  static const char *const hop[] = {"Connection", "keep-alive", "Proxy-Connection", "TE", "Trailer",
                                    "Transfer-Encoding", "UPGRADE", "Proxy-Authenticate", "proxy-authorization"};
  for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
    if (!CHECK(gw_header_is_hop_by_hop(hop[i], strlen(hop[i])))) unit_note("%s", hop[i]);
  static const char *const end[] = {"Content-Length", "Host", "Trailers", "Upgrade-Insecure-Requests", "T",
                                    "Connectio",      "Te-x", "Keep-Alive2", "Authorization", ""};
  for (size_t i = 0; i < sizeof(end) / sizeof(end[0]); i++)
    if (!CHECK(!gw_header_is_hop_by_hop(end[i], strlen(end[i])))) unit_note("%s", end[i]);
  CHECK(gw_header_is_hop_by_hop("te: trailers", 2)); /* only len bytes are read */
}

/* Every length from 0 to 40, name and value: short ones are copied without
 * memcpy (two overlapping words), longer ones with it; each byte lands. */
static void test_every_length(void)
{
  gw_headers_t h;
  gw_headers_init(&h);
  char name[41], value[41];
  for (size_t n = 0; n <= 40; n++) {
    for (size_t i = 0; i < n; i++) name[i] = (char)('a' + (i * 7 + n) % 26);
    for (size_t i = 0; i < 40 - n; i++) value[i] = (char)('0' + (i * 3 + n) % 10);
    CHECK_EQ_INT(gw_headers_add(&h, name, n, value, 40 - n), 0);
  }
  CHECK_EQ_UINT(h.count, 41);
  for (size_t n = 0; n <= 40 && n < h.count; n++) {
    const gw_header_t *f = &h.items[n];
    CHECK_EQ_UINT(f->name_len, n);
    CHECK_EQ_UINT(f->value_len, 40 - n);
    int same = f->name[n] == '\0' && f->value[40 - n] == '\0';
    for (size_t i = 0; i < n; i++) same &= f->name[i] == (char)('a' + (i * 7 + n) % 26);
    for (size_t i = 0; i < 40 - n; i++) same &= f->value[i] == (char)('0' + (i * 3 + n) % 10);
    CHECK(same);
  }
  gw_headers_dispose(&h);
}

int main(void)
{
  test_add_find();
  test_remove();
  test_clear_keeps_memory();
  test_growth();
  test_long_values();
  test_copy();
  test_is_token();
  test_have_token();
  test_field_is_safe();
  test_hop_by_hop();
  test_every_length();
  return unit_done();
}
