#include "parallel/vocab_parallel_distill.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "model/gpt.h"
#include "parallel/tp_regions.h"
#include "parallel/vocab_parallel_loss.h"

namespace lmtrain::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// z (N, V / T) fp32 -> (softmax, log_softmax) of the whole rows, on this rank's columns.
std::pair<at::Tensor, at::Tensor> vocab_parallel_softmax(const at::Tensor& z, dist::Group& g) {
  auto max = std::get<0>(z.max(1));  // (N,)
  train::timed_tp_allreduce(max, dist::ReduceOp::kMax, g);
  const auto shifted = z - max.unsqueeze(1);
  const auto exp = shifted.exp();
  auto sum = exp.sum(1);  // (N,)
  train::timed_tp_allreduce(sum, dist::ReduceOp::kSum, g);
  return {exp / sum.unsqueeze(1), shifted - sum.log().unsqueeze(1)};
}

// T^2 KL(softmax(zt / T) || softmax(zs / T)), the mean over the rows where `valid`.
class VocabParallelKd : public torch::autograd::Function<VocabParallelKd> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& zs, const at::Tensor& zt,
                            const at::Tensor& valid, double T, dist::Group* g) {
    const auto [ps, ls] = vocab_parallel_softmax(zs.to(at::kFloat) / T, *g);
    const auto [pt, lt] = vocab_parallel_softmax(zt.to(at::kFloat) / T, *g);
    auto rows = (pt * (lt - ls)).sum(1);  // (N,): this rank's columns' part
    train::timed_tp_allreduce(rows, dist::ReduceOp::kSum, *g);
    const auto weight = valid.to(at::kFloat);
    const auto count = weight.sum().clamp_min(1);
    ctx->save_for_backward({ps - pt, weight, count});
    ctx->saved_data["T"] = T;
    ctx->saved_data["dtype"] = static_cast<int64_t>(zs.scalar_type());
    return (rows * weight).sum() / count * (T * T);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const double T = ctx->saved_data["T"].toDouble();
    // T^2 * (1 / T) (p_s - p_t) per counted row, over the count.
    const auto scale = saved[1] / saved[2] * (T * grads[0]);  // (N,)
    const auto dzs = saved[0] * scale.unsqueeze(1);
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {dzs.to(dtype), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Logits of hidden states x (N, C) by head rows w (rows, C), soft-capped as the model does.
at::Tensor capped_logits(const at::Tensor& x, const at::Tensor& w, double cap) {
  auto z = at::linear(x, w);
  return cap > 0 ? cap * at::tanh(z / cap) : z;
}

}  // namespace

model::DistillLoss vocab_parallel_distill_loss(const at::Tensor& hs_shard,
                                               const at::Tensor& ws_rows, const at::Tensor& ht,
                                               const at::Tensor& wt, const at::Tensor& targets,
                                               const model::DistillLossSpec& spec,
                                               dist::Group& group) {
  // (B, T_seq / T, Cs) -> (B, T_seq, Cs) -> (N, Cs): the gather's adjoint sums the ranks'
  // partial gradients of the rows and keeps this rank's positions.
  const auto whole = train::gather_sequence(hs_shard, 1, group);
  const auto hs = whole.reshape({-1, whole.size(-1)});
  const auto flat_targets = targets.reshape({-1});                                  // (N,)
  const auto zs = capped_logits(hs, ws_rows, spec.student_softcap).to(at::kFloat);  // (N, V/T)
  at::Tensor zt;
  {
    at::NoGradGuard no_grad;
    const int64_t rows = ws_rows.size(0);
    const auto wt_rows = wt.narrow(0, rows * group.rank(), rows);  // (V / T, Ct)
    zt = capped_logits(ht.reshape({-1, ht.size(-1)}), wt_rows, spec.teacher_softcap).to(at::kFloat);
  }
  const auto valid = flat_targets != model::kIgnoreIndex;
  const auto kd = VocabParallelKd::apply(zs, zt, valid, spec.temperature, &group);
  const auto ce = train::vocab_parallel_cross_entropy(zs, flat_targets, group, model::kIgnoreIndex);
  model::DistillLoss r;
  r.loss = kd * spec.alpha + ce * (1.0 - spec.alpha);
  r.kd = kd.detach();
  r.ce = ce.detach();
  return r;
}

}  // namespace lmtrain::parallel
