/* fastcgi.h - fastcgi: answers a request through a FastCGI server (php-fpm):
 * the CGI/1.1 params, the request body as FCGI_STDIN, the response streamed
 * back (fcgi_client.c), servers picked from an upstream group (balancer.c). */
#ifndef GW_FASTCGI_H
#define GW_FASTCGI_H

#include "config.h"
#include "handler.h"
#include "regex.h"
#include "request.h"

/* Idle FastCGI connections kept per address for a target that is not a
 * group (a group's `keepalive:` otherwise). */
#define GW_FASTCGI_DEFAULT_KEEPALIVE 32

/* A FastCGI target: "unix:/path.sock", "IP:port" ("[v6]:port"), or the
 * name of an upstream group. Returns 0, or -1 for anything else (a host
 * name: FastCGI addresses are not resolved). */
int gw_fastcgi_target_ok(const char *target);

/* The handler of a `fastcgi: TARGET` location. script_filename may be NULL
 * (then params' SCRIPT_FILENAME, else DOCUMENT_ROOT + the script's path);
 * split (split_path_info:, nginx's fastcgi_split_path_info) may be NULL, else
 * a pattern of two groups matched on the decoded path: group 1 is the script
 * (SCRIPT_NAME, DOCUMENT_URI, SCRIPT_FILENAME), group 2 PATH_INFO (and
 * PATH_TRANSLATED = DOCUMENT_ROOT + PATH_INFO); the handler holds its own
 * reference. params: nparams name/value pairs sent after (and instead of)
 * the standard ones of the same name; all copied. NULL for a bad target or
 * out of memory. */
gw_handler_t *gw_fastcgi_handler_new(const char *target, const char *script_filename, gw_regex_t *split,
                                     const char *const *params, size_t nparams);

/* req.fastcgi_pass(target, script_filename:, split_path_info:) from a
 * handler: as the location handler, with the location's params (and its
 * script_filename: and split_path_info: unless given) when it is a fastcgi
 * one. split is only used during the call. Finishes req (502 for a bad
 * target). */
void gw_fastcgi_start(gw_request_t *req, const char *target, const char *script_filename, const gw_regex_t *split);

/* The keep-alive FastCGI connections of ctx's worker, freed at its exit. */
void gw_fastcgi_worker_dispose(gw_context_t *ctx);

#endif
