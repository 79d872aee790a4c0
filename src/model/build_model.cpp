#include "model/build_model.h"

#include "core/config.h"
#include "model/activation_checkpoint.h"
#include "model/fp8_linear.h"
#include "model/lora.h"

namespace lmtrain::model {

Gpt build_model(const core::Config& cfg, const core::Runtime& rt, const BuildOptions& opts) {
  const auto mcfg = GptConfig::from_config(cfg, opts.tokenizer_vocab);
  Gpt model(mcfg, opts.init, opts.experts);
  // LoRA: freeze the base, attach adapters (initialised after the base, from the same seed).
  const auto lora = LoraOptions::from_config(cfg);
  if (lora.enabled()) {
    apply_lora(*model, lora, opts.init);
  } else if (cfg.get_bool("model.temporal.enabled")) {
    // A temporal run aligns an encoder to a frozen LM (its second stage may add LoRA above).
    for (auto& m : model->modules(/*include_self=*/true)) {
      if (auto* t = dynamic_cast<TaggedModule*>(m.get())) t->freeze();
    }
    model->refresh_param_tags();
  }
  if (rt.precision == core::Precision::kFp8) use_fp8_block_linears(*model);
  model->set_checkpointing(
      CheckpointPolicy::parse(cfg.get_string("train.activation_checkpointing")));
  if (rt.device != c10::Device(c10::kCPU) || rt.param_dtype != at::kFloat) {
    model->to(rt.device, rt.param_dtype);
  }
  return model;
}

}  // namespace lmtrain::model
