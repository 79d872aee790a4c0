// `lmtrain eval --tasks` (CORE-style tasks in the DCLM bundle's format) and `--bpb` with the
// real binary against a PyTorch reference of the same scoring (tests/fixtures/
// eval_reference.py: transformers on `lmtrain export hf` of the same checkpoint, `tokenizers` on
// the same tokenizer.json): the same prediction for every item, accuracies, centered
// accuracies and CORE equal, mean losses and bits per byte to float rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

const std::vector<std::string> kWords = {"the", "cat", "sat", "on",  "mat", "dog", "ran", "far",
                                         "old", "man", "and", "sea", "a",   "big", "red", "hat"};

std::string words(std::mt19937& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + kWords[rng() % kWords.size()];
  return s;
}

void write_bundle(const std::string& dir) {
  std::filesystem::create_directories(dir + "/eval_data/sub");
  write_text(dir + "/core.yaml",
             "icl_tasks:\n"
             "- label: mc_task\n  dataset_uri: sub/mc.jsonl\n  num_fewshot: [2]\n"
             "  icl_task_type: multiple_choice\n  continuation_delimiter: ' '\n"
             "- label: schema_task\n  dataset_uri: schema.jsonl\n  num_fewshot: [1]\n"
             "  icl_task_type: schema\n"
             "- label: lm_task\n  dataset_uri: lm.jsonl\n  num_fewshot: [0]\n"
             "  icl_task_type: language_modeling\n  continuation_delimiter: \"\\n\"\n");
  write_text(
      dir + "/eval_meta_data.csv",
      "Eval Task,Task Category,Random baseline\nmc_task,x,33.3333\n\"schema_task\",\"y, z\",50\n"
      "lm_task,x,0\n");
  std::mt19937 rng(3);
  std::ofstream mc(dir + "/eval_data/sub/mc.jsonl"), schema(dir + "/eval_data/schema.jsonl"),
      lm(dir + "/eval_data/lm.jsonl");
  for (int i = 0; i < 14; ++i) {
    mc << nlohmann::json{{"query", words(rng, 5)},
                         {"choices", {words(rng, 1), words(rng, 2), words(rng, 3)}},
                         {"gold", static_cast<int>(rng() % 3)}}
              .dump()
       << "\n";
    schema << nlohmann::json{{"context_options", {words(rng, 4), words(rng, 3)}},
                             {"continuation", words(rng, 3)},
                             {"gold", static_cast<int>(rng() % 2)}}
                  .dump()
           << "\n";
    // Trailing blanks in the context: the format trims them.
    lm << nlohmann::json{{"context", words(rng, 6) + (i % 2 ? "  " : "")},
                         {"continuation", words(rng, 2)}}
              .dump()
       << "\n";
  }
}

class ChatEval : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_chat_eval");
    const std::string data = prepare_synthetic_data(dir_->path());
    auto r = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data +
                         " --run.dir=" + dir_->file("run") + " --train.max_steps=30");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command(lmtrain_binary() + " export hf " + dir_->file("run/checkpoints/latest") + " " +
                    dir_->file("hf"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    write_bundle(dir_->file("bundle"));
  }
  static void TearDownTestSuite() { delete dir_; }
  static CommandResult reference(const std::string& args) {
    return run_command(lmtrain_python() + " " + source_dir() +
                       "/tests/fixtures/eval_reference.py " + args);
  }
  static TempDir* dir_;
};
TempDir* ChatEval::dir_ = nullptr;

void compare_core(const nlohmann::json& got, const nlohmann::json& want) {
  ASSERT_EQ(got["tasks"].size(), want["tasks"].size());
  for (size_t t = 0; t < got["tasks"].size(); ++t) {
    const auto &g = got["tasks"][t], &w = want["tasks"][t];
    EXPECT_EQ(g["label"], w["label"]);
    ASSERT_EQ(g["scores"].size(), w["scores"].size()) << g["label"];
    for (size_t i = 0; i < g["scores"].size(); ++i) {
      const auto &gs = g["scores"][i], &ws = w["scores"][i];
      EXPECT_EQ(gs["pred"], ws["pred"]) << g["label"] << " item " << i;
      EXPECT_EQ(gs["correct"], ws["correct"]) << g["label"] << " item " << i;
      ASSERT_EQ(gs["mean_losses"].size(), ws["mean_losses"].size());
      for (size_t k = 0; k < gs["mean_losses"].size(); ++k) {
        EXPECT_NEAR(gs["mean_losses"][k].get<double>(), ws["mean_losses"][k].get<double>(), 2e-5)
            << g["label"] << " item " << i;
      }
    }
    EXPECT_EQ(g["accuracy"].get<double>(), w["accuracy"].get<double>()) << g["label"];
    EXPECT_EQ(g["centered"].get<double>(), w["centered"].get<double>()) << g["label"];
  }
  EXPECT_EQ(got["core"].get<double>(), want["core"].get<double>());
}

TEST_F(ChatEval, CoreTasksEqualTheReference) {
  for (const int max : {0, 8}) {
    const std::string out = dir_->file("core" + std::to_string(max) + ".json");
    auto r = run_command(lmtrain_binary() + " eval --checkpoint " + dir_->file("run") +
                         " --tasks " + dir_->file("bundle") + " --json " + out +
                         " --max_per_task " + std::to_string(max));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "CORE:")) << r.output;
    const auto got = nlohmann::json::parse(read_text(out));
    auto ref = reference(
        "core " + dir_->file("hf") + " " + dir_->file("run/checkpoints/latest/tokenizer.json") +
        " " + dir_->file("bundle") + " --max-per-task " + std::to_string(max) + " --max-len 32");
    ASSERT_EQ(ref.exit_code, 0) << ref.output;
    compare_core(got, check_result(ref));
    ASSERT_EQ(got["tasks"][0]["items"].get<int>(), max ? max : 14);
  }
}

TEST_F(ChatEval, BitsPerByteEqualTheReference) {
  const std::string text = dir_->file("text.txt");
  write_text(text, read_text(dir_->file("corpus.txt")).substr(0, 3000) + "\ncafé 中文 🙂\n");
  const std::string out = dir_->file("bpb.json");
  auto r = run_command(lmtrain_binary() + " eval --checkpoint " + dir_->file("run") +
                       " --bpb --text " + text + " --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto got = nlohmann::json::parse(read_text(out));
  auto ref =
      reference("bpb " + dir_->file("hf") + " " +
                dir_->file("run/checkpoints/latest/tokenizer.json") + " " + text + " --seq-len 32");
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const auto want = check_result(ref);
  EXPECT_EQ(got["tokens"], want["tokens"]);
  EXPECT_EQ(got["bytes"], want["bytes"]);
  EXPECT_NEAR(got["bpb"].get<double>(), want["bpb"].get<double>(),
              1e-5 * want["bpb"].get<double>());
  EXPECT_GT(got["bpb"].get<double>(), 0.5);  // a 30-step model is far from the text's entropy
  // On the prepared validation split too (no reference needed: the same code, the split's ids).
  r = run_command(lmtrain_binary() + " eval --checkpoint " + dir_->file("run") + " --bpb");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "bits per byte")) << r.output;
}

// Launched on 2 ranks, each rank scores half the items (windows) and the scores are summed:
// the JSON equals one rank's (bits per byte to summation rounding), rank 0 alone prints.
TEST_F(ChatEval, TwoRanksScoreWhatOneRankScores) {
  const std::string text = dir_->file("text2.txt");
  write_text(text, read_text(dir_->file("corpus.txt")).substr(0, 3000));
  const std::string eval = " eval --checkpoint " + dir_->file("run");
  auto two = [&](const std::string& flags) {
    return run_command(lmtrain_binary() + " launch --nproc_per_node=2 --master_port=" +
                       std::to_string(free_port()) + " --" + eval + flags);
  };
  for (const std::string what : {"tasks", "bpb"}) {
    const std::string flags = what == "tasks" ? " --tasks " + dir_->file("bundle")
                                              : " --bpb --batch_size 2 --text " + text;
    const std::string one_json = dir_->file(what + "_one.json"),
                      two_json = dir_->file(what + "_two.json");
    auto r = run_command(lmtrain_binary() + eval + flags + " --json " + one_json);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = two(flags + " --json " + two_json);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "rank 0 of 2")) << r.output;
    const std::string printed = what == "tasks" ? "CORE:" : "bits per byte";
    EXPECT_EQ(r.output.find(printed), r.output.rfind(printed)) << "printed twice: " << r.output;
    auto one = nlohmann::json::parse(read_text(one_json));
    auto both = nlohmann::json::parse(read_text(two_json));
    if (what == "bpb") {
      EXPECT_NEAR(both["bpb"].get<double>(), one["bpb"].get<double>(), 1e-9);
      EXPECT_EQ(both["tokens"], one["tokens"]);
      EXPECT_EQ(both["bytes"], one["bytes"]);
      EXPECT_EQ(both["windows"], one["windows"]);
      EXPECT_GT(one["windows"].get<int>(), 4);
    } else {
      EXPECT_EQ(both["core"].get<double>(), one["core"].get<double>());
      compare_core(both, one);
    }
  }
}

TEST_F(ChatEval, RefusesBadTaskFiles) {
  const std::string bad = dir_->file("bad");
  std::filesystem::create_directories(bad + "/eval_data");
  write_text(bad + "/core.yaml",
             "icl_tasks:\n- label: t\n  dataset_uri: t.jsonl\n  num_fewshot: [0]\n"
             "  icl_task_type: multiple_choice\n  random_baseline: 25\n");
  write_text(bad + "/eval_data/t.jsonl",
             "{\"query\": \"q\", \"choices\": [\"a\"], \"gold\": 0}\n"
             "{\"query\": \"q\", \"choices\": [\"a\"], \"gold\": 3}\n");
  auto r =
      run_command(lmtrain_binary() + " eval --checkpoint " + dir_->file("run") + " --tasks " + bad);
  expect_refused(r, {"t.jsonl:2", "gold 3"});
  write_text(bad + "/core.yaml",
             "icl_tasks:\n- label: t\n  dataset_uri: t.jsonl\n  num_fewshot: [0]\n"
             "  icl_task_type: generative\n  random_baseline: 25\n");
  r = run_command(lmtrain_binary() + " eval --checkpoint " + dir_->file("run") + " --tasks " + bad);
  expect_refused(r, {"generative"});
  r = run_command(lmtrain_binary() + " eval --checkpoint " + dir_->file("run") + " --tasks " +
                  dir_->file("nowhere"));
  expect_refused(r, {"nowhere"});
}

}  // namespace
}  // namespace lmtrain::testing
