#include "train/batch_plan.h"

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::train {

BatchPlan BatchPlan::make(const BatchSizes& sizes, int world_size) {
  BatchPlan p;
  p.micro_batch = sizes.micro_batch;
  p.seq_len = sizes.seq_len;
  p.world_size = world_size;
  const int64_t per_micro_step = p.micro_batch * p.seq_len * world_size;
  int64_t total = sizes.total_tokens;
  const int64_t accum = sizes.accum_steps;
  // Each number is named by its key and by the flags users bring from nanochat
  // (--total_batch_size, --device_batch_size, --max_seq_len) and the HF-style trainers.
  const std::string per_micro_text = log::format(
      "train.micro_batch_size (--batch_size, --device_batch_size) %lld x data.seq_len "
      "(--max_seq_len, --max_length) %lld x world size %d = %lld tokens per micro-step",
      (long long)p.micro_batch, (long long)p.seq_len, world_size, (long long)per_micro_step);
  if (accum > 0) {
    if (total != 0 && total != accum * per_micro_step) {
      throw UsageError(log::format(
          "train.total_batch_size (--total_batch_size) = %lld tokens contradicts "
          "train.grad_accum_steps (--gradient_accumulation_steps) = %lld: %lld x %s would be "
          "%lld; set only one of them",
          (long long)total, (long long)accum, (long long)accum, per_micro_text.c_str(),
          (long long)(accum * per_micro_step)));
    }
    total = accum * per_micro_step;
  }
  if (total == 0) total = per_micro_step;
  if (total % per_micro_step != 0) {
    throw UsageError(log::format(
        "train.total_batch_size (--total_batch_size) = %lld tokens is not divisible by %s: "
        "gradient accumulation must be a whole number of micro-steps",
        (long long)total, per_micro_text.c_str()));
  }
  p.accum_steps = total / per_micro_step;
  p.global_windows = total / p.seq_len;
  return p;
}

std::vector<int64_t> BatchPlan::slots(int rank, int64_t micro) const {
  std::vector<int64_t> out(micro_batch);
  for (int64_t j = 0; j < micro_batch; ++j) {
    out[j] = micro * micro_batch * world_size + j * world_size + rank;
  }
  return out;
}

std::string BatchPlan::describe() const {
  return log::format(
      "batch: %lld tokens/step = %lld windows x %lld tokens; micro-batch %lld x "
      "%lld rank(s) x %lld accumulation step(s)",
      (long long)tokens_per_step(), (long long)global_windows, (long long)seq_len,
      (long long)micro_batch, (long long)world_size, (long long)accum_steps);
}

}  // namespace lmtrain::train
