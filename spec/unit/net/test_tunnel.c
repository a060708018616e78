/* test_tunnel.c - tunnel.c: bytes both ways, bytes already due, half-close,
 * the idle timeout, close_all; over socketpairs on a real event_base.
 * unit: tunnel byte_end tls_server tls_common log -lssl -lcrypto */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "tunnel.h"
#include "unit.h"

static struct event_base *base;

static void spin(int rounds)
{
  for (int i = 0; i < rounds; i++) event_base_loop(base, EVLOOP_NONBLOCK);
}

static void nonblock(int fd)
{
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* A tunnel between two socketpairs: *a and *b are the outer ends. */
static gw_tunnel_t *pair_tunnel(int *a, int *b, struct evbuffer *to_a, struct evbuffer *to_b, int timeout_ms)
{
  int p1[2], p2[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, p1) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, p2) < 0) return NULL;
  nonblock(p1[1]);
  nonblock(p2[1]);
  nonblock(p1[0]);
  nonblock(p2[0]);
  *a = p1[0];
  *b = p2[0];
  return gw_tunnel_new(base, p1[1], to_a, p2[1], to_b, timeout_ms);
}

/* Reads what is there (after spinning the loop). */
static ssize_t drain(int fd, char *buf, size_t n)
{
  spin(10);
  ssize_t r = read(fd, buf, n);
  return r;
}

static void test_both_ways(void)
{
  int a, b;
  struct evbuffer *ta = evbuffer_new(), *tb = evbuffer_new();
  evbuffer_add(ta, "HEAD", 4);
  evbuffer_add(tb, "early", 5);
  gw_tunnel_t *t = pair_tunnel(&a, &b, ta, tb, 0);
  CHECK(t != NULL);
  CHECK_EQ_UINT(evbuffer_get_length(ta), 0); /* moved in */
  evbuffer_free(ta);
  evbuffer_free(tb);
  CHECK_EQ_UINT(gw_tunnel_count(), 1);
  char buf[256];
  CHECK_EQ_INT(drain(a, buf, sizeof(buf)), 4);
  CHECK(memcmp(buf, "HEAD", 4) == 0);
  CHECK_EQ_INT(drain(b, buf, sizeof(buf)), 5);
  CHECK(memcmp(buf, "early", 5) == 0);
  CHECK_EQ_INT(write(a, "ping", 4), 4);
  CHECK_EQ_INT(drain(b, buf, sizeof(buf)), 4);
  CHECK(memcmp(buf, "ping", 4) == 0);
  CHECK_EQ_INT(write(b, "pong!", 5), 5);
  CHECK_EQ_INT(drain(a, buf, sizeof(buf)), 5);
  CHECK(memcmp(buf, "pong!", 5) == 0);

  /* Half-close: a stops writing; b sees EOF but may still talk to a. */
  shutdown(a, SHUT_WR);
  CHECK_EQ_INT(drain(b, buf, sizeof(buf)), 0);
  CHECK_EQ_UINT(gw_tunnel_count(), 1);
  CHECK_EQ_INT(write(b, "late", 4), 4);
  CHECK_EQ_INT(drain(a, buf, sizeof(buf)), 4);
  CHECK(memcmp(buf, "late", 4) == 0);
  /* Both directions ended: the tunnel is gone, a sees EOF. */
  shutdown(b, SHUT_WR);
  spin(10);
  CHECK_EQ_UINT(gw_tunnel_count(), 0);
  CHECK_EQ_INT(drain(a, buf, sizeof(buf)), 0);
  close(a);
  close(b);
}

static void test_back_pressure(void)
{
  int a, b;
  gw_tunnel_t *t = pair_tunnel(&a, &b, NULL, NULL, 0);
  CHECK(t != NULL);
  /* b reads nothing: a can only push about the high water mark plus the
   * kernel's buffers before its own writes stop. */
  char chunk[16384];
  memset(chunk, 'x', sizeof(chunk));
  size_t pushed = 0;
  for (int i = 0; i < 2000; i++) {
    ssize_t w = write(a, chunk, sizeof(chunk));
    if (w > 0) pushed += (size_t)w;
    spin(2);
  }
  CHECK(pushed < 16 * 1024 * 1024);
  CHECK(pushed > GW_TUNNEL_HIGH_WATER);
  /* Now b reads everything, and a can go on. */
  size_t got = 0;
  char buf[65536];
  for (int i = 0; i < 10000 && got < pushed; i++) {
    spin(1);
    ssize_t r = read(b, buf, sizeof(buf));
    if (r > 0) got += (size_t)r;
  }
  CHECK_EQ_UINT(got, pushed);
  close(a); /* EOF: passed on to b */
  CHECK_EQ_INT(drain(b, buf, sizeof(buf)), 0);
  close(b);
  spin(10);
  CHECK_EQ_UINT(gw_tunnel_count(), 0);
}

static void test_idle_timeout(void)
{
  int a, b;
  gw_tunnel_t *t = pair_tunnel(&a, &b, NULL, NULL, 50);
  CHECK(t != NULL);
  char buf[16];
  for (int i = 0; i < 200 && gw_tunnel_count() > 0; i++) {
    usleep(5000);
    spin(1);
  }
  CHECK_EQ_UINT(gw_tunnel_count(), 0);
  CHECK_EQ_INT(read(a, buf, sizeof(buf)), 0); /* closed */
  CHECK_EQ_INT(read(b, buf, sizeof(buf)), 0);
  close(a);
  close(b);
}

static void test_close_all(void)
{
  int a[3], b[3];
  for (int i = 0; i < 3; i++) CHECK(pair_tunnel(&a[i], &b[i], NULL, NULL, 0) != NULL);
  CHECK_EQ_UINT(gw_tunnel_count(), 3);
  gw_tunnel_close_all();
  CHECK_EQ_UINT(gw_tunnel_count(), 0);
  for (int i = 0; i < 3; i++) {
    close(a[i]);
    close(b[i]);
  }
}

int main(void)
{
  base = event_base_new();
  test_both_ways();
  test_back_pressure();
  test_idle_timeout();
  test_close_all();
  event_base_free(base);
  return UNIT_DONE();
}
