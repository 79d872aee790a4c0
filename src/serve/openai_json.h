// The JSON bodies of OpenAI's chat API that `lmtrain serve` sends: an error, a whole answer
// (chat.completion), a streamed piece (chat.completion.chunk) and the model list. Text that is
// not valid UTF-8 (a model can emit any bytes) goes out with U+FFFD in place of the bad bytes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "infer/generator.h"

namespace lmtrain::serve {

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

// "stop" for the end token, "length" for the token budget or the model's context.
const char* finish_reason(infer::StopReason stop);

std::string error_json(const std::string& message, const std::string& type,
                       const std::string& param, int status);
std::string completion_json(const std::string& id, int64_t created, const std::string& model,
                            const std::string& text, infer::StopReason stop, const Usage& usage);
// One streamed piece: the first carries the role, the last the finish reason (and no text);
// a usage chunk (stream_options.include_usage) has no choices.
std::string chunk_json(const std::string& id, int64_t created, const std::string& model,
                       const std::optional<std::string>& text, bool first,
                       std::optional<infer::StopReason> finish, const std::optional<Usage>& usage);
std::string models_json(const std::string& model, int64_t created);

}  // namespace lmtrain::serve
