// `lmtrain chat`: talk to a chat model in the terminal (nanochat's chat_cli). The conversation
// is kept and rendered in the model's chat format every turn; answers stream token by token.
#include <iostream>
#include <sstream>

#include "cli/args.h"
#include "cli/chat_model.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/threads.h"
#include "infer/generator.h"
#include "serve/http_server.h"

namespace lmtrain::cli {
namespace {

constexpr const char* kCommands =
    "commands: /clear (a new conversation), /temperature T, /system TEXT, /help, /quit "
    "(or Ctrl-D)\n";

struct ChatSettings {
  infer::SamplingOptions sampling;
  int64_t max_tokens = 256;
  uint64_t seed = 0;
};

// One answer to the conversation so far, printed as it is decoded; returns its text.
std::string answer(ChatModel& chat, const data::chat::Conversation& c, const ChatSettings& s,
                   std::ostream& out) {
  const auto prompt = chat.renderer->render_prompt(c, "the conversation");
  const auto& tok = *chat.loaded.tokenizer;
  const int64_t end = chat.renderer->end_token();
  std::vector<uint32_t> ids;
  size_t printed = 0;
  std::string text;
  infer::generate(*chat.loaded.model, prompt, s.max_tokens, s.sampling, s.seed, end,
                  [&](uint32_t id) {
                    if (static_cast<int64_t>(id) == end) return;
                    ids.push_back(id);
                    text = tok.decode(ids.data(), ids.size());
                    // Whole characters only: a character's bytes may span tokens.
                    const size_t ready = serve::complete_utf8_prefix(text);
                    if (ready > printed) {
                      out << text.substr(printed, ready - printed) << std::flush;
                      printed = ready;
                    }
                  });
  out << text.substr(printed) << "\n" << std::flush;
  return text;
}

data::chat::Message message(data::chat::Role role, std::string content) {
  data::chat::Message m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

}  // namespace

int cmd_chat(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"checkpoint", FlagKind::kValue, "checkpoint dir, latest/best link, or run dir", "PATH"},
      {"prompt", FlagKind::kValue, "answer this one message and exit (for scripts)", "TEXT"},
      {"system", FlagKind::kValue, "a system message first", "TEXT"},
      {"chat_format", FlagKind::kValue, "auto (default), nanochat, chatml, qwen2.5, qwen3, llama3",
       "NAME"},
      {"temperature", FlagKind::kValue, "softmax temperature; 0 = greedy (default 0.6)", "T"},
      {"top_k", FlagKind::kValue, "keep the k most likely tokens; 0 = off (default 50)", "K"},
      {"max_tokens", FlagKind::kValue, "the longest answer in tokens (default 256)", "N"},
      {"seed", FlagKind::kValue, "sampling seed (default 42)", "N"},
      {"threads", FlagKind::kValue, "intra-op threads (default: all cores)", "N"},
      {"device", FlagKind::kValue, "auto | cpu | cuda (default auto)", "D"},
      quiet_flag(),
  };
  const auto args = parse_args("chat", argv, flags, /*accept_config=*/false);
  apply_quiet(args);
  if (print_help_if_asked(args, flags,
                          "Usage: lmtrain chat --checkpoint RUN [--prompt TEXT] [--system TEXT]\n\n"
                          "Talks to a chat model in the terminal: type a message, the answer\n"
                          "streams back; the conversation is remembered until /clear.\n")) {
    return 0;
  }
  if (!args.has("checkpoint")) throw UsageError("--checkpoint is required");
  ChatSettings s;
  s.sampling.temperature = args.get_float("temperature", 0.6);
  s.sampling.top_k = args.get_int("top_k", 50, 0);
  s.max_tokens = args.get_int("max_tokens", 256, 1);
  s.seed = static_cast<uint64_t>(args.get_int("seed", 42));
  if (s.sampling.temperature < 0) throw UsageError("--temperature must be >= 0");
  core::configure_threads(static_cast<int>(args.get_int("threads", 0, 0, kMaxThreadsFlag)), 1);
  const auto rt = core::Runtime::for_device(args.get("device", "auto"), "--device");
  rt.activate();
  auto chat = load_chat_model(args.get("checkpoint"), args.get("chat_format", "auto"), rt);
  s.sampling.vocab_limit = static_cast<int64_t>(chat.loaded.tokenizer->vocab_size());
  chat.loaded.model->eval();
  std::string system = args.get("system", "");
  data::chat::Conversation c;
  auto restart = [&] {
    c.messages.clear();
    if (!system.empty()) c.messages.push_back(message(data::chat::Role::kSystem, system));
  };
  restart();
  if (args.has("prompt")) {
    c.messages.push_back(message(data::chat::Role::kUser, args.get("prompt")));
    answer(chat, c, s, std::cout);
    return 0;
  }
  std::cout << "lmtrain chat: " << chat.loaded.checkpoint_dir << " ("
            << data::chat::describe_chat_format(chat.format) << ")\n"
            << kCommands;
  std::string line;
  while (std::cout << "\nyou> " << std::flush, std::getline(std::cin, line)) {
    if (line.empty()) continue;
    if (line[0] == '/') {
      std::istringstream in(line);
      std::string cmd;
      in >> cmd;
      if (cmd == "/quit" || cmd == "/exit") break;
      if (cmd == "/clear") {
        restart();
        std::cout << "(a new conversation)\n";
      } else if (cmd == "/temperature") {
        double t = -1;
        if (!(in >> t) || t < 0 || t > 2) {
          std::cout << "(/temperature takes a number in [0, 2])\n";
        } else {
          s.sampling.temperature = t;
          std::cout << "(temperature " << t << ")\n";
        }
      } else if (cmd == "/system") {
        std::getline(in >> std::ws, system);
        restart();
        std::cout << "(a new conversation with that system message)\n";
      } else {
        std::cout << kCommands;
      }
      continue;
    }
    c.messages.push_back(message(data::chat::Role::kUser, line));
    std::cout << "assistant> " << std::flush;
    try {
      c.messages.push_back(message(data::chat::Role::kAssistant, answer(chat, c, s, std::cout)));
    } catch (const UsageError& e) {  // e.g. the conversation outgrew the model's context
      c.messages.pop_back();
      std::cout << "\n(" << e.what() << ")\n";
    }
    ++s.seed;
  }
  std::cout << "\n";
  return 0;
}

}  // namespace lmtrain::cli
