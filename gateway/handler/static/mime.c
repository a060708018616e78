/* mime.c - see mime.h. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mime.h"

#define EXT_MAX 32

typedef struct {
  char ext[EXT_MAX];  /* lower case, NUL-terminated; "" = free slot */
  char *type;         /* owned */
} slot_t;

struct gw_mime_s {
  slot_t *slots;
  size_t cap, count;  /* cap: a power of two, kept at most half full */
};

static size_t hash_ext(const char *e, size_t n)
{
  size_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)tolower((unsigned char)e[i])) * 16777619u;
  return h;
}

static slot_t *find(const gw_mime_t *m, const char *ext, size_t n)
{
  size_t i = hash_ext(ext, n) & (m->cap - 1);
  for (;;) {
    slot_t *s = &m->slots[i];
    if (s->ext[0] == '\0') return s;
    if (strlen(s->ext) == n && strncasecmp(s->ext, ext, n) == 0) return s;
    i = (i + 1) & (m->cap - 1);
  }
}

static int grow(gw_mime_t *m)
{
  size_t ncap = m->cap ? m->cap * 2 : 256;
  slot_t *old = m->slots;
  size_t ocap = m->cap;
  m->slots = calloc(ncap, sizeof(slot_t));
  if (m->slots == NULL) {
    m->slots = old;
    return -1;
  }
  m->cap = ncap;
  for (size_t i = 0; i < ocap; i++)
    if (old[i].ext[0]) *find(m, old[i].ext, strlen(old[i].ext)) = old[i];
  free(old);
  return 0;
}

int gw_mime_set(gw_mime_t *m, const char *ext, size_t n, const char *type)
{
  if (n == 0 || n >= EXT_MAX) return 0; /* not representable: ignored */
  if ((m->count + 1) * 2 > m->cap && grow(m) < 0) return -1;
  slot_t *s = find(m, ext, n);
  char *t = strdup(type);
  if (t == NULL) return -1;
  if (s->ext[0]) {
    free(s->type);
  } else {
    for (size_t i = 0; i < n; i++) s->ext[i] = (char)tolower((unsigned char)ext[i]);
    s->ext[n] = '\0';
    m->count++;
  }
  s->type = t;
  return 0;
}

static const char *const builtin[][2] = {
  {"html", "text/html"}, {"htm", "text/html"}, {"css", "text/css"}, {"js", "text/javascript"},
  {"mjs", "text/javascript"}, {"json", "application/json"}, {"txt", "text/plain"}, {"xml", "application/xml"},
  {"png", "image/png"}, {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"}, {"gif", "image/gif"},
  {"svg", "image/svg+xml"}, {"ico", "image/vnd.microsoft.icon"}, {"webp", "image/webp"},
  {"wasm", "application/wasm"}, {"pdf", "application/pdf"}, {"woff2", "font/woff2"}, {"woff", "font/woff"},
};

gw_mime_t *gw_mime_load(const char *path)
{
  gw_mime_t *m = calloc(1, sizeof(*m));
  if (m == NULL || grow(m) < 0) {
    free(m);
    return NULL;
  }
  for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
    if (gw_mime_set(m, builtin[i][0], strlen(builtin[i][0]), builtin[i][1]) < 0) goto fail;
  FILE *fp = fopen(path ? path : "/etc/mime.types", "r");
  if (fp == NULL) return m;
  char line[1024];
  int nlines = 0;
  while (fgets(line, sizeof(line), fp) && ++nlines < 100000) { /* bounded */
    char *save = NULL;
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *type = strtok_r(line, " \t\r\n", &save);
    if (type == NULL || strchr(type, '/') == NULL) continue;
    for (char *ext; (ext = strtok_r(NULL, " \t\r\n", &save)) != NULL;) {
      if (gw_mime_set(m, ext, strlen(ext), type) < 0) {
        fclose(fp);
        goto fail;
      }
    }
  }
  fclose(fp);
  return m;
fail:
  gw_mime_free(m);
  return NULL;
}

void gw_mime_free(gw_mime_t *m)
{
  if (m == NULL) return;
  for (size_t i = 0; i < m->cap; i++) free(m->slots[i].type);
  free(m->slots);
  free(m);
}

const char *gw_mime_lookup(const gw_mime_t *m, const char *name, size_t len)
{
  size_t i = len;
  while (i > 0 && name[i - 1] != '.' && name[i - 1] != '/') i--;
  if (i == 0 || name[i - 1] != '.') return NULL;
  size_t n = len - i;
  if (n == 0 || n >= EXT_MAX) return NULL;
  slot_t *s = find(m, name + i, n);
  return s->ext[0] ? s->type : NULL;
}

size_t gw_mime_count(const gw_mime_t *m)
{
  return m->count;
}
