#include "checkpoint/checkpoint_model.h"

#include <filesystem>

#include "checkpoint/checkpoint_config.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/sharded_reader.h"
#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "model/build_model.h"
#include "options/read_model.h"

namespace lmtrain::train {

InferenceModel load_inference_model(const std::string& spec, const core::Runtime& rt,
                                    const std::vector<std::string>& extra_files) {
  auto dir = CheckpointStore::resolve(spec, spec);
  if (!dir) throw UsageError("no checkpoint found at '" + spec + "'");
  // The extra files are read only when the checkpoint lists them (load verifies every listed
  // file either way): whether one is required is the caller's to say, in its own words (an LM's
  // checkpoint has no objective.safetensors, and is not a temporal-encoder run).
  auto ckpt = CheckpointStore::load(*dir, /*allow_fallback=*/false, {"model.safetensors"});
  for (const auto& name : extra_files) {
    if (ckpt.meta["files"].contains(name)) {
      ckpt.files.emplace(name, core::read_safetensors(ckpt.dir + "/" + name));
    } else if (sharded_logical_files(ckpt.meta).count(name)) {  // a ZeRO-3 checkpoint's
      ckpt.files.emplace(name, assemble_sharded_file(ckpt.dir, ckpt.meta, name));
    }
  }
  InferenceModel out;
  const core::Config cfg = checkpoint_config(ckpt);
  out.config_yaml = ckpt.meta["config"].get<std::string>();
  out.temporal = cfg.get_bool("model.temporal.enabled");
  out.encoder = options::read_temporal_encoder(cfg);
  out.model = model::build_model(options::read_model_options(cfg, 0), rt, {/*init=*/false, {}});
  load_checkpoint_weights(ckpt, *out.model);  // a LoRA checkpoint: its base + the adapters
  out.model->eval();
  // Imported Hugging Face models may come without a tokenizer: usable on token ids only.
  if (std::filesystem::exists(ckpt.dir + "/tokenizer.json")) {
    out.tokenizer = std::make_unique<data::BpeTokenizer>(
        data::BpeTokenizer::load_hf(ckpt.dir + "/tokenizer.json"));
  }
  out.checkpoint_dir = ckpt.dir;
  out.step = ckpt.step;
  for (const auto& name : extra_files) {
    auto it = ckpt.files.find(name);
    if (it != ckpt.files.end()) out.extra_files.emplace(name, std::move(it->second));
  }
  return out;
}

}  // namespace lmtrain::train
