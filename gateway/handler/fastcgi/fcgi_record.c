/* fcgi_record.c - the FastCGI wire format and the CGI response head (fcgi_record.h).
 * The decoder is a small state machine over record header, content and
 * padding, so a record split anywhere across reads decodes the same. */
#include <string.h>
#include <strings.h>

#include "fcgi_record.h"

int gw_fcgi_target_parse(const char *target, gw_sockaddr_t *out)
{
  memset(out, 0, sizeof(*out));
  if (target == NULL || *target == '\0') return -1;
  const char *up = gw_addr_unix_path(target);
  if (up) {
    socklen_t n = gw_addr_from_unix(up, out);
    return n ? (int)n : -1;
  }
  if (strchr(target, ':') == NULL && strchr(target, '/') == NULL) {
    if (gw_addr_is_ip(target)) return -1; /* an address without its port */
    for (const char *p = target; *p; p++)
      if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
            *p == '-' || *p == '.'))
        return -1;
    return 0;
  }
  gw_hostport_t hp;
  if (gw_addr_split(target, strlen(target), &hp, 0) < 0 || hp.port <= 0) return -1;
  struct sockaddr_storage ss;
  socklen_t len = gw_addr_from_ip(hp.host, hp.port, &ss);
  if (len == 0 || len > sizeof(*out)) return -1;
  memcpy(out, &ss, len);
  return (int)len;
}

void gw_fcgi_put_header(unsigned char out[GW_FCGI_HEADER_LEN], int type, unsigned id, size_t clen, size_t padlen)
{
  out[0] = GW_FCGI_VERSION;
  out[1] = (unsigned char)type;
  out[2] = (unsigned char)(id >> 8);
  out[3] = (unsigned char)id;
  out[4] = (unsigned char)(clen >> 8);
  out[5] = (unsigned char)clen;
  out[6] = (unsigned char)padlen;
  out[7] = 0;
}

void gw_fcgi_put_begin(unsigned char out[16], unsigned id, int keep_conn)
{
  gw_fcgi_put_header(out, GW_FCGI_BEGIN_REQUEST, id, 8, 0);
  memset(out + 8, 0, 8);
  out[9] = GW_FCGI_RESPONDER;
  out[10] = keep_conn ? GW_FCGI_KEEP_CONN : 0;
}

static size_t len_size(size_t n)
{
  return n < 128 ? 1 : 4;
}

size_t gw_fcgi_pair_size(size_t nlen, size_t vlen)
{
  if (nlen > 0x7fffffffu || vlen > 0x7fffffffu) return 0;
  return len_size(nlen) + len_size(vlen) + nlen + vlen;
}

static unsigned char *put_len(unsigned char *p, size_t n)
{
  if (n < 128) {
    *p++ = (unsigned char)n;
    return p;
  }
  *p++ = (unsigned char)((n >> 24) | 0x80);
  *p++ = (unsigned char)(n >> 16);
  *p++ = (unsigned char)(n >> 8);
  *p++ = (unsigned char)n;
  return p;
}

size_t gw_fcgi_put_pair(unsigned char *out, const char *name, size_t nlen, const char *value, size_t vlen)
{
  unsigned char *p = put_len(out, nlen);
  p = put_len(p, vlen);
  memcpy(p, name, nlen);
  p += nlen;
  if (vlen) memcpy(p, value, vlen);
  p += vlen;
  return (size_t)(p - out);
}

int gw_fcgi_add_records(struct evbuffer *out, int type, unsigned id, const void *data, size_t len)
{
  const char *p = data;
  unsigned char hdr[GW_FCGI_HEADER_LEN];
  do {
    size_t n = len > GW_FCGI_MAX_CONTENT ? GW_FCGI_MAX_CONTENT : len;
    gw_fcgi_put_header(hdr, type, id, n, 0);
    if (evbuffer_add(out, hdr, sizeof(hdr)) < 0) return -1;
    if (n && evbuffer_add(out, p, n) < 0) return -1;
    p += n;
    len -= n;
  } while (len > 0);
  return 0;
}

/* -- decoding -------------------------------------------------------------- */

enum { ST_HEADER, ST_CONTENT, ST_PADDING };

void gw_fcgi_decoder_init(gw_fcgi_decoder_t *d, unsigned id)
{
  memset(d, 0, sizeof(*d));
  d->id = id;
  d->state = ST_HEADER;
}

static gw_fcgi_out_t fail(gw_fcgi_decoder_t *d, const char *err)
{
  d->err = err;
  return GW_FCGI_OUT_ERROR;
}

gw_fcgi_out_t gw_fcgi_decode(gw_fcgi_decoder_t *d, const char *data, size_t len, size_t *used)
{
  size_t off = 0;
  d->data = NULL;
  d->len = 0;
  /* Each round consumes at least one byte or returns. */
  while (off < len) {
    if (d->ended == 1) {
      *used = off;
      return fail(d, "data after FCGI_END_REQUEST");
    }
    if (d->state == ST_HEADER) {
      size_t n = GW_FCGI_HEADER_LEN - d->hdr_got;
      if (n > len - off) n = len - off;
      memcpy(d->hdr + d->hdr_got, data + off, n);
      d->hdr_got += n;
      off += n;
      if (d->hdr_got < GW_FCGI_HEADER_LEN) break;
      d->hdr_got = 0;
      const unsigned char *h = d->hdr;
      *used = off;
      if (h[0] != GW_FCGI_VERSION) return fail(d, "bad FastCGI record version");
      unsigned id = (unsigned)h[2] << 8 | h[3];
      d->type = h[1];
      d->content_left = (size_t)h[4] << 8 | h[5];
      d->pad_left = h[6];
      if (id != d->id) return fail(d, "FastCGI record for another request");
      switch (d->type) {
      case GW_FCGI_STDOUT:
      case GW_FCGI_STDERR:
        if (d->content_left == 0) { /* a stream's end */
          d->state = d->pad_left ? ST_PADDING : ST_HEADER;
          return d->type == GW_FCGI_STDOUT ? GW_FCGI_OUT_STDOUT : GW_FCGI_OUT_STDERR;
        }
        break;
      case GW_FCGI_END_REQUEST:
        if (d->content_left != 8) return fail(d, "FCGI_END_REQUEST of the wrong length");
        d->end_got = 0;
        break;
      default:
        return fail(d, "unexpected FastCGI record type");
      }
      d->state = ST_CONTENT;
      continue;
    }
    if (d->state == ST_CONTENT) {
      size_t n = d->content_left;
      if (n > len - off) n = len - off;
      const char *at = data + off;
      off += n;
      d->content_left -= n;
      if (d->content_left == 0) d->state = d->pad_left ? ST_PADDING : ST_HEADER;
      if (d->type == GW_FCGI_END_REQUEST) {
        memcpy(d->end + d->end_got, at, n);
        d->end_got += n;
        if (d->end_got < 8) continue;
        d->app_status = (unsigned long)d->end[0] << 24 | (unsigned long)d->end[1] << 16 |
                        (unsigned long)d->end[2] << 8 | d->end[3];
        d->protocol_status = d->end[4];
        if (d->state == ST_HEADER) d->ended = 1;
        else d->ended = 2; /* padding follows, then nothing */
        *used = off;
        return GW_FCGI_OUT_END;
      }
      d->data = at;
      d->len = n;
      *used = off;
      return d->type == GW_FCGI_STDOUT ? GW_FCGI_OUT_STDOUT : GW_FCGI_OUT_STDERR;
    }
    /* ST_PADDING */
    size_t n = d->pad_left;
    if (n > len - off) n = len - off;
    off += n;
    d->pad_left -= n;
    if (d->pad_left == 0) {
      d->state = ST_HEADER;
      if (d->ended == 2) d->ended = 1;
    }
  }
  *used = off;
  return GW_FCGI_NEED_MORE;
}

/* -- the CGI response head ------------------------------------------------- */

long gw_cgi_head_end(const char *buf, size_t len, size_t from)
{
  if (len == 0) return 0;
  /* A head that starts with the blank line (no fields at all). */
  if (buf[0] == '\n') return 1;
  if (buf[0] == '\r' && len < 2) return 0;
  if (buf[0] == '\r' && buf[1] == '\n') return 2;
  /* A blank line: LF followed by LF or by CR LF. */
  for (const char *nl = from < len ? memchr(buf + from, '\n', len - from) : NULL; nl != NULL;
       nl = memchr(nl + 1, '\n', len - (size_t)(nl + 1 - buf))) {
    size_t i = (size_t)(nl - buf);
    if (i + 1 < len && buf[i + 1] == '\n') return (long)(i + 2);
    if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') return (long)(i + 3);
  }
  return len > GW_CGI_MAX_HEAD ? -1 : 0;
}

static int parse_status(const char *v, size_t n)
{
  if (n < 3) return -1;
  int s = 0;
  for (int i = 0; i < 3; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    s = s * 10 + (v[i] - '0');
  }
  if (n > 3 && v[3] != ' ' && v[3] != '\t') return -1;
  return s >= 100 && s <= 999 ? s : -1;
}

int gw_cgi_head_parse(const char *buf, size_t len, int *status, gw_headers_t *out, const char **err)
{
  int st = 0, location = 0;
  size_t p = 0;
  *err = NULL;
  while (p < len) {
    const char *nl = memchr(buf + p, '\n', len - p);
    size_t end = nl ? (size_t)(nl - buf) : len;
    size_t line_end = end;
    if (line_end > p && buf[line_end - 1] == '\r') line_end--;
    size_t next = nl ? end + 1 : len;
    if (line_end == p) break; /* the blank line */
    const char *line = buf + p;
    size_t llen = line_end - p;
    const char *colon = memchr(line, ':', llen);
    if (colon == NULL) {
      *err = "a line without ':' in the FastCGI response head";
      return -1;
    }
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vlen = llen - nlen - 1;
    while (vlen && (*v == ' ' || *v == '\t')) v++, vlen--;
    while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) vlen--;
    if (!gw_header_field_is_safe(line, nlen, v, vlen) || memchr(v, '\r', vlen)) {
      *err = "a bad field in the FastCGI response head";
      return -1;
    }
    if (nlen == 6 && strncasecmp(line, "status", 6) == 0) {
      st = parse_status(v, vlen);
      if (st < 0) {
        *err = "a bad Status in the FastCGI response head";
        return -1;
      }
    } else {
      if (nlen == 8 && strncasecmp(line, "location", 8) == 0) location = 1;
      if (gw_headers_add(out, line, nlen, v, vlen) < 0) {
        *err = "out of memory";
        return -1;
      }
    }
    p = next;
  }
  *status = st ? st : location ? 302 : 200;
  return 0;
}
