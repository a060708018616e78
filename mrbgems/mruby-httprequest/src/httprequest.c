/* httprequest.c - the native half of HttpRequest: one BLOCKING HTTP/1.x
 * exchange, on purpose.
 *
 * HttpRequest exists to show what a blocking call does to an event-driven
 * worker: getaddrinfo, connect, send and recv all run right here on the
 * worker's thread, and the event loop serves nobody until they return. The
 * only concession is a deadline (poll with the time left) so a dead upstream
 * cannot wedge the worker for ever.
 *
 * Ruby side (mrblib/httprequest.rb) builds the request bytes and the response
 * object; this file provides two singleton methods of HttpRequest:
 *
 *   HttpRequest._exchange(host, port, request, timeout, max_bytes, head)
 *     connect to host:port, send `request`, read and parse one response.
 *   HttpRequest._parse(bytes, head, max_bytes)
 *     parse canned response bytes (the end of the string is the end of the
 *     connection); what the tests use.
 *
 * Both return [http_major, http_minor, status_code, reason,
 *              [[name, value], ...], body]
 * for the final (non-1xx) response, with the body already de-chunked (the
 * trailer fields of a chunked body, if any, follow the header fields).
 * Failures raise HttpRequest::Error, timeouts HttpRequest::TimeoutError
 * (classes defined in mrblib; looked up when raising). No mruby object is
 * created and nothing can raise while a socket or a malloc'd buffer is open.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "gw_mruby.h"
#include "llhttp.h"

#define HR_ERRMSG_MAX 1024
#define HR_PERR_MAX 256
#define HR_RECV_CHUNK 16384
#define HR_STALL_NOTE "(this blocking call stalled the worker's event loop the whole time)"

/* ------------------------------------------------------------------------ */
/* growable byte buffer (plain malloc: running out must not longjmp)        */

typedef struct {
  char *p;
  size_t len;
  size_t cap;
} hr_buf_t;

static int hr_buf_append(hr_buf_t *b, const char *data, size_t len)
{
  if (len == 0) return 0;
  if (b->len + len > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + len) {
      if (cap > SIZE_MAX / 2) return -1;
      cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, len);
  b->len += len;
  return 0;
}

static void hr_buf_free(hr_buf_t *b)
{
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

/* ------------------------------------------------------------------------ */
/* response parser state around llhttp                                       */

typedef struct {
  size_t name_off, name_len;
  size_t value_off, value_len;
} hr_field_t;

typedef struct {
  llhttp_t parser;
  llhttp_settings_t settings;
  int head;            /* the request was HEAD: the final response has no body */
  int done;            /* the final response is complete */
  int oom;             /* a buffer could not grow */
  int last_was_value;  /* header callbacks: the last piece seen was a value */
  int status;
  int major, minor;
  hr_buf_t reason;
  hr_buf_t strings;    /* header names and values, back to back */
  hr_field_t *fields;
  size_t nfields, fields_cap;
  hr_buf_t body;
} hr_resp_t;

static hr_resp_t *hr_from(llhttp_t *p)
{
  return (hr_resp_t *)p->data;
}

/* Each message starts afresh: a 1xx interim response is parsed and then
 * forgotten when the real one begins. */
static int hr_on_message_begin(llhttp_t *p)
{
  hr_resp_t *r = hr_from(p);
  r->reason.len = 0;
  r->strings.len = 0;
  r->nfields = 0;
  r->body.len = 0;
  r->last_was_value = 1;
  r->status = 0;
  return 0;
}

static int hr_on_status(llhttp_t *p, const char *at, size_t len)
{
  hr_resp_t *r = hr_from(p);
  if (hr_buf_append(&r->reason, at, len) < 0) {
    r->oom = 1;
    return HPE_USER;
  }
  return 0;
}

static int hr_on_header_field(llhttp_t *p, const char *at, size_t len)
{
  hr_resp_t *r = hr_from(p);
  if (r->last_was_value) { /* a new field starts */
    if (r->nfields == r->fields_cap) {
      size_t cap = r->fields_cap ? r->fields_cap * 2 : 16;
      hr_field_t *f = realloc(r->fields, cap * sizeof *f);
      if (!f) {
        r->oom = 1;
        return HPE_USER;
      }
      r->fields = f;
      r->fields_cap = cap;
    }
    hr_field_t *f = &r->fields[r->nfields++];
    f->name_off = r->strings.len;
    f->name_len = 0;
    f->value_off = r->strings.len;
    f->value_len = 0;
    r->last_was_value = 0;
  }
  if (hr_buf_append(&r->strings, at, len) < 0) {
    r->oom = 1;
    return HPE_USER;
  }
  r->fields[r->nfields - 1].name_len += len;
  return 0;
}

static int hr_on_header_value(llhttp_t *p, const char *at, size_t len)
{
  hr_resp_t *r = hr_from(p);
  if (r->nfields == 0) return 0; /* cannot happen: llhttp sends a field first */
  hr_field_t *f = &r->fields[r->nfields - 1];
  if (!r->last_was_value) {
    f->value_off = r->strings.len;
    f->value_len = 0;
    r->last_was_value = 1;
  }
  if (hr_buf_append(&r->strings, at, len) < 0) {
    r->oom = 1;
    return HPE_USER;
  }
  f->value_len += len;
  return 0;
}

static int hr_on_headers_complete(llhttp_t *p)
{
  hr_resp_t *r = hr_from(p);
  r->status = llhttp_get_status_code(p);
  r->major = llhttp_get_http_major(p);
  r->minor = llhttp_get_http_minor(p);
  r->last_was_value = 1;
  /* 1 = "this message has no body": what a response to HEAD looks like. */
  if (r->head && r->status >= 200) return 1;
  return 0;
}

static int hr_on_body(llhttp_t *p, const char *at, size_t len)
{
  hr_resp_t *r = hr_from(p);
  if (hr_buf_append(&r->body, at, len) < 0) {
    r->oom = 1;
    return HPE_USER;
  }
  return 0;
}

static int hr_on_message_complete(llhttp_t *p)
{
  hr_resp_t *r = hr_from(p);
  if (r->status >= 100 && r->status < 200 && r->status != 101) {
    return 0; /* interim (100 Continue, 103 Early Hints...): keep reading */
  }
  r->done = 1;
  return HPE_PAUSED; /* stop here; anything after the response is ignored */
}

static void hr_resp_init(hr_resp_t *r, int head)
{
  memset(r, 0, sizeof *r);
  llhttp_settings_init(&r->settings);
  r->settings.on_message_begin = hr_on_message_begin;
  r->settings.on_status = hr_on_status;
  r->settings.on_header_field = hr_on_header_field;
  r->settings.on_header_value = hr_on_header_value;
  r->settings.on_headers_complete = hr_on_headers_complete;
  r->settings.on_body = hr_on_body;
  r->settings.on_message_complete = hr_on_message_complete;
  llhttp_init(&r->parser, HTTP_RESPONSE, &r->settings);
  r->parser.data = r;
  r->head = head;
  r->last_was_value = 1;
}

static void hr_resp_free(hr_resp_t *r)
{
  hr_buf_free(&r->reason);
  hr_buf_free(&r->strings);
  hr_buf_free(&r->body);
  free(r->fields);
  r->fields = NULL;
  r->nfields = r->fields_cap = 0;
}

/* Feeds bytes to the parser. Returns 0 (fine, maybe done), or -1 with a
 * message in err. */
static int hr_feed(hr_resp_t *r, const char *data, size_t len, char *err, size_t errlen)
{
  if (r->done || len == 0) return 0;
  llhttp_errno_t e = llhttp_execute(&r->parser, data, len);
  if (e == HPE_OK) return 0;
  if (e == HPE_PAUSED && r->done) return 0;
  if (e == HPE_PAUSED_UPGRADE) { /* 101 Switching Protocols: headers only */
    r->done = 1;
    return 0;
  }
  if (r->oom) {
    snprintf(err, errlen, "out of memory while parsing it");
  } else {
    snprintf(err, errlen, "malformed HTTP (%s: %s)", llhttp_errno_name(e),
             llhttp_get_error_reason(&r->parser) ? llhttp_get_error_reason(&r->parser) : "?");
  }
  return -1;
}

/* The peer closed the connection: a body delimited by the close ends here.
 * Returns 0 when the response is complete, -1 (err set) otherwise. */
static int hr_finish(hr_resp_t *r, size_t received, char *err, size_t errlen)
{
  if (r->done) return 0;
  if (received == 0) {
    snprintf(err, errlen, "the connection was closed before any response was sent");
    return -1;
  }
  llhttp_errno_t e = llhttp_finish(&r->parser);
  if (r->done) return 0;
  if (e != HPE_OK && e != HPE_PAUSED) {
    snprintf(err, errlen, "the connection was closed in the middle of the response (%s)", llhttp_errno_name(e));
  } else {
    snprintf(err, errlen, "the connection was closed before the response was complete");
  }
  return -1;
}

/* Builds [major, minor, status, reason, [[name, value]...], body]. May raise
 * (out of memory) - call only with nothing left to clean up but `r`, which the
 * caller frees right after: on raise the buffers leak, which mruby's own
 * allocation failure makes moot. */
static mrb_value hr_result(mrb_state *mrb, const hr_resp_t *r)
{
  mrb_value fields = mrb_ary_new_capa(mrb, (mrb_int)r->nfields);
  int ai = mrb_gc_arena_save(mrb);
  for (size_t i = 0; i < r->nfields; i++) {
    const hr_field_t *f = &r->fields[i];
    mrb_value pair[2];
    pair[0] = mrb_str_new(mrb, r->strings.p + f->name_off, f->name_len);
    pair[1] = mrb_str_new(mrb, r->strings.p + f->value_off, f->value_len);
    mrb_ary_push(mrb, fields, mrb_ary_new_from_values(mrb, 2, pair));
    mrb_gc_arena_restore(mrb, ai); /* each pair is reachable from `fields` */
  }
  mrb_value out[6];
  out[0] = mrb_fixnum_value(r->major);
  out[1] = mrb_fixnum_value(r->minor);
  out[2] = mrb_fixnum_value(r->status);
  out[3] = mrb_str_new(mrb, r->reason.p, r->reason.len);
  out[4] = fields;
  out[5] = mrb_str_new(mrb, r->body.p, r->body.len);
  return mrb_ary_new_from_values(mrb, 6, out);
}

/* ------------------------------------------------------------------------ */
/* raising                                                                   */

static struct RClass *hr_error_class(mrb_state *mrb, const char *name)
{
  struct RClass *hr = mrb_class_get(mrb, "HttpRequest");
  if (mrb_const_defined(mrb, mrb_obj_value(hr), mrb_intern_cstr(mrb, name))) {
    return mrb_class_get_under(mrb, hr, name);
  }
  return E_RUNTIME_ERROR; /* mrblib not loaded (cannot happen in the build) */
}

/* ------------------------------------------------------------------------ */
/* the blocking exchange                                                     */

typedef enum { HR_OK = 0, HR_FAIL, HR_TIMEOUT } hr_status_t;

static double hr_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Milliseconds left before the deadline, rounded up; 0 when it has passed. */
static int hr_ms_left(double deadline)
{
  double left = deadline - hr_now();
  if (left <= 0) return 0;
  double ms = ceil(left * 1000.0);
  return ms > 2147483647.0 ? 2147483647 : (int)ms;
}

/* Blocks until fd is ready for `events` or the deadline passes.
 * Returns 1 ready, 0 timed out, -1 error (errno). */
static int hr_wait(int fd, short events, double deadline)
{
  for (int tries = 0; tries < 1000; tries++) { /* bounded: EINTR storms */
    int ms = hr_ms_left(deadline);
    if (ms == 0) return 0;
    struct pollfd pfd = {.fd = fd, .events = events, .revents = 0};
    int n = poll(&pfd, 1, ms);
    if (n > 0) return 1;
    if (n == 0) continue; /* re-check the clock; usually returns 0 next turn */
    if (errno != EINTR) return -1;
  }
  errno = EINTR;
  return -1;
}

/* Connects to one resolved address. Returns the fd, or -1 with *timed_out
 * or errno set. */
static int hr_connect_one(const struct addrinfo *ai, double deadline, int *timed_out)
{
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) return -1;
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  int w = hr_wait(fd, POLLOUT, deadline);
  if (w <= 0) {
    int e = errno;
    close(fd);
    if (w == 0) *timed_out = 1;
    errno = e;
    return -1;
  }
  int soerr = 0;
  socklen_t sl = sizeof soerr;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0) soerr = errno;
  if (soerr != 0) {
    close(fd);
    errno = soerr;
    return -1;
  }
  return fd;
}

static void hr_fmt_secs(char *out, size_t len, double secs)
{
  if (secs == floor(secs) && secs < 1e9) snprintf(out, len, "%.1fs", secs);
  else snprintf(out, len, "%gs", secs);
}

/* One whole exchange. `where` is "host:port" for messages. On failure err
 * holds the full message. */
static hr_status_t hr_exchange(const char *host, int port, const char *where,
                               const char *req, size_t req_len, double timeout,
                               size_t max_bytes, hr_resp_t *resp, char *err, size_t errlen)
{
  double deadline = hr_now() + timeout;
  char secs[32];
  hr_fmt_secs(secs, sizeof secs, timeout);

  /* 1. name resolution: plain blocking getaddrinfo, no timeout possible. */
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int gai = getaddrinfo(host, portstr, &hints, &res);
  if (gai != 0) {
    snprintf(err, errlen, "HttpRequest: cannot resolve host '%s': %s",
             host, gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
    return HR_FAIL;
  }

  /* 2. connect: each address in turn, all within the one deadline. */
  int fd = -1, timed_out = 0, last_errno = 0;
  for (struct addrinfo *ai = res; ai && fd < 0 && !timed_out; ai = ai->ai_next) {
    fd = hr_connect_one(ai, deadline, &timed_out);
    if (fd < 0) last_errno = errno;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    if (timed_out || hr_ms_left(deadline) == 0) {
      snprintf(err, errlen, "HttpRequest: connect to %s timed out after %s " HR_STALL_NOTE, where, secs);
      return HR_TIMEOUT;
    }
    snprintf(err, errlen, "HttpRequest: connect to %s failed: %s", where,
             strerror(last_errno ? last_errno : ECONNREFUSED));
    return HR_FAIL;
  }

  hr_status_t st = HR_OK;
  char perr[HR_PERR_MAX];

  /* 3. send everything. */
  size_t sent = 0;
  while (sent < req_len) {
    ssize_t n = send(fd, req + sent, req_len - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int w = hr_wait(fd, POLLOUT, deadline);
      if (w == 0) {
        snprintf(err, errlen, "HttpRequest: sending the request to %s timed out after %s " HR_STALL_NOTE, where, secs);
        st = HR_TIMEOUT;
        goto out;
      }
      if (w > 0) continue;
    }
    snprintf(err, errlen, "HttpRequest: sending the request to %s failed: %s", where,
             strerror(n < 0 ? errno : EPIPE));
    st = HR_FAIL;
    goto out;
  }

  /* 4. read until the parser has one whole final response (or the peer
   * closes). The server may answer before reading all of a large body; we
   * simply read what it says. */
  size_t received = 0;
  char chunk[HR_RECV_CHUNK];
  while (!resp->done) {
    ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      received += (size_t)n;
      if (received > max_bytes) {
        snprintf(err, errlen, "HttpRequest: the response from %s exceeds the limit of %zu bytes", where, max_bytes);
        st = HR_FAIL;
        goto out;
      }
      if (hr_feed(resp, chunk, (size_t)n, perr, sizeof perr) < 0) {
        snprintf(err, errlen, "HttpRequest: bad response from %s: %s", where, perr);
        st = HR_FAIL;
        goto out;
      }
      continue;
    }
    if (n == 0) {
      if (hr_finish(resp, received, perr, sizeof perr) < 0) {
        snprintf(err, errlen, "HttpRequest: bad response from %s: %s", where, perr);
        st = HR_FAIL;
        goto out;
      }
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int w = hr_wait(fd, POLLIN, deadline);
      if (w == 0) {
        if (received == 0) {
          snprintf(err, errlen, "HttpRequest: no response from %s within %s " HR_STALL_NOTE, where, secs);
        } else {
          snprintf(err, errlen, "HttpRequest: incomplete response from %s within %s (%zu bytes received) " HR_STALL_NOTE,
                   where, secs, received);
        }
        st = HR_TIMEOUT;
        goto out;
      }
      if (w > 0) continue;
    }
    snprintf(err, errlen, "HttpRequest: reading the response from %s failed: %s", where, strerror(errno));
    st = HR_FAIL;
    goto out;
  }

out:
  close(fd);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Ruby methods                                                              */

static size_t hr_max_bytes(mrb_state *mrb, mrb_int max)
{
  if (max <= 0) mrb_raise(mrb, E_ARGUMENT_ERROR, "HttpRequest: max_response_size must be positive");
  return (size_t)max;
}

/* HttpRequest._exchange(host, port, request, timeout, max_bytes, head) */
static mrb_value hr_m_exchange(mrb_state *mrb, mrb_value self)
{
  char *host;
  mrb_int port, max;
  mrb_value req;
  mrb_float timeout;
  mrb_bool head;
  (void)self;
  mrb_get_args(mrb, "ziSfib", &host, &port, &req, &timeout, &max, &head);
  if (port < 1 || port > 65535) mrb_raisef(mrb, E_ARGUMENT_ERROR, "HttpRequest: bad port %i", port);
  if (!(timeout > 0) || !isfinite(timeout) || timeout > 86400.0) {
    mrb_raise(mrb, E_ARGUMENT_ERROR, "HttpRequest: timeout must be a positive number of seconds");
  }
  size_t max_bytes = hr_max_bytes(mrb, max);

  char where[300];
  if (strchr(host, ':')) snprintf(where, sizeof where, "[%.255s]:%d", host, (int)port);
  else snprintf(where, sizeof where, "%.255s:%d", host, (int)port);

  /* The request bytes are copied: the exchange must not depend on a Ruby
   * string staying put (nothing runs Ruby meanwhile, but be plain about it). */
  size_t req_len = (size_t)RSTRING_LEN(req);
  char *req_copy = malloc(req_len ? req_len : 1);
  if (!req_copy) mrb_raise(mrb, E_RUNTIME_ERROR, "HttpRequest: out of memory");
  memcpy(req_copy, RSTRING_PTR(req), req_len);

  hr_resp_t resp;
  hr_resp_init(&resp, head);
  char err[HR_ERRMSG_MAX];
  err[0] = '\0';
  /* The dashboard's loop timeline shows this stretch as BLOCKED, a trace
   * as a blocking call: the lesson's point. */
  char what[340];
  snprintf(what, sizeof what, "HttpRequest to %s (connect, send, recv)", where);
  gw_mrb_blocking(1, what);
  hr_status_t st = hr_exchange(host, (int)port, where, req_copy, req_len, (double)timeout, max_bytes,
                               &resp, err, sizeof err);
  gw_mrb_blocking(0, what);
  free(req_copy);
  if (st != HR_OK) {
    hr_resp_free(&resp);
    mrb_raise(mrb, hr_error_class(mrb, st == HR_TIMEOUT ? "TimeoutError" : "Error"), err);
  }
  mrb_value out = hr_result(mrb, &resp);
  hr_resp_free(&resp);
  return out;
}

/* HttpRequest._parse(bytes, head, max_bytes): canned bytes; the end of the
 * string counts as the peer closing the connection. */
static mrb_value hr_m_parse(mrb_state *mrb, mrb_value self)
{
  mrb_value raw;
  mrb_bool head;
  mrb_int max;
  (void)self;
  mrb_get_args(mrb, "Sbi", &raw, &head, &max);
  size_t max_bytes = hr_max_bytes(mrb, max);
  size_t len = (size_t)RSTRING_LEN(raw);
  if (len > max_bytes) {
    mrb_raisef(mrb, hr_error_class(mrb, "Error"), "HttpRequest: the response exceeds the limit of %i bytes", max);
  }
  /* Copy: llhttp keeps no pointers, but the callbacks run no Ruby anyway. */
  char *copy = malloc(len ? len : 1);
  if (!copy) mrb_raise(mrb, E_RUNTIME_ERROR, "HttpRequest: out of memory");
  memcpy(copy, RSTRING_PTR(raw), len);

  hr_resp_t resp;
  hr_resp_init(&resp, head);
  char perr[HR_PERR_MAX], err[HR_ERRMSG_MAX];
  int rc = hr_feed(&resp, copy, len, perr, sizeof perr);
  if (rc == 0) rc = hr_finish(&resp, len, perr, sizeof perr);
  free(copy);
  if (rc < 0) {
    hr_resp_free(&resp);
    snprintf(err, sizeof err, "HttpRequest: bad response: %s", perr);
    mrb_raise(mrb, hr_error_class(mrb, "Error"), err);
  }
  mrb_value out = hr_result(mrb, &resp);
  hr_resp_free(&resp);
  return out;
}

void mrb_mruby_httprequest_gem_init(mrb_state *mrb)
{
  struct RClass *hr = mrb_define_class(mrb, "HttpRequest", mrb->object_class);
  mrb_define_class_method(mrb, hr, "_exchange", hr_m_exchange, MRB_ARGS_REQ(6));
  mrb_define_class_method(mrb, hr, "_parse", hr_m_parse, MRB_ARGS_REQ(3));
}

void mrb_mruby_httprequest_gem_final(mrb_state *mrb)
{
  (void)mrb;
}
