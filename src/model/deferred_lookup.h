// A token table's lookup whose weight gradient is handed to a sink instead of the table's
// gradient accumulator. Why: in a tied decoder (GPT-2, Qwen3-0.6B) the table is also the LM head,
// whose gradient is complete at the very start of backward; the lookup's part comes at the very
// end. Through the accumulator the sum is known only at the end, so data parallelism sends the
// whole table (vocab x C) after backward, unhidden. With a sink, the accumulator gets the head's
// part alone, early, and the lookup's part — n rows of the table for n tokens — travels on its
// own after backward (parallel/deferred_table_grad.h). The model makes no collective call: the
// sink is installed from outside (train/train_step.cpp), as parallelisms are.
#pragma once
#include <ATen/core/Tensor.h>

namespace lmtrain::model {

class LookupGradSink {
 public:
  virtual ~LookupGradSink() = default;
  // Whether a lookup of `tokens` ids takes the deferred path; decided at forward, alike on
  // every rank's equal batches.
  virtual bool defers(int64_t tokens) const = 0;
  // Backward of a deferred lookup: ids (n,) and their output gradients rows (n, C). Returns
  // false when the sink does not take them now (an accumulation micro-step): the lookup then
  // adds them into the table's .grad itself.
  virtual bool take(const at::Tensor& ids, const at::Tensor& rows) = 0;
};

// weight (V, C), ids (...): weight[ids] (..., C). With a sink that defers, the result's graph
// has no edge to `weight`: its gradient goes to the sink, or straight into weight.grad().
at::Tensor lookup(const at::Tensor& weight, const at::Tensor& ids, LookupGradSink* sink);

}  // namespace lmtrain::model
