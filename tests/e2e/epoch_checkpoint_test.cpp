// checkpoint.every_epoch (the temporal-encoder pretrainer's epoch_N_step_M checkpoints, issue
// 26), with the real binary on a tiny LM run of 2 epochs: each epoch's last step is saved as a
// complete, evaluated checkpoint and linked as epoch_N_step_M; best is the lowest val loss;
// keep_last=1 keeps the epoch links' targets; a run resumed from an epoch link (as a path, or
// by its bare name within the run dir) ends bitwise where the uninterrupted run ended.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "checkpoint/checkpoint_store.h"
#include "core/sha256.h"
#include "e2e/corpus.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

nlohmann::json epoch_test_meta(const std::string& ckpt) {
  return nlohmann::json::parse(read_text(ckpt + "/meta.json"));
}

// val_loss by step, from metrics.jsonl.
std::map<int64_t, double> logged_val_losses(const std::string& run_dir) {
  std::map<int64_t, double> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) out[j["step"].get<int64_t>()] = j["val_loss"].get<double>();
  }
  return out;
}

std::string epoch_link(const std::string& run, int64_t epoch, int64_t step) {
  return run + "/checkpoints/" + train::CheckpointStore::epoch_link_name(epoch, step);
}

class EpochCheckpoints : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_epoch_ckpt");
    data_ = prepare_synthetic_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }

  // 2 epochs, a checkpoint every 5 steps besides the epochs', one step dir kept.
  static CommandResult train(const std::string& run, const std::string& extra = "") {
    return run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
                       " --run.dir=" + run +
                       " --train.max_steps=0 --train.epochs=2 --checkpoint.every_epoch=true"
                       " --checkpoint.every=5 --checkpoint.keep_last=1" +
                       extra);
  }
  // The steps per epoch the run's log states.
  static int64_t steps_per_epoch(const std::string& output) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(output, m, std::regex("\\((\\d+) steps/epoch\\)"))) << output;
    return m.empty() ? 0 : std::stoll(m[1]);
  }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* EpochCheckpoints::dir_ = nullptr;
std::string EpochCheckpoints::data_;

TEST_F(EpochCheckpoints, EachEpochIsLinkedEvaluatedKeptAndResumable) {
  const std::string run = dir_->file("run");
  auto r = train(run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const int64_t S = steps_per_epoch(r.output);
  ASSERT_GT(S, 5) << "an epoch must span more than checkpoint.every steps";

  // Both epochs' links, relative, to complete checkpoints of the epochs' last steps.
  const auto vals = logged_val_losses(run);
  for (int64_t epoch : {1, 2}) {
    const std::string link = epoch_link(run, epoch, epoch * S);
    ASSERT_TRUE(fs::is_symlink(link)) << link;
    EXPECT_EQ(fs::read_symlink(link).string(), train::CheckpointStore::step_dir_name(epoch * S));
    EXPECT_NO_THROW(train::CheckpointStore::verify(link));
    const auto meta = epoch_test_meta(link);
    EXPECT_EQ(meta["step"], epoch * S);
    EXPECT_EQ(meta["epoch"], epoch);
    ASSERT_TRUE(meta["val_loss"].is_number()) << "epoch " << epoch << " was not evaluated";
    ASSERT_TRUE(vals.count(epoch * S)) << "no eval record at step " << epoch * S;
    EXPECT_EQ(meta["val_loss"].get<double>(), vals.at(epoch * S));
  }
  // best: the lower of the two (the only evaluated checkpoints: eval_every is 0).
  const double v1 = vals.at(S), v2 = vals.at(2 * S);
  EXPECT_EQ(fs::read_symlink(run + "/checkpoints/best").string(),
            train::CheckpointStore::step_dir_name(v1 <= v2 ? S : 2 * S))
      << v1 << " " << v2;
  EXPECT_EQ(vals.size(), 2u);
  // keep_last=1: of the checkpoints every 5 steps only the epochs' remain (2S is the latest).
  const std::vector<std::string> want = {train::CheckpointStore::step_dir_name(S),
                                         train::CheckpointStore::step_dir_name(2 * S)};
  EXPECT_EQ(checkpoint_steps(run), want);
  EXPECT_TRUE(contains(r.output, "removing old checkpoint")) << r.output;

  // Resume from epoch 1's link into another run dir: it ends where the uninterrupted run ended.
  const std::string final_model =
      core::sha256_file_hex(run + "/checkpoints/latest/model.safetensors");
  const std::string final_optim =
      core::sha256_file_hex(run + "/checkpoints/latest/optim.rank0.safetensors");
  const std::string other = dir_->file("resumed");
  r = train(other, " --checkpoint.resume=" + epoch_link(run, 1, S));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(
      r.output, "resumed from " + run + "/checkpoints/" + train::CheckpointStore::step_dir_name(S)))
      << r.output;
  EXPECT_EQ(core::sha256_file_hex(other + "/checkpoints/latest/model.safetensors"), final_model);
  EXPECT_EQ(core::sha256_file_hex(other + "/checkpoints/latest/optim.rank0.safetensors"),
            final_optim);
  EXPECT_TRUE(fs::is_symlink(epoch_link(other, 2, 2 * S)));
  EXPECT_FALSE(fs::exists(epoch_link(other, 1, S)));  // epoch 1 ended before the resume

  // The bare name resumes within the run dir, like --resume=step_XXXXXXXX. That rewinds over
  // epoch 2's checkpoint, so it takes --overwrite, which moves it aside first (issue 38).
  r = train(run, " --overwrite --resume=" + train::CheckpointStore::epoch_link_name(1, S));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(
      core::sha256_file_hex(run + "/previous-1/checkpoints/" +
                            train::CheckpointStore::step_dir_name(2 * S) + "/model.safetensors"),
      final_model);
  EXPECT_TRUE(contains(r.output, "resumed from")) << r.output;
  EXPECT_EQ(core::sha256_file_hex(run + "/checkpoints/latest/model.safetensors"), final_model);
}

}  // namespace
}  // namespace lmtrain::testing
