/* redis_resp.c - RESP, the parts of the Redis protocol that need no socket
 * (redis_resp.h): replies read by hiredis's reader into this module's
 * objects (bounded array sizes and buffered bytes, so a hostile server
 * cannot make us allocate without limit), commands encoded, and what a
 * command batch says of itself (its keys' Cluster slot, whether it only
 * reads). Used by redis.c; exposed for the unit test and the fuzz target. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/read.h>

#include "redis_resp.h"

/* -- replies ------------------------------------------------------------------ */

static gw_redis_reply_t *new_reply(const redisReadTask *t)
{
  gw_redis_reply_t *r = calloc(1, sizeof(*r));
  if (r == NULL) return NULL;
  r->type = t->type;
  if (t->parent) {
    gw_redis_reply_t *p = t->parent->obj;
    p->element[t->idx] = r;
  }
  return r;
}

static void *create_string(const redisReadTask *t, char *str, size_t len)
{
  char *copy = malloc(len + 1);
  if (copy == NULL) return NULL;
  gw_redis_reply_t *r = new_reply(t);
  if (r == NULL) {
    free(copy);
    return NULL;
  }
  memcpy(copy, str, len);
  copy[len] = '\0';
  r->str = copy;
  r->len = len;
  return r;
}

static void *create_array(const redisReadTask *t, int elements)
{
  if (elements < 0 || elements > GW_REDIS_MAX_ELEMENTS) return NULL; /* the reader reports it */
  gw_redis_reply_t **el = calloc(elements > 0 ? (size_t)elements : 1, sizeof(*el));
  if (el == NULL) return NULL;
  gw_redis_reply_t *r = new_reply(t);
  if (r == NULL) {
    free(el);
    return NULL;
  }
  r->element = el;
  r->elements = (size_t)elements;
  return r;
}

static void *create_integer(const redisReadTask *t, long long value)
{
  gw_redis_reply_t *r = new_reply(t);
  if (r) r->integer = value;
  return r;
}

static void *create_nil(const redisReadTask *t)
{
  gw_redis_reply_t *r = new_reply(t);
  if (r) r->type = REDIS_REPLY_NIL; /* the task's type is the bulk's or array's */
  return r;
}

void gw_redis_reply_free(gw_redis_reply_t *r)
{
  if (r == NULL) return;
  for (size_t i = 0; i < r->elements; i++) gw_redis_reply_free(r->element[i]);
  free(r->element);
  free(r->str);
  free(r);
}

static void free_object(void *obj)
{
  gw_redis_reply_free(obj);
}

static redisReplyObjectFunctions reply_fns = {create_string, create_array, create_integer, create_nil, free_object};

void *gw_redis_reader_new(void)
{
  return redisReaderCreateWithFunctions(&reply_fns);
}

void gw_redis_reader_free(void *reader)
{
  if (reader) redisReaderFree(reader);
}

int gw_redis_reader_feed(void *reader, const char *data, size_t len)
{
  redisReader *rd = reader;
  if (rd->err) return -1;
  if (rd->len - rd->pos + len > GW_REDIS_MAX_BUFFERED) return -1;
  return redisReaderFeed(rd, data, len) == REDIS_OK ? 0 : -1;
}

int gw_redis_reader_next(void *reader, gw_redis_reply_t **out, const char **err)
{
  redisReader *rd = reader;
  void *reply = NULL;
  *out = NULL;
  if (redisReaderGetReply(rd, &reply) != REDIS_OK || rd->err) {
    if (reply) gw_redis_reply_free(reply);
    *err = rd->errstr[0] ? rd->errstr : "protocol error";
    return -1;
  }
  if (reply == NULL) return 0;
  *out = reply;
  return 1;
}

int gw_redis_reader_pending(void *reader)
{
  redisReader *rd = reader;
  return rd->pos < rd->len || rd->ridx >= 0;
}

/* -- commands ------------------------------------------------------------------ */

static int append_len(gw_buf_t *b, char kind, size_t n)
{
  char tmp[32];
  char *p = tmp + sizeof(tmp);
  *--p = '\n';
  *--p = '\r';
  do {
    *--p = (char)('0' + n % 10);
    n /= 10;
  } while (n);
  *--p = kind;
  return gw_buf_append(b, p, (size_t)(tmp + sizeof(tmp) - p));
}

int gw_redis_append_array(gw_buf_t *b, size_t argc)
{
  return append_len(b, '*', argc);
}

int gw_redis_append_bulk(gw_buf_t *b, const char *s, size_t len)
{
  if (append_len(b, '$', len) < 0 || gw_buf_append(b, s, len) < 0) return -1;
  return gw_buf_append(b, "\r\n", 2);
}

/* -- what a command batch says of itself ---------------------------------------- */

/* CRC16-CCITT (XModem), as Redis Cluster hashes keys (cluster spec, appendix A). */
static unsigned key_hash_slot(const char *key, size_t len)
{
  const char *open = memchr(key, '{', len); /* a {hash tag}: only it is hashed, when not empty */
  if (open) {
    const char *close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
    if (close && close > open + 1) {
      key = open + 1;
      len = (size_t)(close - key);
    }
  }
  unsigned crc = 0;
  for (size_t i = 0; i < len; i++) {
    crc ^= (unsigned)(unsigned char)key[i] << 8;
    for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  }
  return (crc & 0xffff) % GW_REDIS_SLOTS;
}

/* One "$len\r\nbytes\r\n" of a command this module encoded. */
static const char *next_bulk(const char *p, const char *end, const char **s, size_t *n)
{
  if (p >= end || *p != '$') return NULL;
  *n = (size_t)strtoul(p + 1, NULL, 10);
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  if (nl == NULL || (size_t)(end - nl - 1) < *n + 2) return NULL;
  *s = nl + 1;
  return *s + *n + 2;
}

/* The key is the first argument, the fourth of EVAL/EVALSHA when it has
 * keys, none of the commands without. */
int gw_redis_commands_slot(const char *p, size_t len)
{
  static const char *const keyless[] = {"MULTI", "EXEC", "DISCARD", "PING", "ECHO", "INFO", "TIME", "PUBLISH",
                                        "SCRIPT", "CLUSTER", "ASKING", "DBSIZE", "COMMAND", "CLIENT", "CONFIG"};
  const char *end = p + len;
  int slot = -1;
  while (p < end && *p == '*') {
    long argc = strtol(p + 1, NULL, 10);
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL || argc < 1) return slot;
    p = nl + 1;
    const char *name, *key = NULL;
    size_t name_len, key_len = 0;
    if ((p = next_bulk(p, end, &name, &name_len)) == NULL) return slot;
    int key_at = 1, is_keyless = 0;
    for (size_t i = 0; i < sizeof(keyless) / sizeof(keyless[0]); i++)
      if (strlen(keyless[i]) == name_len && strncasecmp(keyless[i], name, name_len) == 0) is_keyless = 1;
    if ((name_len == 4 && strncasecmp(name, "EVAL", 4) == 0) || (name_len == 7 && strncasecmp(name, "EVALSHA", 7) == 0))
      key_at = 3;
    for (long i = 1; i < argc; i++) {
      const char *a;
      size_t n;
      if ((p = next_bulk(p, end, &a, &n)) == NULL) return slot;
      if (i == 2 && key_at == 3 && strtol(a, NULL, 10) < 1) is_keyless = 1; /* numkeys 0 */
      if (i == key_at) {
        key = a;
        key_len = n;
      }
    }
    if (is_keyless || key == NULL) continue;
    int s = (int)key_hash_slot(key, key_len);
    if (slot >= 0 && s != slot) return -2;
    slot = s;
  }
  return slot;
}

int gw_redis_commands_read_only(const char *cmd, size_t len)
{
  static const char *const reads[] = {"GET", "MGET", "EXISTS", "TTL", "PTTL", "TYPE", "STRLEN", "GETRANGE",
                                      "HGET", "HMGET", "HGETALL", "HEXISTS", "HLEN", "HKEYS", "HVALS",
                                      "LRANGE", "LLEN", "LINDEX", "SMEMBERS", "SISMEMBER", "SCARD",
                                      "ZRANGE", "ZSCORE", "ZCARD", "ZRANK", "ZCOUNT", "PING"};
  /* "*N\r\n$L\r\nNAME\r\n" */
  const char *p = memchr(cmd, '\n', len), *end = cmd + len;
  if (p == NULL || ++p >= end || *p != '$') return 0;
  const char *name = memchr(p, '\n', (size_t)(end - p));
  if (name == NULL || ++name >= end) return 0;
  const char *cr = memchr(name, '\r', (size_t)(end - name));
  if (cr == NULL) return 0;
  size_t n = (size_t)(cr - name);
  for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
    if (strlen(reads[i]) == n && strncasecmp(reads[i], name, n) == 0) return 1;
  return 0;
}
