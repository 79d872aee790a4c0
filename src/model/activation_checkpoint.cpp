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
using BlockFn = std::function<at::Tensor(const at::Tensor&)>;

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
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const BlockFn* fn,
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
    return (*fn)(x.detach().requires_grad_(x.requires_grad())).detach();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto saved = ctx->saved_data["state"].toCapsule();
    auto& state = static_cast<Saved&>(*saved);
    auto x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Tensor y;
    {
      torch::AutoGradMode grad_on(true);
      std::optional<ScopedDropoutSeed> rng;  // the forward's masks again
      if (state.rng.active) rng.emplace(state.rng);
      core::AutocastScope autocast(state.autocast.type, state.autocast.enabled,
                                   state.autocast.dtype);
      y = state.fn(x);
    }
    std::vector<at::Tensor> inputs{x};
    inputs.insert(inputs.end(), state.params.begin(), state.params.end());
    auto grads = torch::autograd::grad({y}, inputs, {grad_out[0]}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
    variable_list out;
    out.reserve(grads.size() + 1);
    out.push_back(grads[0]);
    out.emplace_back();  // fn
    out.insert(out.end(), grads.begin() + 1, grads.end());
    return out;
  }
};

}  // namespace

at::Tensor checkpointed(const BlockFn& fn, const at::Tensor& x,
                        const std::vector<at::Tensor>& params) {
  return Checkpointed::apply(x, &fn, at::TensorList(params));
}

}  // namespace lmtrain::model
