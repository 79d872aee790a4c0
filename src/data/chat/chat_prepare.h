// `lmtrain prepare --chat`: conversations (conversation.h) -> token shards with a loss mask
// beside them, in a chat format (chat_format.h), for SFT (`data.format: chat`).
//
// OUTPUT/tokenizer.json           the tokenizer given (copied), and its tokenizer_config.json
// OUTPUT/train.bin, val.bin       every conversation's ids, one after another (token_shard.h)
// OUTPUT/train_mask.bin, val_mask.bin
//                                 one value per id (a shard of the same layout, uint16): 1 where
//                                 the id is a target (the assistant's tokens and end token), 2
//                                 on the first id of each conversation (never a target: a
//                                 conversation starts with its format's start token), 0 else
// OUTPUT/chat.json                the format, counts, the inputs
//
// A conversation goes to the validation split by the hash of its content and the seed
// (document_hash.h), as prepare's documents do. Conversations without an assistant turn train
// nothing and are left out (counted in chat.json).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lmtrain::data::chat {

struct ChatPrepareOptions {
  std::vector<std::string> inputs;  // JSONL files (.jsonl, .jsonl.gz, .jsonl.zst)
  std::string output_dir;
  std::string tokenizer;  // tokenizer.json (required)
  // A chat_format_from_name() name, or auto: the tokenizer_config.json beside the tokenizer (an
  // HF model's), else nanochat's when the tokenizer has nanochat's tokens.
  std::string format = "auto";
  double val_fraction = 0.05;
  uint64_t seed = 1337;
  uint64_t max_line_bytes = uint64_t{64} << 20;
  bool overwrite = false;
};

struct ChatPrepareResult {
  std::string format;  // describe_chat_format()
  int64_t train_conversations = 0, val_conversations = 0, skipped_without_targets = 0;
  int64_t train_tokens = 0, val_tokens = 0, train_targets = 0, val_targets = 0;
};

// Throws UsageError for bad options, inputs or conversations (naming FILE:LINE).
ChatPrepareResult run_chat_prepare(const ChatPrepareOptions& options);

}  // namespace lmtrain::data::chat
