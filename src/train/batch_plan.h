// How a global batch is split over ranks and micro-steps.
//   global windows per step G = total_batch_size / seq_len
//   accumulation steps A   = G / (micro_batch_size * world_size)
// Rank r, micro-step m, row j takes global-batch slot m*B*W + j*W + r, so the set of windows
// in a step is identical at every world size (rank r takes windows r, r+W, ...).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lmtrain::train {

// The batch keys as given (read by the command, cli/read_options.cpp).
struct BatchSizes {
  int64_t micro_batch = 0;   // train.micro_batch_size
  int64_t seq_len = 0;       // data.seq_len
  int64_t total_tokens = 0;  // train.total_batch_size (0 = one micro-step of every rank)
  int64_t accum_steps = 0;   // train.grad_accum_steps (0 = from total_tokens)
};

struct BatchPlan {
  int64_t micro_batch = 0;     // B
  int64_t seq_len = 0;         // T
  int64_t world_size = 1;      // W
  int64_t accum_steps = 1;     // A
  int64_t global_windows = 0;  // G = A * B * W

  // Throws UsageError naming the keys (and their flags) when the sizes contradict each other or
  // do not split into whole micro-steps.
  static BatchPlan make(const BatchSizes& sizes, int world_size);
  int64_t tokens_per_step() const { return global_windows * seq_len; }
  // Positions within the step's global batch for (rank, micro) — B of them.
  std::vector<int64_t> slots(int rank, int64_t micro) const;
  std::string describe() const;
};

}  // namespace lmtrain::train
