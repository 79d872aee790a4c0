// GradSync's side of backward (distributed/grad_sync.h): the post-hook on each parameter's
// gradient accumulator that counts a bucket's final gradients and launches it once complete,
// remaking the accumulators on another stream (CUDA graph capture), and the late rows backward
// hands over on the last micro-step.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <string>

#include "core/error.h"
#include "distributed/grad_sync.h"

namespace lmtrain::dist {
namespace {

// Runs after AccumulateGrad has added this backward's contribution into the parameter's .grad
// (a view of the flat buffer), i.e. once the gradient is final for this backward.
class ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::shared_ptr<GradSync*> sync, size_t param)
      : sync_(std::move(sync)), param_(param) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    if (*sync_) (*sync_)->on_grad_ready(param_);
    return outputs;
  }

 private:
  std::shared_ptr<GradSync*> sync_;
  size_t param_;
};

}  // namespace

void GradSync::hook_accumulators() {
  for (size_t i = 0; i < params_.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
    if (!acc) throw Error("GradSync: parameter " + std::to_string(i) + " is not a leaf");
    acc->add_post_hook(std::make_unique<ReadyHook>(self_, i));
    accumulators_.push_back(std::move(acc));
  }
}

void GradSync::rebind_to_current_stream() {
  if (!active()) return;
  // Tensors hold their accumulator weakly: with ours the only references, clearing them
  // destroys the nodes and their hooks, and grad_accumulator() then makes new ones.
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    if (accumulators_[i].use_count() > 1) {
      throw Error("internal: GradSync: parameter " + std::to_string(i) +
                  "'s gradient accumulator is also held by a live autograd graph, so it cannot "
                  "move to the current stream");
    }
  }
  accumulators_.clear();
  hook_accumulators();
}

void GradSync::on_grad_ready(size_t param) {
  if (!armed_ || seen_[param]) return;
  seen_[param] = true;
  if (--pending_[bucket_of_param_[param]] == 0) {
    if (timeline_) timeline_->ready(bucket_of_param_[param]);
    launch_ready_buckets();
  }
}

bool GradSync::add_late_rows(size_t param, const at::Tensor& ids, const at::Tensor& rows) {
  if (!armed_) return false;
  for (auto& [p, late] : late_) {
    if (p == param) {
      late->add(ids, rows);
      return true;
    }
  }
  throw Error("internal: GradSync: parameter " + std::to_string(param) + " expects no late rows");
}

}  // namespace lmtrain::dist
