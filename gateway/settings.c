/* settings.c - reads the process-wide settings of a config file. */
#include "settings.h"

void gw_settings_read(mrb_state *mrb, mrb_value current, gw_settings_t *s)
{
  (void)mrb;
  (void)current;
  s->placeholder = 0;
}

void gw_settings_dispose(gw_settings_t *s)
{
  (void)s;
}
