/* byte_end.c - one end of a relayed byte stream (see byte_end.h). */
#include <errno.h>
#include <unistd.h>

#include "byte_end.h"

void gw_byte_end_drop(const gw_byte_end_t *e)
{
  if (e->io) e->io->free(e->ioc);
  if (e->fd >= 0) close(e->fd);
}

int gw_byte_end_read_with(struct evbuffer *into, size_t max, ssize_t (*read_fn)(void *ioc, void *buf, size_t n),
                          void *ioc)
{
  struct evbuffer_iovec v;
  if (evbuffer_reserve_space(into, (ev_ssize_t)max, &v, 1) < 1) {
    errno = ENOMEM;
    return -1;
  }
  ssize_t n = read_fn(ioc, v.iov_base, v.iov_len < max ? v.iov_len : max);
  v.iov_len = n > 0 ? (size_t)n : 0;
  evbuffer_commit_space(into, &v, 1);
  return (int)n;
}

static ssize_t read_plain(void *ioc, void *buf, size_t n) { return read(*(const int *)ioc, buf, n); }

int gw_byte_end_read_fd(struct evbuffer *into, int fd, size_t max)
{
  return gw_byte_end_read_with(into, max, read_plain, &fd);
}
