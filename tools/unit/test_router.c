/* test_router.c - gw_router_sort and gw_router_match (gateway/router.c).
 * unit: router */
#include <stdlib.h>
#include <string.h>

#include "router.h"
#include "unit.h"

/* A server with locations from specs like "= /x" (exact) or "/x" (prefix),
 * sorted as at config time. */
typedef struct {
  gw_server_t server;
  gw_location_t locs[16];
  char paths[16][64];
} fixture_t;

static void setup(fixture_t *f, const char *const *specs, size_t n)
{
  memset(f, 0, sizeof(*f));
  for (size_t i = 0; i < n; i++) {
    const char *s = specs[i];
    int exact = strncmp(s, "= ", 2) == 0;
    if (exact) s += 2;
    strcpy(f->paths[i], s);
    f->locs[i].path = f->paths[i];
    f->locs[i].path_len = strlen(s);
    f->locs[i].exact = exact;
  }
  f->server.locations = f->locs;
  f->server.nlocations = n;
  gw_router_sort(f->locs, n);
}

/* The matched location as its spec ("= /x" or "/x"), or "(none)". */
static const char *match(fixture_t *f, const char *path)
{
  static char buf[80];
  const gw_location_t *l = gw_router_match(&f->server, path, strlen(path));
  if (l == NULL) return "(none)";
  snprintf(buf, sizeof(buf), "%s%s", l->exact ? "= " : "", l->path);
  return buf;
}

static void test_sort_order(void)
{
  static const char *const specs[] = {"/", "/a", "= /a", "/api/v1", "/api", "= /", "/b", "/ab"};
  fixture_t f;
  setup(&f, specs, sizeof(specs) / sizeof(specs[0]));
  /* exact first (then by length, longest first), then prefixes longest first;
   * equal lengths by strcmp */
  static const char *const want[] = {"= /a", "= /", "/api/v1", "/api", "/ab", "/a", "/b", "/"};
  for (size_t i = 0; i < 8; i++) {
    char got[80];
    snprintf(got, sizeof(got), "%s%s", f.locs[i].exact ? "= " : "", f.locs[i].path);
    if (!CHECK_EQ_STR(got, want[i])) unit_note("position %zu", i);
  }
}

static void test_exact_before_prefix(void)
{
  static const char *const specs[] = {"/", "/a", "= /a"};
  fixture_t f;
  setup(&f, specs, 3);
  CHECK_EQ_STR(match(&f, "/a"), "= /a");
  CHECK_EQ_STR(match(&f, "/a/"), "/a");
  CHECK_EQ_STR(match(&f, "/ab"), "/a");
  CHECK_EQ_STR(match(&f, "/"), "/");
  CHECK_EQ_STR(match(&f, "/b"), "/");
  /* an exact location is exact: neither a prefix nor a longer path */
  static const char *const only_exact[] = {"= /x"};
  setup(&f, only_exact, 1);
  CHECK_EQ_STR(match(&f, "/x"), "= /x");
  CHECK_EQ_STR(match(&f, "/x/"), "(none)");
  CHECK_EQ_STR(match(&f, "/"), "(none)");
  CHECK_EQ_STR(match(&f, ""), "(none)");
}

static void test_longest_prefix(void)
{
  static const char *const specs[] = {"/api", "/", "/api/v1", "/api/v1/users"};
  fixture_t f;
  setup(&f, specs, 4);
  CHECK_EQ_STR(match(&f, "/api/v1/users/7"), "/api/v1/users");
  CHECK_EQ_STR(match(&f, "/api/v1/user"), "/api/v1");
  CHECK_EQ_STR(match(&f, "/api/v2"), "/api");
  CHECK_EQ_STR(match(&f, "/api"), "/api");
  CHECK_EQ_STR(match(&f, "/ap"), "/");
  CHECK_EQ_STR(match(&f, "/other"), "/");
}

static void test_byte_prefixes(void)
{
  static const char *const specs[] = {"/api"};
  fixture_t f;
  setup(&f, specs, 1);
  /* like nginx: a plain byte prefix, not a path segment */
  CHECK_EQ_STR(match(&f, "/apix"), "/api");
  CHECK_EQ_STR(match(&f, "/api/x"), "/api");
  CHECK_EQ_STR(match(&f, "/api?q=1"), "/api");
  CHECK_EQ_STR(match(&f, "/ap"), "(none)");
  CHECK_EQ_STR(match(&f, "/API"), "(none)"); /* case-sensitive */
  CHECK_EQ_STR(match(&f, "api"), "(none)");
  /* the length given counts, not a NUL */
  const gw_location_t *l = gw_router_match(&f.server, "/apixyz", 3);
  CHECK(l == NULL);
  l = gw_router_match(&f.server, "/apixyz", 4);
  CHECK(l != NULL && strcmp(l->path, "/api") == 0);
  /* a path with a NUL byte inside still compares bytes */
  l = gw_router_match(&f.server, "/api\0zz", 7);
  CHECK(l != NULL);
}

static void test_empty_path(void)
{
  fixture_t f;
  static const char *const none[] = {"/"};
  setup(&f, none, 1);
  CHECK_EQ_STR(match(&f, ""), "(none)");
  static const char *const empty_prefix[] = {"/", ""};
  setup(&f, empty_prefix, 2);
  CHECK_EQ_STR(match(&f, ""), "");
  CHECK_EQ_STR(match(&f, "/"), "/");
  CHECK_EQ_STR(match(&f, "x"), "");
  static const char *const empty_exact[] = {"= ", "/"};
  setup(&f, empty_exact, 2);
  CHECK_EQ_STR(match(&f, ""), "= ");
  CHECK_EQ_STR(match(&f, "/"), "/");
  /* no locations at all */
  setup(&f, NULL, 0);
  CHECK_EQ_STR(match(&f, "/"), "(none)");
  CHECK_EQ_STR(match(&f, ""), "(none)");
}

static void test_ties(void)
{
  /* same length, different bytes: each matches its own paths */
  static const char *const specs[] = {"/b", "/a", "/c"};
  fixture_t f;
  setup(&f, specs, 3);
  CHECK_EQ_STR(f.locs[0].path, "/a");
  CHECK_EQ_STR(f.locs[1].path, "/b");
  CHECK_EQ_STR(f.locs[2].path, "/c");
  CHECK_EQ_STR(match(&f, "/a1"), "/a");
  CHECK_EQ_STR(match(&f, "/b1"), "/b");
  CHECK_EQ_STR(match(&f, "/c1"), "/c");
  /* the same path twice: the first after sorting wins, every time */
  static const char *const twice[] = {"/x", "/x", "= /x", "= /x"};
  setup(&f, twice, 4);
  const gw_location_t *l = gw_router_match(&f.server, "/x", 2);
  CHECK(l == &f.locs[0]);
  CHECK(l != NULL && l->exact);
  l = gw_router_match(&f.server, "/xy", 3);
  CHECK(l == &f.locs[2]);
  /* sorting is independent of the order given */
  static const char *const a[] = {"/", "= /z", "/zz", "/z"};
  static const char *const b[] = {"/z", "/zz", "= /z", "/"};
  fixture_t g;
  setup(&f, a, 4);
  setup(&g, b, 4);
  for (size_t i = 0; i < 4; i++) {
    CHECK_EQ_STR(f.locs[i].path, g.locs[i].path);
    CHECK_EQ_INT(f.locs[i].exact, g.locs[i].exact);
  }
}

int main(void)
{
  test_sort_order();
  test_exact_before_prefix();
  test_longest_prefix();
  test_byte_prefixes();
  test_empty_path();
  test_ties();
  return unit_done();
}
