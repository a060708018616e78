/* timeutil.h - time helpers shared by the loop users: a libevent timeout
 * (struct timeval) from milliseconds or seconds, and the coarse monotonic
 * clock idle timers compare against. Header only; no state. */
#ifndef GW_TIMEUTIL_H
#define GW_TIMEUTIL_H

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

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

/* Milliseconds of CLOCK_MONOTONIC_COARSE: a few ms of resolution for the
 * price of a vDSO read, enough for idle and keep-alive deadlines (precise
 * times: gw_now_ms() in log.h). */
static inline int64_t gw_coarse_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
