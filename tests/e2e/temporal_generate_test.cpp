// `lmtrain generate --series FILE` with a temporal-encoder run's checkpoint (issue 26), on the
// tiny fixture (temporal_fixture.h) after a few training steps: the same series as CSV, NPY and
// JSONL give the same answer (and "<ts>" the same as "<ts><ts/>"); a JSONL file's own prompts
// are answered line by line; greedy generation gives the very tokens the QA eval's greedy
// decoding gives for the same sample; and mismatched placeholders, a checkpoint that is not a
// temporal run's and a temporal run without --series are refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_config.h"
#include "cli/read_options.h"
#include "core/runtime.h"
#include "data/temporal/temporal_cache.h"
#include "data/temporal/temporal_jsonl.h"
#include "e2e/temporal_fixture.h"
#include "test_util.h"
#include "train/temporal_data.h"
#include "train/temporal_qa.h"
#include "train/temporal_setup.h"

namespace lmtrain::testing {
namespace {

namespace dt = data::temporal;

// The values of a univariate series (all valid: the generator masks none).
std::vector<float> series_values(const dt::SeriesValues& s) {
  EXPECT_EQ(s.channels, 1);
  return s.values;
}

// A CSV file with a timestamp column and one column per series (of equal length).
void write_series_csv(const std::string& path, const std::vector<std::vector<float>>& columns) {
  std::ofstream out(path);
  out << "time";
  for (size_t c = 0; c < columns.size(); ++c) out << ",s" << c;
  out << "\n";
  for (size_t t = 0; t < columns[0].size(); ++t) {
    out << t;
    char buf[32];
    for (const auto& col : columns) {
      std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(col[t]));  // float32 exact
      out << "," << buf;
    }
    out << "\n";
  }
}

// An .npy file of float32 rows (N, L), format 1.0, written byte by byte as numpy does.
void write_series_npy(const std::string& path, const std::vector<std::vector<float>>& rows) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows.size()) + ", " + std::to_string(rows[0].size()) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  for (const auto& r : rows) {
    bytes.append(reinterpret_cast<const char*>(r.data()), r.size() * sizeof(float));
  }
  std::ofstream(path, std::ios::binary) << bytes;
}

// The last line of output made of token ids only (what --print_ids prints), as numbers.
std::vector<uint32_t> printed_ids(const std::string& output) {
  std::vector<uint32_t> ids;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.find_first_not_of("0123456789 ") != std::string::npos) continue;
    ids.clear();
    std::istringstream nums(line);
    for (uint32_t id; nums >> id;) ids.push_back(id);
  }
  return ids;
}

// The JSON objects among the output's lines, in order.
std::vector<nlohmann::json> json_lines(const std::string& output) {
  std::vector<nlohmann::json> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '{') out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

class TemporalGenerate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fixture_ = new TemporalFixture;
    fixture_->build("lmtrain_temporal_generate");
    if (::testing::Test::HasFatalFailure()) return;
    run_ = fixture_->dir->file("run");
    auto r = run_command(lmtrain_binary() + " train" + fixture_->flags(run_, 8));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete fixture_; }

  // generate on the run with greedy decoding of up to 8 tokens, one thread.
  static CommandResult generate(const std::string& extra) {
    return run_command(lmtrain_binary() + " generate --checkpoint " + run_ +
                       " --temperature 0 --max_new_tokens 8 --threads 1" + extra);
  }
  // `s` as one shell word.
  static std::string quoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  }

  static TemporalFixture* fixture_;
  static std::string run_;
};
TemporalFixture* TemporalGenerate::fixture_ = nullptr;
std::string TemporalGenerate::run_;

// The run's held-out samples and the eval's greedy answer ids of each, in this process.
struct EvalAnswers {
  std::vector<dt::TemporalSample> samples;
  std::vector<std::vector<uint32_t>> ids;
  int64_t eot = 0;
};
EvalAnswers eval_greedy_answers(const std::string& run, int64_t n) {
  at::set_num_threads(1);  // as generate --threads 1
  auto loaded = train::load_temporal_inference(run, core::Runtime::cpu());
  const auto cfg = train::recorded_config(loaded.lm.config_yaml, loaded.lm.checkpoint_dir);
  auto data = train::make_temporal_data(cli::read_data_options(cfg), loaded.encoder->options(),
                                        *loaded.lm.tokenizer,
                                        static_cast<uint64_t>(cfg.get_int("train.seed")));
  EvalAnswers out;
  out.eot = static_cast<int64_t>(loaded.lm.tokenizer->eot_id());
  for (int64_t i = 0; i < n; ++i) {
    auto s = data->val_sample(i);
    const auto row = train::temporal_prompt(s, *loaded.lm.tokenizer, data->shape().encoder, "s");
    out.ids.push_back(train::greedy_answer_ids(*loaded.lm.model, *loaded.encoder, row,
                                               data->shape(), out.eot, 8));
    out.samples.push_back(std::move(s));
  }
  return out;
}

// Generated ids without a final end-of-text.
std::vector<uint32_t> without_eot(std::vector<uint32_t> ids, int64_t eot) {
  if (!ids.empty() && static_cast<int64_t>(ids.back()) == eot) ids.pop_back();
  return ids;
}

TEST_F(TemporalGenerate, CsvNpyAndJsonlSeriesGiveTheEvalsGreedyAnswer) {
  const auto eval = eval_greedy_answers(run_, 1);
  const auto& s = eval.samples[0];
  const auto values = series_values(s.series.at(0));
  const std::string csv = fixture_->dir->file("one.csv"), npy = fixture_->dir->file("one.npy"),
                    jsonl = fixture_->dir->file("one.jsonl");
  write_series_csv(csv, {values});
  write_series_npy(npy, {values});
  nlohmann::json line, series = nlohmann::json::array();
  series.push_back(values);  // one univariate series: [[v0, v1, ...]]
  line["timeseries"] = series;
  write_text(jsonl, line.dump() + "\n");
  ASSERT_NE(s.input.find("<ts><ts/>"), std::string::npos) << s.input;

  std::vector<uint32_t> first;
  for (const auto& file : {csv, npy, jsonl}) {
    auto r = generate(" --print_ids --series " + file + " --prompt " + quoted(s.input));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto ids = printed_ids(r.output);
    ASSERT_FALSE(ids.empty()) << r.output;
    EXPECT_EQ(without_eot(ids, eval.eot), eval.ids[0]) << file << "\n" << r.output;
    if (first.empty()) first = ids;
    EXPECT_EQ(ids, first) << file;
  }
  // "<ts>" alone is the same placeholder.
  std::string short_prompt = s.input;
  short_prompt.replace(short_prompt.find("<ts><ts/>"), 9, "<ts>");
  auto r = generate(" --print_ids --series " + csv + " --prompt " + quoted(short_prompt));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(printed_ids(r.output), first);
  // As text, with sampling, and several samples.
  r = run_command(lmtrain_binary() + " generate --checkpoint " + run_ + " --series " + npy +
                  " --prompt 'Describe the curve: <ts>' --max_new_tokens 6 --num_samples 2"
                  " --temperature 0.8 --top_k 20 --top_p 0.9 --seed 3 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "--- sample 2 ---")) << r.output;
}

TEST_F(TemporalGenerate, JsonlLinesWithPromptsAreAnsweredLikeTheEval) {
  const auto eval = eval_greedy_answers(run_, 6);
  // The answers differ between the questions: the comparison below is not of empty or constant
  // strings.
  ASSERT_FALSE(eval.ids[0].empty());
  EXPECT_TRUE(std::any_of(eval.ids.begin(), eval.ids.end(),
                          [&](const auto& ids) { return ids != eval.ids[0]; }));
  const std::string jsonl = fixture_->dir->file("lines.jsonl");
  std::string text;
  for (const auto& s : eval.samples) text += dt::sample_to_jsonl(s) + "\n\n";  // blank lines too
  write_text(jsonl, text);
  auto r = generate(" --print_ids --series " + jsonl);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = json_lines(r.output);
  ASSERT_EQ(records.size(), eval.samples.size()) << r.output;
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i]["line"], 1 + 2 * i);
    EXPECT_EQ(records[i]["prompt"], eval.samples[i].input);
    EXPECT_EQ(records[i]["series"], 1);
    const auto ids = records[i]["ids"].get<std::vector<uint32_t>>();
    EXPECT_EQ(without_eot(ids, eval.eot), eval.ids[i]) << "line " << records[i]["line"];
    EXPECT_EQ(records[i]["tokens"], ids.size());
    EXPECT_TRUE(records[i]["completion"].is_string());
  }
}

TEST_F(TemporalGenerate, MismatchedSeriesAndWrongCheckpointsAreRefused) {
  const auto s = dt::read_temporal_dir(fixture_->samples).at(0);
  const auto v = series_values(s.series.at(0));
  const std::string csv2 = fixture_->dir->file("two.csv"), npy3 = fixture_->dir->file("three.npy");
  write_series_csv(csv2, {v, v});
  write_series_npy(npy3, {v, v, v});
  expect_refused(generate(" --series " + csv2 + " --prompt 'Describe <ts>'"),
                 {"1 series placeholder", "2 series", "column", csv2});
  expect_refused(generate(" --series " + npy3 + " --prompt 'Compare <ts> with <ts><ts/>'"),
                 {"2 series placeholder", "3 series", "row", npy3});
  expect_refused(generate(" --series " + csv2), {"--prompt", "<ts>"});
  // A JSONL file whose lines carry prompts, and --prompt as well.
  const std::string lines = fixture_->dir->file("prompted.jsonl");
  write_text(lines, dt::sample_to_jsonl(s) + "\n");
  expect_refused(generate(" --series " + lines + " --prompt 'Describe <ts>'"),
                 {"--prompt", "input"});
  // The LM alone is no temporal run; a temporal run needs --series.
  expect_refused(run_command(lmtrain_binary() + " generate --checkpoint " + fixture_->lm +
                             " --series " + csv2 + " --prompt '<ts> <ts>'"),
                 {"--series", "model.temporal.enabled", fixture_->lm});
  expect_refused(generate(" --prompt 'Describe the curve:'"), {"temporal", "--series"});
  expect_refused(generate(" --series " + csv2 + " --prompts " + lines), {"--prompts", "--series"});
}

}  // namespace
}  // namespace lmtrain::testing
