/* json_out.c - JSON strings into an evbuffer (json_out.h). */
#include <event2/buffer.h>

#include "json_out.h"

void gw_json_string(struct evbuffer *out, const char *s, size_t len)
{
  evbuffer_add(out, "\"", 1);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      evbuffer_add_printf(out, "\\%c", c);
    else if (c < 0x20)
      evbuffer_add_printf(out, "\\u%04x", c);
    else
      evbuffer_add(out, s + i, 1);
  }
  evbuffer_add(out, "\"", 1);
}
