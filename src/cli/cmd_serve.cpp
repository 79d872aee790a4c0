// `lmtrain serve`: a checkpoint behind an OpenAI-compatible HTTP API and a chat page
// (serve/http_server.h), its requests batched through one decoding thread
// (serve/generation_queue.h).
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/args.h"
#include "cli/chat_model.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/stop_signal.h"
#include "core/threads.h"
#include "infer/kv_cache_policy.h"
#include "serve/generation_queue.h"
#include "serve/http_server.h"

namespace lmtrain::cli {
namespace {

// The conversation of a request in the model's chat format, ending with the assistant's header.
std::vector<uint32_t> render(const data::chat::ChatRenderer& renderer,
                             const std::vector<serve::ChatTurn>& turns) {
  data::chat::Conversation c;
  for (const auto& t : turns) {
    data::chat::Message m;
    m.role = t.role == "system"      ? data::chat::Role::kSystem
             : t.role == "assistant" ? data::chat::Role::kAssistant
                                     : data::chat::Role::kUser;
    m.content = t.content;
    c.messages.push_back(std::move(m));
  }
  try {
    return renderer.render_prompt(c, "the request's messages");
  } catch (const Error& e) {  // e.g. nanochat's turns must alternate user, assistant, ...
    throw serve::RequestError(400, e.what(), "messages");
  }
}

}  // namespace

int cmd_serve(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"checkpoint", FlagKind::kValue, "checkpoint dir, latest/best link, or run dir", "PATH"},
      {"host", FlagKind::kValue,
       "address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every interface)",
       "ADDR"},
      {"port", FlagKind::kValue, "port (default 8000; 0: any free port, printed)", "N"},
      {"api_key", FlagKind::kValue,
       "require \"Authorization: Bearer KEY\" on /v1/ (default: $LMTRAIN_API_KEY, else none)",
       "KEY"},
      {"chat_format", FlagKind::kValue,
       "auto (default: from the checkpoint's chat data or tokenizer), nanochat, chatml, qwen2.5, "
       "qwen3, llama3",
       "NAME"},
      {"model_name", FlagKind::kValue, "the model's name in answers (default: the run dir's)",
       "NAME"},
      {"max_batch", FlagKind::kValue, "requests decoded together (default 8)", "N"},
      {"kv_cache", FlagKind::kValue, "KV cache policy, as generate's --kv_cache (default full)",
       "POLICY"},
      {"batching", FlagKind::kValue,
       "continuous (default: requests join and leave the running batch at every decode step; "
       "--kv_cache=full only, others fall back to static) or static (a batch runs until its "
       "last request ends)",
       "MODE"},
      {"prefill_chunk", FlagKind::kValue,
       "continuous batching: prompt tokens prefilled between two decode steps (default 256)", "N"},
      {"max_tokens", FlagKind::kValue,
       "the most tokens a request may ask to generate (default 1024)", "N"},
      {"default_max_tokens", FlagKind::kValue,
       "tokens generated for a request that gives no max_tokens (default 256)", "N"},
      {"max_prompt_tokens", FlagKind::kValue,
       "the longest conversation taken, in tokens (default: block_size - 1)", "N"},
      {"max_body_kb", FlagKind::kValue, "the largest request body (default 4096 KiB)", "N"},
      {"max_waiting", FlagKind::kValue, "requests waiting beyond this get 503 (default 256)", "N"},
      {"timeout_s", FlagKind::kValue,
       "a client that stalls this long while sending or reading is dropped (default 30)", "S"},
      {"http_threads", FlagKind::kValue, "connections served at once (default 32)", "N"},
      {"threads", FlagKind::kValue, "intra-op threads (default: all cores)", "N"},
      {"device", FlagKind::kValue, "auto | cpu | cuda (default auto)", "D"},
      quiet_flag(),
  };
  const auto args = parse_args("serve", argv, flags, /*accept_config=*/false);
  apply_quiet(args);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain serve --checkpoint RUN [--host ADDR] [--port N] [--api_key KEY]\n\n"
          "Serves a chat model over HTTP until Ctrl-C:\n"
          "  POST /v1/chat/completions  OpenAI's chat API (\"stream\": true: server-sent "
          "events)\n"
          "  GET  /v1/models            the model\n"
          "  GET  /health               {\"status\": \"ok\", \"waiting\": N, \"running\": R, "
          "\"cancelled\": C}\n"
          "  GET  /                     a chat page for the browser\n"
          "Any OpenAI client works: base_url http://HOST:PORT/v1. Concurrent requests decode\n"
          "together, up to --max_batch: each joins the running batch at the next decode step\n"
          "and leaves it when done (--batching). Requests that cannot be served (n > 1,\n"
          "stop strings, tools, a prompt over --max_prompt_tokens) get a 4xx JSON error\n"
          "naming the parameter.\n\n")) {
    return 0;
  }
  if (!args.has("checkpoint")) throw UsageError("--checkpoint is required");
  core::configure_threads(static_cast<int>(args.get_int("threads", 0, 0, kMaxThreadsFlag)), 1);
  const auto rt = core::Runtime::for_device(args.get("device", "auto"), "--device");
  rt.activate();
  serve::ServerOptions options;
  options.host = args.get("host", "127.0.0.1");
  options.port = static_cast<int>(args.get_int("port", 8000, 0, 65535));
  const char* env_key = std::getenv("LMTRAIN_API_KEY");
  options.api_key = args.get("api_key", env_key ? env_key : "");
  options.limits.max_tokens = args.get_int("max_tokens", 1024, 1);
  options.default_max_tokens =
      std::min(args.get_int("default_max_tokens", 256, 1), options.limits.max_tokens);
  options.max_body_bytes = static_cast<size_t>(args.get_int("max_body_kb", 4096, 1)) * 1024;
  options.timeout_s = static_cast<int>(args.get_int("timeout_s", 30, 1, 3600));
  options.threads = static_cast<int>(args.get_int("http_threads", 32, 1, 1024));
  const auto policy = infer::parse_kv_policy(args.get("kv_cache", "full"));
  const std::string batching = args.get("batching", "continuous");
  if (batching != "continuous" && batching != "static") {
    throw UsageError("--batching " + batching + ": continuous or static");
  }
  const int64_t prefill_chunk = args.get_int("prefill_chunk", 256, 1);
  if (!serve::server_available()) serve::run_server(options, {}, {});  // says why not

  auto chat = load_chat_model(args.get("checkpoint"), args.get("chat_format", "auto"), rt);
  auto& model = *chat.loaded.model;
  model.eval();
  const int64_t block = model.config().block_size;
  options.max_prompt_tokens = args.get_int("max_prompt_tokens", block - 1, 1);
  if (policy.bounded() && options.max_prompt_tokens >= block) {
    throw UsageError(
        log::format("--max_prompt_tokens %lld: the model's block_size is %lld, so a "
                    "prompt may hold at most %lld tokens with --kv_cache=%s",
                    (long long)options.max_prompt_tokens, (long long)block, (long long)block - 1,
                    policy.text.c_str()));
  }
  options.model_name = args.get("model_name", std::filesystem::path(chat.loaded.checkpoint_dir)
                                                  .parent_path()
                                                  .parent_path()
                                                  .filename()
                                                  .string());
  if (options.model_name.empty()) options.model_name = "lmtrain";

  serve::QueueOptions qo;
  qo.max_batch = args.get_int("max_batch", 8, 1, 4096);
  qo.max_waiting = static_cast<size_t>(args.get_int("max_waiting", 256, 1));
  qo.eot_id = chat.renderer->end_token();
  qo.policy = policy;
  qo.continuous = batching == "continuous";
  qo.prefill_chunk = prefill_chunk;
  serve::GenerationQueue queue(model, qo);
  const auto& tok = *chat.loaded.tokenizer;
  serve::ChatBackend backend;
  backend.render = [&](const std::vector<serve::ChatTurn>& turns) {
    return render(*chat.renderer, turns);
  };
  backend.decode = [&](const std::vector<uint32_t>& ids) {
    return tok.decode(ids.data(), ids.size());
  };
  backend.end_id = qo.eot_id;
  backend.vocab_limit = static_cast<int64_t>(tok.vocab_size());
  options.limits.vocab_size = backend.vocab_limit;  // logit_bias ids the tokenizer can decode
  backend.queue = &queue;
  core::install_stop_handlers();
  core::ignore_broken_pipes();
  serve::run_server(options, backend, [&](int port) {
    // One line a script can wait for; the URL works in a browser and as an OpenAI base_url + /v1.
    std::cout << log::format("serve: %s (%s) on http://%s:%d/ (API: /v1, chat page: /)%s",
                             options.model_name.c_str(),
                             data::chat::describe_chat_format(chat.format).c_str(),
                             options.host.c_str(), port,
                             options.api_key.empty() ? "" : ", API key required")
              << std::endl;
  });
  const auto stats = queue.stats();
  log::info(log::format(
      "serve: stopped after %lld requests in %lld %s (largest batch %lld, %lld cancelled)",
      (long long)stats.rows, (long long)stats.batches,
      stats.continuous ? "admissions (continuous batching)" : "batches",
      (long long)stats.largest_batch, (long long)stats.cancelled));
  return 0;
}

}  // namespace lmtrain::cli
