#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/threads.h"
#include "infer/generator.h"
#include "train/checkpoint_model.h"

namespace lmtrain::cli {

int cmd_generate(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"checkpoint", FlagKind::kValue, "checkpoint dir, latest/best link, or run dir", "PATH"},
      {"prompt", FlagKind::kValue, "text to continue (default: start of a document)", "TEXT"},
      {"max_new_tokens", FlagKind::kValue, "tokens to generate (default 100)", "N"},
      {"max_tokens", FlagKind::kValue, "the same as --max_new_tokens (the seeds' name)", "N"},
      {"use_teacher", FlagKind::kBool,
       "sample from the teacher of the distillation run that wrote --checkpoint"},
      {"kv_cache", FlagKind::kValue,
       "KV cache policy: full (default), int8|int4[:group=G,residual=R] (KIVI quantised), "
       "streaming:sinks=S,window=W (StreamingLLM: runs past block_size)",
       "POLICY"},
      {"temperature", FlagKind::kValue, "softmax temperature; 0 = greedy (default 0.8)", "T"},
      {"top_k", FlagKind::kValue, "keep the k most likely tokens; 0 = off (default 50)", "K"},
      {"top_p", FlagKind::kValue, "nucleus sampling mass; 1 = off (default 1.0)", "P"},
      {"seed", FlagKind::kValue, "sampling seed (default 1337)", "N"},
      {"num_samples", FlagKind::kValue, "independent samples (default 1)", "N"},
      {"stop_at_eot", FlagKind::kBool, "stop at <|endoftext|> (default true)"},
      {"threads", FlagKind::kValue, "intra-op threads (default: all cores)", "N"},
      {"device", FlagKind::kValue, "auto | cpu | cuda (default auto: a GPU when visible)", "D"},
      {"print_ids", FlagKind::kBool,
       "print the generated token ids (space-separated) instead of their text"},
  };
  const auto args = parse_args("generate", argv, flags, /*accept_config=*/false);
  if (args.help) {
    std::cout << "Usage: lmtrain generate --checkpoint PATH [--prompt TEXT] [--max_new_tokens N]\n"
                 "       [--temperature T] [--top_k K] [--top_p P] [--seed S]\n\n"
                 "Prints the prompt's continuation to stdout (the prompt itself is not\n"
                 "repeated). Decoding is incremental with a KV cache. --print_ids prints\n"
                 "every generated token id instead, the <|endoftext|> that stops it included.\n\n"
                 "Flags:\n"
              << flags_help(flags);
    return 0;
  }
  if (!args.has("checkpoint")) throw UsageError("--checkpoint is required");
  infer::SamplingOptions opts;
  opts.temperature = args.get_float("temperature", 0.8);
  opts.top_k = args.get_int("top_k", 50, 0);
  opts.top_p = args.get_float("top_p", 1.0);
  if (args.has("max_new_tokens") && args.has("max_tokens")) {
    throw UsageError("--max_new_tokens and --max_tokens are the same flag: give one of them");
  }
  const int64_t max_new = args.has("max_tokens") ? args.get_int("max_tokens", 100, 0)
                                                 : args.get_int("max_new_tokens", 100, 0);
  const int64_t samples = args.get_int("num_samples", 1, 1);
  const int64_t seed = args.get_int("seed", 1337);
  if (opts.temperature < 0) throw UsageError("--temperature must be >= 0");
  if (!(opts.top_p > 0 && opts.top_p <= 1)) throw UsageError("--top_p must be in (0, 1]");
  const bool stop_at_eot = args.get("stop_at_eot", "true") != "false";
  const bool print_ids = args.get("print_ids", "false") != "false";
  const auto policy = infer::parse_kv_policy(args.get("kv_cache", "full"));
  core::configure_threads(static_cast<int>(args.get_int("threads", 0, 0, kMaxThreadsFlag)), 1);

  const auto rt = core::Runtime::for_device(args.get("device", "auto"), "--device");
  rt.activate();
  auto loaded = train::load_inference_model(args.get("checkpoint"), rt);
  if (args.get("use_teacher", "false") != "false") {
    // The student's config names its teacher's checkpoint (resolved when training started).
    const auto& cfg = *loaded.config;
    if (!cfg.get_bool("distill.enabled") || cfg.get_string("distill.teacher").empty()) {
      throw UsageError("--use_teacher: checkpoint " + loaded.checkpoint_dir +
                       " is not from a distillation run (distill.enabled is false)");
    }
    auto teacher = train::load_inference_model(cfg.get_string("distill.teacher"), rt);
    // An imported teacher may have no tokenizer: it shares the student's vocabulary.
    if (!teacher.tokenizer) teacher.tokenizer = std::move(loaded.tokenizer);
    loaded = std::move(teacher);
  }
  if (!loaded.tokenizer) {
    throw UsageError("checkpoint " + loaded.checkpoint_dir + " has no tokenizer.json");
  }
  const auto& tok = *loaded.tokenizer;
  const int64_t eot = static_cast<int64_t>(tok.eot_id());
  std::vector<uint32_t> prompt = tok.encode_with_special(args.get("prompt"));
  if (prompt.empty()) prompt = {static_cast<uint32_t>(eot)};
  for (int64_t s = 0; s < samples; ++s) {
    if (samples > 1) std::cout << (s ? "\n" : "") << "--- sample " << s + 1 << " ---\n";
    // Stream each token as it is decoded; bytes of a multi-byte character may span tokens,
    // which the terminal reassembles.
    infer::generate(
        *loaded.model, prompt, max_new, opts, static_cast<uint64_t>(seed + s),
        stop_at_eot ? eot : -1,
        [&, first = true](uint32_t id) mutable {
          if (print_ids) {
            std::cout << (first ? "" : " ") << id << std::flush;
            first = false;
            return;
          }
          if (static_cast<int64_t>(id) == eot) return;
          std::cout << tok.decode(&id, 1) << std::flush;
        },
        policy);
    std::cout << "\n";
  }
  return 0;
}

}  // namespace lmtrain::cli
