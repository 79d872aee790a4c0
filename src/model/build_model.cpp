#include "model/build_model.h"

#include "model/activation_checkpoint.h"
#include "model/fp8_linear.h"
#include "model/lora.h"

namespace lmtrain::model {

Gpt build_model(const ModelOptions& m, const core::Runtime& rt, const BuildOptions& opts) {
  Gpt model(m.shape, opts.init, opts.experts);
  // LoRA: freeze the base, attach adapters (initialised after the base, from the same seed).
  if (m.lora.enabled()) {
    apply_lora(*model, m.lora, opts.init);
  } else if (m.freeze_base) {
    // A temporal run aligns an encoder to a frozen LM (its second stage may add LoRA above).
    for (auto& module : model->modules(/*include_self=*/true)) {
      if (auto* t = dynamic_cast<TaggedModule*>(module.get())) t->freeze();
    }
    model->refresh_param_tags();
  }
  if (rt.precision == core::Precision::kFp8) use_fp8_block_linears(*model);
  model->set_checkpointing(m.checkpointing);
  if (rt.device != c10::Device(c10::kCPU) || rt.param_dtype != at::kFloat) {
    model->to(rt.device, rt.param_dtype);
  }
  return model;
}

}  // namespace lmtrain::model
