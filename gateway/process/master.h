/* master.h - the supervising master process. */
#ifndef GW_MASTER_H
#define GW_MASTER_H

#include "config.h"

/* Forks the workers of cfg (sockets already listening) and supervises them
 * until told to stop. Takes ownership of cfg. Returns the exit status. */
int gw_master_run(gw_config_t *cfg);

/* `gateway -s ACTION`: sends the master named by cfg's pid file SIGHUP
 * (reload), SIGTERM (stop), SIGQUIT (quit) or SIGUSR1 (reopen). Returns 0,
 * or 1 after printing why to stderr. cfg's settings must be resolved. */
int gw_master_signal(const gw_config_t *cfg, const char *action);

/* The signal for an action name, or -1. */
int gw_master_signal_number(const char *action);

#endif
