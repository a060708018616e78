/* cpu_limit.c - cpu_limit: a request's Ruby code interrupted once it has run
 * on the CPU past its location's limit without waiting (cpu_limit.h).
 *
 * Why a signal and the VM hook: mruby's VM checks nothing a C caller could
 * set between two instructions except, when built with MRB_USE_DEBUG_HOOK,
 * mrb->code_fetch_hook, which it calls before every instruction when it is
 * not NULL. So the hook stays NULL (one predictable branch per instruction)
 * until a SIGVTALRM tick finds the running code past its limit and sets it;
 * the hook, now inside the VM between two instructions, raises as a method
 * would.
 *
 * The signal handler touches only sig_atomic_t state and the hook pointer (an
 * aligned pointer store, atomic on every platform mruby supports). The main
 * flow orders its own stores around it with signal fences. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include <mruby.h>
#include <mruby/irep.h>
#include <mruby/debug.h>
#include <mruby/proc.h>

#include "cpu_limit.h"

/* Shared with the signal handler. */
static volatile sig_atomic_t running;     /* 1 between enter and leave */
static volatile sig_atomic_t ticks;       /* ticks of CPU time in this run */
static volatile sig_atomic_t limit_ticks; /* ticks that prove the limit passed; 0: none */
static volatile sig_atomic_t force_ticks; /* ticks that prove twice the limit passed */
static volatile sig_atomic_t forced;      /* past twice: raise on every instruction */
static mrb_state *vm;                     /* set before the tick starts */

/* The main flow's view of the current run. */
static struct {
  int limit_ms;
  const char *path;     /* the location's */
  int exact;
  const char *file;     /* where the run was stopped by force */
  int line;
} run;

static int started;

static void on_fetch(mrb_state *mrb, const struct mrb_irep *irep, const mrb_code *pc, mrb_value *regs);

static void on_tick(int sig)
{
  (void)sig;
  if (!running || limit_ticks == 0) return;
  int t = ticks + 1;
  ticks = t;
  if (t == limit_ticks || t == force_ticks) {
    if (t == force_ticks) forced = 1;
    vm->code_fetch_hook = on_fetch;
  }
}

/* The innermost frame of the running fiber with a file name: the script's
 * own code (mruby's mrblib, `loop` or `each`, carries no debug info). The
 * top frame is at pc; the others at their call instruction. */
static const char *script_position(mrb_state *mrb, const struct mrb_irep *irep, const mrb_code *pc, int *line)
{
  const char *file = mrb_debug_get_filename(mrb, irep, (uint32_t)(pc - irep->iseq));
  if (file) {
    *line = (int)mrb_debug_get_line(mrb, irep, (uint32_t)(pc - irep->iseq));
    return file;
  }
  for (const mrb_callinfo *ci = mrb->c->ci - 1; ci >= mrb->c->cibase; ci--) {
    if (ci->proc == NULL || MRB_PROC_CFUNC_P(ci->proc) || ci->pc == NULL) continue;
    const mrb_irep *ir = ci->proc->body.irep;
    if (ir == NULL) continue;
    uint32_t off = (uint32_t)(ci->pc - 1 - ir->iseq);
    file = mrb_debug_get_filename(mrb, ir, off);
    if (file) {
      *line = (int)mrb_debug_get_line(mrb, ir, off);
      return file;
    }
  }
  *line = 0;
  return NULL;
}

/* Runs inside the VM, before the instruction at pc. */
static void on_fetch(mrb_state *mrb, const struct mrb_irep *irep, const mrb_code *pc, mrb_value *regs)
{
  (void)regs;
  if (!running) { /* a late tick; nothing of a request runs */
    mrb->code_fetch_hook = NULL;
    return;
  }
  /* The VM's rescue lookup starts from ci->pc: make it this instruction. */
  mrb->c->ci->pc = pc;
  int line = 0;
  const char *file = forced && run.file ? NULL : script_position(mrb, irep, pc, &line);
  if (forced) {
    if (run.file == NULL && file) { /* the first forced stop tells where */
      run.file = file;
      run.line = line;
    }
  } else {
    mrb->code_fetch_hook = NULL; /* once; the tick re-arms it at twice the limit */
  }
  struct RClass *cls = mrb_class_get_under(mrb, mrb_module_get(mrb, "Gateway"), "CPULimitExceeded");
  char msg[512];
  int n = snprintf(msg, sizeof(msg), "cpu_limit of %g s exceeded in location \"%s%s\"", run.limit_ms / 1000.0,
                   run.exact ? "= " : "", run.path);
  if (file && line > 0 && n > 0 && (size_t)n < sizeof(msg))
    n += snprintf(msg + n, sizeof(msg) - (size_t)n, " at %s:%d", file, line);
  if (n > 0 && (size_t)n < sizeof(msg))
    snprintf(msg + n, sizeof(msg) - (size_t)n, ": Ruby ran on the CPU without waiting%s",
             forced ? " (again, after rescuing it: the request is stopped)" : "");
  mrb_raise(mrb, cls, msg);
}

int gw_cpu_limit_start(mrb_state *mrb)
{
  vm = mrb;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_tick;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGVTALRM, &sa, NULL) < 0) return -1;
  struct itimerval it = {{0, GW_CPU_LIMIT_TICK_MS * 1000}, {0, GW_CPU_LIMIT_TICK_MS * 1000}};
  if (setitimer(ITIMER_VIRTUAL, &it, NULL) < 0) return -1;
  started = 1;
  return 0;
}

void gw_cpu_limit_stop(void)
{
  if (!started) return;
  struct itimerval off;
  memset(&off, 0, sizeof(off));
  setitimer(ITIMER_VIRTUAL, &off, NULL);
  signal(SIGVTALRM, SIG_IGN);
  started = 0;
  running = 0;
  if (vm) vm->code_fetch_hook = NULL;
}

void gw_cpu_limit_enter(int limit_ms, const char *path, int exact)
{
  if (!started) return;
  run.limit_ms = limit_ms;
  run.path = path;
  run.exact = exact;
  run.file = NULL;
  run.line = 0;
  ticks = 0;
  forced = 0;
  /* The timer runs on across runs, so the first tick of this one comes after
   * anything from 0 to a whole tick of its CPU time: n + 1 ticks prove n
   * whole ones, and a run is never stopped before its limit. */
  int n = limit_ms > 0 ? (limit_ms + GW_CPU_LIMIT_TICK_MS - 1) / GW_CPU_LIMIT_TICK_MS : 0;
  force_ticks = n > 0 ? 2 * n + 1 : 0;
  limit_ticks = n > 0 ? n + 1 : 0;
  atomic_signal_fence(memory_order_seq_cst);
  running = 1;
}

int gw_cpu_limit_leave(const char **file, int *line)
{
  if (!started) return 0;
  running = 0;
  atomic_signal_fence(memory_order_seq_cst);
  vm->code_fetch_hook = NULL; /* a tick may have armed it as the run ended */
  int stopped = forced;
  forced = 0;
  if (file) *file = stopped ? run.file : NULL;
  if (line) *line = stopped ? run.line : 0;
  return stopped;
}
