/* util.c - natives of the small helpers (mrblib/util.rb wraps them):
 * Digest::MD5/SHA1/SHA256 and Base64 on OpenSSL's libcrypto (libssl-dev),
 * URL percent-escaping, and the environment for the read-only ENV. */
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/hash.h>
#include <mruby/string.h>
#include <openssl/evp.h>

extern char **environ;

/* Gateway::Util._digest(name, str): the raw digest ("md5", "sha1", "sha256"). */
static mrb_value util_digest(mrb_state *mrb, mrb_value self)
{
  char *name;
  mrb_value str;
  (void)self;
  mrb_get_args(mrb, "zS", &name, &str);
  const EVP_MD *md = strcmp(name, "md5") == 0 ? EVP_md5() : strcmp(name, "sha1") == 0 ? EVP_sha1()
                   : strcmp(name, "sha256") == 0 ? EVP_sha256() : NULL;
  if (md == NULL) mrb_raise(mrb, E_ARGUMENT_ERROR, "unknown digest");
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!EVP_Digest(RSTRING_PTR(str), (size_t)RSTRING_LEN(str), out, &n, md, NULL))
    mrb_raise(mrb, E_RUNTIME_ERROR, "EVP_Digest failed");
  return mrb_str_new(mrb, (const char *)out, n);
}

/* Gateway::Util._b64encode(str): standard alphabet, padded, no newlines. */
static mrb_value util_b64encode(mrb_state *mrb, mrb_value self)
{
  mrb_value str;
  (void)self;
  mrb_get_args(mrb, "S", &str);
  mrb_int n = RSTRING_LEN(str);
  mrb_value out = mrb_str_new(mrb, NULL, (n + 2) / 3 * 4);
  int len = EVP_EncodeBlock((unsigned char *)RSTRING_PTR(out), (const unsigned char *)RSTRING_PTR(str), (int)n);
  mrb_str_resize(mrb, out, len);
  return out;
}

static int b64_value(unsigned char c)
{
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Gateway::Util._b64decode(str, strict): strict, the text must be whole
 * 4-character groups of the alphabet with '=' only as padding (nil if not);
 * otherwise characters outside the alphabet are skipped and decoding stops
 * at the first '=' (as CRuby's decode64). */
static mrb_value util_b64decode(mrb_state *mrb, mrb_value self)
{
  mrb_value str;
  mrb_bool strict;
  (void)self;
  mrb_get_args(mrb, "Sb", &str, &strict);
  const unsigned char *s = (const unsigned char *)RSTRING_PTR(str);
  mrb_int n = RSTRING_LEN(str);
  if (strict) {
    if (n % 4 != 0) return mrb_nil_value();
    mrb_int pad = n > 0 && s[n - 1] == '=' ? (n > 1 && s[n - 2] == '=' ? 2 : 1) : 0;
    for (mrb_int i = 0; i < n - pad; i++)
      if (b64_value(s[i]) < 0) return mrb_nil_value();
    /* The bits the padding drops must be zero (CRuby's strict_decode64). */
    if (pad && (b64_value(s[n - pad - 1]) & (pad == 1 ? 0x3 : 0xF))) return mrb_nil_value();
  }
  /* The alphabet's characters up to the first '=', whole groups padded. */
  mrb_value clean = mrb_str_new(mrb, NULL, n + 4);
  unsigned char *c = (unsigned char *)RSTRING_PTR(clean);
  mrb_int m = 0;
  for (mrb_int i = 0; i < n && s[i] != '='; i++)
    if (b64_value(s[i]) >= 0) c[m++] = s[i];
  mrb_int rest = m % 4;
  if (rest == 1) m--; /* 6 lone bits: no byte (as CRuby) */
  mrb_int pad = rest == 2 ? 2 : rest == 3 ? 1 : 0;
  for (mrb_int i = 0; i < pad; i++) c[m++] = '=';
  mrb_value out = mrb_str_new(mrb, NULL, m / 4 * 3);
  int len = m ? EVP_DecodeBlock((unsigned char *)RSTRING_PTR(out), c, (int)m) : 0;
  if (len < 0) return mrb_nil_value();
  mrb_str_resize(mrb, out, len - pad);
  return out;
}

/* RFC 3986 unreserved characters: ALPHA DIGIT - . _ ~ */
static int unreserved(unsigned char c)
{
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

/* Gateway::Util.escape(str): every byte but the unreserved ones as %XX
 * (upper-case hex; a space is %20), as ngx_mruby's Nginx::Utils.escape. */
static mrb_value util_escape(mrb_state *mrb, mrb_value self)
{
  static const char hex[] = "0123456789ABCDEF";
  mrb_value str;
  (void)self;
  mrb_get_args(mrb, "S", &str);
  const unsigned char *s = (const unsigned char *)RSTRING_PTR(str);
  mrb_int n = RSTRING_LEN(str);
  mrb_value out = mrb_str_new(mrb, NULL, n * 3);
  char *o = RSTRING_PTR(out), *p = o;
  for (mrb_int i = 0; i < n; i++) {
    if (unreserved(s[i])) {
      *p++ = (char)s[i];
    } else {
      *p++ = '%';
      *p++ = hex[s[i] >> 4];
      *p++ = hex[s[i] & 15];
    }
  }
  mrb_str_resize(mrb, out, p - o);
  return out;
}

static int hexval(unsigned char c)
{
  if (c >= '0' && c <= '9') return c - '0';
  c |= 0x20;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* Gateway::Util.unescape(str): %XX to its byte and '+' to a space (as
 * CGI.unescape); a '%' not followed by two hex digits stays as it is. */
static mrb_value util_unescape(mrb_state *mrb, mrb_value self)
{
  mrb_value str;
  (void)self;
  mrb_get_args(mrb, "S", &str);
  const unsigned char *s = (const unsigned char *)RSTRING_PTR(str);
  mrb_int n = RSTRING_LEN(str);
  mrb_value out = mrb_str_new(mrb, NULL, n);
  char *o = RSTRING_PTR(out), *p = o;
  for (mrb_int i = 0; i < n; i++) {
    if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
      *p++ = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
      i += 2;
    } else {
      *p++ = s[i] == '+' ? ' ' : (char)s[i];
    }
  }
  mrb_str_resize(mrb, out, p - o);
  return out;
}

/* Gateway::Util._getenv(name): the variable's value or nil. */
static mrb_value util_getenv(mrb_state *mrb, mrb_value self)
{
  char *name;
  (void)self;
  mrb_get_args(mrb, "z", &name);
  const char *v = getenv(name);
  return v ? mrb_str_new_cstr(mrb, v) : mrb_nil_value();
}

/* Gateway::Util._environ: every variable as a Hash. */
static mrb_value util_environ(mrb_state *mrb, mrb_value self)
{
  (void)self;
  mrb_value h = mrb_hash_new(mrb);
  int ai = mrb_gc_arena_save(mrb);
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (eq == NULL) continue;
    mrb_hash_set(mrb, h, mrb_str_new(mrb, *e, eq - *e), mrb_str_new_cstr(mrb, eq + 1));
    mrb_gc_arena_restore(mrb, ai);
  }
  return h;
}

void mrb_mruby_gateway_util_gem_init(mrb_state *mrb)
{
  struct RClass *gw = mrb_define_module(mrb, "Gateway");
  struct RClass *util = mrb_define_module_under(mrb, gw, "Util");
  mrb_define_module_function(mrb, util, "_digest", util_digest, MRB_ARGS_REQ(2));
  mrb_define_module_function(mrb, util, "_b64encode", util_b64encode, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, util, "_b64decode", util_b64decode, MRB_ARGS_REQ(2));
  mrb_define_module_function(mrb, util, "_escape", util_escape, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, util, "_unescape", util_unescape, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, util, "_getenv", util_getenv, MRB_ARGS_REQ(1));
  mrb_define_module_function(mrb, util, "_environ", util_environ, MRB_ARGS_NONE());
}

void mrb_mruby_gateway_util_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
