/* byte_end.c - one end of a relayed byte stream (see byte_end.h). */
#include <unistd.h>

#include "byte_end.h"

void gw_byte_end_drop(const gw_byte_end_t *e)
{
  if (e->io) e->io->free(e->ioc);
  if (e->fd >= 0) close(e->fd);
}
