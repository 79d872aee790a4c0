// Resume equivalence and checkpoint safety, with the real binary on real files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/sha256.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class ResumeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_resume");
    data_ = prepare_synthetic_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string train(const std::string& run, const std::string& extra, int expect = 0) {
    auto r = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
                         " --run.dir=" + run +
                         " --model.dropout=0.1 --train.workers=2 --train.max_steps=40" + extra);
    EXPECT_EQ(r.exit_code, expect) << r.output;
    return r.output;
  }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* ResumeTest::dir_ = nullptr;
std::string ResumeTest::data_;

TEST_F(ResumeTest, StoppedAndResumedRunEqualsUninterruptedBitwise) {
  const std::string a = dir_->file("uninterrupted"), b = dir_->file("resumed");
  train(a, "");
  train(b, " --train.stop_at_step=20");
  ASSERT_EQ(step_records(b).size(), 20u);
  const std::string out = train(b, " --resume=auto");
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;

  auto ra = step_records(a), rb = step_records(b);
  ASSERT_EQ(ra.size(), 40u);
  ASSERT_EQ(rb.size(), 40u);
  for (size_t i = 0; i < 40; ++i) {
    EXPECT_EQ(ra[i]["step"], rb[i]["step"]);
    // Bitwise: the doubles themselves, not a tolerance.
    EXPECT_EQ(ra[i]["loss"].get<double>(), rb[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(ra[i]["lr"].get<double>(), rb[i]["lr"].get<double>()) << "step " << i + 1;
  }
  // The final weights and optimizer state are byte-identical files.
  for (const char* f : {"model.safetensors", "optim.rank0.safetensors"}) {
    EXPECT_EQ(core::sha256_file_hex(a + "/checkpoints/latest/" + f),
              core::sha256_file_hex(b + "/checkpoints/latest/" + f))
        << f;
  }
}

TEST_F(ResumeTest, CorruptCheckpointIsRefusedOrFallsBack) {
  const std::string run = dir_->file("corrupt");
  train(run, " --checkpoint.every=10");
  const std::string latest = fs::canonical(run + "/checkpoints/latest").string();
  {
    std::fstream f(latest + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  auto r = run_command(lmtrain_binary() + " eval --checkpoint " + latest);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;

  // Resuming falls back to the previous complete checkpoint, with a warning.
  const std::string out = train(run, " --resume=auto --train.max_steps=40");
  EXPECT_NE(out.find("warning"), std::string::npos) << out;
  EXPECT_NE(out.find("step 30"), std::string::npos) << out;
}

TEST_F(ResumeTest, IncompatibleModelShapeIsAClearError) {
  const std::string run = dir_->file("shape");
  train(run, " --train.stop_at_step=5");
  const std::string out = train(run, " --resume=auto --model.n_layer=3", 2);
  EXPECT_NE(out.find("incompatible"), std::string::npos) << out;
  EXPECT_NE(out.find("model.n_layer: checkpoint has 2, config has 3"), std::string::npos) << out;
}

TEST_F(ResumeTest, ResumeFromMissingPathIsAUsageError) {
  const std::string out = train(dir_->file("missing"), " --resume=/nonexistent/ckpt", 2);
  EXPECT_NE(out.find("/nonexistent/ckpt"), std::string::npos) << out;
}

}  // namespace
}  // namespace lmtrain::testing
