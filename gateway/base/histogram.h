/* histogram.h - log-linear histogram of microsecond values (HdrHistogram's
 * idea): exact below 64 µs, then 64 buckets per power of two, so a bucket is
 * at most 1/64 of its values wide and the midpoint it reports is within
 * 1/128 (0.8 %) of any value it holds. Covers 0 .. 2^26 µs (67 s); larger
 * values count in the last bucket. Pure: the caller owns the counts. */
#ifndef GW_HISTOGRAM_H
#define GW_HISTOGRAM_H

#include <stddef.h>
#include <stdint.h>

#define GW_HIST_SUB 64     /* buckets per power of two (and the exact range) */
#define GW_HIST_OCTAVES 20 /* 64 µs .. 2^26 µs */
#define GW_HIST_BUCKETS (GW_HIST_SUB + GW_HIST_OCTAVES * GW_HIST_SUB)

/* The bucket of a value (µs). */
size_t gw_hist_index(uint64_t us);
/* The value a bucket reports (µs): the middle of the values it holds. */
double gw_hist_value(size_t index);
/* The value under which a fraction q (0..1] of the counted values fall: the
 * reported value of the bucket holding the ceil(q * total)-th smallest; 0
 * when total is 0. */
double gw_hist_quantile(const uint32_t *counts, uint64_t total, double q);

/* The mean of the counted values, from the reported values (within 1 %);
 * 0 when total is 0. */
double gw_hist_mean(const uint32_t *counts, uint64_t total);

#endif
