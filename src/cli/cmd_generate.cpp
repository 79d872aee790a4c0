#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_config.h"
#include "checkpoint/checkpoint_model.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_temporal.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/threads.h"
#include "infer/generator.h"
#include "infer/prompt_file.h"

namespace lmtrain::cli {
namespace {

// --prompts FILE: every line's continuation as a JSONL record, in file order, generated in
// batches (infer/prompt_file.h plans them); throughput on stderr at the end.
void generate_prompt_file(const std::string& path, int64_t batch_size, int64_t max_new,
                          const infer::SamplingOptions& opts, int64_t seed, bool stop_at_eot,
                          bool print_ids, const infer::KvPolicy& policy, model::GptImpl& model,
                          const data::BpeTokenizer& tok, std::ostream& out) {
  const auto lines = infer::read_prompt_file(path);
  const int64_t eot = static_cast<int64_t>(tok.eot_id());
  std::vector<std::vector<uint32_t>> prompts;
  std::vector<size_t> lengths;
  for (const auto& l : lines) {
    prompts.push_back(tok.encode_with_special(l.prompt));
    if (prompts.back().empty()) prompts.back() = {static_cast<uint32_t>(eot)};
    lengths.push_back(prompts.back().size());
  }
  const auto batches = infer::plan_batches(lengths, batch_size, !policy.supports_padding());
  std::vector<infer::Generated> results(lines.size());
  int64_t peak_bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  core::Progress progress("generate", static_cast<int64_t>(lines.size()), "prompts");
  for (size_t k = 0; k < batches.size(); ++k) {
    std::vector<std::vector<uint32_t>> rows;
    std::vector<int64_t> budgets;
    for (size_t i : batches[k]) {
      rows.push_back(prompts[i]);
      budgets.push_back(lines[i].max_new_tokens.value_or(max_new));
    }
    auto got = infer::generate_batch(model, rows, budgets, opts, static_cast<uint64_t>(seed) + k,
                                     stop_at_eot ? eot : -1, policy);
    peak_bytes = std::max(peak_bytes, got.peak_cache_bytes);
    for (size_t j = 0; j < got.rows.size(); ++j) results[batches[k][j]] = std::move(got.rows[j]);
    progress.add(static_cast<int64_t>(batches[k].size()));
  }
  progress.finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t generated = 0, total = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto ids = results[i].tokens;
    generated += static_cast<int64_t>(ids.size());
    total += static_cast<int64_t>(ids.size() + prompts[i].size());
    if (!ids.empty() && static_cast<int64_t>(ids.back()) == eot) ids.pop_back();
    nlohmann::json j;
    j["id"] = nlohmann::json::parse(lines[i].id_json);
    j["prompt"] = lines[i].prompt;
    j["completion"] = tok.decode(ids.data(), ids.size());
    j["tokens"] = results[i].tokens.size();
    j["stop"] = infer::stop_reason_name(results[i].stop);
    if (print_ids) j["ids"] = results[i].tokens;
    // A completion cut inside a multi-byte character is not valid UTF-8: replace those bytes.
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  out.flush();
  std::cerr << log::format(
      "generate: %zu prompts in %zu batches of up to %lld, kv_cache %s: %lld new tokens in %.2f s "
      "= %.1f tokens/s generated, %.1f tokens/s with the prompts; peak cache bytes: %lld\n",
      lines.size(), batches.size(), (long long)batch_size, policy.text.c_str(),
      (long long)generated, seconds, generated / std::max(seconds, 1e-9),
      total / std::max(seconds, 1e-9), (long long)peak_bytes);
}

}  // namespace

int cmd_generate(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"checkpoint", FlagKind::kValue, "checkpoint dir, latest/best link, or run dir", "PATH"},
      {"prompt", FlagKind::kValue,
       "text to continue (default: start of a document); with --series, the question, with a "
       "<ts> placeholder per series",
       "TEXT"},
      {"series", FlagKind::kValue,
       "a temporal-encoder run's checkpoint: the series to answer about, CSV (a series per "
       "column), NPY (a series per row) or JSONL ({\"timeseries\": [...]}, with an \"input\" "
       "prompt per line or none)",
       "FILE"},
      {"max_new_tokens", FlagKind::kValue, "tokens to generate (default 100)", "N"},
      {"max_tokens", FlagKind::kValue, "the same as --max_new_tokens (the seeds' name)", "N"},
      {"use_teacher", FlagKind::kBool,
       "sample from the teacher of the distillation run that wrote --checkpoint"},
      {"kv_cache", FlagKind::kValue,
       "KV cache policy: full (default), int8|int4[:group=G,residual=R] (KIVI quantised), "
       "streaming:sinks=S,window=W (StreamingLLM: runs past block_size), "
       "h2o:budget=B,recent=R (heavy hitters), or SELECTION+STORAGE, e.g. "
       "streaming:sinks=4,window=252+int8",
       "POLICY"},
      {"prompts", FlagKind::kValue,
       "batched generation: a JSONL file, one {\"prompt\": TEXT, \"id\": ANY, "
       "\"max_new_tokens\": N} per line (id and max_new_tokens optional); writes one JSON record "
       "per line",
       "FILE"},
      {"batch_size", FlagKind::kValue, "prompts decoded together with --prompts (default 8)", "N"},
      {"output", FlagKind::kValue, "with --prompts: write the JSONL records here (default stdout)",
       "FILE"},
      {"temperature", FlagKind::kValue, "softmax temperature; 0 = greedy (default 0.8)", "T"},
      {"top_k", FlagKind::kValue, "keep the k most likely tokens; 0 = off (default 50)", "K"},
      {"top_p", FlagKind::kValue, "nucleus sampling mass; 1 = off (default 1.0)", "P"},
      {"seed", FlagKind::kValue, "sampling seed (default 1337)", "N"},
      {"num_samples", FlagKind::kValue, "independent samples (default 1)", "N"},
      {"stop_at_eot", FlagKind::kBool, "stop at <|endoftext|> (default true)"},
      {"threads", FlagKind::kValue, "intra-op threads (default: all cores)", "N"},
      {"device", FlagKind::kValue,
       "auto | cpu | cuda (default auto: a GPU when visible); fp32, without TF32", "D"},
      {"print_ids", FlagKind::kBool,
       "print the generated token ids (space-separated) instead of their text"},
      quiet_flag(),
  };
  const auto args = parse_args("generate", argv, flags, /*accept_config=*/false);
  apply_quiet(args);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain generate --checkpoint PATH [--prompt TEXT] [--max_new_tokens N]\n"
          "       [--temperature T] [--top_k K] [--top_p P] [--seed S]\n"
          "       lmtrain generate --checkpoint RUN --series FILE [--prompt TEXT] [...]\n"
          "       lmtrain generate --checkpoint PATH --prompts FILE.jsonl [--batch_size N]\n"
          "       [--output FILE] [...]\n\n"
          "Prints the prompt's continuation to stdout (the prompt itself is not\n"
          "repeated). Decoding is incremental with a KV cache. --print_ids prints\n"
          "every generated token id instead, the <|endoftext|> that stops it included.\n\n"
          "With --prompts, decodes the file's prompts --batch_size at a time (left-padded,\n"
          "shortest first) and writes one JSON object per prompt, in file order:\n"
          "  {\"id\", \"prompt\", \"completion\", \"tokens\", \"stop\": eot|length|context}\n"
          "(tokens counts the new ids, a final <|endoftext|> included; the completion\n"
          "text leaves it out; --print_ids adds the ids as \"ids\"). Greedy results\n"
          "equal one-prompt runs; sampling seeds batch k with --seed + k. Throughput\n"
          "and the peak cache bytes go to stderr.\n\n"
          "A temporal-encoder run's checkpoint (model.temporal.enabled) answers about\n"
          "time series: --series FILE with --prompt \"Describe the curve: <ts>\". The\n"
          "run's encoder turns each series into soft tokens that stand at the prompt's\n"
          "placeholders (<ts> or <ts><ts/>, one per series in the file's order: CSV one\n"
          "per column, NPY one per row, JSONL every line's \"timeseries\"); the frozen LM\n"
          "decodes the answer with the sampling flags above. A JSONL file whose lines\n"
          "carry their own prompts (\"input\", ChatTS's format) needs no --prompt: each\n"
          "line is answered, one JSON object per line on stdout:\n"
          "  {\"line\", \"prompt\", \"series\", \"completion\", \"tokens\", \"stop\"}\n\n")) {
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
  const bool stop_at_eot = args.get_bool("stop_at_eot", true);
  const bool print_ids = args.get_bool("print_ids");
  const auto policy = infer::parse_kv_policy(args.get("kv_cache", "full"));
  const int64_t batch_size = args.get_int("batch_size", 8, 1);
  if (args.has("prompts")) {
    for (const char* single : {"prompt", "num_samples"}) {
      if (args.has(single)) {
        throw UsageError(std::string("--") + single + " does not go with --prompts");
      }
    }
  } else {
    for (const char* batched : {"batch_size", "output"}) {
      if (args.has(batched)) throw UsageError(std::string("--") + batched + " needs --prompts");
    }
  }
  if (args.has("series")) {
    for (const char* other : {"prompts", "use_teacher"}) {
      if (args.has(other))
        throw UsageError(std::string("--") + other + " does not go with --series");
    }
  }
  core::configure_threads(static_cast<int>(args.get_int("threads", 0, 0, kMaxThreadsFlag)), 1);

  const auto rt = core::Runtime::for_device(args.get("device", "auto"), "--device");
  rt.activate();
  // A temporal run's LM answers about series; decide from meta.json before loading anything.
  const std::string spec = args.get("checkpoint");
  const auto temporal = is_temporal_checkpoint(spec);
  if (args.has("series") && temporal && !*temporal) {
    throw UsageError("--series needs a temporal-encoder run's checkpoint, and " + spec +
                     " is not one (model.temporal.enabled is false): train one with "
                     "--model.temporal.enabled=true, or leave --series out");
  }
  if (!args.has("series") && temporal && *temporal) {
    throw UsageError("checkpoint " + spec +
                     " is a temporal-encoder run's: give --series FILE (CSV, NPY or JSONL) and a "
                     "--prompt with a <ts> per series, e.g. --prompt \"Describe the curve: <ts>\" "
                     "(for text alone, generate from its LM, model.init_from)");
  }
  if (args.has("series")) {
    SeriesGenerateOptions so;
    so.checkpoint = spec;
    so.series_path = args.get("series");
    if (args.has("prompt")) so.prompt = args.get("prompt");
    so.max_new_tokens = max_new;
    so.sampling = opts;
    so.seed = seed;
    so.num_samples = samples;
    so.stop_at_eot = stop_at_eot;
    so.print_ids = print_ids;
    so.policy = policy;
    generate_with_series(so, rt);
    return 0;
  }
  auto loaded = train::load_inference_model(spec, rt);
  if (args.get_bool("use_teacher")) {
    // The student's config names its teacher's checkpoint (resolved when training started).
    const core::Config cfg = train::recorded_config(loaded.config_yaml, loaded.checkpoint_dir);
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
  opts.vocab_limit = static_cast<int64_t>(tok.vocab_size());  // not the model's padding
  if (args.has("prompts")) {
    if (args.has("output")) {
      std::ofstream file(args.get("output"));
      if (!file) throw UsageError("--output: cannot write " + args.get("output"));
      generate_prompt_file(args.get("prompts"), batch_size, max_new, opts, seed, stop_at_eot,
                           print_ids, policy, *loaded.model, tok, file);
      if (!file) throw Error("--output: writing " + args.get("output") + " failed");
    } else {
      generate_prompt_file(args.get("prompts"), batch_size, max_new, opts, seed, stop_at_eot,
                           print_ids, policy, *loaded.model, tok, std::cout);
    }
    return 0;
  }
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
