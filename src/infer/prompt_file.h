// The prompt file of batched generation (lmtrain generate --prompts FILE.jsonl): one JSON object
// per line,
//   {"prompt": "text", "id": <any JSON value, optional>, "max_new_tokens": N (optional)}
// Blank lines are skipped; anything else (not an object, no "prompt" string, an unknown key, a
// bad max_new_tokens) is a UsageError naming FILE:LINE. Without "id", the line number is the id.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lmtrain::infer {

struct PromptLine {
  int64_t line = 0;                       // 1-based line number in the file
  std::string prompt;                     // the text to continue
  std::string id_json;                    // the "id" value, serialised JSON (the line if absent)
  std::optional<int64_t> max_new_tokens;  // per-prompt override of --max_new_tokens
};

std::vector<PromptLine> read_prompt_file(const std::string& path);

// Batches (indices into `lengths`, the prompts' token counts) of at most batch_size prompts,
// shortest first so that a batch's rows need little left padding. same_length: a batch never
// mixes lengths (caches that cannot be left-padded: streaming, h2o).
std::vector<std::vector<size_t>> plan_batches(const std::vector<size_t>& lengths,
                                              int64_t batch_size, bool same_length);

}  // namespace lmtrain::infer
