#include "interop/hf_checkpoint.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "checkpoint/checkpoint_config.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/run_output.h"
#include "checkpoint/training_checkpoint.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/output_dir.h"
#include "core/progress.h"
#include "core/safetensors.h"
#include "data/bpe_tokenizer.h"
#include "interop/hf_format.h"
#include "model/build_model.h"
#include "options/read_model.h"

namespace fs = std::filesystem;

namespace lmtrain::train {
namespace {

nlohmann::json read_json(const std::string& path) {
  if (!fs::exists(path)) throw UsageError(path + " not found");
  try {
    return nlohmann::json::parse(core::read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(path + " is not valid JSON: " + e.what());
  }
}

// Every tensor of the HF checkpoint, converted to fp32 (HF stores bf16/fp16 often).
model::hf::Tensors read_hf_tensors(const std::string& dir) {
  std::vector<std::string> files;
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (fs::exists(single)) {
    files.push_back(single);
  } else if (fs::exists(index)) {
    const auto j = read_json(index);
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
      throw UsageError(index + " has no weight_map");
    }
    std::set<std::string> unique;
    for (const auto& [name, file] : j["weight_map"].items()) unique.insert(file.get<std::string>());
    for (const auto& f : unique) files.push_back(dir + "/" + f);
  } else {
    throw UsageError(dir +
                     " has neither model.safetensors nor model.safetensors.index.json (PyTorch "
                     ".bin checkpoints are not supported: convert them to safetensors)");
  }
  model::hf::Tensors out;
  int64_t bytes = 0;  // the tensors' bytes, from the headers
  for (const auto& f : files) {
    for (const auto& e : core::read_safetensors_header(f).entries) {
      bytes += static_cast<int64_t>(e.end - e.begin);
    }
  }
  core::Progress progress("import hf: reading", bytes, "bytes");
  for (const auto& f : files) {
    auto file = core::read_safetensors(f, at::kFloat, &progress);
    for (auto& [name, t] : file.tensors) {
      if (!out.emplace(name, t).second)
        throw Error("tensor '" + name + "' appears twice in " + dir);
    }
  }
  return out;
}

// The end-of-text token (content, id) of a tokenizer.json lmtrain can read.
std::optional<std::pair<std::string, uint32_t>> end_of_text(const std::string& path) {
  try {
    const auto tok = data::BpeTokenizer::load_hf(path);
    const uint32_t id = tok.eot_id();
    return std::make_pair(tok.token_bytes(id), id);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// tokenizer_config.json for AutoTokenizer: without one, transformers picks the model family's
// tokenizer class (e.g. Qwen2Tokenizer), which rebuilds its own normalizer and pre-tokenizer
// instead of using tokenizer.json as written. PreTrainedTokenizerFast takes tokenizer.json
// as is; clean_up_tokenization_spaces=false keeps decode() byte-exact.
nlohmann::json tokenizer_config(const std::optional<std::pair<std::string, uint32_t>>& eot,
                                int64_t context) {
  nlohmann::json j = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                      {"model_max_length", context},
                      {"clean_up_tokenization_spaces", false}};
  if (eot) {
    j["eos_token"] = eot->first;
    j["bos_token"] = eot->first;
  }
  return j;
}

}  // namespace

ImportResult import_hf(const std::string& hf_dir, const std::string& run_dir, bool overwrite) {
  core::OutputDir out(run_dir, {"import hf", {hf_dir}, overwrite});
  const auto hf_config = read_json(hf_dir + "/config.json");
  core::Config cfg = core::Config::defaults();
  std::vector<std::pair<std::string, std::string>> overrides;
  try {
    overrides = model::hf::config_overrides(hf_config);
  } catch (const UsageError& e) {
    // Its messages start "config.json: KEY ...": name the file the user gave.
    throw UsageError(hf_dir + "/" + e.what());
  }
  for (const auto& [key, value] : overrides) cfg.set(key, value, hf_dir + "/config.json");
  const int64_t block = cfg.get_int("model.block_size");
  if (cfg.get_int("data.seq_len") > block) cfg.set("data.seq_len", std::to_string(block), "import");
  set_finetune_defaults(cfg, run_dir, "import hf");
  const auto model_options = options::read_model_options(cfg, 0);
  const auto& mcfg = model_options.shape;

  auto tensors = model::hf::import_tensors(mcfg, read_hf_tensors(hf_dir));
  auto m = model::build_model(model_options, core::Runtime::cpu(), {/*init=*/false, {}});
  TensorList model_tensors;
  for (auto& [name, t] : m->state_tensors()) {
    auto it = tensors.find(name);
    if (it != tensors.end()) {
      model_tensors.emplace_back(name, it->second);
    } else if (name.size() > 12 && name.compare(name.size() - 12, 12, ".expert_bias") == 0) {
      model_tensors.emplace_back(name, torch::zeros(t.sizes()));  // HF routes without a bias
    } else {
      throw Error("import: no weights for parameter '" + name + "'");
    }
  }

  CheckpointFiles files;
  files.tensor_files.emplace_back("model.safetensors", std::move(model_tensors));
  nlohmann::json meta = {{"epoch", 0},
                         {"data_cursor", 0},
                         {"world_size", 1},
                         {"imported_from", fs::absolute(hf_dir).string()},
                         {"config", cfg.to_yaml()},
                         {"model", mcfg.describe()}};
  ImportResult result;
  const std::string tok = hf_dir + "/tokenizer.json";
  if (fs::exists(tok)) {
    files.raw_files.emplace_back("tokenizer.json", core::read_file(tok));
    result.has_tokenizer = true;
    try {
      meta["tokenizer_hash"] = data::BpeTokenizer::load_hf(tok).hash();
    } catch (const std::exception& e) {
      log::warn("tokenizer.json was copied but lmtrain's byte-level BPE cannot load it (" +
                std::string(e.what()) + "): generate/eval need a compatible tokenizer");
    }
    // The chat template: `lmtrain chat`, `serve` and `eval --chat_tasks` read the model's chat
    // format from it (data/chat/chat_format.h).
    const std::string tok_config = hf_dir + "/tokenizer_config.json";
    if (fs::is_regular_file(tok_config)) {
      files.raw_files.emplace_back("tokenizer_config.json", core::read_file(tok_config));
    }
  } else {
    log::warn(hf_dir +
              " has no tokenizer.json: the checkpoint can be fine-tuned on data "
              "prepared with a matching vocabulary, but not used by generate");
  }
  result.checkpoint_dir = write_one_checkpoint_run(out, 0, files, std::move(meta), cfg.to_yaml());
  result.model_description = mcfg.describe();
  return result;
}

void export_hf(const std::string& spec, const std::string& out_dir, bool overwrite) {
  auto dir = CheckpointStore::resolve(spec, spec);
  if (!dir) throw UsageError("no checkpoint found at '" + spec + "'");
  core::OutputDir out(out_dir, {"export hf", {spec, *dir}, overwrite});
  auto ckpt = CheckpointStore::load(*dir, /*allow_fallback=*/false, {"model.safetensors"});
  if (is_lora_checkpoint(ckpt)) {
    throw UsageError("checkpoint " + ckpt.dir +
                     " is a LoRA run (adapters on a frozen base): `lmtrain export peft` writes "
                     "its adapters for peft; `lmtrain lora merge` folds them into a full "
                     "checkpoint that `lmtrain export hf` takes");
  }
  const auto cfg = checkpoint_config(ckpt);
  const auto mcfg = model::hf::with_hf_family(options::read_gpt_config(cfg, 0));
  auto hf_config = model::hf::hf_config(mcfg);  // validates before writing anything
  const auto& stored = ckpt.files.at("model.safetensors").tensors;
  model::hf::Tensors ours(stored.begin(), stored.end());
  const auto hf = model::hf::export_tensors(mcfg, ours);
  core::NamedTensors list(hf.begin(), hf.end());
  int64_t bytes = 0;
  for (const auto& [name, t] : list) bytes += static_cast<int64_t>(t.nbytes());
  {
    core::Progress progress("export hf: writing", bytes, "bytes");
    core::write_safetensors(out.staging() + "/model.safetensors", list, {{"format", "pt"}},
                            &progress);
  }
  const std::string tok = ckpt.dir + "/tokenizer.json";
  if (fs::exists(tok)) {
    core::write_file_atomic(out.staging() + "/tokenizer.json", core::read_file(tok));
    const auto eot = end_of_text(tok);
    if (eot) {
      hf_config["eos_token_id"] = eot->second;
      hf_config["bos_token_id"] = eot->second;
    }
    core::write_file_atomic(out.staging() + "/tokenizer_config.json",
                            tokenizer_config(eot, mcfg.block_size).dump(2) + "\n");
  }
  core::write_file_atomic(out.staging() + "/config.json", hf_config.dump(2) + "\n");
  out.commit();
}

}  // namespace lmtrain::train
