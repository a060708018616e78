/* cache_control.c - RFC 9111's rules for a shared cache: Cache-Control
 * directives, storability and freshness (see cache_control.h). */
#include <string.h>
#include <strings.h>

#include "cache_control.h"
#include "static_http.h"

void gw_cc_init(gw_cc_t *cc)
{
  memset(cc, 0, sizeof(*cc));
  cc->max_age = cc->s_maxage = cc->stale_while_revalidate = cc->stale_if_error = -1;
}

long long gw_cc_seconds(const char *s, size_t len)
{
  if (len == 0) return -1;
  long long n = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    if (n < GW_CC_MAX_SECONDS) n = n * 10 + (s[i] - '0');
  }
  return n > GW_CC_MAX_SECONDS ? GW_CC_MAX_SECONDS : n;
}

static int is_ws(char c)
{
  return c == ' ' || c == '\t';
}

/* A number directive's value: the seconds, 0 when malformed. */
static long long seconds_or_zero(const char *v, size_t len)
{
  if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
    v++;
    len -= 2;
  }
  long long n = gw_cc_seconds(v, len);
  return n < 0 ? 0 : n;
}

static int named(const char *name, size_t len, const char *lit)
{
  return strlen(lit) == len && strncasecmp(name, lit, len) == 0;
}

/* One directive: name[=value]. */
static void directive(gw_cc_t *cc, const char *name, size_t nlen, const char *val, size_t vlen, int has_val)
{
  if (named(name, nlen, "no-store")) cc->no_store = 1;
  else if (named(name, nlen, "no-cache")) cc->no_cache = 1;
  else if (named(name, nlen, "private")) cc->is_private = 1;
  else if (named(name, nlen, "public")) cc->is_public = 1;
  else if (named(name, nlen, "must-revalidate")) cc->must_revalidate = 1;
  else if (named(name, nlen, "proxy-revalidate")) cc->proxy_revalidate = 1;
  else if (named(name, nlen, "no-transform")) cc->no_transform = 1;
  else if (!has_val) return;
  /* a directive given twice: the smallest (the most careful) wins */
#define TAKE(field) do { long long n_ = seconds_or_zero(val, vlen); \
    if (cc->field < 0 || n_ < cc->field) cc->field = n_; } while (0)
  else if (named(name, nlen, "max-age")) TAKE(max_age);
  else if (named(name, nlen, "s-maxage")) TAKE(s_maxage);
  else if (named(name, nlen, "stale-while-revalidate")) TAKE(stale_while_revalidate);
  else if (named(name, nlen, "stale-if-error")) TAKE(stale_if_error);
#undef TAKE
}

void gw_cc_parse(gw_cc_t *cc, const char *v, size_t len)
{
  size_t i = 0;
  while (i < len) {
    while (i < len && (is_ws(v[i]) || v[i] == ',')) i++;
    size_t ns = i;
    while (i < len && v[i] != '=' && v[i] != ',' && !is_ws(v[i])) i++;
    size_t ne = i;
    while (i < len && is_ws(v[i])) i++;
    const char *val = NULL;
    size_t vlen = 0;
    int has_val = 0;
    if (i < len && v[i] == '=') {
      i++;
      while (i < len && is_ws(v[i])) i++;
      size_t vs = i;
      if (i < len && v[i] == '"') { /* quoted-string: up to the closing quote (a backslash escapes) */
        i++;
        while (i < len && v[i] != '"') i += v[i] == '\\' && i + 1 < len ? 2 : 1;
        if (i < len) i++;
      } else {
        while (i < len && v[i] != ',' && !is_ws(v[i])) i++;
      }
      val = v + vs;
      vlen = i - vs;
      has_val = 1;
    }
    if (ne > ns) directive(cc, v + ns, ne - ns, val, vlen, has_val);
    while (i < len && v[i] != ',') i++; /* junk after a directive: skipped */
  }
}

/* Every line of field name in hs into cc. */
static void parse_all(gw_cc_t *cc, const gw_headers_t *hs, const char *name)
{
  for (size_t i = 0; i < hs->count; i++)
    if (strcasecmp(hs->items[i].name, name) == 0) gw_cc_parse(cc, hs->items[i].value, hs->items[i].value_len);
}

static int not_stored(gw_cache_verdict_t *out, const char *why)
{
  out->storable = 0;
  out->why = why;
  return 0;
}

/* Expires - Date in seconds (>= 0), or -1 when there is no usable Expires. */
static long long expires_lifetime(const gw_headers_t *resp, time_t now)
{
  const gw_header_t *ex = gw_headers_find(resp, "expires");
  if (ex == NULL) return -1;
  time_t e = gw_static_http_date_parse(ex->value, ex->value_len);
  if (e == (time_t)-1) return 0; /* an invalid date means "already expired" (RFC 9111 §5.3) */
  const gw_header_t *dh = gw_headers_find(resp, "date");
  time_t d = dh ? gw_static_http_date_parse(dh->value, dh->value_len) : (time_t)-1;
  if (d == (time_t)-1) d = now;
  if (e <= d) return 0;
  long long n = (long long)e - (long long)d;
  return n > GW_CC_MAX_SECONDS ? GW_CC_MAX_SECONDS : n;
}

void gw_cache_decide(int status, const gw_headers_t *resp, const gw_headers_t *req, time_t now,
                     const gw_cache_rules_t *rules, gw_cache_verdict_t *out)
{
  memset(out, 0, sizeof(*out));
  if (status < 200 || status == 206 || status == 304 || status > 599) {
    not_stored(out, "status not cacheable");
    return;
  }
  gw_cc_t cc;
  gw_cc_init(&cc);
  parse_all(&cc, resp, "cache-control");
  if (cc.no_store) {
    not_stored(out, "Cache-Control: no-store");
    return;
  }
  if (cc.is_private) {
    not_stored(out, "Cache-Control: private");
    return;
  }
  if (gw_headers_have_token(resp, "vary", "*")) {
    not_stored(out, "Vary: *");
    return;
  }
  if (!rules->store_set_cookie && gw_headers_find(resp, "set-cookie")) {
    not_stored(out, "Set-Cookie");
    return;
  }
  if (req && gw_headers_find(req, "authorization") && !(cc.is_public || cc.s_maxage >= 0 || cc.must_revalidate)) {
    not_stored(out, "a request with Authorization");
    return;
  }
  long long fresh = cc.s_maxage >= 0 ? cc.s_maxage : cc.max_age;
  if (fresh < 0) fresh = expires_lifetime(resp, now);
  if (fresh < 0) {
    long long v = rules->valid ? rules->valid[gw_cc_valid_slot(status)] : -1;
    if (v < 0 && rules->valid && status >= 100 && status <= 599) v = rules->valid[GW_CC_VALID_ANY];
    if (v < 0) {
      not_stored(out, "no freshness (no max-age, s-maxage, Expires or valid: for the status)");
      return;
    }
    fresh = v;
  }
  if (cc.no_cache) fresh = 0; /* stored, but revalidated before every use */
  const gw_header_t *age = gw_headers_find(resp, "age");
  long long a = age ? gw_cc_seconds(age->value, age->value_len) : -1;
  out->age_s = a > 0 ? a : 0;
  out->storable = 1;
  out->fresh_s = fresh;
  out->must_revalidate = cc.must_revalidate || cc.proxy_revalidate || cc.s_maxage >= 0 || cc.no_cache;
  if (!out->must_revalidate) {
    out->stale_while_revalidate_s = cc.stale_while_revalidate > 0 ? cc.stale_while_revalidate : 0;
    out->stale_if_error_s = cc.stale_if_error > 0 ? cc.stale_if_error : 0;
  }
}
