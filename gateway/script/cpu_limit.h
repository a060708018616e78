/* cpu_limit.h - interrupts a request's Ruby code that runs on the CPU past
 * its location's cpu_limit without waiting (`loop {}`), through mruby's
 * code-fetch hook (mruby built with MRB_USE_DEBUG_HOOK: tools/mruby/).
 *
 * A worker with a limit anywhere starts a CPU-time tick (ITIMER_VIRTUAL:
 * user CPU only, so a blocking HttpRequest sleeping in the kernel does not
 * count). The mruby handler brackets every resume of a request's fiber with
 * gw_cpu_limit_enter() / gw_cpu_limit_leave(); ticks that land between them
 * count against that run's limit, from zero on every resume ("between two
 * waits"). Past the limit the VM's hook raises Gateway::CPULimitExceeded (an
 * Exception, not a StandardError) once; past it a second time in the same
 * run (the handler rescued it and went on) the hook raises on every
 * instruction until the run is over. */
#ifndef GW_CPU_LIMIT_H
#define GW_CPU_LIMIT_H

#include <mruby.h>

/* The CPU-time tick, and so the granularity of a limit. */
#define GW_CPU_LIMIT_TICK_MS 50

/* Starts the tick in this process (a worker; never the master). Returns 0,
 * or -1 with errno set. */
int gw_cpu_limit_start(mrb_state *mrb);
/* Stops it (worker exit). */
void gw_cpu_limit_stop(void);

/* Ruby code of a request is about to run for up to limit_ms of CPU time (0:
 * no limit); path (which must outlive the run) and exact name its location
 * in messages. */
void gw_cpu_limit_enter(int limit_ms, const char *path, int exact);
/* The run is over (the fiber finished or parked). Returns 1 if the run hit
 * its limit twice and was stopped by force (then *file and *line tell where
 * it was, or NULL and 0), else 0. */
int gw_cpu_limit_leave(const char **file, int *line);

#endif
