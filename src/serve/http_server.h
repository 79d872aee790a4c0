// `lmtrain serve`'s HTTP side, on cpp-httplib (Debian's libcpp-httplib-dev; this file's .cpp is
// the only one that includes it): an OpenAI-compatible POST /v1/chat/completions (a JSON answer,
// or server-sent events with "stream": true), GET /v1/models, GET /health, and the chat page at
// GET /. Requests decode through the GenerationQueue, which batches concurrent ones.
//
// Defences: it listens on 127.0.0.1 unless told otherwise; with an API key every /v1/ route
// needs "Authorization: Bearer KEY" (401 otherwise); bodies over max_body_bytes get 413, prompts
// over max_prompt_tokens and max_tokens over the cap 400; a client that stalls while sending
// or reading is dropped after timeout_s; a closed connection cancels its generation. Every error
// is OpenAI's JSON {"error": {"message", "type", "param", "code"}} and never stops the server.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "serve/chat_request.h"
#include "serve/generation_queue.h"

namespace lmtrain::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;         // 0: any free port (on_listening says which)
  std::string api_key;     // empty: no authentication
  std::string model_name;  // what /v1/models lists and answers carry
  size_t max_body_bytes = 4 << 20;
  RequestLimits limits;
  int64_t max_prompt_tokens = 0;  // the longest rendered prompt taken
  int64_t default_max_tokens = 256;
  int timeout_s = 30;  // a stalled read or write ends the connection
  int threads = 32;    // connections served at once (a stream holds one)
};

// The model side, made by the command from a checkpoint.
struct ChatBackend {
  // The prompt's ids for a conversation, ending where the assistant's answer starts. Throws
  // RequestError for a conversation the model's chat format cannot hold.
  std::function<std::vector<uint32_t>(const std::vector<ChatTurn>&)> render;
  std::function<std::string(const std::vector<uint32_t>&)> decode;
  int64_t end_id = -1;      // the assistant's end token: it stops decoding and is not in the text
  int64_t vocab_limit = 0;  // the tokenizer's size: ids past it are never sampled
  GenerationQueue* queue = nullptr;
};

// Whether this lmtrain was built with cpp-httplib.
bool server_available();

// Serves until SIGINT or SIGTERM. on_listening(port) runs once the socket is bound. Throws
// UsageError when the address cannot be bound (naming it).
void run_server(const ServerOptions& options, const ChatBackend& backend,
                const std::function<void(int)>& on_listening);

// The end of the longest prefix of `text` that holds no cut multi-byte character: streamed text
// goes out in whole characters even when a character's bytes span tokens.
size_t complete_utf8_prefix(const std::string& text);

}  // namespace lmtrain::serve
