#include "data/window_stream.h"

#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "core/seed_mix.h"
#include "data/token_split.h"

namespace lmtrain::data {
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t state = seed * 0xD1B54A32D192ED03ULL + stream * 0x9E3779B97F4A7C15ULL + 1;
  for (int64_t i = n - 1; i > 0; --i) {
    // Multiply-shift maps a 64-bit draw to [0, i] without modulo bias worth caring about.
    const uint64_t r = core::splitmix64_next(state);
    const auto j = static_cast<int64_t>((static_cast<unsigned __int128>(r) * (i + 1)) >> 64);
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

WindowStream::WindowStream(const TokenSplit& split, int64_t seq_len, uint64_t seed, bool shuffle)
    : split_(split), seq_len_(seq_len), seed_(seed), shuffle_(shuffle) {
  const int64_t n = static_cast<int64_t>(split.size());
  num_windows_ = n > 1 ? (n - 1) / seq_len : 0;
  if (num_windows_ == 0) {
    throw Error(log::format("token split has %lld tokens: too few for one window of seq_len %lld",
                            (long long)n, (long long)seq_len));
  }
}

int64_t WindowStream::window_at(int64_t epoch, int64_t index) {
  if (index < 0 || index >= num_windows_) {
    throw Error(log::format("window index %lld out of range [0, %lld)", (long long)index,
                            (long long)num_windows_));
  }
  if (!shuffle_) return index;
  if (order_epoch_ != epoch) {
    order_ = seeded_permutation(num_windows_, seed_, static_cast<uint64_t>(epoch));
    order_epoch_ = epoch;
  }
  return order_[index];
}

void WindowStream::copy_windows(const std::vector<int64_t>& window_ids, int64_t* out) const {
  const int64_t row = seq_len_ + 1;
  for (size_t i = 0; i < window_ids.size(); ++i) {
    split_.copy_window(static_cast<size_t>(window_ids[i] * seq_len_), static_cast<size_t>(row),
                       out + i * row);
  }
}

}  // namespace lmtrain::data
