#include "core/seed_yaml_keys.h"

#include "core/config.h"
#include "core/error.h"

namespace lmtrain::core {

const std::vector<SeedYamlKey>& seed_yaml_keys() {
  static const char* kMapped =
      "lmtrain's data is memory-mapped token shards read by the training process itself";
  static const std::vector<SeedYamlKey> keys = {
      {"training.num_epochs", "train.epochs", ""},
      {"training.learning_rate", "optim.lr", ""},
      {"training.gradient_accumulation_steps", "train.grad_accum_steps", ""},
      {"training.fp16", "train.precision", ""},
      {"training.gradient_clip", "train.grad_clip", ""},
      {"training.batch_size", "train.micro_batch_size", ""},
      {"training.weight_decay", "optim.weight_decay", ""},
      {"training.warmup_steps", "optim.warmup_steps", ""},
      {"data.batch_size", "train.micro_batch_size", ""},
      {"data.num_workers", "", std::string(kMapped) + ": there are no loader worker processes"},
      {"data.pin_memory", "",
       std::string(kMapped) + ": batches are copied from the mapped shards to the device, "
                              "there is no pinned staging buffer"},
      {"data.prefetch_factor", "",
       std::string(kMapped) + ": there is no loader queue to prefetch into"},
  };
  return keys;
}

const SeedYamlKey* find_seed_yaml_key(const std::string& path) {
  for (const auto& k : seed_yaml_keys()) {
    if (k.path == path) return &k;
  }
  return nullptr;
}

bool is_seed_yaml_section(const std::string& name) { return name == "training"; }

std::string seed_yaml_value(const SeedYamlKey& key, const std::string& text,
                            const std::string& origin) {
  if (key.path != "training.fp16") return text;
  static const KeySpec kFp16{"training.fp16", ValueType::kBool, "false", {}, {}, {}, ""};
  return canonicalize_value(kFp16, text, origin) == "true" ? "fp16" : "fp32";
}

}  // namespace lmtrain::core
