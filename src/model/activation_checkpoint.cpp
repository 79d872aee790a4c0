#include "model/activation_checkpoint.h"

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "core/runtime.h"
#include "model/dropout.h"

namespace lmtrain::model {

CheckpointPolicy CheckpointPolicy::parse(const std::string& text) {
  CheckpointPolicy p;
  if (text.empty() || text == "none") return p;
  if (text == "block") {
    p.every = 1;
    return p;
  }
  const std::string prefix = "every:";
  if (text.rfind(prefix, 0) == 0) {
    const std::string k = text.substr(prefix.size());
    char* end = nullptr;
    const long long v = std::strtoll(k.c_str(), &end, 10);
    if (!k.empty() && end && *end == '\0' && v >= 1) {
      p.every = v;
      return p;
    }
  }
  throw UsageError("train.activation_checkpointing = '" + text +
                   "': expected none, block, or every:K with K >= 1");
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using BlockFn = std::function<std::vector<at::Tensor>(const at::Tensor&)>;

// Autocast state of the forward, re-entered for the recompute (backward runs outside it).
struct AutocastState {
  c10::DeviceType type = c10::kCPU;
  bool enabled = false;
  at::ScalarType dtype = at::kFloat;
};

// What backward needs besides x, owned by the autograd context (freed with the graph, also when
// no backward ever runs).
struct Saved : torch::CustomClassHolder {
  BlockFn fn;
  DropoutRngState rng;
  AutocastState autocast;
  std::vector<at::Tensor> params;
};

class Checkpointed : public torch::autograd::Function<Checkpointed> {
 public:
  // Autograd inputs: x and each of params (one gradient slot each); fn is not a tensor.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const BlockFn* fn,
                               at::TensorList params) {
    auto saved = c10::make_intrusive<Saved>();
    saved->fn = *fn;
    saved->rng = capture_dropout_rng();
    saved->autocast.type = x.device().type();
    saved->autocast.enabled = at::autocast::is_autocast_enabled(saved->autocast.type);
    saved->autocast.dtype = at::autocast::get_autocast_dtype(saved->autocast.type);
    saved->params = params.vec();
    ctx->save_for_backward({x});
    ctx->saved_data["state"] = c10::IValue::make_capsule(saved);
    // A custom Function's forward runs with grad mode off, and libtorch may pick other kernels
    // then (CPU attention does for bf16), which would make this forward differ from the plain
    // run's and from the recompute. So run it as they do, with grad on, and drop the graph: it
    // lives only until this block returns.
    torch::AutoGradMode grad_on(true);
    auto outs = (*fn)(x.detach().requires_grad_(x.requires_grad()));
    variable_list result;
    std::vector<at::Tensor> constants;
    for (auto& o : outs) {
      const bool differentiable = o.requires_grad();
      result.push_back(o.detach());
      if (!differentiable) constants.push_back(result.back());
    }
    if (!constants.empty()) ctx->mark_non_differentiable(constants);
    return result;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto saved = ctx->saved_data["state"].toCapsule();
    auto& state = static_cast<Saved&>(*saved);
    auto x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    std::vector<at::Tensor> ys;
    {
      torch::AutoGradMode grad_on(true);
      std::optional<ScopedDropoutSeed> rng;  // the forward's masks again
      if (state.rng.active) rng.emplace(state.rng);
      core::AutocastScope autocast(state.autocast.type, state.autocast.enabled,
                                   state.autocast.dtype);
      ys = state.fn(x);
    }
    // Only outputs the loss reached carry a gradient; an unused one contributes nothing.
    std::vector<at::Tensor> outputs, grads;
    for (size_t i = 0; i < ys.size(); ++i) {
      if (ys[i].requires_grad() && grad_out[i].defined()) {
        outputs.push_back(ys[i]);
        grads.push_back(grad_out[i]);
      }
    }
    std::vector<at::Tensor> inputs{x};
    inputs.insert(inputs.end(), state.params.begin(), state.params.end());
    variable_list out;
    out.reserve(inputs.size() + 1);
    if (outputs.empty()) {
      out.resize(inputs.size() + 1);
      return out;
    }
    auto input_grads = torch::autograd::grad(outputs, inputs, grads, /*retain_graph=*/false,
                                             /*create_graph=*/false, /*allow_unused=*/true);
    out.push_back(input_grads[0]);
    out.emplace_back();  // fn
    out.insert(out.end(), input_grads.begin() + 1, input_grads.end());
    return out;
  }
};

}  // namespace

std::vector<at::Tensor> checkpointed(const BlockFn& fn, const at::Tensor& x,
                                     const std::vector<at::Tensor>& params) {
  return Checkpointed::apply(x, &fn, at::TensorList(params));
}

}  // namespace lmtrain::model
