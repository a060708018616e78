/* fuzz_proxy_proto.c - libFuzzer target for the PROXY protocol parser
 * (proxy_proto.c): the first bytes of a connection on a `proxy_protocol:`
 * listener. Checked on every input:
 *   - a header's length is within the input and the version's bound, and
 *     every shorter prefix of it asks for more (so the listener, which
 *     takes bytes off the socket only while the parser asks for more,
 *     never takes a byte past the header);
 *   - a "more" answer is never given for GW_PROXY_V2_MAX bytes or more;
 *   - an error says why;
 *   - a v2 header's authority TLV lies inside the header;
 *   - a header with addresses, written again (gw_proxy_write) in the same
 *     version, parses to the same source address;
 *   - no memory error (ASan/UBSan). */
#define FUZZ_NAME "fuzz_proxy_proto"
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "proxy_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  gw_proxy_header_t h, h2;
  const char *why;
  int r = gw_proxy_parse(data, size, &h, &why);
  if (r < 0 && why == NULL) FAIL("error %d without a reason", r);
  if (r == GW_PROXY_MORE && size >= GW_PROXY_V2_MAX) FAIL("asks for more after %zu bytes", size);
  if (r <= 0) return 0;
  size_t len = (size_t)r;
  if (len > size) FAIL("header of %zu bytes in %zu", len, size);
  if (h.version == 1 && len > GW_PROXY_V1_MAX) FAIL("v1 header of %zu bytes", len);
  if (h.version == 2 && len > GW_PROXY_V2_MAX) FAIL("v2 header of %zu bytes", len);
  if (h.version != 1 && h.version != 2) FAIL("version %d", h.version);
  if (h.authority && (h.authority < data || h.authority + h.authority_len > data + len))
    FAIL("authority outside the header");
  /* prefixes: all of them for short headers, a sample for long ones */
  size_t step = len > 256 ? len / 97 + 1 : 1;
  for (size_t k = 0; k < len; k += step)
    if (gw_proxy_parse(data, k, &h2, &why) != GW_PROXY_MORE) FAIL("prefix %zu of a %zu-byte header is not MORE", k, len);
  if (gw_proxy_parse(data, len, &h2, &why) != r) FAIL("the header alone parses differently");
  if (!h.local) {
    unsigned char out[GW_PROXY_V1_MAX + 64];
    int w = gw_proxy_write(h.version, &h.src.sa, &h.dst.sa, out, sizeof(out));
    if (w <= 0) FAIL("could not write it again");
    if (gw_proxy_parse(out, (size_t)w, &h2, &why) != w) FAIL("written header does not parse: %s", why ? why : "");
    if (h2.src_len != h.src_len || memcmp(&h2.src, &h.src, h.src_len) != 0) FAIL("source changed on a round trip");
  }
  return 0;
}
