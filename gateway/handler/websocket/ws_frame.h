/* ws_frame.h - RFC 6455 on the server side, as pure functions over bytes:
 * the handshake's Sec-WebSocket-Accept, a frame parser that reassembles
 * fragmented messages and checks every rule a server must enforce, and the
 * encoder of the (unmasked) frames a server sends. No I/O, no allocation
 * but the message being reassembled: websocket.c does the sockets, the
 * fuzz target and spec/unit feed it bytes directly.
 *
 * Rules checked (the close code the peer gets): client frames must be
 * masked, reserved bits clear (no extension is negotiated), opcodes known,
 * control frames at most 125 bytes and never fragmented, a continuation only
 * inside a fragmented message and a new data frame never inside one (1002);
 * text messages valid UTF-8, checked as fragments arrive (1007); a message
 * (all its fragments) at most max_message bytes (1009). A close frame's
 * payload is a code (not 1005/1006/1015, not outside 1000..4999) and UTF-8
 * reason, or empty (1002/1007 otherwise). */
#ifndef GW_WS_FRAME_H
#define GW_WS_FRAME_H

#include <stddef.h>
#include <stdint.h>

enum {
  GW_WS_CONT = 0x0,
  GW_WS_TEXT = 0x1,
  GW_WS_BINARY = 0x2,
  GW_WS_CLOSE = 0x8,
  GW_WS_PING = 0x9,
  GW_WS_PONG = 0xA
};

/* Close codes used by the gateway. */
enum {
  GW_WS_NORMAL = 1000,
  GW_WS_GOING_AWAY = 1001,
  GW_WS_PROTOCOL_ERROR = 1002,
  GW_WS_NO_STATUS = 1005,   /* a close frame without a code (never sent) */
  GW_WS_BAD_DATA = 1007,    /* invalid UTF-8 in a text message */
  GW_WS_TOO_BIG = 1009,
  GW_WS_INTERNAL_ERROR = 1011
};

#define GW_WS_MAX_CONTROL 125
#define GW_WS_MAX_HEAD 14 /* 2 + 8 (length) + 4 (mask) */

/* What gw_ws_parse() found. */
typedef enum {
  GW_WS_EV_NONE,     /* all input consumed, nothing complete yet */
  GW_WS_EV_MESSAGE,  /* msg/msg_len: a whole data message (binary or text) */
  GW_WS_EV_PING,     /* ctl/ctl_len: the payload to echo in a pong */
  GW_WS_EV_PONG,
  GW_WS_EV_CLOSE,    /* close_code (GW_WS_NO_STATUS: none), reason in ctl+2 */
  GW_WS_EV_ERROR     /* error_code (1002/1007/1009) and error (a short text);
                        the parser is stuck in this state from now on */
} gw_ws_event_t;

typedef struct {
  size_t max_message;       /* the limit of a reassembled message (1009 beyond) */
  /* the frame being read */
  uint8_t head[GW_WS_MAX_HEAD];
  size_t head_len;          /* bytes of head[] gathered so far */
  int in_payload;           /* head done: reading `left` payload bytes */
  int fin, opcode;
  uint64_t left;
  uint8_t mask[4];
  unsigned mask_pos;
  /* the message being reassembled (owned; kept for the next one) */
  int msg_opcode;           /* GW_WS_TEXT / GW_WS_BINARY while fragments arrive; 0: none */
  char *msg;
  size_t msg_len, msg_cap;
  int msg_binary;           /* the message just returned was binary */
  uint32_t utf8;            /* UTF-8 check state across fragments */
  /* the control frame being read (at most 125 bytes) */
  uint8_t ctl[GW_WS_MAX_CONTROL];
  size_t ctl_len;
  int close_code;
  int error_code;
  const char *error;        /* static text */
  int failed;
} gw_ws_parser_t;

void gw_ws_parser_init(gw_ws_parser_t *p, size_t max_message);
/* Frees the message buffer. */
void gw_ws_parser_free(gw_ws_parser_t *p);
/* Lets go of a large message buffer once its message was taken (idle
 * connections keep nothing big). */
void gw_ws_parser_trim(gw_ws_parser_t *p);

/* Consumes data[0, len) until an event; *used says how much. Call again
 * with the rest after each event other than NONE (and never after ERROR).
 * A MESSAGE's bytes stay valid until the next call. Out of memory is an
 * ERROR with code 1011. */
gw_ws_event_t gw_ws_parse(gw_ws_parser_t *p, const uint8_t *data, size_t len, size_t *used);

/* The head of an unmasked frame (a server's) of len payload bytes into
 * out; returns its length (2, 4 or 10). */
size_t gw_ws_frame_head(uint8_t out[GW_WS_MAX_HEAD], int fin, int opcode, uint64_t len);

/* XORs data with mask, starting at mask byte `pos` (0..3); returns the next pos. */
unsigned gw_ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], unsigned pos);

/* UTF-8 checked incrementally: *state starts at 0; returns -1 on an invalid
 * sequence. A complete text ends with *state == 0. */
int gw_ws_utf8_check(uint32_t *state, const uint8_t *s, size_t n);

/* 1 when key (a Sec-WebSocket-Key) is base64 of 16 bytes. */
int gw_ws_key_valid(const char *key, size_t len);
/* Sec-WebSocket-Accept for key: base64(SHA-1(key + GUID)), 28 characters + NUL. */
void gw_ws_accept(const char *key, size_t len, char out[29]);
/* A fresh Sec-WebSocket-Key (base64 of 16 random bytes, NUL-terminated), as
 * a client sends it. 0, or -1 when no randomness could be had. */
int gw_ws_key_new(char out[25]);

#endif
