#include "model/deferred_lookup.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "kernels/lookup_rows_add.h"

namespace lmtrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The table itself, handed to the function as a non-tensor argument: a tensor argument that
// requires grad would give the graph the very edge to the table's accumulator this avoids.
struct Table {
  at::Tensor weight;
};

// anchor: an empty leaf that requires grad, so the output joins the graph without an edge to
// the table. detached: the table without autograd; its gradient leaves through the sink.
class DeferredLookup : public torch::autograd::Function<DeferredLookup> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& anchor,
                            const at::Tensor& detached, const at::Tensor& ids, Table table,
                            LookupGradSink* sink) {
    (void)anchor;
    ctx->saved_data["ids"] = ids;
    ctx->saved_data["weight"] = table.weight;
    ctx->saved_data["sink"] = reinterpret_cast<int64_t>(sink);
    return at::embedding(detached, ids);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto ids = ctx->saved_data["ids"].toTensor().reshape({-1});
    auto weight = ctx->saved_data["weight"].toTensor();
    auto* sink = reinterpret_cast<LookupGradSink*>(ctx->saved_data["sink"].toInt());
    const auto rows = grads[0].reshape({-1, weight.size(1)}).to(weight.scalar_type());
    if (!sink->take(ids, rows)) {
      torch::NoGradGuard no_grad;
      if (!weight.grad().defined()) weight.mutable_grad() = at::zeros_like(weight);
      kernels::add_lookup_rows(weight.mutable_grad(), ids, rows, 1.0);
    }
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor lookup(const at::Tensor& weight, const at::Tensor& ids, LookupGradSink* sink) {
  if (!sink || !weight.requires_grad() || !torch::autograd::GradMode::is_enabled() ||
      !sink->defers(ids.numel())) {
    return at::embedding(weight, ids);
  }
  // Made per call: a leaf of no elements costs nothing, and none outlives its graph.
  const auto anchor = at::empty({0}, weight.options()).requires_grad_(true);
  return DeferredLookup::apply(anchor, weight.detach(), ids, Table{weight}, sink);
}

}  // namespace lmtrain::model
