#include "cli/chat_model.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_config.h"
#include "core/error.h"
#include "core/fs.h"

namespace lmtrain::cli {
namespace fs = std::filesystem;

data::chat::ChatFormat chat_format_of(const train::InferenceModel& loaded,
                                      const std::string& format_flag, const std::string& flag) {
  if (format_flag != "auto") {
    const auto f = data::chat::chat_format_from_name(format_flag);
    if (!f) {
      throw UsageError(flag + " " + format_flag +
                       " is not one of auto, nanochat, chatml, qwen2.5, qwen3, llama3");
    }
    return *f;
  }
  // The chat data it was fine-tuned on: `prepare --chat` writes the format into chat.json.
  const core::Config cfg = train::recorded_config(loaded.config_yaml, loaded.checkpoint_dir);
  const std::string data_dir = cfg.get_string("data.dir");
  const std::string chat_json = data_dir + "/chat.json";
  std::error_code ec;
  if (!data_dir.empty() && fs::is_regular_file(chat_json, ec)) {
    const auto j = nlohmann::json::parse(core::read_file(chat_json), nullptr, false);
    if (j.is_object() && j.value("format", "") != "") {
      auto f = data::chat::chat_format_from_name(j.value("format", ""));
      if (f) {
        f->default_system = j.value("default_system", "");
        return *f;
      }
    }
  }
  // An imported model: its chat template, copied from the HF directory by `import hf`.
  const std::string tok_config = loaded.checkpoint_dir + "/tokenizer_config.json";
  if (fs::is_regular_file(tok_config, ec)) {
    return data::chat::chat_format_from_tokenizer_config(tok_config, loaded.checkpoint_dir);
  }
  if (loaded.tokenizer && loaded.tokenizer->special_id("<|assistant_start|>")) {
    return *data::chat::chat_format_from_name("nanochat");
  }
  throw UsageError("checkpoint " + loaded.checkpoint_dir +
                   " has no chat format lmtrain can find (not fine-tuned on `prepare --chat` "
                   "data, no tokenizer_config.json, no nanochat chat tokens): give " +
                   flag);
}

ChatModel load_chat_model(const std::string& checkpoint, const std::string& format_flag,
                          const core::Runtime& rt) {
  ChatModel chat{train::load_inference_model(checkpoint, rt), {}, nullptr};
  if (!chat.loaded.tokenizer) {
    throw UsageError("checkpoint " + chat.loaded.checkpoint_dir + " has no tokenizer.json");
  }
  chat.format = chat_format_of(chat.loaded, format_flag, "--chat_format");
  chat.renderer = std::make_unique<data::chat::ChatRenderer>(
      chat.format, *chat.loaded.tokenizer, chat.loaded.checkpoint_dir + "/tokenizer.json");
  return chat;
}

}  // namespace lmtrain::cli
