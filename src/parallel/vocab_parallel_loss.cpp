#include "parallel/vocab_parallel_loss.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "parallel/tp_regions.h"

namespace lmtrain::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class VocabParallelCrossEntropy : public torch::autograd::Function<VocabParallelCrossEntropy> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets, dist::Group* g, int64_t ignore_index) {
    const auto x = logits.to(at::kFloat);  // (N, V / T): the sums in fp32
    const int64_t width = x.size(1), begin = width * g->rank();
    auto max = std::get<0>(x.max(1));  // (N,)
    timed_tp_allreduce(max, dist::ReduceOp::kMax, *g);
    const auto shifted = x - max.unsqueeze(1);
    const auto exp = shifted.exp();
    auto sum = exp.sum(1);  // (N,)
    timed_tp_allreduce(sum, dist::ReduceOp::kSum, *g);
    const auto valid = targets != ignore_index;
    const auto mine = valid & (targets >= begin) & (targets < begin + width);
    const auto local = at::where(mine, targets - begin, at::zeros_like(targets));
    auto target_logit = shifted.gather(1, local.unsqueeze(1)).squeeze(1) * mine.to(at::kFloat);
    timed_tp_allreduce(target_logit, dist::ReduceOp::kSum, *g);
    const auto count = valid.sum().to(at::kFloat).clamp_min(1);
    const auto per_token = (sum.log() - target_logit) * valid.to(at::kFloat);  // (N,)
    // For backward: softmax of this rank's columns, and where each target sits.
    ctx->save_for_backward({exp / sum.unsqueeze(1), local, mine, valid, count});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return per_token.sum() / count;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto grad = saved[0].clone();  // softmax (N, V / T)
    const auto &local = saved[1], &mine = saved[2], &valid = saved[3], &count = saved[4];
    grad.scatter_add_(1, local.unsqueeze(1), -mine.to(at::kFloat).unsqueeze(1));
    grad.mul_((valid.to(at::kFloat) / count).unsqueeze(1) * grads[0]);
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits_shard, const at::Tensor& targets,
                                        dist::Group& group, int64_t ignore_index) {
  return VocabParallelCrossEntropy::apply(logits_shard, targets, &group, ignore_index);
}

}  // namespace lmtrain::train
