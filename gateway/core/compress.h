/* compress.h - compression on the fly: the last stage between a request's
 * handler and its protocol (h2o's ostream model). request.c passes every
 * response through it once (as the location's gw_stage_t) - the whole ones (gw_request_finish) and the
 * streamed ones (stream_begin/data/end) - after the location's own filters
 * and before proto->send / stream_*; no handler knows of it.
 *
 * Whether a response is compressed is decided once, on its head: the
 * location has `compress:`, the request is a client's (not a sub-request)
 * and not HEAD, the status is not 1xx/204/206/304, there is no
 * Content-Encoding and no "Cache-Control: no-transform", the media type is
 * listed and a known length is at least min_length. Such a response gets
 * "Vary: Accept-Encoding" (added to a Vary it has); then, if the client's
 * Accept-Encoding takes one of the location's codings, Content-Encoding, a
 * weak ETag, no Content-Length (a whole response gets its compressed one)
 * and no Accept-Ranges.
 *
 * A streamed body is compressed as it comes and flushed (a sync flush of
 * the coding) once the producer has given nothing for a whole loop turn, so
 * a server-sent-events stream stays live; its memory is one encoder plus
 * what the protocol buffers (back-pressure is the protocol's, passed
 * through). A producer that gives more than a turn's budget without the
 * protocol pushing back is paused and resumed next turn, so compressing a
 * big file never stalls the worker. */
#ifndef GW_COMPRESS_H
#define GW_COMPRESS_H

#include "request.h"

/* The stage (request.h's gw_stage_t) config_load.c gives a location with
 * `compress:` (gw_location_t.stage). */
extern const gw_stage_t gw_compress_stage;

#endif
