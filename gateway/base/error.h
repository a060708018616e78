/* error.h - what went wrong with an upstream exchange, a DNS lookup or a
 * sub-request, as a kind that decisions read (retry on the next server? 502 or
 * 504? Gateway::TimeoutError or Gateway::UpstreamError?) together with the
 * static message that is logged and becomes the Ruby exception's message.
 * Header only; includes nothing of the gateway. */
#ifndef GW_ERROR_H
#define GW_ERROR_H

typedef enum {
  GW_OK = 0,
  GW_ERR_CONNECT_REFUSED, /* "connection refused" */
  GW_ERR_CONNECT_TIMEOUT, /* "upstream connect timed out" */
  GW_ERR_CONNECT,         /* "cannot connect to upstream": socket(), connect() or a
                             bad address; also an unexpected errno on a connection
                             (as before the kinds existed) */
  GW_ERR_RESET,           /* "connection reset by upstream" */
  GW_ERR_CLOSED,          /* "upstream closed connection prematurely" */
  GW_ERR_TIMEOUT,         /* "upstream timed out", "sub-request timed out" */
  GW_ERR_BAD_RESPONSE,    /* "invalid upstream response" */
  GW_ERR_TOO_LARGE,       /* "upstream response too large" */
  GW_ERR_DNS_NOT_FOUND,   /* "host not found" */
  GW_ERR_DNS_TIMEOUT,     /* "DNS server did not answer" */
  GW_ERR_DNS_FAILURE,     /* "DNS server failure", "DNS lookup failed" */
  GW_ERR_BAD_NAME,        /* "invalid host name", "invalid port" */
  GW_ERR_NOMEM,           /* "out of memory" */
  GW_ERR_TLS,             /* "upstream TLS handshake failed" (the reason is logged where
                             it happened: certificate verification, protocol, ...) */
  GW_ERR_KIND_COUNT
} gw_err_kind_t;

/* An outcome: kind GW_OK with msg NULL, or a failure kind with its static
 * message (never freed; valid forever). Passed by value. */
typedef struct {
  gw_err_kind_t kind;
  const char *msg;
} gw_err_t;

static inline gw_err_t gw_err(gw_err_kind_t kind, const char *msg)
{
  gw_err_t e = {kind, kind == GW_OK ? (const char *)0 : msg};
  return e;
}

static inline gw_err_t gw_err_none(void)
{
  return gw_err(GW_OK, 0);
}

/* Nothing of the request reached the upstream (refused, connect timeout,
 * cannot connect, host not found, the TLS handshake failed): trying another server is safe. */
static inline int gw_err_is_connect_failure(gw_err_kind_t kind)
{
  return kind == GW_ERR_CONNECT_REFUSED || kind == GW_ERR_CONNECT_TIMEOUT || kind == GW_ERR_CONNECT ||
         kind == GW_ERR_DNS_NOT_FOUND || kind == GW_ERR_TLS;
}

/* Something did not answer in time (connecting, the exchange, DNS). */
static inline int gw_err_is_timeout(gw_err_kind_t kind)
{
  return kind == GW_ERR_CONNECT_TIMEOUT || kind == GW_ERR_TIMEOUT || kind == GW_ERR_DNS_TIMEOUT;
}

/* The status a proxy answers with: 504 for timeouts, 502 for any other
 * failure, 0 for GW_OK. */
static inline int gw_err_status(gw_err_kind_t kind)
{
  if (kind == GW_OK) return 0;
  return gw_err_is_timeout(kind) ? 504 : 502;
}

/* The enum's name without the prefix ("CONNECT_REFUSED"), for tests and
 * debug output; "?" for an unknown value. */
static inline const char *gw_err_name(gw_err_kind_t kind)
{
  switch (kind) {
  case GW_OK: return "OK";
  case GW_ERR_CONNECT_REFUSED: return "CONNECT_REFUSED";
  case GW_ERR_CONNECT_TIMEOUT: return "CONNECT_TIMEOUT";
  case GW_ERR_CONNECT: return "CONNECT";
  case GW_ERR_RESET: return "RESET";
  case GW_ERR_CLOSED: return "CLOSED";
  case GW_ERR_TIMEOUT: return "TIMEOUT";
  case GW_ERR_BAD_RESPONSE: return "BAD_RESPONSE";
  case GW_ERR_TOO_LARGE: return "TOO_LARGE";
  case GW_ERR_DNS_NOT_FOUND: return "DNS_NOT_FOUND";
  case GW_ERR_DNS_TIMEOUT: return "DNS_TIMEOUT";
  case GW_ERR_DNS_FAILURE: return "DNS_FAILURE";
  case GW_ERR_BAD_NAME: return "BAD_NAME";
  case GW_ERR_NOMEM: return "NOMEM";
  case GW_ERR_TLS: return "TLS";
  case GW_ERR_KIND_COUNT: break;
  }
  return "?";
}

#endif
