#include "parallel/tp_local_init.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "core/error.h"
#include "model/param_init.h"

namespace lmtrain::parallel {

void init_tp_slices_from_seed(model::GptImpl& model, const std::map<std::string, TpSlice>& slices,
                              const c10::Device& device, at::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  // name -> this rank's slice of the parameter's initial weights (fp32, CPU).
  std::map<std::string, at::Tensor> local;
  const model::InitWriter write = [&](const std::string& name, at::Tensor& param,
                                      const model::InitFill& fill) {
    const auto it = slices.find(name);
    if (it == slices.end()) {
      throw Error("internal: init_tp_slices_from_seed: no slice for parameter '" + name + "'");
    }
    // One parameter materialised whole (its shape is the unwritten model's), as the whole-model
    // init draws it; a parameter written twice keeps its later values.
    auto scratch = at::empty(param.sizes(), at::TensorOptions().dtype(at::kFloat));
    fill(scratch);
    local[name] = tp_local_piece(scratch, it->second);
  };
  model::init_model_weights(model, write);
  model::init_lora_adapter_weights(model, write);  // after the base, as build_model draws them
  for (auto& item : model.named_parameters()) {
    auto& p = item.value();
    if (p.device() != c10::Device(c10::kCPU) || p.scalar_type() != at::kFloat) {
      throw Error("internal: init_tp_slices_from_seed: parameter '" + item.key() +
                  "' is not an unwritten fp32 CPU tensor");
    }
    const auto it = local.find(item.key());
    if (it == local.end()) {
      throw Error("internal: init_tp_slices_from_seed: parameter '" + item.key() +
                  "' was not initialised");
    }
    // The whole tensor's never-touched storage goes with its last reference.
    p.set_data(it->second.to(device, dtype));
    local.erase(it);
  }
}

}  // namespace lmtrain::parallel
