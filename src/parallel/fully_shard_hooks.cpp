// FullyShard's block hooks (parallel/fully_shard.h, model/block_hooks.h): before a block its
// gather is waited for and the next block's issued (prefetch), after it its parameters are
// freed; hooks on the block's activation gradients gather it again for backward (prefetching
// the block before) and, once its gradients are accumulated, free it and launch its
// reduce-scatter.
#include <torch/csrc/autograd/grad_mode.h>

#include "parallel/fully_shard.h"

namespace lmtrain::parallel {

void FullyShard::pre_backward(size_t u) {
  auto& s = state_[u];
  if (s.pre_backward_done) return;
  s.pre_backward_done = true;
  issue_gather(u);
  wait_gather(u);
  hold_grads(u);
  if (u > 1) issue_gather(u - 1);  // prefetch: the block before runs its backward next
}

void FullyShard::post_backward(size_t u) {
  release_params(u);
  if (!last_micro_) return;  // accumulation: the gradient buffer stays until the last
  launch_reduce(u);
  // At most two units' gradient buffers in flight: the oldest one's reduce-scatter has had
  // a block's backward to finish.
  while (reduce_order_.size() > 2) {
    wait_reduce(reduce_order_.front());
    reduce_order_.erase(reduce_order_.begin());
  }
}

at::Tensor FullyShard::before_block(int64_t layer, const at::Tensor& x) {
  const size_t u = static_cast<size_t>(layer) + 1;
  issue_gather(u);
  wait_gather(u);
  if (u + 1 < units_.size()) issue_gather(u + 1);  // prefetch the next block
  if (x.requires_grad()) {
    // x's gradient is complete once every gradient of block `layer` is accumulated (autograd
    // runs the accumulators first): then this block's backward is over, the one before starts.
    x.register_hook([this, u](const at::Tensor&) {
      post_backward(u);
      if (u > 1) pre_backward(u - 1);
    });
  }
  return x;
}

std::vector<at::Tensor> FullyShard::after_block(int64_t layer, std::vector<at::Tensor> outputs) {
  const size_t u = static_cast<size_t>(layer) + 1;
  if (reshard_ || !torch::GradMode::is_enabled()) release_params(u);
  // The last block's output (and any other output, e.g. MoE balance terms, whose gradient may
  // arrive first): its gradient starts the block's backward. Block L's y is block L+1's x,
  // whose hook (above) covers it after L+1's backward.
  const bool last_block = u + 1 == units_.size();
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto& t = outputs[i];
    if (!t.defined() || !t.requires_grad() || (i == 0 && !last_block)) continue;
    t.register_hook([this, u](const at::Tensor&) { pre_backward(u); });
  }
  return outputs;
}

}  // namespace lmtrain::parallel
