#include "report/downsample.h"

#include <algorithm>

namespace lmtrain::report {

std::vector<size_t> downsample_indices(const std::vector<double>& values, size_t max_buckets) {
  const size_t n = values.size();
  std::vector<size_t> keep;
  if (max_buckets == 0 || n <= 4 * max_buckets) {
    keep.resize(n);
    for (size_t i = 0; i < n; ++i) keep[i] = i;
    return keep;
  }
  keep.reserve(4 * max_buckets);
  for (size_t b = 0; b < max_buckets; ++b) {
    const size_t begin = b * n / max_buckets, end = (b + 1) * n / max_buckets;
    if (begin >= end) continue;
    size_t lo = begin, hi = begin;
    for (size_t i = begin + 1; i < end; ++i) {
      if (values[i] < values[lo]) lo = i;
      if (values[i] > values[hi]) hi = i;
    }
    size_t picks[4] = {begin, std::min(lo, hi), std::max(lo, hi), end - 1};
    for (size_t p : picks) {
      if (keep.empty() || keep.back() < p) keep.push_back(p);
    }
  }
  return keep;
}

std::vector<double> ema_smooth(const std::vector<double>& values, double beta) {
  std::vector<double> out(values.size());
  double s = 0, correction = 1;
  for (size_t i = 0; i < values.size(); ++i) {
    s = beta * s + (1 - beta) * values[i];
    correction *= beta;
    out[i] = s / (1 - correction);
  }
  return out;
}

double smoothing_beta(size_t n) {
  if (n <= 2000) return 0.9;
  return 1.0 - 200.0 / static_cast<double>(n);
}

}  // namespace lmtrain::report
