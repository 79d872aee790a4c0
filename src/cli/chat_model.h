// A checkpoint loaded for chatting (`lmtrain chat`, `lmtrain serve`, `eval --chat_tasks`): the
// model, its tokenizer and the renderer of its chat format, which comes from --chat_format, else
// from the chat data it was fine-tuned on (data.dir's chat.json, written by `prepare --chat`),
// else nanochat's when its tokenizer holds nanochat's tokens; an imported model's from its
// tokenizer_config.json. A model whose format cannot be found is refused, never guessed.
#pragma once
#include <memory>
#include <string>

#include "checkpoint/checkpoint_model.h"
#include "core/runtime.h"
#include "data/chat/chat_render.h"

namespace lmtrain::cli {

struct ChatModel {
  train::InferenceModel loaded;
  data::chat::ChatFormat format;
  std::unique_ptr<data::chat::ChatRenderer> renderer;
};

// format_flag: "auto" or a --chat_format name; `flag` names the flag in messages.
data::chat::ChatFormat chat_format_of(const train::InferenceModel& loaded,
                                      const std::string& format_flag, const std::string& flag);
ChatModel load_chat_model(const std::string& checkpoint, const std::string& format_flag,
                          const core::Runtime& rt);

}  // namespace lmtrain::cli
