/* chunked.h - writes a body in HTTP/1.1 chunked transfer coding.
 *
 * Each piece of data becomes one chunk, "SIZE\r\n" + data + "\r\n" with SIZE
 * in lowercase hex; gw_chunked_end writes the last chunk "0\r\n\r\n" (no
 * trailers). Used for a streamed response to the client and for a streamed
 * request body to an upstream. An empty piece writes nothing: a chunk of
 * size 0 would end the body. */
#ifndef GW_CHUNKED_H
#define GW_CHUNKED_H

#include <stddef.h>
#include <event2/buffer.h>

/* Appends data[0, len) to out as one chunk. Returns the bytes appended
 * (len plus its framing), or 0 when len is 0 or memory ran out; out is then
 * unchanged. data may be NULL when len is 0. */
size_t gw_chunked_add(struct evbuffer *out, const char *data, size_t len);

/* Moves the first len bytes of src (all of src if it holds fewer; at most
 * INT_MAX) to out as one chunk, without copying whole evbuffer chains.
 * Returns the bytes appended to out: 0 when nothing was moved. When memory
 * runs out it returns 0 and out may end inside the chunk (the body cannot be
 * finished: close that connection). */
size_t gw_chunked_add_buffer(struct evbuffer *out, struct evbuffer *src, size_t len);

/* Appends the last chunk, "0\r\n\r\n". Returns 5, or 0 when memory ran out
 * (out unchanged). */
size_t gw_chunked_end(struct evbuffer *out);

#endif
