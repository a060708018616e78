/* test_redis.c - redis_resp.c, what a command batch says of itself: its
 * Redis Cluster key slot (CRC16 as the cluster spec gives it: its test
 * vector, keys whose slots redis-server's CLUSTER KEYSLOT reports), {hash
 * tags}, EVAL's keys, keyless commands, a call whose keys differ in slot;
 * whether it only reads (Sentinel fails those over); and a reader holding
 * bytes beyond a reply.
 * unit: redis_resp buf -lhiredis */
#include <string.h>

#include "redis_resp.h"
#include "unit.h"

/* The RESP of one command of argc arguments. */
static void add(gw_buf_t *b, int argc, const char *const *argv)
{
  gw_redis_append_array(b, (size_t)argc);
  for (int i = 0; i < argc; i++) gw_redis_append_bulk(b, argv[i], strlen(argv[i]));
}

static int slot_of(int argc, const char *const *argv)
{
  gw_buf_t b = {0};
  add(&b, argc, argv);
  int s = gw_redis_commands_slot(b.data, b.len);
  gw_buf_dispose(&b);
  return s;
}

#define SLOT(...) slot_of((int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *)), (const char *[]){__VA_ARGS__})

int main(void)
{
  /* CRC16/XMODEM("123456789") = 0x31C3 (the cluster spec's vector): 12739 % 16384 */
  CHECK_EQ_INT(SLOT("GET", "123456789"), 0x31C3);
  CHECK_EQ_INT(SLOT("GET", "foo"), 12182); /* redis-server: CLUSTER KEYSLOT foo */
  CHECK_EQ_INT(SLOT("SET", "bar", "1"), 5061);
  CHECK_EQ_INT(SLOT("GET", "{user1000}.following"), SLOT("GET", "user1000"));
  CHECK_EQ_INT(SLOT("GET", "{user1000}.followers"), SLOT("GET", "user1000"));
  CHECK_EQ_INT(SLOT("GET", "foo{}{bar}"), SLOT("GET", "foo{}{bar}")); /* an empty tag: the whole key */
  CHECK(SLOT("GET", "foo{}{bar}") != SLOT("GET", "bar"));
  CHECK_EQ_INT(SLOT("GET", "foo{{bar}}zap"), SLOT("GET", "{bar"));
  CHECK_EQ_INT(SLOT("EVAL", "return 1", "1", "foo", "x"), 12182);
  CHECK_EQ_INT(SLOT("EVALSHA", "abc", "0", "foo"), -1); /* no keys: foo is an argument */
  CHECK_EQ_INT(SLOT("PING"), -1);
  CHECK_EQ_INT(SLOT("publish", "ch", "m"), -1);

  gw_buf_t b = {0};
  add(&b, 1, (const char *[]){"MULTI"});
  add(&b, 2, (const char *[]){"INCR", "{u}.a"});
  add(&b, 2, (const char *[]){"INCR", "{u}.b"});
  add(&b, 1, (const char *[]){"EXEC"});
  CHECK_EQ_INT(gw_redis_commands_slot(b.data, b.len), SLOT("GET", "u"));
  add(&b, 2, (const char *[]){"GET", "bar"});
  CHECK_EQ_INT(gw_redis_commands_slot(b.data, b.len), -2); /* two slots in one call */
  gw_buf_dispose(&b);
  CHECK_EQ_INT(gw_redis_commands_slot("", 0), -1);
  CHECK_EQ_INT(gw_redis_commands_slot("*2\r\n$3\r\nGET\r\n$9\r\nfoo", 20), -1); /* cut short: stops */

  add(&b, 2, (const char *[]){"hgetall", "h"});
  CHECK(gw_redis_commands_read_only(b.data, b.len));
  b.len = 0;
  add(&b, 2, (const char *[]){"INCR", "a"});
  CHECK(!gw_redis_commands_read_only(b.data, b.len));
  b.len = 0;
  add(&b, 1, (const char *[]){"GETDEL"}); /* a prefix of none, GET's longer twin */
  CHECK(!gw_redis_commands_read_only(b.data, b.len));
  CHECK(!gw_redis_commands_read_only("*1\r\n", 5));
  gw_buf_dispose(&b);

  void *rd = gw_redis_reader_new();
  gw_redis_reply_t *reply;
  const char *err;
  CHECK_EQ_INT(gw_redis_reader_feed(rd, "+OK\r\n:1", 7), 0);
  CHECK_EQ_INT(gw_redis_reader_next(rd, &reply, &err), 1);
  CHECK_EQ_STR(reply->str, "OK");
  gw_redis_reply_free(reply);
  CHECK(gw_redis_reader_pending(rd)); /* ":1" unasked for */
  CHECK_EQ_INT(gw_redis_reader_feed(rd, "\r\n", 2), 0);
  CHECK_EQ_INT(gw_redis_reader_next(rd, &reply, &err), 1);
  CHECK_EQ_INT((int)reply->integer, 1);
  gw_redis_reply_free(reply);
  CHECK(!gw_redis_reader_pending(rd));
  gw_redis_reader_free(rd);
  return unit_done();
}
