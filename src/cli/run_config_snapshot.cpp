#include "cli/run_config_snapshot.h"

#include "checkpoint/checkpoint_config.h"
#include "core/error.h"
#include "options/read_model.h"

namespace lmtrain::cli {

void RunConfigSnapshot::record_vocab_size(int64_t vocab_size) {
  config_.set("model.vocab_size", std::to_string(vocab_size), "tokenizer");
}

void RunConfigSnapshot::record_teacher(const std::string& teacher, const std::string& why) {
  config_.set("distill.teacher", teacher, why);
}

model::ModelOptions RunConfigSnapshot::adopt_lm_shape(const train::LoadedCheckpoint& lm) {
  const auto saved = train::checkpoint_config(lm).section("model");
  const auto defaults = core::Config::defaults().section("model");
  const auto mine = config_.section("model");
  for (const auto& [key, value] : saved) {
    if (key.rfind("temporal.", 0) == 0 || key == "init_from") continue;
    const std::string path = "model." + key;
    const std::string& current = mine.at(key);
    if (current != value && current != defaults.at(key)) {
      throw UsageError("config key '" + path + "' = " + current +
                       ", but the LM of model.init_from = " + lm.dir + " has " + value +
                       ": a temporal run keeps its LM's shape (leave the key unset)");
    }
    config_.set(path, value, "model.init_from " + lm.dir);
  }
  return options::read_model_options(config_, options::kTokenizerLater);
}

}  // namespace lmtrain::cli
