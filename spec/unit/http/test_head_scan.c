/* test_head_scan.c - the CRLF-only head scanner (gateway/http/head_scan.c): every
 * head, valid or not, gives the same verdict however it is split into pieces.
 * unit: head_scan */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "head_scan.h"
#include "unit.h"

enum { MORE, DONE, REJECT };
static const char *const kind_name[] = {"more", "done", "reject"};

typedef struct {
  int kind;
  size_t at; /* DONE: bytes of the head; REJECT: index of the byte that proves it */
} verdict_t;

/* The rules, one byte at a time and written independently of the scanner:
 * an LF not preceded by CR, or a CR followed by anything but LF, rejects;
 * CRLF CRLF ends the head (the first CRLF may be an empty first line). */
static verdict_t oracle(const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\n' && (i == 0 || s[i - 1] != '\r')) return (verdict_t){REJECT, i};
    if (i > 0 && s[i - 1] == '\r' && s[i] != '\n') return (verdict_t){REJECT, i};
    if (i >= 3 && memcmp(s + i - 3, "\r\n\r\n", 4) == 0) return (verdict_t){DONE, i + 1};
  }
  return (verdict_t){MORE, 0};
}

/* Feeds s[0, n) to a fresh scanner in pieces ending at cuts[0..ncuts) (sorted,
 * each in 1..n-1), each piece in a buffer of its own exact size so that a read
 * past it is an ASan error. Checks the calls against `want`: 0 before the
 * piece holding the deciding byte, then -1 or the head's remaining bytes,
 * then 0 (after DONE) or -1 (after a reject) for the pieces after it, and an
 * empty call between pieces changes nothing. Returns 1 if all agree. */
static int feed(const char *s, size_t n, const size_t *cuts, size_t ncuts, verdict_t want)
{
  gw_head_scan_t sc;
  gw_head_scan_init(&sc);
  int ok = 1;
  size_t start = 0;
  int decided = 0;
  for (size_t k = 0; k <= ncuts && ok; k++) {
    size_t end = k < ncuts ? cuts[k] : n;
    size_t len = end - start;
    char *piece = malloc(len ? len : 1);
    memcpy(piece, s + start, len);
    ssize_t got = gw_head_scan(&sc, piece, len);
    free(piece);
    ssize_t expect;
    size_t decider = want.kind == DONE ? want.at - 1 : want.at; /* the byte that decides */
    int holds = want.kind != MORE && decider >= start && decider < end;
    if (decided || holds) {
      expect = want.kind == REJECT ? -1 : decided ? 0 : (ssize_t)(want.at - start);
      decided = 1;
    } else {
      expect = 0;
    }
    if (got != expect) {
      ok = 0;
      unit_note("piece %zu [%zu, %zu): got %zd, want %zd", k, start, end, got, expect);
    }
    /* an empty call changes nothing */
    ssize_t empty = gw_head_scan(&sc, NULL, 0);
    if (empty != (want.kind == REJECT && decided ? -1 : 0)) {
      ok = 0;
      unit_note("empty call after piece %zu: got %zd", k, empty);
    }
    if (gw_head_scan_done(&sc) != (want.kind == DONE && decided)) {
      ok = 0;
      unit_note("gw_head_scan_done after piece %zu: %d", k, gw_head_scan_done(&sc));
    }
    start = end;
  }
  return ok;
}

static char escaped[4096];

static const char *esc(const char *s, size_t n)
{
  size_t o = 0;
  for (size_t i = 0; i < n && o < sizeof(escaped) - 8; i++) {
    if (s[i] == '\r') o += (size_t)snprintf(escaped + o, 8, "\\r");
    else if (s[i] == '\n') o += (size_t)snprintf(escaped + o, 8, "\\n");
    else escaped[o++] = s[i];
  }
  escaped[o] = '\0';
  return escaped;
}

static void report(const char *s, size_t n, const size_t *cuts, size_t ncuts, verdict_t want)
{
  unit_note("input \"%s\" (%zu bytes), want %s at %zu", esc(s, n), n, kind_name[want.kind], want.at);
  char buf[512];
  size_t o = 0;
  for (size_t i = 0; i < ncuts && o < sizeof(buf) - 24; i++) o += (size_t)snprintf(buf + o, 24, " %zu", cuts[i]);
  buf[o] = '\0';
  unit_note("cuts:%s", ncuts ? buf : " (none)");
}

static unsigned long splits_tried;

/* Every way to split s into pieces (2^(n-1)) when n <= 14; otherwise every
 * single cut, every pair of cuts (for long inputs: pairs on a stride, and
 * every pair around each CR and LF), every even piece size, and 200 random
 * splits. One CHECK per input (a failure reports the first split that
 * disagrees). */
#define MAX_CUTS 4096
static int check_all_splits(const char *s, size_t n, verdict_t want)
{
  static size_t cuts[MAX_CUTS];
  int ok = 1;
#define TRY(nc)                                          \
  do {                                                   \
    splits_tried++;                                      \
    if (ok && !feed(s, n, cuts, (nc), want)) {           \
      report(s, n, cuts, (nc), want);                    \
      ok = 0;                                            \
    }                                                    \
  } while (0)
  if (n <= 14) {
    size_t nmasks = n ? (size_t)1 << (n - 1) : 1;
    for (size_t mask = 0; mask < nmasks && ok; mask++) {
      size_t nc = 0;
      for (size_t i = 1; i < n; i++)
        if (mask & ((size_t)1 << (i - 1))) cuts[nc++] = i;
      TRY(nc);
    }
    return ok;
  }
  TRY(0);
  size_t stride = n <= 200 ? 1 : n / 100;
  for (size_t i = 1; i < n && ok; i++) {
    cuts[0] = i;
    TRY(1);
    int near_eol = s[i] == '\r' || s[i] == '\n' || s[i - 1] == '\r' || s[i - 1] == '\n';
    if (i % stride != 0 && !near_eol) continue;
    for (size_t j = i + 1; j < n && ok; j++) {
      int j_near = s[j] == '\r' || s[j] == '\n' || s[j - 1] == '\r' || s[j - 1] == '\n';
      if (stride > 1 && (j - i) % stride != 0 && !(near_eol && j_near)) continue;
      cuts[1] = j;
      TRY(2);
    }
  }
  for (size_t size = 1; size < n && ok; size++) {
    size_t nc = 0;
    for (size_t at = size; at < n && nc < MAX_CUTS; at += size) cuts[nc++] = at;
    TRY(nc);
  }
  uint32_t x = 2463534242u ^ (uint32_t)n;
  for (int r = 0; r < 200 && ok; r++) {
    size_t nc = 0;
    for (size_t i = 1; i < n && nc < MAX_CUTS; i++) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      if (x % 5 == 0) cuts[nc++] = i;
    }
    TRY(nc);
  }
#undef TRY
  return ok;
}

/* A literal with its verdict given by hand (and checked against the oracle). */
static void check_case(const char *s, int kind, size_t at)
{
  size_t n = strlen(s);
  verdict_t want = {kind, at}, rule = oracle(s, n);
  if (!CHECK(rule.kind == kind && rule.at == at))
    unit_note("oracle disagrees on \"%s\": %s at %zu", esc(s, n), kind_name[rule.kind], rule.at);
  CHECK(check_all_splits(s, n, want));
}

#define VALID(s, body) check_case(s body, DONE, sizeof(s) - 1)

static void test_valid_heads(void)
{
  VALID("GET / HTTP/1.1\r\nHost: a\r\n\r\n", "");
  VALID("GET / HTTP/1.1\r\n\r\n", "");
  VALID("GET / HTTP/1.1\r\nHost: a\r\n\r\n", "body with a bare \n LF and a \r lone CR");
  VALID("GET / HTTP/1.1\r\nHost: a\r\n\r\n", "\r\n\r\n");
  VALID("GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET /next HTTP/1.1\n\n"); /* pipelined: not ours */
  VALID("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX-Tab:\ta\tb\r\n\r\n", "abc");
  VALID("HTTP/1.1 200 OK\r\nServer: x\r\n\r\n", "");
  VALID("\r\n\r\n", "");                     /* an empty line, then the blank line */
  VALID("\r\nGET / HTTP/1.1\r\n\r\n", "");   /* a leading empty line */
  VALID("a\r\n\r\n", "\n");
  VALID("GET / HTTP/1.1\r\nX: \x01\x7f\xff z\r\n\r\n", ""); /* other bytes are not ours to judge */
  /* a long head: the memchr paths over long lines */
  char big[3000];
  size_t o = (size_t)snprintf(big, sizeof(big), "GET /%0500d HTTP/1.1\r\n", 0);
  for (int i = 0; i < 20; i++) o += (size_t)snprintf(big + o, sizeof(big) - o, "X-Field-%02d: %0100d\r\n", i, i);
  o += (size_t)snprintf(big + o, sizeof(big) - o, "\r\n");
  size_t head_len = o;
  o += (size_t)snprintf(big + o, sizeof(big) - o, "tail\n");
  CHECK(check_all_splits(big, o, (verdict_t){DONE, head_len}));
}

#define INVALID(s, at) check_case(s, REJECT, at)
#define PARTIAL(s) check_case(s, MORE, 0)

static void test_invalid_heads(void)
{
  INVALID("GET / HTTP/1.1\nHost: a\r\n\r\n", 14);     /* bare LF ending the request line */
  INVALID("GET / HTTP/1.1\r\nHost: a\n\r\n", 23);     /* ... a field line */
  INVALID("GET / HTTP/1.1\r\nHost: a\r\n\n", 25);     /* "\r\n\n": a bare LF as the blank line */
  INVALID("GET / HTTP/1.1\r\nHost: a\r\n\r\r\n", 26); /* CR CR LF */
  INVALID("GET / HTTP/1.1\r\nHost: a\r\n\rX", 26);    /* a CR in the blank line, then a byte */
  INVALID("GET / HTTP/1.1\r\nHo\rst: a\r\n\r\n", 19); /* a CR inside a line */
  INVALID("GET / HTTP/1.1\r\nHost: a\r\r\n\r\n", 24); /* CR CR LF ending a line */
  INVALID("GET / HTTP/1.1\n\n", 14);
  INVALID("\n", 0);
  INVALID("\nGET / HTTP/1.1\r\n\r\n", 0);
  INVALID("\r\r", 1);
  INVALID("\rx", 1);
  INVALID("a\r\n\n", 3);
  INVALID("a\r\n\r\r", 4);
  INVALID("a\r\nb\nc\r\n\r\n", 4);
  INVALID("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 21);
  /* a bare LF right after a line's CRLF */
  INVALID("GET / HTTP/1.1\r\n\nHost: a\r\n\r\n", 16);
}

static void test_partial_heads(void)
{
  PARTIAL("");
  PARTIAL("G");
  PARTIAL("GET / HTTP/1.1");
  PARTIAL("GET / HTTP/1.1\r");
  PARTIAL("GET / HTTP/1.1\r\n");
  PARTIAL("GET / HTTP/1.1\r\nHost: a\r\n");
  PARTIAL("GET / HTTP/1.1\r\nHost: a\r\n\r");
  PARTIAL("\r\n");
  PARTIAL("\r\n\r");
}

/* Every string of up to 8 bytes over {a, CR, LF}, split every way; longer
 * ones (9 and 10 bytes) with at most two cuts. */
static void test_exhaustive(void)
{
  static const char alphabet[] = {'a', '\r', '\n'};
  char s[16];
  unsigned long inputs = 0, bad = 0;
  for (size_t n = 0; n <= 10; n++) {
    size_t total = 1;
    for (size_t i = 0; i < n; i++) total *= 3;
    for (size_t code = 0; code < total; code++) {
      size_t c = code;
      for (size_t i = 0; i < n; i++, c /= 3) s[i] = alphabet[c % 3];
      verdict_t want = oracle(s, n);
      int ok;
      if (n <= 8) {
        ok = check_all_splits(s, n, want);
      } else {
        size_t cuts[2];
        ok = feed(s, n, cuts, 0, want);
        for (size_t i = 1; i < n && ok; i++) {
          cuts[0] = i;
          ok = feed(s, n, cuts, 1, want);
          for (size_t j = i + 1; j < n && ok; j++) {
            cuts[1] = j;
            ok = feed(s, n, cuts, 2, want);
          }
        }
        if (!ok) report(s, n, cuts, 0, want);
      }
      inputs++;
      if (!ok) bad++;
      if (bad > 5) break;
    }
  }
  CHECK_EQ_UINT(bad, 0);
  CHECK(inputs > 88000);
}

/* Long random heads: valid ones with one byte changed to CR or LF somewhere. */
static void test_random_mutations(void)
{
  uint32_t x = 12345;
#define RND() (x ^= x << 13, x ^= x >> 17, x ^= x << 5, x)
  unsigned long bad = 0;
  for (int round = 0; round < 300 && bad < 5; round++) {
    char s[400];
    size_t o = (size_t)snprintf(s, sizeof(s), "GET /r%d HTTP/1.1\r\n", round);
    int fields = (int)(RND() % 8);
    for (int i = 0; i < fields; i++) o += (size_t)snprintf(s + o, sizeof(s) - o, "F%d: v%u\r\n", i, RND() % 100000);
    o += (size_t)snprintf(s + o, sizeof(s) - o, "\r\nbody\n");
    if (round % 3) {
      size_t at = RND() % o;
      s[at] = RND() % 2 ? '\r' : '\n';
    }
    verdict_t want = oracle(s, o);
    if (!check_all_splits(s, o, want)) bad++;
  }
#undef RND
  CHECK_EQ_UINT(bad, 0);
}

static void test_reuse(void)
{
  /* init starts over: a keep-alive connection's next head, or after a reject */
  gw_head_scan_t s;
  gw_head_scan_init(&s);
  CHECK_EQ_INT(gw_head_scan(&s, "A\r\n\r\nB", 6), 5);
  CHECK(gw_head_scan_done(&s));
  CHECK_EQ_INT(gw_head_scan(&s, "\n\n\n", 3), 0); /* body: not looked at */
  gw_head_scan_init(&s);
  CHECK(!gw_head_scan_done(&s));
  CHECK_EQ_INT(gw_head_scan(&s, "B\n", 2), -1);
  CHECK_EQ_INT(gw_head_scan(&s, "\r\n\r\n", 4), -1); /* stays rejected */
  CHECK(!gw_head_scan_done(&s));
  gw_head_scan_init(&s);
  CHECK_EQ_INT(gw_head_scan(&s, "C\r", 2), 0);
  CHECK_EQ_INT(gw_head_scan(&s, "\n", 1), 0);
  CHECK_EQ_INT(gw_head_scan(&s, "\r", 1), 0);
  CHECK_EQ_INT(gw_head_scan(&s, "\nD", 2), 1);
  CHECK(gw_head_scan_done(&s));
}

int main(void)
{
  test_valid_heads();
  test_invalid_heads();
  test_partial_heads();
  test_exhaustive();
  test_random_mutations();
  test_reuse();
  fprintf(stderr, "head_scan: %lu splits fed\n", splits_tried);
  return unit_done();
}
