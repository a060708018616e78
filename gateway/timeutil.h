/* timeutil.h - time conversions shared by the loop users: a libevent timeout
 * (struct timeval) from milliseconds or seconds. Header only; no state. */
#ifndef GW_TIMEUTIL_H
#define GW_TIMEUTIL_H

#include <sys/time.h>

/* ms (>= 0) as a timeval: {ms / 1000, (ms % 1000) * 1000}. */
static inline struct timeval gw_timeval_from_ms(long long ms)
{
  struct timeval tv;
  tv.tv_sec = (time_t)(ms / 1000);
  tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
  return tv;
}

/* seconds (>= 0, fractions kept to the microsecond, truncated) as a timeval. */
static inline struct timeval gw_timeval_from_s(double seconds)
{
  struct timeval tv;
  tv.tv_sec = (time_t)seconds;
  tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
  return tv;
}

#endif
