/* ws_frame.c - RFC 6455 frames and handshake key (see ws_frame.h). */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "ws_frame.h"

/* Message buffers above this are freed once their message was taken. */
#define KEEP_MSG_BUF 4096

void gw_ws_parser_init(gw_ws_parser_t *p, size_t max_message)
{
  memset(p, 0, sizeof(*p));
  p->max_message = max_message;
}

void gw_ws_parser_free(gw_ws_parser_t *p)
{
  free(p->msg);
  p->msg = NULL;
  p->msg_len = p->msg_cap = 0;
}

void gw_ws_parser_trim(gw_ws_parser_t *p)
{
  if (p->msg_opcode == 0 && p->msg_cap > KEEP_MSG_BUF) gw_ws_parser_free(p);
}

/* The UTF-8 state: the continuation bytes still due (bits 0-1) and the
 * range the next one must be in (bits 8-15 low, 16-23 high), which rules out
 * overlong forms, surrogates and code points past U+10FFFF. */
static uint32_t utf8_expect(unsigned need, unsigned lo, unsigned hi)
{
  return need | lo << 8 | hi << 16;
}

int gw_ws_utf8_check(uint32_t *state, const uint8_t *s, size_t n)
{
  uint32_t st = *state;
  for (size_t i = 0; i < n; i++) {
    unsigned b = s[i];
    unsigned need = st & 3;
    if (need == 0) {
      if (b < 0x80) continue;
      if (b >= 0xC2 && b <= 0xDF) st = utf8_expect(1, 0x80, 0xBF);
      else if (b == 0xE0) st = utf8_expect(2, 0xA0, 0xBF);
      else if (b == 0xED) st = utf8_expect(2, 0x80, 0x9F);
      else if (b >= 0xE1 && b <= 0xEF) st = utf8_expect(2, 0x80, 0xBF);
      else if (b == 0xF0) st = utf8_expect(3, 0x90, 0xBF);
      else if (b >= 0xF1 && b <= 0xF3) st = utf8_expect(3, 0x80, 0xBF);
      else if (b == 0xF4) st = utf8_expect(3, 0x80, 0x8F);
      else return -1;
    } else {
      if (b < ((st >> 8) & 0xFF) || b > ((st >> 16) & 0xFF)) return -1;
      st = need == 1 ? 0 : utf8_expect(need - 1, 0x80, 0xBF);
    }
  }
  *state = st;
  return 0;
}

unsigned gw_ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], unsigned pos)
{
  for (size_t i = 0; i < len; i++) {
    data[i] ^= mask[pos];
    pos = (pos + 1) & 3;
  }
  return pos;
}

static gw_ws_event_t fail(gw_ws_parser_t *p, int code, const char *why)
{
  p->failed = 1;
  p->error_code = code;
  p->error = why;
  return GW_WS_EV_ERROR;
}

/* Bytes of the head, known once its first two are. */
static size_t head_need(const gw_ws_parser_t *p)
{
  if (p->head_len < 2) return 2;
  unsigned len7 = p->head[1] & 0x7F;
  return 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + ((p->head[1] & 0x80) ? 4 : 0);
}

/* The first two bytes: everything that needs no length. */
static gw_ws_event_t check_start(gw_ws_parser_t *p)
{
  unsigned b0 = p->head[0], b1 = p->head[1];
  int opcode = (int)(b0 & 0x0F);
  if (b0 & 0x70) return fail(p, GW_WS_PROTOCOL_ERROR, "reserved bits set");
  if (opcode != GW_WS_CONT && opcode != GW_WS_TEXT && opcode != GW_WS_BINARY && opcode != GW_WS_CLOSE &&
      opcode != GW_WS_PING && opcode != GW_WS_PONG)
    return fail(p, GW_WS_PROTOCOL_ERROR, "unknown opcode");
  if (!(b1 & 0x80)) return fail(p, GW_WS_PROTOCOL_ERROR, "unmasked client frame");
  if (opcode & 8) {
    if (!(b0 & 0x80)) return fail(p, GW_WS_PROTOCOL_ERROR, "fragmented control frame");
    if ((b1 & 0x7F) > GW_WS_MAX_CONTROL) return fail(p, GW_WS_PROTOCOL_ERROR, "control frame over 125 bytes");
  } else if (opcode == GW_WS_CONT && p->msg_opcode == 0) {
    return fail(p, GW_WS_PROTOCOL_ERROR, "continuation frame outside a fragmented message");
  } else if (opcode != GW_WS_CONT && p->msg_opcode != 0) {
    return fail(p, GW_WS_PROTOCOL_ERROR, "new message inside a fragmented one");
  }
  return GW_WS_EV_NONE;
}

/* The whole head is there: length and mask. */
static gw_ws_event_t start_payload(gw_ws_parser_t *p)
{
  const uint8_t *h = p->head;
  unsigned len7 = h[1] & 0x7F;
  uint64_t len = len7;
  size_t at = 2;
  if (len7 == 126) {
    len = (uint64_t)h[2] << 8 | h[3];
    at = 4;
  } else if (len7 == 127) {
    len = 0;
    for (int i = 0; i < 8; i++) len = len << 8 | h[2 + i];
    if (len >> 63) return fail(p, GW_WS_PROTOCOL_ERROR, "frame length with its top bit set");
    at = 10;
  }
  memcpy(p->mask, h + at, 4);
  p->mask_pos = 0;
  p->fin = h[0] >> 7;
  p->opcode = h[0] & 0x0F;
  p->left = len;
  if (p->opcode & 8) {
    p->ctl_len = 0;
  } else {
    if (p->opcode != GW_WS_CONT) { /* a new message */
      p->msg_opcode = p->opcode;
      p->msg_len = 0;
      p->utf8 = 0;
    }
    if (len > p->max_message || p->msg_len > p->max_message - len)
      return fail(p, GW_WS_TOO_BIG, "message over the size limit");
  }
  p->in_payload = 1;
  return GW_WS_EV_NONE;
}

static int msg_reserve(gw_ws_parser_t *p, size_t extra)
{
  if (p->msg_cap - p->msg_len >= extra) return 0;
  size_t cap = p->msg_cap ? p->msg_cap : 256;
  while (cap - p->msg_len < extra) cap *= 2;
  char *m = realloc(p->msg, cap);
  if (m == NULL) return -1;
  p->msg = m;
  p->msg_cap = cap;
  return 0;
}

/* A close frame's payload: empty, or a code a peer may send and a UTF-8 reason. */
static gw_ws_event_t parse_close(gw_ws_parser_t *p)
{
  if (p->ctl_len == 0) {
    p->close_code = GW_WS_NO_STATUS;
    return GW_WS_EV_CLOSE;
  }
  if (p->ctl_len == 1) return fail(p, GW_WS_PROTOCOL_ERROR, "close frame with a 1-byte payload");
  int code = p->ctl[0] << 8 | p->ctl[1];
  int known = (code >= 1000 && code <= 1014 && code != 1004 && code != 1005 && code != 1006) ||
              (code >= 3000 && code <= 4999);
  if (!known) return fail(p, GW_WS_PROTOCOL_ERROR, "invalid close code");
  uint32_t st = 0;
  if (gw_ws_utf8_check(&st, p->ctl + 2, p->ctl_len - 2) < 0 || st != 0)
    return fail(p, GW_WS_BAD_DATA, "close reason is not UTF-8");
  p->close_code = code;
  return GW_WS_EV_CLOSE;
}

/* The payload ended: what the frame means. */
static gw_ws_event_t end_frame(gw_ws_parser_t *p)
{
  p->in_payload = 0;
  p->head_len = 0;
  switch (p->opcode) {
  case GW_WS_PING: return GW_WS_EV_PING;
  case GW_WS_PONG: return GW_WS_EV_PONG;
  case GW_WS_CLOSE: return parse_close(p);
  default: break;
  }
  if (!p->fin) return GW_WS_EV_NONE;
  if (p->msg_opcode == GW_WS_TEXT && p->utf8 != 0) return fail(p, GW_WS_BAD_DATA, "text message is not UTF-8");
  p->msg_binary = p->msg_opcode == GW_WS_BINARY;
  p->msg_opcode = 0;
  return GW_WS_EV_MESSAGE;
}

gw_ws_event_t gw_ws_parse(gw_ws_parser_t *p, const uint8_t *data, size_t len, size_t *used)
{
  size_t i = 0;
  gw_ws_event_t ev = GW_WS_EV_NONE;
  if (p->failed) {
    *used = 0;
    return GW_WS_EV_ERROR;
  }
  while (ev == GW_WS_EV_NONE && (i < len || (p->in_payload && p->left == 0))) {
    if (!p->in_payload) {
      p->head[p->head_len++] = data[i++];
      if (p->head_len == 2) ev = check_start(p);
      if (ev == GW_WS_EV_NONE && p->head_len >= 2 && p->head_len == head_need(p)) ev = start_payload(p);
      continue;
    }
    size_t n = (uint64_t)(len - i) < p->left ? len - i : (size_t)p->left;
    if (p->opcode & 8) {
      memcpy(p->ctl + p->ctl_len, data + i, n);
      p->mask_pos = gw_ws_mask(p->ctl + p->ctl_len, n, p->mask, p->mask_pos);
      p->ctl_len += n;
    } else if (n > 0) {
      if (msg_reserve(p, n) < 0) {
        ev = fail(p, GW_WS_INTERNAL_ERROR, "out of memory");
        break;
      }
      uint8_t *at = (uint8_t *)p->msg + p->msg_len;
      memcpy(at, data + i, n);
      p->mask_pos = gw_ws_mask(at, n, p->mask, p->mask_pos);
      p->msg_len += n;
      if (p->msg_opcode == GW_WS_TEXT && gw_ws_utf8_check(&p->utf8, at, n) < 0)
        ev = fail(p, GW_WS_BAD_DATA, "text message is not UTF-8");
    }
    i += n;
    p->left -= n;
    if (ev == GW_WS_EV_NONE && p->left == 0) ev = end_frame(p);
  }
  *used = i;
  return ev;
}

size_t gw_ws_frame_head(uint8_t out[GW_WS_MAX_HEAD], int fin, int opcode, uint64_t len)
{
  out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0F));
  if (len < 126) {
    out[1] = (uint8_t)len;
    return 2;
  }
  if (len <= 0xFFFF) {
    out[1] = 126;
    out[2] = (uint8_t)(len >> 8);
    out[3] = (uint8_t)len;
    return 4;
  }
  out[1] = 127;
  for (int i = 0; i < 8; i++) out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
  return 10;
}

static int b64_char(char c)
{
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

int gw_ws_key_valid(const char *key, size_t len)
{
  /* 16 bytes encode to 22 characters and "==". */
  if (len != 24 || key[22] != '=' || key[23] != '=') return 0;
  for (size_t i = 0; i < 22; i++)
    if (!b64_char(key[i])) return 0;
  return 1;
}

void gw_ws_accept(const char *key, size_t len, char out[29])
{
  static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  unsigned char digest[SHA_DIGEST_LENGTH];
  char buf[128];
  if (len > sizeof(buf) - (sizeof(guid) - 1)) len = sizeof(buf) - (sizeof(guid) - 1); /* keys are 24 bytes */
  memcpy(buf, key, len);
  memcpy(buf + len, guid, sizeof(guid) - 1);
  SHA1((const unsigned char *)buf, len + sizeof(guid) - 1, digest);
  EVP_EncodeBlock((unsigned char *)out, digest, SHA_DIGEST_LENGTH); /* 28 characters and a NUL */
}

int gw_ws_key_new(char out[25])
{
  unsigned char nonce[16];
  if (RAND_bytes(nonce, sizeof(nonce)) != 1) return -1;
  EVP_EncodeBlock((unsigned char *)out, nonce, sizeof(nonce)); /* 24 characters and a NUL */
  return 0;
}
