// Training windows over a token split (one shard, or the pieces of one, concatenated:
// data/token_split.h), in a deterministic order.
// The split of N tokens holds W = (N - 1) / T non-overlapping windows; window w is tokens
// [w*T, w*T + T] (T+1 tokens: inputs and shifted targets). Each epoch visits the windows in an
// order that depends only on (seed, epoch), so a data position {epoch, cursor} saved in a
// checkpoint fully determines what comes next, at any world size.
#pragma once
#include <cstdint>
#include <vector>

namespace lmtrain::data {

class TokenSplit;

struct DataPosition {
  int64_t epoch = 0;
  int64_t cursor = 0;  // windows of this epoch's order already consumed (globally)
};

class WindowStream {
 public:
  WindowStream(const TokenSplit& split, int64_t seq_len, uint64_t seed, bool shuffle);

  int64_t num_windows() const { return num_windows_; }
  int64_t seq_len() const { return seq_len_; }
  // Window id at `index` of epoch `epoch`'s order.
  int64_t window_at(int64_t epoch, int64_t index);
  // Copies windows (ids, not order indices) into out: (ids.size(), T+1) int64, row-major.
  void copy_windows(const std::vector<int64_t>& window_ids, int64_t* out) const;

 private:
  const TokenSplit& split_;
  int64_t seq_len_;
  uint64_t seed_;
  bool shuffle_;
  int64_t num_windows_;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

// Deterministic permutation of [0, n) from (seed, stream): Fisher-Yates driven by splitmix64,
// identical on every platform and library version.
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream);

}  // namespace lmtrain::data
