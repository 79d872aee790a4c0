// The body of an OpenAI-style POST /v1/chat/completions, read strictly into what `lmtrain serve`
// does with it. Anything it cannot honour is refused with a RequestError that names the
// parameter, never ignored: a client asking for n=3 or a stop string must not get one plain
// answer it takes for what it asked.
//
// Accepted: model (any string: the server has one model), messages [{role, content}] with role
// system | developer (read as system) | user | assistant and content a string or a list of
// {"type": "text", "text": ...} parts, stream, stream_options.include_usage, max_tokens or
// max_completion_tokens, temperature [0, 2], top_p (0, 1], top_k (an extension, >= 0), seed,
// logit_bias ({"token id": bias in [-100, 100]}, added to the logits before any sampling, greedy
// included, as OpenAI does: -100 bans a token, the end of the turn too), n = 1, and the parameters
// whose defaults change nothing (frequency_penalty and presence_penalty 0, logprobs false, user,
// metadata, store). Everything else is a 400.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmtrain::serve {

// An HTTP error the server sends as OpenAI's {"error": {message, type, param, code}}.
class RequestError : public std::runtime_error {
 public:
  RequestError(int status, std::string message, std::string param = "",
               std::string type = "invalid_request_error")
      : std::runtime_error(message),
        status(status),
        param(std::move(param)),
        type(std::move(type)) {}
  int status;
  std::string param;
  std::string type;
};

struct ChatTurn {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatRequest {
  std::string model;
  std::vector<ChatTurn> messages;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  std::optional<int64_t> max_tokens;
  double temperature = 1.0;  // OpenAI's default
  double top_p = 1.0;
  int64_t top_k = 0;
  std::optional<uint64_t> seed;
  std::vector<std::pair<int64_t, float>> logit_bias;  // (token id, bias), ids ascending
};

struct RequestLimits {
  size_t max_messages = 512;
  size_t max_content_bytes = 256 * 1024;  // per message
  int64_t max_tokens = 4096;              // the most a request may ask to generate
  int64_t vocab_size = 0;                 // > 0: logit_bias ids must be below it
  size_t max_logit_bias = 1024;           // OpenAI's limit on logit_bias entries
};

// Throws RequestError (400) naming the parameter for anything that is not a request we serve.
ChatRequest parse_chat_request(std::string_view body, const RequestLimits& limits);

}  // namespace lmtrain::serve
