// `lmtrain serve`'s request parser (serve/chat_request.h) on any bytes a client can send as the
// body of POST /v1/chat/completions: it either gives a request within the limits or refuses with
// a RequestError (a 4xx for the client); any other exception would reach the client as a 500
// and counts as a finding.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "serve/chat_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmtrain::serve::RequestLimits limits;
  limits.max_messages = 8;
  limits.max_content_bytes = 64;
  limits.max_tokens = 100;
  limits.vocab_size = 1000;
  try {
    const auto r = lmtrain::serve::parse_chat_request(
        std::string_view(reinterpret_cast<const char*>(data), size), limits);
    if (r.messages.empty() || r.messages.size() > limits.max_messages) std::abort();
    for (const auto& m : r.messages) {
      if (m.content.size() > limits.max_content_bytes) std::abort();
      if (m.role != "system" && m.role != "user" && m.role != "assistant") std::abort();
    }
    if (r.max_tokens && (*r.max_tokens < 1 || *r.max_tokens > limits.max_tokens)) std::abort();
    if (!(r.temperature >= 0 && r.temperature <= 2) || !(r.top_p > 0 && r.top_p <= 1)) std::abort();
    for (size_t i = 0; i < r.logit_bias.size(); ++i) {  // ids ascending, each once, biases bounded
      const auto [id, bias] = r.logit_bias[i];
      if (id < 0 || id >= limits.vocab_size || !(bias >= -100 && bias <= 100)) std::abort();
      if (i > 0 && r.logit_bias[i - 1].first >= id) std::abort();
    }
  } catch (const lmtrain::serve::RequestError& e) {
    if (e.status < 400 || e.status >= 500) std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FINDING: exception that is not a RequestError: %s\n", e.what());
    std::abort();
  }
  return 0;
}
