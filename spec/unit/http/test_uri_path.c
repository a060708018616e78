/* test_uri_path.c - the request path percent-decoded and normalised
 * (uri_path.c): the file-system form (decode, clean) and the routing form.
 * unit: uri_path */
#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "uri_path.h"

static int decodes(const char *in, const char *want)
{
  char out[256];
  ssize_t n = gw_uri_path_decode(in, strlen(in), out, sizeof(out));
  if (want == NULL) {
    if (!CHECK(n < 0)) unit_note("%s decoded to %s", in, out);
    return n < 0;
  }
  if (!CHECK(n >= 0)) {
    unit_note("%s refused", in);
    return 0;
  }
  if (!CHECK_EQ_STR(out, want)) unit_note("input %s", in);
  return CHECK_EQ_INT(n, (long long)strlen(want));
}

static void test_paths(void)
{
  decodes("/", "/");
  decodes("", "/");
  decodes("/a/b.css", "/a/b.css");
  decodes("/a//b", "/a/b");
  decodes("/a/./b", "/a/b");
  decodes("/a/b/", "/a/b/");
  decodes("/a/b/..", "/a/");
  decodes("/a/b/../c", "/a/c");
  decodes("/a/.", "/a/");
  decodes("a.txt", "/a.txt"); /* alias: the rest after the prefix */
  decodes("/%61%62", "/ab");
  decodes("/a%20b", "/a b");
  decodes("/%2e%2e/x", NULL);
  decodes("/%2E%2E/x", NULL);
  decodes("/a/%2e%2e/b", "/b");
  decodes("/..", NULL);
  decodes("/../etc/passwd", NULL);
  decodes("/a/../../etc", NULL);
  decodes("/a%2fb", NULL);  /* encoded slash inside a segment */
  decodes("/a%2Fb", NULL);
  decodes("/a%00b", NULL);  /* encoded NUL */
  decodes("/a\\b", NULL);   /* backslash */
  decodes("/a%5cb", NULL);
  decodes("/a%5Cb", NULL);
  decodes("/%252e%252e/x", "/%2e%2e/x"); /* decoded once: a literal name */
  decodes("/a%", NULL);
  decodes("/a%4", NULL);
  decodes("/a%zz", NULL);
  decodes("/a%0a", NULL);   /* control byte */
  decodes("/...", "/...");  /* a name, not a parent */
  decodes("/.hidden", "/.hidden");
  char out[8];
  CHECK(gw_uri_path_decode("/abcdefghij", 11, out, sizeof(out)) < 0); /* cap too small */
  char raw[64];
  CHECK_EQ_INT(gw_uri_path_clean("/a%2e%2e/b", 10, raw, sizeof(raw)), 10);
  CHECK_EQ_STR(raw, "/a%2e%2e/b");
  CHECK(gw_uri_path_clean("/../x", 5, raw, sizeof(raw)) < 0);
}

/* gw_uri_path_route: want NULL for a refusal. */
static void routes(const char *in, const char *want)
{
  char out[256];
  ssize_t n = gw_uri_path_route(in, strlen(in), out, sizeof(out));
  if (want == NULL) {
    if (!CHECK(n < 0)) unit_note("%s routed as %s", in, out);
  } else if (!CHECK(n >= 0) || !CHECK_EQ_STR(out, want) || !CHECK_EQ_INT(n, (long long)strlen(want))) {
    unit_note("input %s", in);
  }
}

static void test_route(void)
{
  routes("/admin", "/admin");
  routes("/%61dmin", "/admin");
  routes("//admin", "/admin");
  routes("/./admin", "/admin");
  routes("/x/../admin", "/admin");
  routes("/%2Fadmin", "/admin");      /* an encoded slash is a slash here */
  routes("/a%2fb%2F", "/a/b/");
  routes("/a%5Cb", "/a\\b");         /* a backslash is only a byte: routing, not a file name */
  routes("/%2e%2e/x", NULL);          /* above the root, encoded */
  routes("/a/%2E%2E/%2e/b", "/b");
  routes("/a%", NULL);
  routes("/a%2", NULL);
  routes("/a%zz", NULL);
  routes("/a%00", NULL);
  routes("/../x", NULL);
  routes("/a/%252F", "/a/%2F");       /* decoded once */
  char out[8];
  CHECK(gw_uri_path_route("/abcdefghij", 11, out, sizeof(out)) < 0); /* cap too small */
}

int main(void)
{
  test_paths();
  test_route();
  return unit_done();
}
