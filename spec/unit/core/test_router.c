/* test_router.c - gw_router_sort and gw_router_match (gateway/core/router.c).
 * unit: router regex uri_path -lpcre2-8 */
#include <stdlib.h>
#include <string.h>

#include "regex.h"
#include "router.h"
#include "unit.h"

/* A server with locations from specs like "= /x" (exact) or "/x" (prefix),
 * sorted as at config time. */
typedef struct {
  gw_server_t server;
  gw_location_t locs[16];
  char paths[16][64];
} fixture_t;

static void free_regexes(fixture_t *f)
{
  for (size_t i = 0; i < f->server.nlocations; i++) gw_regex_unref(f->locs[i].regex);
}

/* Specs may also be "~ re", "~* re" (regex locations; path is the spec) and
 * "^~ /x" (a prefix that skips regexes). */
static void setup(fixture_t *f, const char *const *specs, size_t n)
{
  free_regexes(f);
  memset(f, 0, sizeof(*f));
  for (size_t i = 0; i < n; i++) {
    const char *s = specs[i];
    f->locs[i].seq = i;
    if (s[0] == '~') {
      int ci = s[1] == '*';
      const char *re = s + (ci ? 3 : 2);
      char err[200];
      f->locs[i].regex = gw_regex_new(re, strlen(re), ci ? GW_RE_IGNORECASE : 0, err, sizeof(err));
      if (!CHECK(f->locs[i].regex != NULL)) unit_note("%s: %s", s, err);
      strcpy(f->paths[i], s);
      f->locs[i].path = f->paths[i];
      f->locs[i].path_len = strlen(s);
      continue;
    }
    if (strncmp(s, "^~ ", 3) == 0) {
      f->locs[i].no_regex = 1;
      s += 3;
    }
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
  if (l == &gw_router_refused) return "(refused)";
  snprintf(buf, sizeof(buf), "%s%s%s", l->exact ? "= " : "", l->no_regex ? "^~ " : "", l->path);
  return buf;
}

static void test_sort_order(void)
{
  static const char *const specs[] = {"/", "/a", "= /a", "/api/v1", "/api", "= /", "/b", "/ab"};
  fixture_t f = {0};
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
  fixture_t f = {0};
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
  fixture_t f = {0};
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
  fixture_t f = {0};
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
  fixture_t f = {0};
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
  fixture_t f = {0};
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
  fixture_t g = {0};
  setup(&f, a, 4);
  setup(&g, b, 4);
  for (size_t i = 0; i < 4; i++) {
    CHECK_EQ_STR(f.locs[i].path, g.locs[i].path);
    CHECK_EQ_INT(f.locs[i].exact, g.locs[i].exact);
  }
}

static void test_regex_order(void)
{
  /* nginx: exact, then the longest prefix is remembered, then regexes in
   * config order, first match wins, else the prefix */
  static const char *const specs[] = {"/", "~ ^/api/v[0-9]+/", "/api/", "= /api/v1/x", "~* \\.(png|jpg)$",
                                      "~ ^/api/v1/", "^~ /static/", "/img/"};
  fixture_t f = {0};
  setup(&f, specs, 8);
  CHECK_EQ_STR(match(&f, "/api/v1/x"), "= /api/v1/x");
  CHECK_EQ_STR(match(&f, "/api/v1/y"), "~ ^/api/v[0-9]+/"); /* the first regex in config order */
  CHECK_EQ_STR(match(&f, "/api/list"), "/api/");            /* no regex matches: the prefix */
  CHECK_EQ_STR(match(&f, "/img/a.PNG"), "~* \\.(png|jpg)$"); /* regex beats a prefix */
  CHECK_EQ_STR(match(&f, "/img/a.gif"), "/img/");
  CHECK_EQ_STR(match(&f, "/static/a.png"), "^~ /static/");  /* ^~ skips the regexes */
  CHECK_EQ_STR(match(&f, "/x.jpg"), "~* \\.(png|jpg)$");
  CHECK_EQ_STR(match(&f, "/x"), "/");
  /* regexes sort after the rest, in config order */
  CHECK(f.locs[5].regex && f.locs[5].seq == 1);
  CHECK(f.locs[6].regex && f.locs[6].seq == 4);
  CHECK(f.locs[7].regex && f.locs[7].seq == 5);
  free_regexes(&f);
}

static void test_regex_only(void)
{
  static const char *const specs[] = {"~ ^/users/([0-9]+)$", "~* ^/HELLO$"};
  fixture_t f = {0};
  setup(&f, specs, 2);
  CHECK_EQ_STR(match(&f, "/users/42"), "~ ^/users/([0-9]+)$");
  CHECK_EQ_STR(match(&f, "/users/42/x"), "(none)");
  CHECK_EQ_STR(match(&f, "/hello"), "~* ^/HELLO$");
  CHECK_EQ_STR(match(&f, "/Users/42"), "(none)"); /* ~ is case-sensitive */
  /* the length given counts, not a NUL */
  const gw_location_t *l = gw_router_match(&f.server, "/users/42xyz", 9);
  CHECK(l != NULL && l->regex != NULL);
  /* a catastrophic pattern fails its match limit: no match, no hang */
  static const char *const bad[] = {"~ ^/(a+)+$", "/"};
  setup(&f, bad, 2);
  char path[64] = "/";
  memset(path + 1, 'a', 40);
  strcpy(path + 41, "b");
  CHECK_EQ_STR(match(&f, path), "/");
  free_regexes(&f);
}

/* A pattern is tried on the path as received, then on its normalised form:
 * an encoding cannot hide "\.php$" and leave the script to the static "/". */
/* A prefix or exact location reached only by the decoded, normalised path
 * refuses the request; a path routed the same both ways passes. */
static void test_prefix_normalised(void)
{
  static const char *const specs[] = {"/", "/admin", "= /exact"};
  fixture_t f = {0};
  setup(&f, specs, 3);
  static const char *const refused[] = {"/%61dmin", "//admin", "/./admin", "/x/../admin", "/%2Fadmin",
                                        "/%61dmin%2Fx", "/%65xact", "/x/..//exact", "/a%zz", "/a%00", "/../x"};
  for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
    if (!CHECK_EQ_STR(match(&f, refused[i]), "(refused)")) unit_note("%s", refused[i]);
  CHECK_EQ_STR(match(&f, "/admin/%7E"), "/admin");
  CHECK_EQ_STR(match(&f, "/admin/../admin/x"), "/admin");
  CHECK_EQ_STR(match(&f, "/admin//x"), "/admin");
  CHECK_EQ_STR(match(&f, "/api/a%2Fb"), "/");
  CHECK_EQ_STR(match(&f, "/a//b/./c"), "/");
  CHECK_EQ_STR(match(&f, "/exact"), "= /exact");
  free_regexes(&f);
}

static void test_regex_normalised(void)
{
  static const char *const specs[] = {"/", "~ [^/]\\.php(/|$)", "~ ^/admin/"};
  fixture_t f = {0};
  setup(&f, specs, 3);
  const char *php = "~ [^/]\\.php(/|$)";
  CHECK_EQ_STR(match(&f, "/a.php"), php);
  CHECK_EQ_STR(match(&f, "/a%2Ephp"), php);
  CHECK_EQ_STR(match(&f, "/a.ph%70/x"), php);
  CHECK_EQ_STR(match(&f, "/sub/%62.php"), php); /* the raw form matches already */
  CHECK_EQ_STR(match(&f, "//admin/x"), "~ ^/admin/");
  CHECK_EQ_STR(match(&f, "/./admin/x"), "~ ^/admin/");
  CHECK_EQ_STR(match(&f, "/x/../admin/x"), "~ ^/admin/");
  CHECK_EQ_STR(match(&f, "/%61dmin/x"), "~ ^/admin/");
  CHECK_EQ_STR(match(&f, "/a%2Etxt"), "/");
  CHECK_EQ_STR(match(&f, "/a%2"), "(refused)");         /* does not decode: 400 */
  CHECK_EQ_STR(match(&f, "/a%2Fb%2Ephp"), "(refused)"); /* "/a/b.php" by $uri, the static "/" raw */
  /* longer than the stack buffer */
  char path[2100] = "/";
  memset(path + 1, 'd', 2000);
  strcpy(path + 2001, "/x%2Ephp");
  CHECK_EQ_STR(match(&f, path), php);
  char out[32];
  CHECK_EQ_INT(gw_router_normalised("/a/b", 4, out, sizeof(out)), -1); /* nothing to normalise */
  CHECK_EQ_INT(gw_router_normalised("/a%20b", 6, out, sizeof(out)), 4);
  CHECK_EQ_STR(out, "/a b");
  free_regexes(&f);
}

int main(void)
{
  test_sort_order();
  test_exact_before_prefix();
  test_longest_prefix();
  test_byte_prefixes();
  test_empty_path();
  test_ties();
  test_regex_order();
  test_regex_only();
  test_prefix_normalised();
  test_regex_normalised();
  return unit_done();
}
