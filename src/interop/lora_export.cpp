#include "interop/lora_export.h"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "checkpoint/checkpoint_config.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/run_output.h"
#include "checkpoint/training_checkpoint.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/output_dir.h"
#include "core/progress.h"
#include "core/safetensors.h"
#include "interop/hf_format.h"
#include "model/build_model.h"
#include "model/lora.h"
#include "options/read_model.h"

namespace fs = std::filesystem;

namespace lmtrain::train {
namespace {

struct LoadedLora {
  LoadedCheckpoint ckpt;
  core::Config config;
  model::Gpt model{nullptr};
};

// A LoRA run's checkpoint with its base and adapters loaded (CPU, eval mode), and the output
// directory claimed once the checkpoint is read (its inputs are the checkpoint and the base) and
// before the model is built.
LoadedLora load_lora(const std::string& spec, const char* command,
                     std::optional<core::OutputDir>& out, const std::string& out_dir,
                     bool overwrite) {
  auto dir = CheckpointStore::resolve(spec, spec);
  if (!dir) throw UsageError("no checkpoint found at '" + spec + "'");
  LoadedLora in{CheckpointStore::load(*dir, /*allow_fallback=*/false, {"model.safetensors"}),
                core::Config::defaults(), nullptr};
  if (!is_lora_checkpoint(in.ckpt)) {
    throw UsageError(std::string(command) + ": checkpoint " + in.ckpt.dir +
                     " is not a LoRA run's (no lora_base in its meta.json)");
  }
  std::vector<std::string> inputs = {spec, in.ckpt.dir};
  const auto& base = in.ckpt.meta["lora_base"];
  if (base.is_object() && base.contains("path") && base["path"].is_string()) {
    inputs.push_back(base["path"].get<std::string>());
  }
  out.emplace(out_dir, core::OutputDirOptions{command, inputs, overwrite});
  in.config = checkpoint_config(in.ckpt);
  in.model = model::build_model(options::read_model_options(in.config, 0), core::Runtime::cpu(),
                                {/*init=*/false, {}});
  load_checkpoint_weights(in.ckpt, *in.model);
  in.model->eval();
  return in;
}

std::string read_if_exists(const std::string& path) {
  return fs::exists(path) ? core::read_file(path) : std::string();
}

}  // namespace

std::string merge_lora(const std::string& spec, const std::string& out_dir, bool overwrite) {
  std::optional<core::OutputDir> out;
  auto in = load_lora(spec, "lora merge", out, out_dir, overwrite);
  CheckpointFiles files;
  TensorList tensors;
  for (auto& [name, t] : model::merged_state_tensors(*in.model)) tensors.emplace_back(name, t);
  files.tensor_files.emplace_back("model.safetensors", std::move(tensors));
  const std::string tok = read_if_exists(in.ckpt.dir + "/tokenizer.json");
  if (!tok.empty()) files.raw_files.emplace_back("tokenizer.json", tok);

  core::Config cfg = in.config;
  cfg.set("lora.rank", "0", "lora merge");
  set_finetune_defaults(cfg, out_dir, "lora merge");
  nlohmann::json meta = {{"epoch", 0},
                         {"data_cursor", 0},
                         {"world_size", 1},
                         {"merged_from", fs::canonical(in.ckpt.dir).string()},
                         {"lora_base_merged", in.ckpt.meta["lora_base"]},
                         {"config", cfg.to_yaml()},
                         {"model", in.model->config().describe()}};
  if (in.ckpt.meta.contains("tokenizer_hash"))
    meta["tokenizer_hash"] = in.ckpt.meta["tokenizer_hash"];
  return write_one_checkpoint_run(*out, in.ckpt.step, files, std::move(meta), cfg.to_yaml());
}

void export_peft(const std::string& spec, const std::string& out_dir, bool overwrite) {
  std::optional<core::OutputDir> out_files;
  auto in = load_lora(spec, "export peft", out_files, out_dir, overwrite);
  const auto mcfg = model::hf::with_hf_family(in.model->config());
  model::hf::hf_config(mcfg);  // UsageError unless transformers computes this model exactly
  const auto lora = options::read_lora_options(in.config);
  if (lora.unfreeze_norms || lora.unfreeze_embeddings || lora.unfreeze_head) {
    throw UsageError("export peft: the run also trained base parameters (lora.unfreeze = " +
                     in.config.get_string("lora.unfreeze") +
                     "), which an adapter file does not carry: `lmtrain lora merge` it and "
                     "`lmtrain export hf` the result instead");
  }
  const bool gpt2 = mcfg.arch == model::Arch::kGpt2;
  const int64_t H = mcfg.n_head, K = mcfg.kv_heads(), D = mcfg.head_dim();

  // HF module name of an lmtrain (linear, part): "transformer.h.3.attn.c_attn" + "q" -> gpt2:
  // the same module (fused), llama: "model.layers.3.self_attn.q_proj".
  auto hf_module = [&](const std::string& linear, const std::string& part) -> std::string {
    if (gpt2 || linear == "lm_head") return linear;
    const std::string prefix = "transformer.h.";
    const auto dot = linear.find('.', prefix.size());
    const std::string layer = "model.layers." + linear.substr(prefix.size(), dot - prefix.size());
    const std::string rest = linear.substr(dot + 1);
    if (rest == "attn.c_attn") return layer + ".self_attn." + part + "_proj";
    if (rest == "attn.c_proj") return layer + ".self_attn.o_proj";
    if (rest == "mlp.c_fc") return layer + ".mlp." + part + "_proj";
    if (rest == "mlp.c_proj") return layer + ".mlp.down_proj";
    throw Error("export peft: no Hugging Face module for '" + linear + "'");
  };
  auto module_kind = [&](const std::string& hf) {  // the target_modules entry
    if (gpt2 && hf != "lm_head") return hf.substr(hf.find(".", hf.find(".h.") + 3) + 1);
    return hf.substr(hf.rfind('.') + 1);
  };

  std::map<std::string, std::pair<at::Tensor, at::Tensor>> adapters;  // HF module -> (A, B)
  std::map<std::string, int64_t> parts_in;                            // HF module -> count
  std::set<std::string> kinds;
  for (const auto& s : model::lora_sites(*in.model)) {
    const auto A = s.adapter->lora_A.detach().contiguous();  // (r, in)
    const auto B = s.adapter->lora_B.detach().contiguous();  // (rows, r)
    const std::string hf = hf_module(s.linear, s.part);
    kinds.insert(module_kind(hf));
    if (gpt2 && !s.part.empty()) {
      // Fused c_attn: one block-diagonal adapter over the parts present, in [q; k; v] order
      // (lora_sites lists them in that order).
      auto& [a, b] = adapters[hf];
      const int64_t n = parts_in[hf]++;
      const int64_t rows = (H + 2 * K) * D;
      auto block = torch::zeros({rows, lora.rank});
      block.narrow(0, s.adapter->row_offset, s.adapter->rows).copy_(B);
      a = n == 0 ? A : torch::cat({a, A});
      b = n == 0 ? block : torch::cat({b, block}, 1);
      continue;
    }
    adapters[hf] = {A, B};
  }
  core::NamedTensors out;
  for (const auto& [hf, ab] : adapters) {
    out.emplace_back("base_model.model." + hf + ".lora_A.weight", ab.first.contiguous());
    out.emplace_back("base_model.model." + hf + ".lora_B.weight", ab.second.contiguous());
  }
  nlohmann::json rank_pattern = nlohmann::json::object(), alpha_pattern = nlohmann::json::object();
  for (const auto& [hf, n] : parts_in) {
    if (n > 1) {
      rank_pattern["c_attn"] = n * lora.rank;
      alpha_pattern["c_attn"] = static_cast<double>(n) * lora.alpha;
    }
  }
  nlohmann::json config = {{"peft_type", "LORA"},
                           {"task_type", "CAUSAL_LM"},
                           {"r", lora.rank},
                           {"lora_alpha", lora.alpha},
                           {"lora_dropout", lora.dropout},
                           {"target_modules", std::vector<std::string>(kinds.begin(), kinds.end())},
                           {"bias", "none"},
                           {"fan_in_fan_out", gpt2},
                           {"use_rslora", false},
                           {"use_dora", false},
                           {"init_lora_weights", true},
                           {"inference_mode", true},
                           {"modules_to_save", nullptr},
                           {"rank_pattern", rank_pattern},
                           {"alpha_pattern", alpha_pattern},
                           {"base_model_name_or_path", nullptr}};
  const std::string& staging = out_files->staging();
  int64_t bytes = 0;
  for (const auto& [name, t] : out) bytes += static_cast<int64_t>(t.nbytes());
  {
    core::Progress progress("export peft: writing the adapters", bytes, "bytes");
    core::write_safetensors(staging + "/adapter_model.safetensors", out, {{"format", "pt"}},
                            &progress);
  }
  core::write_file_atomic(staging + "/adapter_config.json", config.dump(2) + "\n");
  out_files->commit();
}

}  // namespace lmtrain::train
