/* histogram.c - the log-linear buckets of histogram.h. */
#include <math.h>

#include "histogram.h"

size_t gw_hist_index(uint64_t us)
{
  if (us < GW_HIST_SUB) return (size_t)us;
  int octave = 63 - __builtin_clzll(us) - 6; /* 0 for 64..127 µs */
  if (octave >= GW_HIST_OCTAVES) return GW_HIST_BUCKETS - 1;
  return (size_t)(GW_HIST_SUB + octave * GW_HIST_SUB + (int)((us >> octave) - GW_HIST_SUB));
}

double gw_hist_value(size_t index)
{
  if (index < GW_HIST_SUB) return (double)index;
  size_t octave = (index - GW_HIST_SUB) / GW_HIST_SUB, sub = (index - GW_HIST_SUB) % GW_HIST_SUB;
  double low = (double)((GW_HIST_SUB + sub) << octave), width = (double)((uint64_t)1 << octave);
  return low + (width - 1) / 2; /* the values are whole µs: low .. low + width - 1 */
}

double gw_hist_quantile(const uint32_t *counts, uint64_t total, double q)
{
  if (total == 0) return 0;
  uint64_t rank = (uint64_t)ceil(q * (double)total), seen = 0;
  if (rank < 1) rank = 1;
  for (size_t i = 0; i < GW_HIST_BUCKETS; i++) {
    seen += counts[i];
    if (seen >= rank) return gw_hist_value(i);
  }
  return gw_hist_value(GW_HIST_BUCKETS - 1);
}

double gw_hist_mean(const uint32_t *counts, uint64_t total)
{
  if (total == 0) return 0;
  double sum = 0;
  for (size_t i = 0; i < GW_HIST_BUCKETS; i++)
    if (counts[i]) sum += gw_hist_value(i) * counts[i];
  return sum / (double)total;
}
