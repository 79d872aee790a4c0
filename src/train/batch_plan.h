// How a global batch is split over ranks and micro-steps.
//   global windows per step G = total_batch_size / seq_len
//   accumulation steps A   = G / (micro_batch_size * world_size)
// Rank r, micro-step m, row j takes global-batch slot m*B*W + j*W + r, so the set of windows
// in a step is identical at every world size (rank r takes windows r, r+W, ...).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lmtrain::core {
class Config;
}

namespace lmtrain::train {

struct BatchPlan {
  int64_t micro_batch = 0;     // B
  int64_t seq_len = 0;         // T
  int64_t world_size = 1;      // W
  int64_t accum_steps = 1;     // A
  int64_t global_windows = 0;  // G = A * B * W

  static BatchPlan from_config(const core::Config& cfg, int world_size);
  int64_t tokens_per_step() const { return global_windows * seq_len; }
  // Positions within the step's global batch for (rank, micro) — B of them.
  std::vector<int64_t> slots(int rank, int64_t micro) const;
  std::string describe() const;
};

}  // namespace lmtrain::train
