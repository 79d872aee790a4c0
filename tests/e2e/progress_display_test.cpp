// Progress of the long commands (issue 25, core/progress.h), through a pipe as CI and logs see
// them: plain lines (no carriage return, no escape code) ending in each phase's "done:" line;
// --quiet silences them and nothing else; LMTRAIN_PROGRESS=terminal draws the in-place form.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "e2e/corpus.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

class ProgressE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_progress");
    data_ = prepare_synthetic_data(dir_->path());
    run_ = dir_->file("run");
    auto r = lmtrain("train" + tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run_ +
                     " --train.max_steps=2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static CommandResult lmtrain(const std::string& args) {
    return run_command(lmtrain_binary() + " " + args);
  }
  static TempDir* dir_;
  static std::string data_, run_;
};
TempDir* ProgressE2E::dir_ = nullptr;
std::string ProgressE2E::data_, ProgressE2E::run_;

// Plain lines only, and each of `done` ("prepare: reading", ...) ends with its "done:" line.
void expect_plain_progress(const CommandResult& r, const std::vector<std::string>& done) {
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;
  for (const auto& what : done) {
    EXPECT_TRUE(contains(r.output, "\n" + what + " done: ") ||
                r.output.rfind(what + " done: ", 0) == 0)
        << what << "\n"
        << r.output;
  }
}

TEST_F(ProgressE2E, PrepareShowsEachPhaseAndQuietSilencesIt) {
  // 30 small files, so reading has steps of its own.
  const std::string in = dir_->file("many");
  std::filesystem::create_directories(in);
  for (int i = 0; i < 30; ++i) {
    std::ofstream(in + "/f" + std::to_string(i) + ".txt")
        << "file " << i << " says hello to the progress display, line after line.\n";
  }
  auto r = lmtrain("prepare --input " + in + " --output " + dir_->file("p1") + " --vocab_size 300");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_plain_progress(
      r, {"prepare: checksums", "prepare: sampling for the tokenizer", "prepare: encoding"});

  r = lmtrain("prepare --quiet --input " + in + " --output " + dir_->file("p2") +
              " --vocab_size 300");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "prepare: encoding")) << r.output;
  EXPECT_FALSE(contains(r.output, " done: ")) << r.output;
  EXPECT_TRUE(contains(r.output, "prepared " + dir_->file("p2") + ": 30 documents")) << r.output;

  // The terminal form, forced into the pipe: redrawn in place with "\r", no escape codes.
  r = run_command("LMTRAIN_PROGRESS=terminal " + lmtrain_binary() + " prepare --input " + in +
                  " --output " + dir_->file("p3") + " --vocab_size 300");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "\rprepare: encoding [")) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;
}

TEST_F(ProgressE2E, EvalGenerateExportImportAndDistillCacheShowProgress) {
  auto r = lmtrain("eval --checkpoint " + run_ + " --batches 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_plain_progress(r, {"eval"});
  EXPECT_TRUE(contains(r.output, "eval done: 3 batches in ")) << r.output;
  r = lmtrain("eval --quiet --checkpoint " + run_ + " --batches 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "eval done")) << r.output;
  EXPECT_TRUE(contains(r.output, "perplexity: ")) << r.output;

  const std::string prompts = dir_->file("prompts.jsonl");
  write_text(prompts, "{\"prompt\": \"the\"}\n{\"prompt\": \"a cat\"}\n{\"prompt\": \"it\"}\n");
  r = lmtrain("generate --checkpoint " + run_ + " --prompts " + prompts +
              " --max_new_tokens 4 --batch_size 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_plain_progress(r, {"generate"});
  EXPECT_TRUE(contains(r.output, "generate done: 3 prompts in ")) << r.output;

  r = lmtrain("export hf " + run_ + " " + dir_->file("hf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_plain_progress(r, {"export hf: writing"});
  r = lmtrain("import hf " + dir_->file("hf") + " --output " + dir_->file("imported"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_plain_progress(r, {"import hf: reading"});
  r = lmtrain("import hf " + dir_->file("hf") + " --quiet --output " + dir_->file("imported2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "import hf: reading")) << r.output;

  r = lmtrain("distill-cache" + tiny_train_flags() + " --data.dir=" + data_ +
              " --distill.teacher=" + run_ + " --top_k 4 --output " + dir_->file("cache.kdc"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_plain_progress(r, {"distill-cache"});
  EXPECT_TRUE(contains(r.output, " windows in ")) << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
