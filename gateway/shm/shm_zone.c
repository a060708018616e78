/* shm_zone.c - the master's named shared regions (shm_zone.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "shm_zone.h"

#define MAX_ZONES 64

typedef struct {
  char kind[16];
  char name[64];
  char *ident;        /* malloc'd, or NULL */
  size_t size;
  void *mem;          /* the mapping */
  int pending;        /* declared by the config being evaluated; not current yet */
  int declared;       /* current, and declared again by the config being evaluated */
} zone_t;

static zone_t zones[MAX_ZONES];
static int nzones;

static void zone_unmap(int i)
{
  munmap(zones[i].mem, zones[i].size);
  free(zones[i].ident);
  zones[i] = zones[--nzones];
}

static int same_ident(const char *a, const char *b)
{
  return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

void *gw_shm_zone_declare(const char *kind, const char *name, size_t size, const char *ident, int *fresh,
                          char *err, size_t errlen)
{
  if (strlen(name) >= sizeof(zones[0].name)) {
    snprintf(err, errlen, "%s %s: the name is too long", kind, name);
    return NULL;
  }
  for (int i = 0; i < nzones; i++) {
    zone_t *z = &zones[i];
    if (strcmp(z->kind, kind) != 0 || strcmp(z->name, name) != 0) continue;
    if (z->pending || z->declared) {
      snprintf(err, errlen, "%s %s is declared twice", kind, name);
      return NULL;
    }
    if (z->size == size && same_ident(z->ident, ident)) {
      z->declared = 1;
      *fresh = 0;
      return z->mem;
    }
  }
  if (nzones == MAX_ZONES) {
    snprintf(err, errlen, "%s %s: more than %d zones", kind, name, MAX_ZONES / 2);
    return NULL;
  }
  char *id = NULL;
  if (ident && (id = strdup(ident)) == NULL) {
    snprintf(err, errlen, "%s %s: out of memory", kind, name);
    return NULL;
  }
  void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    snprintf(err, errlen, "%s %s: cannot map %zu bytes: %s", kind, name, size, strerror(errno));
    free(id);
    return NULL;
  }
  zone_t *z = &zones[nzones++];
  memset(z, 0, sizeof(*z));
  snprintf(z->kind, sizeof(z->kind), "%s", kind);
  snprintf(z->name, sizeof(z->name), "%s", name);
  z->ident = id;
  z->size = size;
  z->mem = mem;
  z->pending = 1;
  *fresh = 1;
  return mem;
}

void gw_shm_zone_commit(void)
{
  for (int i = nzones - 1; i >= 0; i--) {
    if (zones[i].pending || zones[i].declared) {
      zones[i].pending = zones[i].declared = 0;
    } else {
      zone_unmap(i);
    }
  }
}

void gw_shm_zone_abort(void)
{
  for (int i = nzones - 1; i >= 0; i--) {
    if (zones[i].pending) zone_unmap(i);
    else zones[i].declared = 0;
  }
}

void *gw_shm_zone_find(const char *kind, const char *name)
{
  void *current = NULL;
  for (int i = 0; i < nzones; i++) {
    if (strcmp(zones[i].kind, kind) != 0 || strcmp(zones[i].name, name) != 0) continue;
    if (zones[i].pending) return zones[i].mem;
    current = zones[i].mem;
  }
  return current;
}

void *gw_shm_zone_at(const char *kind, size_t i, const char **name)
{
  for (int j = 0; j < nzones; j++) {
    if (zones[j].pending || strcmp(zones[j].kind, kind) != 0) continue;
    if (i-- == 0) {
      if (name) *name = zones[j].name;
      return zones[j].mem;
    }
  }
  return NULL;
}
