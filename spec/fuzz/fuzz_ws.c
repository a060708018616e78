/* fuzz_ws.c - libFuzzer target for the WebSocket frame parser (ws_frame.c):
 * what a client sends after the 101, as websocket.c feeds it.
 *
 * The first byte is the message size limit (in units of 64 bytes, 0: 64)
 * and the split point modulus; the rest is parsed once whole and once in
 * slices, and both runs must agree event by event (same kind, same message
 * bytes, same close or error code). Also checked on every input:
 *   - the parser never claims more bytes than it was given, and always
 *     makes progress until an event;
 *   - a message is within the limit, a text message valid UTF-8 (checked
 *     again from scratch), a control payload at most 125 bytes;
 *   - an error carries one of 1002/1007/1009 and the parser stays failed;
 *   - no leak (LSan), no memory error (ASan/UBSan). */
#define FUZZ_NAME "fuzz_ws"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "ws_frame.h"

#define MAX_EVENTS 4096

typedef struct {
  int ev, code, binary;
  size_t len;
  uint64_t sum; /* of the message or control payload */
} event_t;

static uint64_t digest(const void *p, size_t n)
{
  const uint8_t *b = p;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h ^ n;
}

/* Parses data in slices of at most `step` bytes; records the events. */
static size_t run(const uint8_t *data, size_t len, size_t max, size_t step, event_t *evs)
{
  gw_ws_parser_t p;
  gw_ws_parser_init(&p, max);
  size_t nev = 0, at = 0;
  while (at < len && nev < MAX_EVENTS) {
    size_t n = len - at < step ? len - at : step, used;
    gw_ws_event_t ev = gw_ws_parse(&p, data + at, n, &used);
    if (used > n) FAIL("parser claims %zu of %zu bytes", used, n);
    at += used;
    if (ev == GW_WS_EV_NONE) {
      if (used != n) FAIL("no event, but only %zu of %zu bytes used", used, n);
      continue;
    }
    event_t *e = &evs[nev++];
    memset(e, 0, sizeof(*e));
    e->ev = (int)ev;
    switch (ev) {
    case GW_WS_EV_MESSAGE: {
      if (p.msg_len > max) FAIL("message of %zu bytes over the %zu limit", p.msg_len, max);
      uint32_t st = 0;
      if (!p.msg_binary && (gw_ws_utf8_check(&st, (const uint8_t *)p.msg, p.msg_len) < 0 || st != 0))
        FAIL("text message of %zu bytes is not UTF-8", p.msg_len);
      e->binary = p.msg_binary;
      e->len = p.msg_len;
      e->sum = digest(p.msg, p.msg_len);
      gw_ws_parser_trim(&p);
      break;
    }
    case GW_WS_EV_PING:
    case GW_WS_EV_PONG:
    case GW_WS_EV_CLOSE:
      if (p.ctl_len > GW_WS_MAX_CONTROL) FAIL("control payload of %zu bytes", p.ctl_len);
      e->len = p.ctl_len;
      e->sum = digest(p.ctl, p.ctl_len);
      e->code = ev == GW_WS_EV_CLOSE ? p.close_code : 0;
      break;
    case GW_WS_EV_ERROR: {
      e->code = p.error_code;
      if (e->code != 1002 && e->code != 1007 && e->code != 1009) FAIL("error code %d", e->code);
      size_t u2;
      if (gw_ws_parse(&p, data, len, &u2) != GW_WS_EV_ERROR || u2 != 0) FAIL("a failed parser went on");
      at = len;
      break;
    }
    default: break;
    }
  }
  gw_ws_parser_free(&p);
  return nev;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  size_t max = (size_t)(data[0] & 0x3f ? data[0] & 0x3f : 1) * 64;
  size_t step = (size_t)(data[0] >> 6) * 3 + 1; /* 1, 4, 7, 10 */
  data++;
  size--;
  static event_t whole[MAX_EVENTS], sliced[MAX_EVENTS];
  size_t a = run(data, size, max, size ? size : 1, whole);
  size_t b = run(data, size, max, step, sliced);
  if (a != b) FAIL("%zu events whole, %zu in slices of %zu", a, b, step);
  for (size_t i = 0; i < a; i++) {
    if (memcmp(&whole[i], &sliced[i], sizeof(event_t)) != 0)
      FAIL("event %zu differs: kind %d/%d code %d/%d len %zu/%zu", i, whole[i].ev, sliced[i].ev, whole[i].code,
           sliced[i].code, whole[i].len, sliced[i].len);
  }
  return 0;
}
