#include "cli/generate_temporal.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "checkpoint/checkpoint_config.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "data/temporal/series_file.h"
#include "data/temporal/temporal_jsonl.h"
#include "infer/generator.h"
#include "objective/temporal_objective.h"
#include "train/temporal_data.h"
#include "train/temporal_setup.h"

namespace lmtrain::cli {
namespace {

namespace dt = data::temporal;

// One prompt to answer: its text (placeholders complete) and its series, named for messages.
struct SeriesPrompt {
  dt::TemporalSample sample;
  std::string name;  // "--prompt" or "FILE:LINE"
  int64_t line = 0;  // JSONL prompts: the line number
};

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

// The non-blank lines of a JSONL series file, each with its own series (and prompt, if any).
std::vector<SeriesPrompt> read_jsonl_series_lines(const std::string& path,
                                                  const dt::ReadOptions& read) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw UsageError(path + ": no such file (a series file: .csv, .npy or .jsonl)");
  }
  std::vector<SeriesPrompt> out;
  for (auto& n : dt::read_numbered_temporal_jsonl(path, read, dt::JsonlFields::kSeriesOnly)) {
    out.push_back({std::move(n.sample), path + ":" + std::to_string(n.line), n.line});
  }
  return out;
}

// What one series file holds, for the count-mismatch message.
std::string series_file_hint(const std::string& ext) {
  if (ext == ".csv") return "a CSV file holds one series per column (a timestamp column aside)";
  if (ext == ".npy") return "an NPY file holds one series per row ([N, L] or [N, C, L])";
  return "a JSONL file's lines hold theirs in \"timeseries\"";
}

// The prompts to answer: --prompt with every series of the file, or the JSONL file's own lines.
std::vector<SeriesPrompt> series_prompts(const SeriesGenerateOptions& o,
                                         const dt::ReadOptions& read) {
  const std::string ext = lower_extension(o.series_path);
  if (ext == ".jsonl") {
    auto lines = read_jsonl_series_lines(o.series_path, read);
    const auto with_input = std::count_if(
        lines.begin(), lines.end(), [](const SeriesPrompt& p) { return !p.sample.input.empty(); });
    if (with_input == static_cast<int64_t>(lines.size())) {
      if (o.prompt) {
        throw UsageError("--prompt and --series " + o.series_path +
                         ", whose lines carry their own prompts (\"input\"): give one of them "
                         "(drop --prompt to answer every line, or the lines' \"input\" to ask "
                         "--prompt about all their series)");
      }
      return lines;
    }
    if (with_input > 0) {
      const auto first = std::find_if(lines.begin(), lines.end(),
                                      [](const SeriesPrompt& p) { return p.sample.input.empty(); });
      throw UsageError(first->name +
                       ": no \"input\", though other lines of the file have one: either every "
                       "line carries its prompt, or none does (then --prompt asks about all "
                       "their series)");
    }
  }
  if (!o.prompt) {
    throw UsageError("--series " + o.series_path +
                     " needs --prompt with one <ts> placeholder per series, e.g. --prompt "
                     "\"Describe the curve: <ts>\"");
  }
  SeriesPrompt p;
  p.name = "--prompt";
  p.sample.input = normalize_series_placeholders(*o.prompt);
  p.sample.series = dt::read_series_file(o.series_path, read);
  const auto placeholders = dt::count_placeholders(p.sample.input);
  if (placeholders != static_cast<int64_t>(p.sample.series.size())) {
    throw UsageError(log::format(
        "--prompt has %lld series placeholder(s) (<ts> or <ts><ts/>) but --series %s holds %zu "
        "series (%s): give one placeholder per series, in the file's order",
        (long long)placeholders, o.series_path.c_str(), p.sample.series.size(),
        series_file_hint(ext).c_str()));
  }
  return {p};
}

// The prompt's token ids and soft tokens: the encoder's outputs for its series.
std::pair<std::vector<uint32_t>, infer::PromptSoftTokens> encode_series_prompt(
    const SeriesPrompt& p, train::TemporalInference& run,
    const model::temporal::TemporalEncoderOptions& enc) {
  const auto& tok = *run.lm.tokenizer;
  const auto row = train::temporal_prompt(p.sample, tok, enc, p.name);
  if (row.tokens.empty()) throw UsageError(p.name + ": the prompt encodes to no tokens");
  train::TemporalBatchShape shape;
  shape.seq_len = static_cast<int64_t>(row.tokens.size());
  shape.max_series = std::max<int64_t>(1, static_cast<int64_t>(row.series.size()));
  shape.encoder = enc;
  torch::NoGradGuard no_grad;
  const auto batch =
      train::temporal_batch({row}, {p.name}, shape, tok.eot_id(), run.lm.model->device());
  infer::PromptSoftTokens soft;
  soft.slots.push_back(row.soft_slot);
  soft.values.push_back(
      train::TemporalAlignmentObjective::soft_token_values(*run.encoder, batch));  // (n, C)
  std::vector<uint32_t> ids(row.tokens.begin(), row.tokens.end());
  return {std::move(ids), std::move(soft)};
}

}  // namespace

std::optional<bool> is_temporal_checkpoint(const std::string& spec) {
  const auto dir = train::CheckpointStore::resolve(spec, spec);
  if (!dir) return std::nullopt;
  try {
    train::LoadedCheckpoint meta_only;
    meta_only.dir = *dir;
    meta_only.meta = nlohmann::json::parse(core::read_file(*dir + "/meta.json"));
    return train::checkpoint_config(meta_only).get_bool("model.temporal.enabled");
  } catch (const std::exception&) {
    return std::nullopt;  // loading the checkpoint says what is wrong with it
  }
}

std::string normalize_series_placeholders(const std::string& prompt) {
  static const std::string open = "<ts>", close = "<ts/>";
  std::string out;
  size_t from = 0;
  for (size_t at = prompt.find(open); at != std::string::npos; at = prompt.find(open, from)) {
    out += prompt.substr(from, at - from) + open + close;
    from = at + open.size();
    if (prompt.compare(from, close.size(), close) == 0) from += close.size();
  }
  return out + prompt.substr(from);
}

void generate_with_series(const SeriesGenerateOptions& o, const core::Runtime& rt) {
  auto run = train::load_temporal_inference(o.checkpoint, rt);
  const auto& enc = run.encoder->options();
  const auto prompts = series_prompts(o, dt::ReadOptions{enc.max_length, enc.channels});
  const auto& tok = *run.lm.tokenizer;
  const int64_t eot = static_cast<int64_t>(tok.eot_id());
  const int64_t stop = o.stop_at_eot ? eot : -1;
  auto& lm = *run.lm.model;

  if (prompts.size() == 1 && prompts[0].line == 0) {
    const auto [ids, soft] = encode_series_prompt(prompts[0], run, enc);
    for (int64_t s = 0; s < o.num_samples; ++s) {
      if (o.num_samples > 1) std::cout << (s ? "\n" : "") << "--- sample " << s + 1 << " ---\n";
      infer::generate(
          lm, ids, o.max_new_tokens, o.sampling, static_cast<uint64_t>(o.seed + s), stop,
          [&, first = true](uint32_t id) mutable {
            if (o.print_ids) {
              std::cout << (first ? "" : " ") << id << std::flush;
              first = false;
              return;
            }
            if (static_cast<int64_t>(id) == eot) return;
            std::cout << tok.decode(&id, 1) << std::flush;
          },
          o.policy, soft);
      std::cout << "\n";
    }
    return;
  }
  // One JSON record per line, as `generate --prompts` writes them; line k samples with seed + k.
  if (o.num_samples > 1) {
    throw UsageError("--num_samples does not go with --series " + o.series_path +
                     ", whose lines carry their own prompts (one answer per line)");
  }
  for (size_t k = 0; k < prompts.size(); ++k) {
    const auto& p = prompts[k];
    const auto [ids, soft] = encode_series_prompt(p, run, enc);
    auto got = infer::generate_batch(lm, {ids}, {o.max_new_tokens}, o.sampling,
                                     static_cast<uint64_t>(o.seed) + k, stop, o.policy, {}, soft)
                   .rows[0];
    auto text_ids = got.tokens;
    if (!text_ids.empty() && static_cast<int64_t>(text_ids.back()) == eot) text_ids.pop_back();
    nlohmann::json j;
    j["line"] = p.line;
    j["prompt"] = p.sample.input;
    j["series"] = p.sample.series.size();
    j["completion"] = tok.decode(text_ids.data(), text_ids.size());
    j["tokens"] = got.tokens.size();
    j["stop"] = infer::stop_reason_name(got.stop);
    if (o.print_ids) j["ids"] = got.tokens;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  std::cout.flush();
}

}  // namespace lmtrain::cli
