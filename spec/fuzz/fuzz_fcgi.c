/* fuzz_fcgi.c - libFuzzer target for the FastCGI response side (fcgi_record.c):
 * the record decoder and the CGI response head, as fcgi_client.c drives
 * them. The input is a byte stream from a FastCGI server; the first two
 * bytes pick where it is cut in two reads. Checked on every input:
 *
 *   - the decoder never reads past its input, consumes at least one byte per
 *     call that reports nothing, and gives the same outcome (stdout and
 *     stderr bytes, END with the same statuses, or an error) whichever way
 *     the stream is cut;
 *   - the head found in STDOUT (gw_cgi_head_end, scanned incrementally as
 *     the client does, and whole) is the same, and parses or is refused
 *     without a memory error; a parsed status is 100..999;
 *   - no leak (LSan), no memory error (ASan/UBSan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_fcgi"
#include "fcgi_record.h"
#include "fuzz_common.h"

typedef struct {
  char *out, *err;
  size_t out_len, err_len;
  int result; /* 1 END, 2 ERROR, 0 neither */
  unsigned long app;
  int proto;
  long head_incr; /* head end found while gathering STDOUT piece by piece */
} outcome_t;

static void decode(const uint8_t *data, size_t size, size_t cut, outcome_t *o)
{
  gw_fcgi_decoder_t d;
  gw_fcgi_decoder_init(&d, 1);
  memset(o, 0, sizeof(*o));
  o->out = malloc(size + 1);
  o->err = malloc(size + 1);
  size_t bounds[3] = {0, cut, size};
  for (int part = 0; part < 2 && !o->result; part++) {
    /* a copy of exactly this read: ASan catches any read past it */
    size_t left = bounds[part + 1] - bounds[part];
    char *copy = malloc(left ? left : 1);
    memcpy(copy, data + bounds[part], left);
    const char *p = copy;
    while (!o->result) {
      size_t used = 0;
      gw_fcgi_out_t r = gw_fcgi_decode(&d, p, left, &used);
      if (used > left) abort();
      if (r == GW_FCGI_NEED_MORE && used != left) abort();
      if (r == GW_FCGI_OUT_STDOUT && d.len) {
        memcpy(o->out + o->out_len, d.data, d.len);
        size_t before = o->out_len;
        o->out_len += d.len;
        if (o->head_incr == 0) o->head_incr = gw_cgi_head_end(o->out, o->out_len, before > 3 ? before - 3 : 0);
      }
      if (r == GW_FCGI_OUT_STDERR && d.len) {
        memcpy(o->err + o->err_len, d.data, d.len);
        o->err_len += d.len;
      }
      if (r == GW_FCGI_OUT_END) {
        o->result = 1;
        o->app = d.app_status;
        o->proto = d.protocol_status;
      }
      if (r == GW_FCGI_OUT_ERROR) o->result = 2;
      p += used;
      left -= used;
      if (r == GW_FCGI_NEED_MORE) break;
    }
    free(copy);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 2) return 0;
  size_t cut = ((size_t)data[0] << 8 | data[1]);
  data += 2;
  size -= 2;
  cut = size ? cut % (size + 1) : 0;
  outcome_t a, b;
  decode(data, size, size, &a);
  decode(data, size, cut, &b);
  if (a.result != b.result || a.out_len != b.out_len || a.err_len != b.err_len) abort();
  if (memcmp(a.out, b.out, a.out_len) != 0 || memcmp(a.err, b.err, a.err_len) != 0) abort();
  if (a.result == 1 && (a.app != b.app || a.proto != b.proto)) abort();
  /* An incremental scan must not find the end later than a whole one, and
   * (when it was found) not elsewhere. */
  long whole = gw_cgi_head_end(a.out, a.out_len, 0);
  if (a.head_incr > 0 && whole > 0 && a.head_incr != whole) abort();
  if (whole > 0) {
    gw_headers_t hs;
    gw_headers_init(&hs);
    int status = 0;
    const char *err = NULL;
    if (gw_cgi_head_parse(a.out, (size_t)whole, &status, &hs, &err) == 0) {
      if (status < 100 || status > 999) abort();
      for (size_t i = 0; i < hs.count; i++)
        if (!gw_header_field_is_safe(hs.items[i].name, hs.items[i].name_len, hs.items[i].value, hs.items[i].value_len))
          abort();
    } else if (err == NULL) {
      abort();
    }
    gw_headers_dispose(&hs);
  }
  free(a.out);
  free(a.err);
  free(b.out);
  free(b.err);
  return 0;
}
