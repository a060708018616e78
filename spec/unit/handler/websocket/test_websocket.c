/* test_websocket.c - websocket.c over a socketpair on a real event_base: the
 * 101 and early bytes, messages to the owner, pings answered, a kept
 * message and gw_ws_resume(), the close handshake both ways, a protocol
 * error's close code, output above the high water mark and on_drain, the
 * idle timeout, release and free.
 * unit: websocket ws_frame byte_end tls_server tls_common log -lssl -lcrypto */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "unit.h"
#include "websocket.h"
#include "ws_frame.h"

static struct event_base *base;

static void spin(int rounds)
{
  for (int i = 0; i < rounds; i++) event_base_loop(base, EVLOOP_NONBLOCK);
}

typedef struct {
  int messages, closed, drained, freed, keep; /* keep: on_message returns 0 */
  int close_code;
  char last[256];
  size_t last_len;
  int last_binary;
} owner_t;

static int on_message(void *arg, const char *data, size_t len, int binary)
{
  owner_t *o = arg;
  if (o->keep) return 0;
  o->messages++;
  o->last_len = len < sizeof(o->last) ? len : sizeof(o->last);
  memcpy(o->last, data, o->last_len);
  o->last_binary = binary;
  return 1;
}

static void on_closed(void *arg, int code)
{
  owner_t *o = arg;
  o->closed++;
  o->close_code = code;
}

static void on_drain(void *arg)
{
  ((owner_t *)arg)->drained++;
}

static void on_free(void *arg)
{
  ((owner_t *)arg)->freed++;
}

static const gw_ws_events_t events = {on_message, on_closed, on_drain, on_free};

/* A masked client frame. */
static size_t client_frame(uint8_t *out, int opcode, const void *payload, size_t len)
{
  static const uint8_t mask[4] = {1, 2, 3, 4};
  size_t n = gw_ws_frame_head(out, 1, opcode, len);
  out[1] |= 0x80;
  memcpy(out + n, mask, 4);
  memcpy(out + n + 4, payload, len);
  gw_ws_mask(out + n + 4, len, mask, 0);
  return n + 4 + len;
}

static void send_frame(int fd, int opcode, const void *payload, size_t len)
{
  uint8_t buf[512];
  size_t n = client_frame(buf, opcode, payload, len);
  CHECK_EQ_INT((int)write(fd, buf, n), (int)n);
}

/* Reads one server frame (after spinning): its opcode, payload into p. -1: none. */
static int read_frame(int fd, char *p, size_t cap, size_t *len)
{
  spin(10);
  uint8_t h[2];
  if (read(fd, h, 2) != 2) return -1;
  size_t n = h[1] & 0x7f;
  if (n >= 126 || n > cap) return -2; /* small frames only here */
  if (n && read(fd, p, n) != (ssize_t)n) return -3;
  *len = n;
  return h[0] & 0x0f;
}

static gw_ws_t *make(int *client, owner_t *o, int timeout_ms, const char *early, size_t early_len)
{
  int sp[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
  fcntl(sp[0], F_SETFL, O_NONBLOCK);
  fcntl(sp[1], F_SETFL, O_NONBLOCK);
  *client = sp[0];
  struct evbuffer *to = evbuffer_new(), *from = evbuffer_new();
  evbuffer_add(to, "HTTP/1.1 101 OK\r\n\r\n", 19);
  if (early_len) evbuffer_add(from, early, early_len);
  gw_byte_end_t end = {sp[1], NULL, NULL};
  gw_ws_t *ws = gw_ws_new(base, &end, "test", to, from, 100, timeout_ms, "chat");
  evbuffer_free(to);
  evbuffer_free(from);
  memset(o, 0, sizeof(*o));
  gw_ws_set_events(ws, &events, o);
  return ws;
}

static void test_messages_and_ping(void)
{
  int c;
  owner_t o;
  uint8_t early[64];
  size_t en = client_frame(early, GW_WS_TEXT, "early", 5);
  gw_ws_t *ws = make(&c, &o, 0, (const char *)early, en);
  CHECK_EQ_STR(gw_ws_protocol(ws), "chat");
  char head[19];
  spin(5);
  CHECK_EQ_INT((int)read(c, head, sizeof(head)), 19);
  CHECK_EQ_INT(o.messages, 1); /* the bytes read with the handshake */
  CHECK(o.last_len == 5 && memcmp(o.last, "early", 5) == 0);
  send_frame(c, GW_WS_BINARY, "\x01\x02", 2);
  spin(5);
  CHECK_EQ_INT(o.messages, 2);
  CHECK(o.last_binary);
  send_frame(c, GW_WS_PING, "pp", 2);
  char p[200];
  size_t n;
  CHECK_EQ_INT(read_frame(c, p, sizeof(p), &n), GW_WS_PONG);
  CHECK(n == 2 && memcmp(p, "pp", 2) == 0);
  CHECK_EQ_INT(gw_ws_send(ws, 0, "hi", 2), 0);
  CHECK_EQ_INT(read_frame(c, p, sizeof(p), &n), GW_WS_TEXT);
  CHECK(n == 2 && memcmp(p, "hi", 2) == 0);
  /* The peer closes: echoed, the owner told, the socket closed. */
  send_frame(c, GW_WS_CLOSE, "\x03\xe8", 2);
  CHECK_EQ_INT(read_frame(c, p, sizeof(p), &n), GW_WS_CLOSE);
  CHECK(n == 2 && memcmp(p, "\x03\xe8", 2) == 0);
  CHECK_EQ_INT(o.closed, 1);
  CHECK_EQ_INT(o.close_code, 1000);
  CHECK_EQ_INT((int)read(c, p, 1), 0); /* EOF */
  CHECK_EQ_INT(gw_ws_send(ws, 0, "late", 4), -1);
  CHECK_EQ_INT(o.freed, 0);
  gw_ws_release(ws);
  CHECK_EQ_INT(o.freed, 1);
  CHECK_EQ_UINT(gw_ws_count(), 0);
  close(c);
}

static void test_keep_and_resume(void)
{
  int c;
  owner_t o;
  gw_ws_t *ws = make(&c, &o, 0, NULL, 0);
  o.keep = 1;
  uint8_t two[64];
  size_t n = client_frame(two, GW_WS_TEXT, "one", 3);
  n += client_frame(two + n, GW_WS_TEXT, "two", 3);
  CHECK_EQ_INT((int)write(c, two, n), (int)n);
  spin(5);
  CHECK_EQ_INT(o.messages, 0); /* kept: nothing more is read */
  o.keep = 0;
  gw_ws_resume(ws);
  spin(5);
  CHECK_EQ_INT(o.messages, 2); /* the kept one again, then the rest */
  CHECK(o.last_len == 3 && memcmp(o.last, "two", 3) == 0);
  /* We close: a close frame goes out, the peer's answer ends it. */
  gw_ws_close(ws, 4000, "bye", 3);
  CHECK(!gw_ws_is_open(ws));
  char p[200];
  size_t len;
  char h[19];
  CHECK_EQ_INT((int)read(c, h, sizeof(h)), 19);
  CHECK_EQ_INT(read_frame(c, p, sizeof(p), &len), GW_WS_CLOSE);
  CHECK(len == 5 && memcmp(p, "\x0f\xa0" "bye", 5) == 0);
  send_frame(c, GW_WS_TEXT, "dropped", 7);
  send_frame(c, GW_WS_CLOSE, "\x0f\xa0", 2);
  spin(10);
  CHECK_EQ_INT(o.messages, 2);
  CHECK_EQ_INT(o.closed, 1);
  CHECK_EQ_INT((int)read(c, p, 1), 0);
  gw_ws_release(ws);
  CHECK_EQ_INT(o.freed, 1);
  close(c);
}

static void test_protocol_error(void)
{
  int c;
  owner_t o;
  gw_ws_t *ws = make(&c, &o, 0, NULL, 0);
  char big[101];
  memset(big, 'x', sizeof(big));
  uint8_t buf[256];
  size_t n = client_frame(buf, GW_WS_TEXT, big, sizeof(big)); /* over the limit of 100 */
  CHECK_EQ_INT((int)write(c, buf, n), (int)n);
  spin(10);
  char h[19], p[200];
  size_t len;
  CHECK_EQ_INT((int)read(c, h, sizeof(h)), 19);
  CHECK_EQ_INT(read_frame(c, p, sizeof(p), &len), GW_WS_CLOSE);
  CHECK(len >= 2 && (((uint8_t)p[0] << 8) | (uint8_t)p[1]) == 1009);
  CHECK_EQ_INT(o.close_code, 1009);
  CHECK_EQ_INT((int)read(c, p, 1), 0);
  gw_ws_release(ws);
  close(c);
}

static void test_high_water_and_timeout(void)
{
  int c;
  owner_t o;
  gw_ws_t *ws = make(&c, &o, 200, NULL, 0);
  char *chunk = calloc(1, 65536);
  for (int i = 0; i < 8; i++) gw_ws_send(ws, 1, chunk, 65536);
  spin(5);
  CHECK(gw_ws_queued(ws) > GW_WS_HIGH_WATER / 2); /* the socketpair holds far less than 512 KiB */
  /* The peer reads it all: on_drain once below the low water mark. */
  char buf[65536];
  for (int i = 0; i < 200 && gw_ws_queued(ws) > 0; i++) {
    spin(2);
    while (read(c, buf, sizeof(buf)) > 0) {}
  }
  CHECK_EQ_UINT(gw_ws_queued(ws), 0);
  CHECK_EQ_INT(o.drained, 1);
  /* Then silence: the idle timeout closes it. */
  usleep(300 * 1000);
  spin(5);
  CHECK_EQ_INT(o.closed, 1);
  CHECK_EQ_INT(o.close_code, 1006);
  gw_ws_release(ws);
  CHECK_EQ_INT(o.freed, 1);
  free(chunk);
  close(c);
}

static void test_close_all(void)
{
  int c;
  owner_t o;
  make(&c, &o, 0, NULL, 0);
  CHECK_EQ_UINT(gw_ws_count(), 1);
  gw_ws_close_all();
  CHECK_EQ_UINT(gw_ws_count(), 0);
  CHECK_EQ_INT(o.freed, 1);
  CHECK_EQ_INT(o.closed, 0); /* worker exit: on_free only */
  char h[19], p[200];
  size_t len;
  CHECK_EQ_INT((int)read(c, h, sizeof(h)), 19);
  CHECK_EQ_INT(read_frame(c, p, sizeof(p), &len), GW_WS_CLOSE); /* going away */
  CHECK(len == 2 && (((uint8_t)p[0] << 8) | (uint8_t)p[1]) == 1001);
  close(c);
}

int main(void)
{
  base = event_base_new();
  test_messages_and_ping();
  test_keep_and_resume();
  test_protocol_error();
  test_high_water_and_timeout();
  test_close_all();
  event_base_free(base);
  return unit_done();
}
