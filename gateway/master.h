/* master.h - the supervising master process. */
#ifndef GW_MASTER_H
#define GW_MASTER_H

#include "config.h"

/* Forks the workers of cfg (sockets already listening) and supervises them
 * until told to stop. Takes ownership of cfg. Returns the exit status. */
int gw_master_run(gw_config_t *cfg);

#endif
