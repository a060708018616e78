/* listener.h - listening sockets: one shared by a server's workers, or one
 * SO_REUSEPORT socket per worker (the kernel spreads new connections over
 * them by a hash of the 4-tuple), and the closing of a server's sockets. */
#ifndef GW_LISTENER_H
#define GW_LISTENER_H

#include <stddef.h>

#include "config.h"

/* A non-blocking listening socket bound to host:port (host an IP literal),
 * with SO_REUSEPORT when reuseport; a port still held by a lingering socket
 * is retried for a moment (reuseport < 0: bound, not listening: a probe
 * that the port is free). Returns the descriptor, or -1 with err set. */
int gw_listener_open(const char *host, int port, int reuseport, char *err, size_t errlen);

/* Opens s's sockets (s->fd, or s->fds[0..workers) with reuseport), taking
 * over those of old (a running config's server on the same host:port, or
 * NULL) instead of opening new ones: worker i's socket stays socket i. On
 * error the sockets opened so far stay in s (gw_listener_close_all frees them). */
int gw_listener_take(gw_server_t *s, const gw_server_t *old, char *err, size_t errlen);

/* 1 if fd is one of s's sockets. */
int gw_listener_owns(const gw_server_t *s, int fd);

/* Closes s's sockets except those keep (a config, or NULL) still uses. */
void gw_listener_close_all(gw_server_t *s, const gw_config_t *keep);

/* In a worker of s: keeps only worker index's own socket in s->fd. */
void gw_listener_keep_own(gw_server_t *s, int index);

#endif
