#include "distributed/all_to_all_autograd.h"

#include <torch/csrc/autograd/custom_function.h>

#include <chrono>
#include <numeric>

#include "core/error.h"

namespace lmtrain::dist {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// (rows, ...) exchanged as described in the header; rows of `input` must add up to its size.
at::Tensor exchange(Group& group, const at::Tensor& input, const std::vector<int64_t>& out_splits,
                    const std::vector<int64_t>& in_splits, CommTimer* timer) {
  const auto start = std::chrono::steady_clock::now();
  auto sizes = input.sizes().vec();
  sizes[0] = std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0});
  auto output = at::empty(sizes, input.options());
  group.all_to_all(output, input.contiguous(), out_splits, in_splits)->wait();
  if (timer) timer->add_since(start);
  return output;
}

class AllToAll : public torch::autograd::Function<AllToAll> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, Group* group,
                            const std::vector<int64_t>& out_splits,
                            const std::vector<int64_t>& in_splits, CommTimer* timer) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
    ctx->saved_data["timer"] = reinterpret_cast<int64_t>(timer);
    ctx->saved_data["out_splits"] = out_splits;
    ctx->saved_data["in_splits"] = in_splits;
    return exchange(*group, input, out_splits, in_splits, timer);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto* group = reinterpret_cast<Group*>(ctx->saved_data["group"].toInt());
    auto* timer = reinterpret_cast<CommTimer*>(ctx->saved_data["timer"].toInt());
    // Reverse: what this rank received goes back whence it came.
    auto grad_in = exchange(*group, grad_out[0], ctx->saved_data["in_splits"].toIntVector(),
                            ctx->saved_data["out_splits"].toIntVector(), timer);
    return {grad_in, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor all_to_all_autograd(Group& group, const at::Tensor& input,
                               const std::vector<int64_t>& output_splits,
                               const std::vector<int64_t>& input_splits, CommTimer* timer) {
  if (input.dim() < 1) throw Error("all_to_all_autograd: input needs a row dimension");
  return AllToAll::apply(input, &group, output_splits, input_splits, timer);
}

}  // namespace lmtrain::dist
