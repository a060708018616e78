/* http_status.h - reason phrases and bodyless statuses (RFC 9110 §15). */
#ifndef GW_HTTP_STATUS_H
#define GW_HTTP_STATUS_H

/* "Not Found" for 404, ...; "Unknown" for codes we do not name. */
const char *gw_http_reason(int status);

/* 1 for a status that never has a body (1xx, 204, 304). */
int gw_http_bodyless(int status);

#endif
