/* fcgi_record.h - the FastCGI wire format (FastCGI 1.0 spec), pure: record
 * headers, name-value pairs, a byte-at-a-time-safe record decoder for one
 * request id, and the CGI response head (RFC 3875 §6) found at the start of
 * FCGI_STDOUT. No I/O and nothing of the gateway above helpers, so the unit
 * test and the fuzz target drive exactly what fcgi_client.c runs. */
#ifndef GW_FCGI_H
#define GW_FCGI_H

#include <stddef.h>
#include <event2/buffer.h>

#include "addr.h"
#include "headers.h"

#define GW_FCGI_VERSION 1
#define GW_FCGI_HEADER_LEN 8
#define GW_FCGI_MAX_CONTENT 65535

enum {
  GW_FCGI_BEGIN_REQUEST = 1,
  GW_FCGI_ABORT_REQUEST = 2,
  GW_FCGI_END_REQUEST = 3,
  GW_FCGI_PARAMS = 4,
  GW_FCGI_STDIN = 5,
  GW_FCGI_STDOUT = 6,
  GW_FCGI_STDERR = 7,
  GW_FCGI_DATA = 8,
  GW_FCGI_GET_VALUES = 9,
  GW_FCGI_GET_VALUES_RESULT = 10,
  GW_FCGI_UNKNOWN_TYPE = 11,
};

#define GW_FCGI_RESPONDER 1
#define GW_FCGI_KEEP_CONN 1
#define GW_FCGI_REQUEST_COMPLETE 0

/* A FastCGI target as configured: "unix:/path.sock" or "IP:port"
 * ("[v6]:port") into *out, returning its length; 0 for a name (an upstream
 * group's, checked by the caller); -1 for anything else (empty, a host
 * name with a port: FastCGI addresses are never resolved, a bad path). */
int gw_fcgi_target_parse(const char *target, gw_sockaddr_t *out);

/* -- encoding -------------------------------------------------------------- */

/* The 8-byte header of a record of `type` for request `id` with clen bytes
 * of content (<= GW_FCGI_MAX_CONTENT) and padlen of padding. */
void gw_fcgi_put_header(unsigned char out[GW_FCGI_HEADER_LEN], int type, unsigned id, size_t clen, size_t padlen);

/* FCGI_BEGIN_REQUEST (role responder; flags FCGI_KEEP_CONN when keep_conn):
 * 16 bytes, header included. */
void gw_fcgi_put_begin(unsigned char out[16], unsigned id, int keep_conn);

/* Bytes a name-value pair takes (1-byte lengths below 128, else 4-byte);
 * 0 when a length does not fit 31 bits. */
size_t gw_fcgi_pair_size(size_t nlen, size_t vlen);

/* Writes the pair at out (gw_fcgi_pair_size bytes of room); returns the
 * bytes written. */
size_t gw_fcgi_put_pair(unsigned char *out, const char *name, size_t nlen, const char *value, size_t vlen);

/* Appends data as records of `type` (split at GW_FCGI_MAX_CONTENT, no
 * padding); len 0 appends the empty record that ends a stream. Returns 0,
 * or -1 when out of memory. */
int gw_fcgi_add_records(struct evbuffer *out, int type, unsigned id, const void *data, size_t len);

/* -- decoding -------------------------------------------------------------- */

typedef enum {
  GW_FCGI_NEED_MORE = 0, /* all of the input was consumed; nothing to report */
  GW_FCGI_OUT_STDOUT,    /* piece of FCGI_STDOUT (len 0: the stream's end record) */
  GW_FCGI_OUT_STDERR,    /* piece of FCGI_STDERR (len 0: its end) */
  GW_FCGI_OUT_END,       /* FCGI_END_REQUEST: app_status, protocol_status set */
  GW_FCGI_OUT_ERROR,     /* malformed: err says what; the connection is unusable */
} gw_fcgi_out_t;

typedef struct {
  unsigned id;             /* the request id records must carry */
  int state;               /* internal */
  unsigned char hdr[GW_FCGI_HEADER_LEN];
  size_t hdr_got;
  int type;
  size_t content_left, pad_left;
  unsigned char end[8];    /* FCGI_END_REQUEST body, gathered */
  size_t end_got;
  int ended;               /* FCGI_END_REQUEST was decoded: any further byte is an error */
  /* results */
  const char *data;        /* the piece (points into the input) */
  size_t len;
  unsigned long app_status;
  int protocol_status;
  const char *err;         /* static message for GW_FCGI_OUT_ERROR */
} gw_fcgi_decoder_t;

void gw_fcgi_decoder_init(gw_fcgi_decoder_t *d, unsigned id);

/* Decodes from data (len bytes) until something is to report; *used is the
 * number of bytes consumed (the caller drops them and calls again with the
 * rest). Never reads past len; any split of the input gives the same pieces
 * (pieces of a record may come in several parts). Unexpected record types,
 * another request id, a version other than 1, an END_REQUEST whose length is
 * not 8, or any byte after END_REQUEST: GW_FCGI_OUT_ERROR. */
gw_fcgi_out_t gw_fcgi_decode(gw_fcgi_decoder_t *d, const char *data, size_t len, size_t *used);

/* -- the CGI response head ------------------------------------------------- */

/* Longest head accepted (the status line of CGI is its Status field). */
#define GW_CGI_MAX_HEAD (64 * 1024)

/* Looks for the end of the head (a blank line: "\r\n\r\n", "\n\n", or mixed)
 * in buf (len bytes, the head gathered so far from its start), scanning from
 * offset `from` on (what an earlier call saw, minus 3). Returns the
 * head's length including the blank line, 0 when it is not complete yet, or
 * -1 when len passed GW_CGI_MAX_HEAD without one. */
long gw_cgi_head_end(const char *buf, size_t len, size_t from);

/* Parses a complete head (buf, len from gw_cgi_head_end) into *status and
 * out (appended; "Status" is consumed, never copied). Status defaults to
 * 200; a Location without Status gives 302 (CGI's client or local redirect:
 * both answered as a redirect, as nginx does). Field names must be tokens,
 * lines end in LF or CRLF, values are trimmed. Returns 0, or -1 with *err
 * set (a line without ':', a bad name or value, a bad Status). */
int gw_cgi_head_parse(const char *buf, size_t len, int *status, gw_headers_t *out, const char **err);

#endif
