#include "parallel/tp_fp8.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "parallel/tp_layers.h"
#include "parallel/tp_regions.h"

namespace lmtrain::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The whole tensor's amax from this rank's: one fp32 scalar, MAX over the TP group.
model::Fp8AmaxOfWhole tp_amax_of_whole(dist::Group& g) {
  return [&g](const at::Tensor& local_amax) {
    auto amax = local_amax.reshape({1}).clone();
    train::timed_tp_allreduce(amax, dist::ReduceOp::kMax, g);
    return amax.reshape({});
  };
}

// x (any float type) -> x in fp32, with the gradient rounded to bf16 and back to x's type: what
// fp8_linear does to one process's dx, done here after the TP sum of the fp32 partial dx (this
// sits before the all-gather, so its backward runs after the reduce-scatter).
class Fp32WithBf16Grad : public torch::autograd::Function<Fp32WithBf16Grad> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    ctx->saved_data["dtype"] = x.scalar_type();
    return x.to(at::kFloat);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {grads[0].to(at::kBFloat16).to(ctx->saved_data["dtype"].toScalarType())};
  }
};

// y (.., N) bf16 + b (N): b's gradient summed over the rows in fp32, as fp8_linear sums one
// process's (autograd's broadcast sum would round it to bf16 first).
class Bf16BiasAdd : public torch::autograd::Function<Bf16BiasAdd> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, const at::Tensor& b) {
    ctx->saved_data["b_dtype"] = b.scalar_type();
    return y + b.to(y.scalar_type());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& dy = grads[0];
    const auto db = dy.reshape({-1, dy.size(-1)}).sum(0, false, at::kFloat);
    return {dy, db.to(ctx->saved_data["b_dtype"].toScalarType())};
  }
};

}  // namespace

std::shared_ptr<const TpFp8Splits> make_tp_fp8_splits(dist::Group& group) {
  auto s = std::make_shared<TpFp8Splits>();
  s->column.w = s->column.dy = tp_amax_of_whole(group);
  s->column.partial_dx = true;
  s->row.x = s->row.w = tp_amax_of_whole(group);
  s->row.partial_y = true;
  return s;
}

at::Tensor column_parallel_fp8_linear(const at::Tensor& x, const at::Tensor& weight_shard,
                                      const at::Tensor& bias_shard, dist::Group& group,
                                      const TpFp8Splits& splits) {
  if (!model::fp8_linear_supported(x, weight_shard)) {
    return train::column_parallel_linear(x, weight_shard, bias_shard, group, true);
  }
  // (B, T_seq / T, C) -> (B, T_seq, C) fp32: the fp32 partial dx is summed by the gather's
  // adjoint (a reduce-scatter) before Fp32WithBf16Grad rounds it.
  const auto input = train::gather_sequence(Fp32WithBf16Grad::apply(x), 1, group);
  return model::fp8_linear(input, weight_shard, bias_shard, &splits.column);
}

at::Tensor row_parallel_fp8_linear(const at::Tensor& x, const at::Tensor& weight_shard,
                                   const at::Tensor& bias, dist::Group& group,
                                   const TpFp8Splits& splits) {
  if (!model::fp8_linear_supported(x, weight_shard)) {
    return train::row_parallel_linear(x, weight_shard, bias, group, true);
  }
  // (B, T_seq, C / T) -> fp32 partial (B, T_seq, out) -> summed and cut: (B, T_seq / T, out),
  // rounded to bf16 once.
  const auto partial = model::fp8_linear(x, weight_shard, at::Tensor(), &splits.row);
  const auto y = train::scatter_sequence(partial, 1, group).to(at::kBFloat16);
  return bias.defined() ? Bf16BiasAdd::apply(y, bias) : y;
}

}  // namespace lmtrain::parallel
