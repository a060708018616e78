/* compress_http.c - Accept-Encoding and media types for compression
 * (compress_http.h). */
#include <ctype.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compress_http.h"

const char *const gw_compress_default_types[] = {
  "text/*", "application/json", "application/javascript", "application/x-javascript", "application/ecmascript",
  "application/xml", "application/wasm", "image/svg+xml", "*/*+json", "*/*+xml", NULL};

/* A qvalue's text ("1", "0.5", "0.000") as thousandths, 1000 at most;
 * anything malformed reads as 1000 (the element counts, as if unweighted). */
static int parse_q(const char *p, const char *end)
{
  int q = 0, digits = 0;
  if (p < end && (*p == '0' || *p == '1')) {
    q = (*p - '0') * 1000;
    p++;
    if (p < end && *p == '.') {
      p++;
      int scale = 100;
      while (p < end && isdigit((unsigned char)*p) && digits < 3) {
        q += (*p - '0') * scale;
        scale /= 10;
        digits++;
        p++;
      }
    }
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p == end) return q > 1000 ? 1000 : q;
  }
  return 1000;
}

enum { ID_STAR = GW_CODING_COUNT, ID_IDENTITY, ID_COUNT };

static int token_id(const char *t, size_t n)
{
  if (n == 1 && *t == '*') return ID_STAR;
  if ((n == 4 && strncasecmp(t, "gzip", 4) == 0) || (n == 6 && strncasecmp(t, "x-gzip", 6) == 0))
    return GW_CODING_GZIP;
  if (n == 2 && strncasecmp(t, "br", 2) == 0) return GW_CODING_BR;
  if (n == 4 && strncasecmp(t, "zstd", 4) == 0) return GW_CODING_ZSTD;
  if (n == 8 && strncasecmp(t, "identity", 8) == 0) return ID_IDENTITY;
  return -1;
}

gw_coding_t gw_compress_negotiate(const char *ae, size_t len, const gw_coding_t *prefs, size_t nprefs)
{
  int q[ID_COUNT];
  for (int i = 0; i < ID_COUNT; i++) q[i] = -1; /* not named */
  const char *p = ae, *end = ae ? ae + len : ae;
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) p++;
    const char *t = p;
    while (p < end && *p != ',' && *p != ';' && *p != ' ' && *p != '\t') p++;
    int id = token_id(t, (size_t)(p - t));
    int qv = 1000;
    while (p < end && *p != ',') { /* parameters: only q matters */
      if (*p++ != ';') continue;
      while (p < end && (*p == ' ' || *p == '\t')) p++;
      const char *pe = p;
      while (pe < end && *pe != ',' && *pe != ';') pe++;
      if (pe - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') qv = parse_q(p + 2, pe);
      p = pe;
    }
    if (id >= 0 && (q[id] < 0 || qv < q[id])) q[id] = qv; /* named twice: the stricter */
  }
  for (size_t i = 0; i < nprefs; i++) {
    gw_coding_t c = prefs[i];
    if (c <= GW_CODING_NONE || c >= GW_CODING_COUNT) continue;
    int qc = q[c] >= 0 ? q[c] : q[ID_STAR] >= 0 ? q[ID_STAR] : 0;
    if (qc <= 0) continue;
    if (q[ID_IDENTITY] > qc) return GW_CODING_NONE; /* the client rather has it as it is */
    return c;
  }
  return GW_CODING_NONE;
}

int gw_compress_type_matches(const char *ct, size_t len, char *const *patterns, size_t npatterns)
{
  char type[128];
  size_t n = 0;
  while (n < len && ct[n] != ';' && ct[n] != ' ' && ct[n] != '\t') n++;
  if (n == 0 || n >= sizeof(type)) return 0;
  memcpy(type, ct, n);
  type[n] = '\0';
  for (size_t i = 0; i < npatterns; i++) {
    const char *pat = patterns[i];
    size_t pl = strlen(pat);
    const char *wild = strpbrk(pat, "*?[\\");
    if (wild == NULL) { /* the usual shapes without fnmatch's cost: exact, "type/" + "*", "*" + "/" + "*+suffix" */
      if (pl == n && strcasecmp(pat, type) == 0) return 1;
    } else if (wild == pat + pl - 1 && pl >= 2 && pat[pl - 2] == '/') {
      if (n >= pl && strncasecmp(pat, type, pl - 1) == 0) return 1;
    } else if (wild == pat && pl > 3 && strncmp(pat, "*/*", 3) == 0 && strpbrk(pat + 3, "*?[\\") == NULL) {
      if (n >= pl - 3 && strchr(type, '/') && strcasecmp(type + n - (pl - 3), pat + 3) == 0) return 1;
    } else if (fnmatch(pat, type, FNM_CASEFOLD) == 0) {
      return 1;
    }
  }
  return 0;
}

void gw_compress_conf_free(gw_compress_conf_t *conf)
{
  if (conf == NULL) return;
  for (size_t i = 0; i < conf->ntypes; i++) free(conf->types[i]);
  free(conf->types);
  free(conf);
}
