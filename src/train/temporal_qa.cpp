#include "train/temporal_qa.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/log.h"
#include "data/temporal/generator.h"
#include "model/kv_cache.h"
#include "objective/temporal_objective.h"

namespace lmtrain::train {
namespace {

namespace dt = data::temporal;

enum Condition { kCurve = 0, kTextOnly = 1, kShuffled = 2 };

struct Scorer {
  model::GptImpl& lm;
  model::temporal::TemporalEncoderImpl& encoder;
  const TemporalData& data;
  const TemporalQaOptions& options;

  const data::BpeTokenizer& tok() const { return data.tokenizer(); }

  // The batch of `rows` on the model's device, with its soft tokens (zeroed for text only).
  std::pair<Batch, model::SoftTokens> batch_of(const std::vector<TemporalRow>& rows,
                                               Condition c) const {
    std::vector<std::string> names(rows.size(), "a scored sample");
    auto b = temporal_batch(rows, names, data.shape(), tok().eot_id(), lm.device());
    auto values = TemporalAlignmentObjective::soft_token_values(encoder, b);
    if (c == kTextOnly) values = torch::zeros_like(values);
    model::SoftTokens soft{b.tensors.at("soft_slots"), values};
    return {std::move(b), std::move(soft)};
  }

  // log p(answer tokens and <|endoftext|> | prompt) of each row.
  std::vector<double> answer_logprobs(const std::vector<TemporalRow>& rows, Condition c) const {
    auto [b, soft] = batch_of(rows, c);
    auto logp = torch::log_softmax(lm.logits(lm.final_hidden(b.inputs(), soft)).to(torch::kFloat),
                                   -1);  // (B, T, V)
    const auto& targets = b.targets();
    auto mask = targets != model::kIgnoreIndex;
    auto picked = logp.gather(-1, targets.clamp_min(0).unsqueeze(-1)).squeeze(-1);
    auto sums =
        torch::where(mask, picked, torch::zeros_like(picked)).sum(1).to(torch::kDouble).cpu();
    return {sums.data_ptr<double>(), sums.data_ptr<double>() + sums.numel()};
  }

  // The greedy continuation of a prompt row, until <|endoftext|> or max_new_tokens.
  std::string greedy(const TemporalRow& prompt, Condition c) const {
    return tok().decode(greedy_answer_ids(lm, encoder, prompt, data.shape(), tok().eot_id(),
                                          options.max_new_tokens, c == kTextOnly));
  }

  // The sample with its answer text for `choice` (the canonical phrase replaced in its output).
  static dt::TemporalSample with_answer(dt::TemporalSample s, const std::string& choice) {
    const auto at = s.output.find(s.answer);
    if (at != std::string::npos) s.output.replace(at, s.answer.size(), choice);
    return s;
  }
};

struct Tally {
  int64_t n = 0, likelihood = 0, greedy = 0;
  std::vector<double> rel_errors;
  QaCondition result(bool numeric) const {
    QaCondition c;
    if (n == 0) return c;
    if (!numeric) {
      c.likelihood_accuracy = static_cast<double>(likelihood) / n;
      c.greedy_accuracy = static_cast<double>(greedy) / n;
      return c;
    }
    auto e = rel_errors;
    std::sort(e.begin(), e.end());
    c.median_rel_error =
        e.size() % 2 ? e[e.size() / 2] : 0.5 * (e[e.size() / 2 - 1] + e[e.size() / 2]);
    c.within_10pct =
        static_cast<double>(std::count_if(e.begin(), e.end(), [](double x) { return x <= 0.1; })) /
        static_cast<double>(e.size());
    return c;
  }
};

}  // namespace

std::vector<uint32_t> greedy_answer_ids(model::GptImpl& lm,
                                        model::temporal::TemporalEncoderImpl& encoder,
                                        const TemporalRow& prompt, const TemporalBatchShape& shape,
                                        int64_t eot_id, int64_t max_new_tokens, bool text_only) {
  torch::NoGradGuard no_grad;
  auto b = temporal_batch({prompt}, {"a scored sample"}, shape, eot_id, lm.device());
  auto values = TemporalAlignmentObjective::soft_token_values(encoder, b);
  if (text_only) values = torch::zeros_like(values);
  const auto n = static_cast<int64_t>(prompt.tokens.size());
  auto ids = b.inputs().narrow(1, 0, n);
  model::SoftTokens prompt_soft{b.tensors.at("soft_slots").narrow(1, 0, n), values};
  auto cache = lm.make_cache(1, n + max_new_tokens);
  auto logits = lm.forward_cached(ids, *cache, &prompt_soft);
  std::vector<uint32_t> out;
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    const auto next = logits.select(1, logits.size(1) - 1).argmax(-1).item<int64_t>();
    if (next == eot_id) break;
    out.push_back(static_cast<uint32_t>(next));
    if (i + 1 == max_new_tokens) break;
    logits = lm.forward_cached(torch::full({1, 1}, next, ids.options()), *cache);
  }
  return out;
}

TemporalQaReport score_temporal_qa(model::GptImpl& lm,
                                   model::temporal::TemporalEncoderImpl& encoder,
                                   const TemporalData& data, const TemporalQaOptions& options) {
  const bool lm_training = lm.is_training(), enc_training = encoder.is_training();
  lm.eval();
  encoder.eval();
  torch::NoGradGuard no_grad;
  Scorer scorer{lm, encoder, data, options};
  int64_t n = data.val_samples();
  if (options.max_samples > 0) n = std::min(n, options.max_samples);
  std::vector<dt::TemporalSample> samples;
  for (int64_t i = 0; i < n; ++i) {
    auto s = data.val_sample(i);
    if (s.task.empty() || s.task == "caption" || s.answer.empty()) continue;
    samples.push_back(std::move(s));
  }
  std::vector<std::string> order;  // tasks in first-seen order
  std::map<std::string, std::array<Tally, 3>> tallies;
  std::map<std::string, int64_t> option_counts;
  const auto& enc = data.shape().encoder;
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    if (!tallies.count(s.task)) order.push_back(s.task);
    auto& t = tallies[s.task];
    const bool numeric = s.choices.empty();
    option_counts[s.task] = static_cast<int64_t>(s.choices.size());
    // The shuffled condition: this question about the next sample's series.
    dt::TemporalSample shuffled = s;
    shuffled.series = samples[(i + 1) % samples.size()].series;
    for (int c = 0; c < 3; ++c) {
      const auto& asked = c == kShuffled ? shuffled : s;
      const auto cond = static_cast<Condition>(c);
      auto& tally = t[c];
      ++tally.n;
      const std::string text =
          scorer.greedy(temporal_prompt(asked, scorer.tok(), enc, "a scored sample"), cond);
      if (numeric) {
        const auto value = dt::parse_number(text);
        const double truth = s.numeric_answer;
        tally.rel_errors.push_back(
            value ? std::min(1.0, std::abs(*value - truth) / std::max(std::abs(truth), 1e-9))
                  : 1.0);
        continue;
      }
      if (dt::parse_answer(s, text) == s.answer) ++tally.greedy;
      std::vector<TemporalRow> rows;
      for (const auto& choice : s.choices) {
        rows.push_back(
            temporal_row(Scorer::with_answer(asked, choice), scorer.tok(), enc, "a scored sample"));
      }
      const auto lp = scorer.answer_logprobs(rows, cond);
      const auto best = std::max_element(lp.begin(), lp.end()) - lp.begin();
      if (s.choices[static_cast<size_t>(best)] == s.answer) ++tally.likelihood;
    }
  }
  TemporalQaReport report;
  report.samples = static_cast<int64_t>(samples.size());
  for (const auto& task : order) {
    const auto& t = tallies.at(task);
    QaTaskScore score;
    score.task = task;
    score.samples = t[0].n;
    score.options = option_counts.at(task);
    const bool numeric = score.options == 0;
    score.chance = numeric ? 0 : 1.0 / static_cast<double>(score.options);
    score.curve = t[kCurve].result(numeric);
    score.text_only = t[kTextOnly].result(numeric);
    score.shuffled = t[kShuffled].result(numeric);
    report.tasks.push_back(score);
  }
  if (lm_training) lm.train();
  if (enc_training) encoder.train();
  return report;
}

std::string format_temporal_qa(const TemporalQaReport& report) {
  std::string out = log::format(
      "temporal QA on %lld held-out samples (accuracy: greedy / likelihood; numeric tasks: "
      "share within 10%% / median relative error)\n",
      (long long)report.samples);
  out += log::format("  %-16s %5s %7s   %-15s %-15s %-15s\n", "task", "n", "chance", "curve",
                     "text only", "shuffled");
  auto cell = [](const QaCondition& c, bool numeric) {
    return numeric ? log::format("%.2f / %.3f", c.within_10pct, c.median_rel_error)
                   : log::format("%.2f / %.2f", c.greedy_accuracy, c.likelihood_accuracy);
  };
  for (const auto& t : report.tasks) {
    const bool numeric = t.options == 0;
    out += log::format("  %-16s %5lld %7s   %-15s %-15s %-15s\n", t.task.c_str(),
                       (long long)t.samples, numeric ? "-" : log::format("%.2f", t.chance).c_str(),
                       cell(t.curve, numeric).c_str(), cell(t.text_only, numeric).c_str(),
                       cell(t.shuffled, numeric).c_str());
  }
  return out;
}

nlohmann::json temporal_qa_json(const TemporalQaReport& report) {
  auto cond = [](const QaCondition& c, bool numeric) {
    return numeric ? nlohmann::json{{"within_10pct", c.within_10pct},
                                    {"median_rel_error", c.median_rel_error}}
                   : nlohmann::json{{"greedy_accuracy", c.greedy_accuracy},
                                    {"likelihood_accuracy", c.likelihood_accuracy}};
  };
  nlohmann::json tasks = nlohmann::json::object();
  for (const auto& t : report.tasks) {
    const bool numeric = t.options == 0;
    tasks[t.task] = {{"samples", t.samples},
                     {"options", t.options},
                     {"chance", t.chance},
                     {"curve", cond(t.curve, numeric)},
                     {"text_only", cond(t.text_only, numeric)},
                     {"shuffled", cond(t.shuffled, numeric)}};
  }
  return {{"samples", report.samples}, {"tasks", tasks}};
}

}  // namespace lmtrain::train
