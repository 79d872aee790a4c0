// Per-rank index sampler for map-style datasets, with exactly the semantics of PyTorch's
// torch.utils.data.DistributedSampler (torch/utils/data/distributed.py, 1.13), so that a
// dataset split across W ranks here visits the same indices, in the same order, as a Python
// DDP job with the same (size, W, seed, epoch, shuffle, drop_last).
//
// For an epoch e:
//   1. order = shuffle ? torch.randperm(size, generator seeded with seed + e) : [0, size).
//   2. num_samples = (drop_last && size % W != 0) ? ceil((size - W) / W) : ceil(size / W);
//      total_size = num_samples * W.
//   3. Not drop_last: pad order to total_size by appending its head; when the padding is
//      longer than the list itself (possible only when size < W) the whole list is repeated
//      as often as needed, then cut. drop_last: truncate order to total_size.
//   4. Rank r gets order[r], order[r + W], order[r + 2W], ... (num_samples indices).
// So every rank gets the same number of indices; without drop_last every index is visited at
// least once per epoch (a few twice), with drop_last at most once (the tail is skipped).
// Call set_epoch() before each epoch, or every epoch repeats epoch 0's order (as in PyTorch).
#pragma once
#include <cstdint>
#include <vector>

namespace lmtrain::data {

class DistributedSampler {
 public:
  // Throws UsageError (naming the bad value) if dataset_size < 0, num_replicas < 1 or rank is
  // outside [0, num_replicas).
  DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);

  // The shuffle generator is seeded with seed + epoch (mod 2^64, as torch.Generator's
  // manual_seed wraps negative values), so every rank must use the same seed and epoch.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  int64_t dataset_size() const { return dataset_size_; }
  int64_t num_replicas() const { return num_replicas_; }
  int64_t rank() const { return rank_; }
  // Indices this rank gets per epoch (PyTorch's len(sampler)); the same on every rank.
  int64_t num_samples() const { return num_samples_; }
  // num_samples() * num_replicas(): the padded or truncated length of the global order.
  int64_t total_size() const { return total_size_; }

  // This rank's dataset indices for the current epoch, in visiting order.
  std::vector<int64_t> indices() const;

 private:
  int64_t dataset_size_;
  int64_t num_replicas_;
  int64_t rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
  int64_t num_samples_;
  int64_t total_size_;
};

}  // namespace lmtrain::data
