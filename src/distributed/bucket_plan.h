// The gradient buckets of data parallelism: contiguous slices of the flat gradient buffer, cut
// at parameter boundaries (distributed/grad_sync.h sends one collective per bucket).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace lmtrain::dist {

struct GradBucket {
  int64_t begin = 0, end = 0;  // element range of the flat gradient buffer
  std::vector<size_t> params;  // indices into the parameter list
};

// The last bucket's least size: what backward leaves to send after it returns (PyTorch DDP
// sizes its first-ready bucket the same, 1 MiB).
inline constexpr int64_t kTailBucketBytes = int64_t{1} << 20;

// Splits [0, total) at parameter boundaries into buckets, planned from the end: the last holds at
// least `tail_bytes`, each earlier one at least twice the next, up to `bucket_bytes`; the first
// takes what is left (it may be smaller). `ranges[i]` = (offset, numel) of parameter i, in
// increasing offset order.
std::vector<GradBucket> plan_buckets(const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                     int64_t total, int64_t element_size, int64_t bucket_bytes,
                                     int64_t tail_bytes = kTailBucketBytes);

// Splits the bucket that holds parameter `param` so that `param` has a bucket of its own; the
// parameters before and after it in that bucket keep theirs. For a parameter whose gradient is
// ready at another time than its neighbours' (a tied table's, parallel/deferred_table_grad.h).
void isolate_param(std::vector<GradBucket>& buckets,
                   const std::vector<std::pair<int64_t, int64_t>>& ranges, size_t param);

}  // namespace lmtrain::dist
