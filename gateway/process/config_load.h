/* config_load.h - reading a config file into a gw_config_t (config.h), and
 * its listening sockets. */
#ifndef GW_CONFIG_LOAD_H
#define GW_CONFIG_LOAD_H

#include <stddef.h>

#include "config.h"

/* Evaluates the config file in a new VM. On error returns NULL and writes
 * "FILE:LINE: message" into err. The caller owns the result (gw_config_free). */
gw_config_t *gw_config_load(const char *path, char *err, size_t errlen);

/* Opens (or takes over from `old`, when the same host:port is listed there)
 * every server's listening socket. Returns 0, or -1 with err set. */
int gw_config_listen(gw_config_t *cfg, gw_config_t *old, char *err, size_t errlen);

/* Closes listening sockets that are not shared with `keep` (may be NULL),
 * closes the VM and frees everything. */
void gw_config_free(gw_config_t *cfg, const gw_config_t *keep);

#endif
