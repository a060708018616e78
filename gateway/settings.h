/* settings.h - process-wide settings of a config file (pid file, logs). */
#ifndef GW_SETTINGS_H
#define GW_SETTINGS_H

#include <mruby.h>

typedef struct {
  int placeholder; /* fields are added by settings.c's owner */
} gw_settings_t;

/* Reads the top-level settings out of Gateway::Config.current into s (raises
 * on invalid values; called under mrb_protect_error by config.c). */
void gw_settings_read(mrb_state *mrb, mrb_value current, gw_settings_t *s);
/* Frees what gw_settings_read allocated. */
void gw_settings_dispose(gw_settings_t *s);

#endif
