/* fuzz_cache_control.c - libFuzzer target for the response cache's HTTP
 * rules (cache_control.c): the input is a response's header fields, one
 * "Name: value" per line, the first line its status. Checked on every input:
 *   - every number directive is absent (-1) or within 0..2^31;
 *   - a storable verdict has a freshness within 0..2^31 and no reason, a
 *     refused one a reason and nothing else;
 *   - no-store, private, Vary: * and Set-Cookie are never storable, and
 *     must-revalidate never gets stale serving;
 *   - parsing a field in two calls at a comma gives the same directives as
 *     in one (lines of one field are one list);
 *   - no memory error (ASan/UBSan). */
#define FUZZ_NAME "fuzz_cache_control"
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "cache_control.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_num(long long n, const char *what)
{
  if (n < -1 || n > GW_CC_MAX_SECONDS) FAIL("%s = %lld", what, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *s = (const char *)data;
  gw_headers_t h;
  gw_headers_init(&h);
  int status = 200;
  size_t i = 0, line = 0;
  while (i < size) {
    const char *nl = memchr(s + i, '\n', size - i);
    size_t end = nl ? (size_t)(nl - s) : size;
    if (line++ == 0) {
      status = 0;
      for (size_t k = i; k < end && k < i + 3; k++) status = status * 10 + (s[k] >= '0' && s[k] <= '9' ? s[k] - '0' : 0);
    } else {
      const char *colon = memchr(s + i, ':', end - i);
      if (colon) gw_headers_add(&h, s + i, (size_t)(colon - s - i), colon + 1, end - (size_t)(colon + 1 - s));
    }
    i = end + 1;
  }
  gw_cc_t cc, split;
  gw_cc_init(&cc);
  gw_cc_init(&split);
  for (size_t k = 0; k < h.count; k++) {
    if (strcasecmp(h.items[k].name, "cache-control") != 0) continue;
    const char *v = h.items[k].value;
    size_t len = h.items[k].value_len;
    gw_cc_parse(&cc, v, len);
    const char *comma = memchr(v, ',', len);
    const char *quote = memchr(v, '"', len);
    if (comma && quote == NULL) { /* a comma outside quotes splits the list */
      gw_cc_parse(&split, v, (size_t)(comma - v));
      gw_cc_parse(&split, comma + 1, len - (size_t)(comma + 1 - v));
    } else {
      gw_cc_parse(&split, v, len);
    }
  }
  if (memcmp(&cc, &split, sizeof(cc)) != 0) FAIL("a field split at a comma parses differently");
  check_num(cc.max_age, "max-age");
  check_num(cc.s_maxage, "s-maxage");
  check_num(cc.stale_while_revalidate, "stale-while-revalidate");
  check_num(cc.stale_if_error, "stale-if-error");
  static long long valid[GW_CC_VALID_SLOTS];
  for (int k = 0; k < GW_CC_VALID_SLOTS; k++) valid[k] = k % 3 == 0 ? -1 : k;
  gw_cache_rules_t rules = {valid, 0};
  gw_cache_verdict_t v;
  gw_cache_decide(status, &h, NULL, 1700000000, &rules, &v);
  if (v.storable) {
    if (v.why) FAIL("storable with a reason");
    if (v.fresh_s < 0 || v.fresh_s > GW_CC_MAX_SECONDS) FAIL("freshness %lld", v.fresh_s);
    if (cc.no_store || cc.is_private) FAIL("no-store/private stored");
    if (gw_headers_find(&h, "set-cookie")) FAIL("Set-Cookie stored");
    if (gw_headers_have_token(&h, "vary", "*")) FAIL("Vary: * stored");
    if (cc.must_revalidate && (v.stale_if_error_s || v.stale_while_revalidate_s)) FAIL("must-revalidate served stale");
  } else if (v.why == NULL || v.fresh_s || v.stale_if_error_s || v.stale_while_revalidate_s) {
    FAIL("refused without a reason, or with a lifetime");
  }
  gw_headers_dispose(&h);
  return 0;
}
