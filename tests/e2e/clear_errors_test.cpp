// Messages that name their cause (issue 30): conflicting values that used to be "last one wins",
// settings that were silently ignored, and errors that named the wrong thing. Each case checks
// the exit code and that the message names the file/key and what to do.
#include <gtest/gtest.h>

#include <filesystem>

#include "e2e/corpus.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

CommandResult lmtrain(const std::string& args) {
  return run_command(lmtrain_binary() + " " + args);
}

TEST(ClearErrors, AnAliasAndItsNativeKeyWithDifferentValuesAreAnError) {
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"--lr=1e-3 --optim.lr=2e-3", {"--lr=0.001 and --optim.lr=0.002 both set optim.lr"}},
      {"--batch_size=4 --device_batch_size=8",
       {"--batch_size=4 and --device_batch_size=8 both set train.micro_batch_size"}},
      {"--max_seq_len=32 --max_length=64",
       {"--max_seq_len=32 and --max_length=64", "data.seq_len"}},
      {"--run.dir=a --save_dir=b", {"--run.dir=a and --save_dir=b both set run.dir"}},
  };
  for (const auto& [flags, parts] : cases) expect_refused(lmtrain("train " + flags), parts);
  // The same value twice is not a conflict.
  EXPECT_EQ(lmtrain("train --lr=0.001 --optim.lr=1e-3 --help").exit_code, 0);
}

TEST(ClearErrors, DepthAndAShapeKeyTheyBothSetAreAnError) {
  TempDir dir("lmtrain_clear_depth");
  const std::string data = prepare_synthetic_data(dir.path());
  auto r = lmtrain("train --config " + source_dir() + "/configs/nanochat-d12.yaml --depth=2 " +
                   "--model.n_layer=4 --data.dir=" + data + " --run.dir=" + dir.file("run"));
  expect_refused(r, {"model.depth = 2 (--depth) sets model.n_layer = 2, but model.n_layer = 4"});
  EXPECT_FALSE(fs::exists(dir.file("run/config.yaml")));
  // Depth alone records the shape it trains.
  r = lmtrain("train --config " + source_dir() + "/configs/nanochat-d12.yaml --depth=1 " +
              "--data.dir=" + data + " --run.dir=" + dir.file("d1") +
              " --data.seq_len=32 --model.block_size=32 --train.micro_batch_size=4 " +
              "--train.total_batch_size=128 --train.max_steps=1 --train.eval_every=0 " +
              "--train.threads=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string yaml = read_text(dir.file("d1/config.yaml"));
  EXPECT_TRUE(contains(yaml, "n_layer: 1")) << yaml;
  EXPECT_TRUE(contains(yaml, "n_embd: 64")) << yaml;
}

class ClearErrorsWithRuns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_clear_errors");
    data_ = prepare_synthetic_data(dir_->path());
    base_ = dir_->file("base");
    auto r = lmtrain("train" + flags() + " --run.dir=" + base_ + " --train.max_steps=2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string flags() {
    return tiny_train_flags() + " --data.dir=" + data_ + " --model.tie_embeddings=false";
  }
  static TempDir* dir_;
  static std::string data_, base_;
};
TempDir* ClearErrorsWithRuns::dir_ = nullptr;
std::string ClearErrorsWithRuns::data_, ClearErrorsWithRuns::base_;

TEST_F(ClearErrorsWithRuns, GenerateAndPrepareRefuseRepeatedParametersAndDuplicateKeys) {
  write_text(dir_->file("prompts.jsonl"),
             "{\"prompt\": \"a\"}\n{\"prompt\": \"a\", \"prompt\": \"b\"}\n");
  // A prompt file's bad line is bad data (exit 1, issue 38), like a corpus's below.
  const auto p = lmtrain("generate --checkpoint " + base_ + " --prompts " +
                         dir_->file("prompts.jsonl") + " --max_new_tokens 2");
  EXPECT_EQ(p.exit_code, 1) << p.output;
  EXPECT_TRUE(contains(p.output, dir_->file("prompts.jsonl") + ":2: key \"prompt\" appears twice"))
      << p.output;
  expect_refused(lmtrain("generate --checkpoint " + base_ +
                         " --prompt hi --max_new_tokens 2 --kv_cache=streaming:window=16,window=8"),
                 {"--kv_cache=streaming:window=16,window=8: 'window' is given twice"});
  write_text(dir_->file("docs.jsonl"), "{\"text\": \"one\", \"text\": \"two\"}\n");
  const auto r = lmtrain("prepare --input " + dir_->file("docs.jsonl") + " --output " +
                         dir_->file("docs_data") + " --vocab_size 300");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // a corpus's bad line is bad data (issue 38)
  EXPECT_TRUE(contains(r.output, dir_->file("docs.jsonl") + ":1: key \"text\" appears twice"))
      << r.output;
}

TEST_F(ClearErrorsWithRuns, EvalNamesADataDirAndAnImportWithoutData) {
  expect_refused(lmtrain("eval --checkpoint " + data_),
                 {data_ + " is a prepared data dir", "--data.dir"});
  auto r = lmtrain("import hf " + source_dir() + "/tests/fixtures/hf/qwen2 --output " +
                   dir_->file("imported"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_refused(lmtrain("eval --checkpoint " + dir_->file("imported")),
                 {"records no data.dir", "--data.dir DIR"});
}

TEST_F(ClearErrorsWithRuns, DistillationNamesTheTeacherAndTheCache) {
  const std::string kd = "train" + flags() + " --distill.enabled=true --train.max_steps=1";
  // A LoRA run as the teacher: merge it first.
  const std::string lora = dir_->file("lora");
  auto r = lmtrain("train" + flags() + " --run.dir=" + lora + " --model.init_from=" + base_ +
                   " --lora.rank=2 --train.max_steps=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_refused(lmtrain(kd + " --run.dir=" + dir_->file("s1") + " --distill.teacher=" + lora),
                 {"is a LoRA run's checkpoint", "lmtrain lora merge --checkpoint"});
  // A teacher with a shorter context than the student's windows.
  const std::string short_teacher = dir_->file("short");
  r = lmtrain("train" + flags() + " --run.dir=" + short_teacher +
              " --model.block_size=16 --data.seq_len=16 --train.max_steps=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_refused(
      lmtrain(kd + " --run.dir=" + dir_->file("s2") + " --distill.teacher=" + short_teacher),
      {"has model.block_size 16, shorter than the student's data.seq_len 32"});
  // A directory as the cache.
  expect_refused(lmtrain(kd + " --run.dir=" + dir_->file("s3") + " --distill.cache=" + data_),
                 {"distill.cache = " + data_ + " is not a file", "lmtrain distill-cache"});
  // A cache beside another teacher; a cache without distill.enabled is ignored, with a warning.
  const std::string cache = dir_->file("cache.kdc");
  r = lmtrain("distill-cache" + flags() + " --distill.teacher=" + base_ + " --output " + cache);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_refused(lmtrain(kd + " --run.dir=" + dir_->file("s4") + " --distill.cache=" + cache +
                         " --distill.teacher=" + short_teacher),
                 {"distill.teacher = " + short_teacher, "holds the logits of teacher"});
  r = lmtrain("train" + flags() + " --run.dir=" + dir_->file("s5") + " --train.max_steps=1" +
              " --distill.cache=" + cache);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "is ignored: distill.enabled is false")) << r.output;
}

TEST_F(ClearErrorsWithRuns, ResumeWithAnotherSeqLenAndAnOversizedLoraRank) {
  auto r = lmtrain("train" + flags() + " --run.dir=" + base_ +
                   " --resume=auto --train.max_steps=3 --data.seq_len=16");
  expect_refused(r, {"was trained with data.seq_len = 32, this run has 16", "--data.seq_len=32",
                     "--model.init_from="});
  r = lmtrain("train" + flags() + " --run.dir=" + dir_->file("wide_lora") +
              " --model.init_from=" + base_ + " --lora.rank=40 --train.max_steps=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "lora.rank = 40 exceeds the width of")) << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
