/* test_error.c - error.h: which kinds allow a retry, which are timeouts, the
 * status each one answers with.
 * error.h is header-only: nothing else is linked. */
#include "error.h"
#include "unit.h"

int main(void)
{
  /* nothing was sent: another server may be tried */
  CHECK(gw_err_is_connect_failure(GW_ERR_CONNECT_REFUSED));
  CHECK(gw_err_is_connect_failure(GW_ERR_CONNECT_TIMEOUT));
  CHECK(gw_err_is_connect_failure(GW_ERR_CONNECT));
  CHECK(gw_err_is_connect_failure(GW_ERR_DNS_NOT_FOUND));
  CHECK(gw_err_is_connect_failure(GW_ERR_TLS)); /* a failed handshake sent no request */
  CHECK(!gw_err_is_connect_failure(GW_OK));
  CHECK(!gw_err_is_connect_failure(GW_ERR_RESET));
  CHECK(!gw_err_is_connect_failure(GW_ERR_CLOSED));
  CHECK(!gw_err_is_connect_failure(GW_ERR_TIMEOUT));
  CHECK(!gw_err_is_connect_failure(GW_ERR_BAD_RESPONSE));
  CHECK(!gw_err_is_connect_failure(GW_ERR_TOO_LARGE));
  CHECK(!gw_err_is_connect_failure(GW_ERR_DNS_TIMEOUT));
  CHECK(!gw_err_is_connect_failure(GW_ERR_DNS_FAILURE));
  CHECK(!gw_err_is_connect_failure(GW_ERR_BAD_NAME));
  CHECK(!gw_err_is_connect_failure(GW_ERR_NOMEM));

  /* timeouts: 504 and Gateway::TimeoutError */
  CHECK(gw_err_is_timeout(GW_ERR_CONNECT_TIMEOUT));
  CHECK(gw_err_is_timeout(GW_ERR_TIMEOUT));
  CHECK(gw_err_is_timeout(GW_ERR_DNS_TIMEOUT));
  int timeouts = 0;
  for (int k = GW_OK; k < GW_ERR_KIND_COUNT; k++) {
    timeouts += gw_err_is_timeout((gw_err_kind_t)k);
    CHECK(gw_err_status((gw_err_kind_t)k) == (k == GW_OK ? 0 : gw_err_is_timeout((gw_err_kind_t)k) ? 504 : 502));
    CHECK(gw_err_name((gw_err_kind_t)k)[0] != '?');
  }
  CHECK(timeouts == 3);
  CHECK(gw_err_status(GW_ERR_CONNECT_REFUSED) == 502);
  CHECK(gw_err_status(GW_ERR_DNS_TIMEOUT) == 504);
  CHECK(gw_err_status(GW_ERR_DNS_NOT_FOUND) == 502);
  CHECK_STR(gw_err_name(GW_ERR_RESET), "RESET");
  CHECK_STR(gw_err_name(GW_ERR_TLS), "TLS");
  CHECK(gw_err_status(GW_ERR_TLS) == 502);
  CHECK_STR(gw_err_name(GW_ERR_KIND_COUNT), "?");

  gw_err_t e = gw_err(GW_ERR_TIMEOUT, "upstream timed out");
  CHECK(e.kind == GW_ERR_TIMEOUT);
  CHECK_STR(e.msg, "upstream timed out");
  e = gw_err(GW_OK, "ignored");
  CHECK(e.kind == GW_OK && e.msg == NULL);
  e = gw_err_none();
  CHECK(e.kind == GW_OK && e.msg == NULL);
  return UNIT_DONE();
}
