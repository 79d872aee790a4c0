// Tensor parallelism's set-up without the whole model (issue 42: models bigger than one
// device). A TP rank builds the model unwritten on the CPU (model::BuildOptions::init = false:
// never-touched memory, no page committed), and each parameter's initial weights are drawn here
// into a CPU scratch of its whole shape, in GptImpl::init_weights' order from the global CPU
// generator (model/param_init.h; LoRA adapters after the base, as build_model draws them), of
// which this rank's slice is kept and the scratch freed at once. Every parameter then holds only
// its slice, placed on the run's device in its parameter dtype, and the unwritten whole storage
// is released untouched: at most one parameter whole beside this rank's slices, on the host, and
// only the slices on the device. Bit for bit the slices TensorParallel cuts out of the whole
// model build_model draws from the same seed, and the generator ends where that build leaves
// it. model.init_from and a resume then read only these slices, by range
// (checkpoint/local_lora_base.h, checkpoint/unsharded_local_read.h).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <map>
#include <string>

#include "model/gpt.h"
#include "parallel/tp_slices.h"

namespace lmtrain::parallel {

// Writes `model`'s initial weights into this rank's slices (`slices`: every parameter's, by
// name, from the model's whole shapes) and points each parameter at its slice on `device` in
// `dtype`. The model must be unwritten, fp32, on the CPU. Collective-free.
void init_tp_slices_from_seed(model::GptImpl& model, const std::map<std::string, TpSlice>& slices,
                              const c10::Device& device, at::ScalarType dtype);

}  // namespace lmtrain::parallel
