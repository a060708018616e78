/* access_log.c - the access log (one line per answered client request). */
#include "access_log.h"

void gw_access_log_write(const gw_request_t *req, int status, size_t bytes_sent)
{
  (void)req;
  (void)status;
  (void)bytes_sent;
}
