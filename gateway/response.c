/* response.c - writes a response head and body into an output buffer. One
 * evbuffer_add per piece of the head, the body moved (not copied) behind it. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "response.h"
#include "worker.h"

const char *gw_response_reason(int status)
{
  switch (status) {
  case 100: return "Continue";
  case 101: return "Switching Protocols";
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 204: return "No Content";
  case 206: return "Partial Content";
  case 301: return "Moved Permanently";
  case 302: return "Found";
  case 303: return "See Other";
  case 304: return "Not Modified";
  case 307: return "Temporary Redirect";
  case 308: return "Permanent Redirect";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 411: return "Length Required";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 415: return "Unsupported Media Type";
  case 417: return "Expectation Failed";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  case 505: return "HTTP Version Not Supported";
  default: return "Unknown";
  }
}

/* Headers the core computes itself; a script's own values are not sent. */
static int is_managed(const gw_header_t *h)
{
  switch (h->name_len) {
  case 4: return strcasecmp(h->name, "date") == 0;
  case 10: return strcasecmp(h->name, "connection") == 0 || strcasecmp(h->name, "keep-alive") == 0;
  case 14: return strcasecmp(h->name, "content-length") == 0;
  case 17: return strcasecmp(h->name, "transfer-encoding") == 0;
  default: return 0;
  }
}

void gw_response_write(gw_request_t *req, struct evbuffer *out, gw_worker_t *w, int keepalive)
{
  int status = req->status ? req->status : 200;
  char line[128];
  int n = snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", status, gw_response_reason(status));
  evbuffer_add(out, line, (size_t)n);
  int has_server = 0;
  for (size_t i = 0; i < req->resp_headers.count; i++) {
    const gw_header_t *h = &req->resp_headers.items[i];
    if (is_managed(h)) continue;
    if (h->name_len == 6 && strcasecmp(h->name, "server") == 0) has_server = 1;
    evbuffer_add(out, h->name, h->name_len);
    evbuffer_add(out, ": ", 2);
    evbuffer_add(out, h->value, h->value_len);
    evbuffer_add(out, "\r\n", 2);
  }
  if (!has_server) evbuffer_add(out, "Server: gateway\r\n", 17);
  const char *date = gw_worker_date(w);
  evbuffer_add(out, date, strlen(date));
  int bodyless = status == 204 || status == 304 || (status >= 100 && status < 200);
  size_t body_len = evbuffer_get_length(req->resp_body);
  if (!bodyless) {
    n = snprintf(line, sizeof(line), "Content-Length: %zu\r\n", body_len);
    evbuffer_add(out, line, (size_t)n);
  }
  if (!keepalive)
    evbuffer_add(out, "Connection: close\r\n", 19);
  else if (req->http_minor == 0)
    evbuffer_add(out, "Connection: keep-alive\r\n", 24);
  evbuffer_add(out, "\r\n", 2);
  if (bodyless || req->head)
    evbuffer_drain(req->resp_body, body_len);
  else
    evbuffer_add_buffer(out, req->resp_body);
}
