/* proxy_accept.h - a connection accepted on a `proxy_protocol: true`
 * listener, until its PROXY header (proxy_proto.h) is read: before any TLS
 * or HTTP byte. Then it goes on to its protocol (http1_server.c) with the address
 * the header carried; a peer not allowed, or a missing, malformed, oversized
 * or slow header, closes it (a log line and a counter, stats.h). */
#ifndef GW_PROXY_ACCEPT_H
#define GW_PROXY_ACCEPT_H

#include <sys/socket.h>

#include "context.h"

/* The header was read (exactly its bytes taken off fd): client is the
 * address it carried, or the socket's own (a LOCAL or UNKNOWN header), peer
 * the socket's (the balancer's). carried: 1 when client came from the header.
 * The callee owns fd. Returns 0, or -1 (the callee closed fd). */
typedef int (*gw_proxy_accept_ready_t)(gw_context_t *ctx, int fd, const struct sockaddr *client,
                                       const struct sockaddr *peer, int carried);

/* Takes fd (a freshly accepted socket from peer): closes it now if peer is
 * not in the server's proxy_protocol_from, else waits for the header, at most
 * the server's header_timeout. Returns 0, or -1 (out of memory: fd closed). */
int gw_proxy_accept_start(gw_context_t *ctx, int fd, const struct sockaddr *peer, socklen_t peer_len,
                          gw_proxy_accept_ready_t ready);

/* Worker stop: closes every connection still waiting for its header. */
void gw_proxy_accept_close_all(void);

#endif
