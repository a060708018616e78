/* addr.h - addresses, in one place: IP literals (with or without [brackets]),
 * ports, "host:port" and "[v6]:port" splitting, "unix:/path", and building or
 * printing socket addresses. Pure: no I/O, no allocation, nothing of the
 * gateway above it; every function is safe to call from anywhere. */
#ifndef GW_ADDR_H
#define GW_ADDR_H

#include <stddef.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

/* Room for any address the gateway connects to or listens on. */
typedef union {
  struct sockaddr sa;
  struct sockaddr_in in4;
  struct sockaddr_in6 in6;
  struct sockaddr_un un;
} gw_sockaddr_t;

/* Longest host kept by gw_hostport_t (a DNS name is at most 253 bytes). */
#define GW_ADDR_HOST_MAX 255

/* "host:port" split (gw_addr_split). */
typedef struct {
  char host[GW_ADDR_HOST_MAX + 1]; /* NUL-terminated, without [brackets] */
  int port;                        /* 1..65535, or -1 when the string has none */
  int bracketed;                   /* the host was written "[...]" */
} gw_hostport_t;

/* gw_addr_split flags */
#define GW_ADDR_BARE_V6 1 /* an unbracketed host may hold ':' ("::1:80"): the port
                             follows the last ':' (else the first ':' starts it) */

/* A port: 1 to 5 ASCII digits, value 1..65535. s need not be NUL-terminated.
 * Returns the port, or -1 ("", "x", "0", "65536", "+1", "123456"). */
int gw_addr_parse_port(const char *s, size_t len);

/* 1 if host (NUL-terminated, no brackets) is an IPv4 or IPv6 literal. */
int gw_addr_is_ip(const char *host);

/* host (an IPv4 or IPv6 literal, no brackets) and port as a socket address in
 * *out (zeroed first): its length, or 0 if host is not a literal or the port
 * is not 1..65535. */
socklen_t gw_addr_from_ip(const char *host, int port, struct sockaddr_storage *out);

/* host (len bytes) as an IP literal, "[v6]" accepted, port 0, into *out
 * (zeroed first). Returns 1 (a literal; *outlen set), 0 (not a literal: a
 * host name), or -1 (neither: a bad "[...]", or a ':' that is no IPv6
 * address, e.g. a zone "fe80::1%eth0"). */
int gw_addr_parse_literal(const char *host, size_t len, gw_sockaddr_t *out, socklen_t *outlen);

/* Sets the port (0..65535) of an AF_INET or AF_INET6 address; others untouched. */
void gw_addr_set_port(gw_sockaddr_t *a, int port);

/* Splits s (len bytes): "host", "host:port", "[v6]", "[v6]:port" (and with
 * GW_ADDR_BARE_V6 "::1:80"). The port, when there is a ':', must be valid
 * (gw_addr_parse_port). Returns 0, or -1 for an empty or too long host, a
 * '[' without ']' or with anything but ":port" after it, or a bad port. The
 * host is not checked further (a name or a literal). */
int gw_addr_split(const char *s, size_t len, gw_hostport_t *out, int flags);

/* "unix:/path": the path (pointing into s, "/path"), else NULL. */
const char *gw_addr_unix_path(const char *s);

/* A unix socket path (non-empty, shorter than sun_path) as an address in
 * *out (zeroed first): its length, or 0 when the path is unusable. */
socklen_t gw_addr_from_unix(const char *path, gw_sockaddr_t *out);

/* A fixed address that needs no DNS (a data server's: Redis, Tarantool):
 * "unix:/path", "IP:port" or "localhost:port" (as 127.0.0.1). Its length,
 * or 0 when addr is none of these. */
socklen_t gw_addr_parse_fixed(const char *addr, gw_sockaddr_t *out);

/* The IP of an AF_INET/AF_INET6 address as text ("10.0.0.1", "::1": no port,
 * no brackets) into buf (size bytes, 46 is always enough). Returns 0, or -1
 * for another family or a buffer too small (buf is then ""). */
int gw_addr_to_string(const struct sockaddr *sa, char *buf, size_t size);

/* The whole address for logs: "10.0.0.1:80", "[::1]:80" or "unix:/path".
 * Returns 0, or -1 (buf "") for an unknown family or a buffer too small. */
int gw_addr_format(const struct sockaddr *sa, socklen_t len, char *buf, size_t size);

/* An address range "10.0.0.0/8", "2001:db8::/32", or one address "127.0.0.1"
 * (all its bits). */
typedef struct {
  int family;               /* AF_INET or AF_INET6 */
  int bits;                 /* prefix length: 0..32 or 0..128 */
  unsigned char net[16];    /* the address (4 or 16 bytes), host bits cleared */
} gw_cidr_t;

/* s (len bytes) as a range: "IP" or "IP/N" (IPv6 without brackets). Returns
 * 0, or -1 for a bad address or prefix length ("10.0.0.0/33", "/8", "x/8").
 * Host bits set in the address are cleared ("10.1.2.3/8" is 10.0.0.0/8). */
int gw_addr_parse_cidr(const char *s, size_t len, gw_cidr_t *out);

/* 1 if sa (AF_INET or AF_INET6; an IPv4-mapped IPv6 address counts as its
 * IPv4 address) lies in one of the n ranges, else 0. */
int gw_addr_cidr_match(const gw_cidr_t *list, size_t n, const struct sockaddr *sa);

/* The same for an address written as text (len bytes, "[v6]" accepted): -1
 * when it is no IP literal. */
int gw_addr_cidr_match_text(const gw_cidr_t *list, size_t n, const char *ip, size_t len);

#endif
