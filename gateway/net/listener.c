/* listener.c - listening sockets (see listener.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "listener.h"
#include "log.h"

/* Binding a port that a lingering socket still holds (a client of an earlier
 * run, in TIME_WAIT or not) fails for a moment: retry, as nginx does. */
#define LISTEN_TRIES 5
#define LISTEN_RETRY_MS 500
#define LISTEN_BACKLOG 4096

/* reuseport < 0: a probe, bound but not listening (see gw_listener_take). */
int gw_listener_open(const char *host, int port, int reuseport, char *err, size_t errlen)
{
  struct sockaddr_storage ss;
  socklen_t sslen = gw_addr_from_ip(host, port, &ss);
  if (sslen == 0) {
    snprintf(err, errlen, "listen %s:%d: host must be an IP address", host, port);
    return -1;
  }
  for (int try = 1;; try++) {
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport > 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) {
      int e = errno;
      close(fd);
      snprintf(err, errlen, "listen %s:%d: SO_REUSEPORT: %s", host, port, strerror(e));
      return -1;
    }
    if (bind(fd, (struct sockaddr *)&ss, sslen) == 0 && (reuseport < 0 || listen(fd, LISTEN_BACKLOG) == 0)) return fd;
    int e = errno;
    close(fd);
    errno = e;
    if (e != EADDRINUSE || try == LISTEN_TRIES) break;
    gw_log_warn("listen %s:%d: %s; trying again in %d ms (%d of %d)", host, port, strerror(e), LISTEN_RETRY_MS, try,
                LISTEN_TRIES - 1);
    struct timespec pause = {0, LISTEN_RETRY_MS * 1000000L};
    nanosleep(&pause, NULL);
  }
  snprintf(err, errlen, "listen %s:%d: %s", host, port, strerror(errno));
  return -1;
}

int gw_listener_take(gw_server_t *s, const gw_server_t *old, char *err, size_t errlen)
{
  if (old && old->reuseport != s->reuseport) {
    if (!s->reuseport_default) {
      /* The other mode's sockets cannot share the port with these: switching
       * would close the port for a moment. */
      snprintf(err, errlen, "listen %s:%d: reuseport: cannot change from %s to %s on reload (restart the gateway)",
               s->host, s->port, old->reuseport ? "true" : "false", s->reuseport ? "true" : "false");
      return -1;
    }
    s->reuseport = old->reuseport; /* a default never changes a running port's mode */
  }
  if (!s->reuseport) {
    s->fd = old ? old->fd : gw_listener_open(s->host, s->port, 0, err, errlen);
    return s->fd < 0 ? -1 : 0;
  }
  s->fds = malloc((size_t)s->workers * sizeof(int));
  if (s->fds == NULL) {
    snprintf(err, errlen, "listen %s:%d: out of memory", s->host, s->port);
    return -1;
  }
  for (int i = 0; i < s->workers; i++) s->fds[i] = -1;
  s->nfds = s->workers;
  if (old == NULL) {
    /* SO_REUSEPORT would let a second gateway (same user) share a port that
     * is already served, silently splitting its traffic: first make sure
     * nothing listens there, with a plain socket that bind() refuses if so. */
    int probe = gw_listener_open(s->host, s->port, -1, err, errlen);
    if (probe < 0) return -1;
    close(probe);
  }
  for (int i = 0; i < s->workers; i++) {
    s->fds[i] = old && i < old->nfds ? old->fds[i] : gw_listener_open(s->host, s->port, 1, err, errlen);
    if (s->fds[i] < 0) return -1;
  }
  return 0;
}

int gw_listener_owns(const gw_server_t *s, int fd)
{
  if (fd < 0) return 0;
  if (s->fd == fd) return 1;
  for (int i = 0; i < s->nfds; i++)
    if (s->fds[i] == fd) return 1;
  return 0;
}

static int kept(const gw_config_t *keep, int fd)
{
  for (size_t i = 0; keep && i < keep->nservers; i++)
    if (gw_listener_owns(&keep->servers[i], fd)) return 1;
  return 0;
}

void gw_listener_close_all(gw_server_t *s, const gw_config_t *keep)
{
  if (s->fd >= 0 && !kept(keep, s->fd)) close(s->fd);
  s->fd = -1;
  for (int i = 0; i < s->nfds; i++)
    if (s->fds[i] >= 0 && !kept(keep, s->fds[i])) close(s->fds[i]);
  free(s->fds);
  s->fds = NULL;
  s->nfds = 0;
}

void gw_listener_keep_own(gw_server_t *s, int index)
{
  if (!s->reuseport) return;
  for (int i = 0; i < s->nfds; i++)
    if (i != index && s->fds[i] >= 0) close(s->fds[i]);
  s->fd = index < s->nfds ? s->fds[index] : -1;
  free(s->fds);
  s->fds = NULL;
  s->nfds = 0;
}
