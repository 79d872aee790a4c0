// Fewer points to draw, with the extremes kept. A chart is a few hundred pixels wide, so a
// million logged steps would only make the file heavy; but a loss spike or a throughput dip
// is what a reader looks for, so plain striding (or averaging) would hide exactly that.
//
// The rule (tests/report/check_report.py implements it again to count the points drawn):
// a series of n <= 4 * max_buckets points is drawn whole. Longer, its indices are cut into
// max_buckets buckets of consecutive points, bucket b = [floor(b n / B), floor((b + 1) n / B)),
// and each bucket keeps its first point, its minimum, its maximum (the first index of each on
// ties) and its last point, in index order, each index once. So the global minimum and maximum
// are always drawn, and at most 4 B points are.
#pragma once
#include <cstddef>
#include <vector>

namespace lmtrain::report {

inline constexpr size_t kMaxBuckets = 2000;

// Indices (increasing) into `values` of the points to draw.
std::vector<size_t> downsample_indices(const std::vector<double>& values,
                                       size_t max_buckets = kMaxBuckets);

// Exponential moving average with bias correction (as Adam's moments): s_t = b s_{t-1} +
// (1 - b) x_t, shown as s_t / (1 - b^t), so the first points are not pulled towards 0.
std::vector<double> ema_smooth(const std::vector<double>& values, double beta);

// The smoothing a series of n points gets: b = 0.9 (about 10 points) up to 2000 points; beyond,
// the horizon grows with the run, b = 1 - 200 / n (about n / 200 points), so a long run's curve
// is smooth at the chart's width instead of a band of noise.
double smoothing_beta(size_t n);

}  // namespace lmtrain::report
