/* test_h2c_upgrade.c - recognising `Upgrade: h2c` and decoding HTTP2-Settings
 * (gateway/http/h2c_upgrade.c).
 * unit: h2c_upgrade headers -lcrypto */
#include <string.h>

#include "h2c_upgrade.h"
#include "unit.h"

static int settings_of(const char *upgrade, const char *connection, const char *s1, const char *s2,
                       unsigned char *out)
{
  gw_headers_t h;
  gw_headers_init(&h);
  gw_headers_add(&h, "Host", 4, "x", 1);
  if (upgrade) gw_headers_add(&h, "Upgrade", 7, upgrade, strlen(upgrade));
  if (connection) gw_headers_add(&h, "Connection", 10, connection, strlen(connection));
  if (s1) gw_headers_add(&h, "HTTP2-Settings", 14, s1, strlen(s1));
  if (s2) gw_headers_add(&h, "http2-settings", 14, s2, strlen(s2));
  int n = gw_h2c_upgrade_settings(&h, out);
  gw_headers_dispose(&h);
  return n;
}

int main(void)
{
  unsigned char out[GW_H2C_SETTINGS_MAX];
  /* curl's: MAX_CONCURRENT_STREAMS 100, INITIAL_WINDOW_SIZE 33554432, ENABLE_PUSH 0 */
  CHECK_EQ_INT(settings_of("h2c", "Upgrade, HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA", NULL, out), 18);
  static const unsigned char curl[18] = {0, 3, 0, 0, 0, 100, 0, 4, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0};
  CHECK(memcmp(out, curl, 18) == 0);
  /* the url alphabet: - and _ */
  CHECK_EQ_INT(settings_of("h2c", "upgrade,http2-settings", "AAQAAP__", NULL, out), 6);
  CHECK(out[4] == 0xff && out[5] == 0xff);
  CHECK_EQ_INT(settings_of("websocket, h2c", "keep-alive, Upgrade , HTTP2-Settings", "", NULL, out), 0);
  /* not an h2c upgrade */
  CHECK_EQ_INT(settings_of("websocket", "Upgrade, HTTP2-Settings", "AAQAAP__", NULL, out), -1);
  CHECK_EQ_INT(settings_of("h2c", "Upgrade", "AAQAAP__", NULL, out), -1);
  CHECK_EQ_INT(settings_of("h2c", "HTTP2-Settings", "AAQAAP__", NULL, out), -1);
  CHECK_EQ_INT(settings_of(NULL, "Upgrade, HTTP2-Settings", "AAQAAP__", NULL, out), -1);
  CHECK_EQ_INT(settings_of("h2c", "Upgrade, HTTP2-Settings", NULL, NULL, out), -1);
  CHECK_EQ_INT(settings_of("h2cx", "Upgrade, HTTP2-Settings", "AAQAAP__", NULL, out), -1);
  /* bad payloads: two headers, padding, the standard alphabet, not whole settings, too long */
  CHECK_EQ_INT(settings_of("h2c", "Upgrade, HTTP2-Settings", "AAQAAP__", "AAQAAP__", out), -1);
  CHECK_EQ_INT(settings_of("h2c", "Upgrade, HTTP2-Settings", "AAMAAABk=", NULL, out), -1);
  CHECK_EQ_INT(settings_of("h2c", "Upgrade, HTTP2-Settings", "AAQAAP//", NULL, out), -1);
  CHECK_EQ_INT(settings_of("h2c", "Upgrade, HTTP2-Settings", "AAMAAA", NULL, out), -1);
  CHECK_EQ_INT(settings_of("h2c", "Upgrade, HTTP2-Settings", "AAMAA", NULL, out), -1);
  CHECK_EQ_INT(settings_of("h2c", "Upgrade, HTTP2-Settings", "AA*AAABk", NULL, out), -1);
  char big[400];
  memset(big, 'A', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  CHECK_EQ_INT(settings_of("h2c", "Upgrade, HTTP2-Settings", big, NULL, out), -1);
  big[336] = '\0'; /* 252 bytes: 42 settings, the most that fits */
  CHECK_EQ_INT(settings_of("h2c", "Upgrade, HTTP2-Settings", big, NULL, out), 252);
  return unit_done();
}
