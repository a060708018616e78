/* handler.h - what a location does with a request, as objects bound at
 * config load (h2o's h2o_handler_t). The core dispatches through these and
 * names no handler kind; each kind lives in its own file and is built by the
 * config reader: mruby_handler.c (a Ruby block), proxy.c (proxy_pass),
 * status.c (the status page).
 *
 * A new kind: write one file with a constructor that returns a gw_handler_t
 * (usually embedded first in a struct of its own), and call it from
 * config.c where the location's options are read. */
#ifndef GW_HANDLER_H
#define GW_HANDLER_H

typedef struct gw_request_s gw_request_t;

typedef struct gw_handler_s gw_handler_t;
typedef struct gw_filter_s gw_filter_t;

struct gw_handler_s {
  const char *name;         /* "mruby", "proxy_pass", "status": for traces */
  /* Answers req: sets its response and calls gw_request_finish() (or
   * streams it), now or later from the loop. Whatever it waits on is
   * registered with gw_request_pending_add(), so an abort cancels it. */
  void (*on_req)(gw_handler_t *self, gw_request_t *req);
  /* Frees the handler (config teardown). */
  void (*dispose)(gw_handler_t *self);
};

/* How a step ended (the `verdict` of gw_filter_done_cb). */
enum {
  GW_STEP_NEXT = 0,     /* go on with the next step */
  GW_STEP_FAILED = 1,   /* it raised: answer 500 */
  GW_STEP_ANSWERED = 2  /* it set the response itself (a rewrite or access
                           phase that answered): finish with that */
};

/* Called by a step when it is done; arg: the one given to run. */
typedef void (*gw_filter_done_cb)(gw_request_t *req, int verdict, void *arg);

/* A step of a request's phases other than its content (nginx's phases):
 * before the content handler (rewrite, access: may answer), on a response
 * before it goes out (header filter: status and headers, the body not read
 * yet; body filter: the whole body), or after it went out (log). */
struct gw_filter_s {
  /* Runs on req as it stands, then calls done(req, verdict, arg), possibly
   * before returning. req is not finished here: done goes on. */
  void (*run)(gw_filter_t *self, gw_request_t *req, gw_filter_done_cb done, void *arg);
  void (*dispose)(gw_filter_t *self);
};

#endif
