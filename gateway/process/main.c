/* main.c - command line: serve, check a config, signal a running master,
 * print the version. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <ares.h>
#include <llhttp.h>
#include <mruby/version.h>

#include "config_load.h"
#include "gw_mruby.h"
#include "log.h"
#include "master.h"
#include "version.h"


static void usage(FILE *out)
{
  fprintf(out,
          "usage: gateway [-t] [-v] [-h] [--trace] [-s SIGNAL] -f FILE\n"
          "\n"
          "  -f FILE    the configuration (an mruby script); serve it in the foreground,\n"
          "             logging to its error_log (default stderr)\n"
          "  -t         check the configuration and exit: 0 and \"syntax is ok\", or 1 and\n"
          "             FILE:LINE: message\n"
          "  -s SIGNAL  send SIGNAL to the master serving FILE, found through the pid\n"
          "             file that FILE configures, and exit (1 if it is not running):\n"
          "               reload   re-read FILE: new workers, the old ones finish (HUP)\n"
          "               stop     fast stop (TERM)\n"
          "               quit     graceful stop: finish in-flight requests (QUIT)\n"
          "               reopen   reopen the log files, after logrotate (USR1)\n"
          "  -v         print the version and exit\n"
          "  -h         print this help and exit\n"
          "  --trace    log every fiber start, suspend and resume of every request,\n"
          "             with the event behind it and timestamps (also GATEWAY_TRACE=1)\n"
          "\n"
          "signals to the master: TERM/INT fast stop, QUIT graceful stop (finish\n"
          "in-flight requests), HUP reload the configuration (a bad one is logged\n"
          "and the running one kept), USR1 reopen the log files\n"
          "\n"
          "top-level directives of FILE for operating it (relative paths are from\n"
          "FILE's folder):\n"
          "  pid \"gateway.pid\"\n"
          "                                 default /tmp/gateway-<hash of FILE's path>.pid\n"
          "  error_log \"error.log\", level: :notice\n"
          "                                 default :stderr; levels debug info notice\n"
          "                                 warn error crit\n"
          "  access_log \"access.log\", format: :combined\n"
          "                                 default :off; also :stderr; formats\n"
          "                                 :combined, :nginx_combined, or a String\n"
          "                                 with $variables ($remote_addr, $status...)\n"
          "  user \"gateway\", group: \"gateway\"\n"
          "                                 default: none; workers switch to this user\n"
          "                                 (the master, root, keeps binding the ports)\n"
          "  include \"conf.d/*.rb\"\n"
          "                                 read these files here (sorted; relative\n"
          "                                 to the including file)\n");
}

int main(int argc, char **argv)
{
  const char *file = NULL;
  const char *signal_name = NULL;
  int test_only = 0;
  int opt;
  static const struct option long_opts[] = {{"trace", no_argument, NULL, 'T'}, {NULL, 0, NULL, 0}};
  const char *env_trace = getenv("GATEWAY_TRACE");
  gw_trace = env_trace && *env_trace && strcmp(env_trace, "0") != 0 ? GW_TRACE_LOG : 0;
  while ((opt = getopt_long(argc, argv, "f:s:tvh", long_opts, NULL)) != -1) {
    switch (opt) {
    case 'T': gw_trace = GW_TRACE_LOG; break;
    case 'f': file = optarg; break;
    case 't': test_only = 1; break;
    case 's':
      signal_name = optarg;
      if (gw_master_signal_number(signal_name) < 0) {
        fprintf(stderr, "gateway: -s %s: unknown signal (use reload, stop, quit or reopen)\n", signal_name);
        return 2;
      }
      break;
    case 'v':
      printf("gateway/%s (mruby %s, libevent %s, c-ares %s, llhttp %d.%d.%d)\n", GW_VERSION, MRUBY_VERSION,
             event_get_version(), ares_version(NULL), LLHTTP_VERSION_MAJOR, LLHTTP_VERSION_MINOR,
             LLHTTP_VERSION_PATCH);
      return 0;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc || file == NULL) {
    if (file == NULL) fprintf(stderr, "gateway: no configuration given (-f FILE)\n");
    else fprintf(stderr, "gateway: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (test_only && signal_name) {
    fprintf(stderr, "gateway: -t and -s do not go together\n");
    return 2;
  }

  char err[1024];
  gw_config_t *cfg = gw_config_load(file, err, sizeof(err));
  if (cfg == NULL) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  if (test_only) {
    printf("%s: syntax is ok\n", file);
    gw_config_free(cfg, NULL);
    return 0;
  }
  if (gw_settings_resolve(&cfg->settings, file, err, sizeof(err)) < 0) {
    fprintf(stderr, "%s\n", err);
    gw_config_free(cfg, NULL);
    return 1;
  }
  if (signal_name) {
    int rc = gw_master_signal(cfg, signal_name);
    gw_config_free(cfg, NULL);
    return rc;
  }
  if (gw_config_listen(cfg, NULL, err, sizeof(err)) < 0) {
    fprintf(stderr, "%s: %s\n", file, err);
    gw_config_free(cfg, NULL);
    return 1;
  }
  return gw_master_run(cfg);
}
