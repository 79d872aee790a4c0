// Mixture-of-Experts under tensor parallelism (dist.tp), with real processes over Gloo, against
// one process on the same global batch. The plan replicates each MoE layer (router, 4 experts of
// top-2 routing, a shared expert) over the TP group and each TP rank routes its sequence shard;
// the expert loads, the balancing loss's mean probabilities and the z-loss are totalled over
// the TP ranks (parallel/tensor_parallel_plan.h). So TP=2 on 2 ranks, and TP=2 x 2 data-parallel
// replicas (ZeRO-1, ZeRO-3) on 4 without the balancing loss, equal one process: loss within 1e-6
// relative at every step, parameters within 1e-5, the logged per-layer loads and balancing losses
// within 1e-6 and the DeepSeek balancing bias equal; with a capacity that drops, TP=2 drops what
// one process drops. A TP=2 checkpoint resumes bit for bit as TP=2 and as one process within 1e-5;
// dist.ep is refused naming its key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_store.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class TensorParallelMoeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_tp_moe");
    data_ = prepare_synthetic_data(dir_->path());
    one_ = run("one", 1, 1, "");
  }
  static void TearDownTestSuite() { delete dir_; }

  // tiny_moe_flags (2 MoE layers, 4 experts, top-2, SwiGLU, z-loss, balancing bias) with a
  // shared expert and a balancing loss weighted enough to steer the router.
  static std::string flags(const std::string& run) {
    return tiny_moe_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --model.moe.shared_experts=1 --model.moe.aux_loss_coef=0.05"
           " --train.total_batch_size=768 --train.max_steps=10 --dist.bucket_mb=0.02"
           " --optim.eps=1e-6 --train.activation_checkpointing=block --train.grad_clip=0.1";
  }
  // A run on `ranks` ranks with dist.tp = tp: world / tp replicas, 2 micro-steps each.
  static std::string run(const std::string& name, int ranks, int tp, const std::string& extra) {
    const std::string dir = dir_->file(name);
    auto r = run_command(lmtrain_on_ranks(ranks, "train") + flags(dir) + extra +
                         " --dist.tp=" + std::to_string(tp) +
                         " --train.micro_batch_size=" + std::to_string(12 / (ranks / tp)));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(fs::exists(dir + "/checkpoints/latest")) << r.output;
    outputs_[name] = r.output;
    return dir;
  }
  static std::string resume_copy(const std::string& from, const std::string& name, int ranks,
                                 int tp) {
    fs::copy(from, dir_->file(name), fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    const std::string dir = run(name, ranks, tp, " --resume=auto");
    EXPECT_NE(outputs_[name].find("resumed from"), std::string::npos) << outputs_[name];
    return dir;
  }
  // A tensor of run's last checkpoint, through the store (a TP checkpoint's slices assembled).
  static at::Tensor tensor(const std::string& run, const std::string& name) {
    auto ckpt =
        train::CheckpointStore::load(run + "/checkpoints/latest", false, {"model.safetensors"});
    const auto& f = ckpt.files.at("model.safetensors");
    const auto it = f.tensors.find(name);
    return it == f.tensors.end() ? at::Tensor() : it->second;
  }
  // The per-layer MoE statistics of every step (metrics.jsonl) equal `base`'s (one process);
  // the balancing loss only where both ran the same forwards (it is a product of means over a
  // forward's tokens, so data-parallel replicas' smaller forwards give another value).
  static void expect_moe_metrics_match(const std::string& run, const std::string& base,
                                       bool same_forwards = true) {
    const auto got = step_records(run), want = step_records(base);
    ASSERT_EQ(got.size(), want.size()) << run;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i]["moe"].size(), 2u) << got[i].dump();
      for (size_t l = 0; l < 2; ++l) {
        for (const std::string key :
             {"load_min", "load_max", "load_cv", "dropped", "aux_loss", "z_loss"}) {
          if (key == "aux_loss" && !same_forwards) continue;
          const double a = got[i]["moe"][l][key], b = want[i]["moe"][l][key];
          EXPECT_NEAR(a, b, 1e-6 * std::max(1.0, std::abs(b))) << run << " step " << i << key;
        }
      }
    }
  }

  static TempDir* dir_;
  static std::string data_, one_;
  static std::map<std::string, std::string> outputs_;
};
TempDir* TensorParallelMoeTest::dir_ = nullptr;
std::string TensorParallelMoeTest::data_, TensorParallelMoeTest::one_;
std::map<std::string, std::string> TensorParallelMoeTest::outputs_;

TEST_F(TensorParallelMoeTest, Tp2EqualsOneProcessWithItsBalancingStatistics) {
  const std::string tp = run("tp2", 2, 2, "");
  EXPECT_NE(outputs_["tp2"].find("tensor parallelism: tp=2"), std::string::npos) << outputs_["tp2"];
  expect_run_matches(tp, one_, 1e-6, 1e-5);
  expect_moe_metrics_match(tp, one_);
  // The balancing bias (a buffer, stepped by the sign of each expert's load against the mean)
  // moved, and moved as one process's: the loads the TP ranks saw were the whole batch's.
  for (const char* name : {"transformer.h.0.mlp.expert_bias", "transformer.h.1.mlp.expert_bias"}) {
    const auto got = tensor(tp, name), want = tensor(one_, name);
    ASSERT_TRUE(got.defined() && want.defined()) << name;
    EXPECT_GT(want.abs().max().item<double>(), 0.0) << name;
    EXPECT_TRUE(got.equal(want)) << name << got << want;
  }
}

// A capacity that drops (model.moe.capacity_factor=0.75): the TP ranks gather their expert
// choices and keep their part of one process's plan, so they drop the same assignments.
TEST_F(TensorParallelMoeTest, Tp2WithACapacityDropsWhatOneProcessDrops) {
  const std::string cap = " --model.moe.capacity_factor=0.75";
  const std::string one = run("one_capacity", 1, 1, cap);
  const std::string tp = run("tp2_capacity", 2, 2, cap);
  expect_run_matches(tp, one, 1e-6, 1e-5);
  expect_moe_metrics_match(tp, one);
  const auto first = step_records(one).front();
  EXPECT_GT(first["moe"][0]["dropped"].get<double>(), 0.0) << first.dump();
}

// TP=2 inside 2 data-parallel replicas with ZeRO-1 and with ZeRO-3: the TP-totalled loads are
// summed over the data-parallel ranks once more, as two replicas of one process would. Without the
// balancing loss, as MoeTrainTest's data-parallel runs: it is a product of means over each
// forward's tokens, and a replica's forward holds half of one process's (a data-parallel property,
// not TP's: TP=2 alone equals one process with it, above).
TEST_F(TensorParallelMoeTest, Tp2TimesTwoReplicasOnFourRanksEqualsOneProcess) {
  const std::string no_aux = " --model.moe.aux_loss_coef=0";
  const std::string one = run("one_no_aux", 1, 1, no_aux);
  for (const std::string zero : {"1", "3"}) {
    const std::string name = "tp2_dp2_zero" + zero;
    const std::string four = run(name, 4, 2, no_aux + " --dist.zero=" + zero);
    EXPECT_NE(outputs_[name].find("2 data-parallel replica(s)"), std::string::npos)
        << outputs_[name];
    expect_run_matches(four, one, 1e-6, 1e-5);
    expect_moe_metrics_match(four, one, /*same_forwards=*/false);
  }
}

// A TP=2 checkpoint of step 5 (the experts saved whole, once; the split layers as slices):
// resumed as TP=2 it ends bit for bit as the uninterrupted TP=2 run (parameters, TP rank 1's
// moments, every loss); resumed as one process within 1e-5 of the uninterrupted one.
TEST_F(TensorParallelMoeTest, CheckpointResumesBitwiseAndAsOneProcess) {
  const std::string tp = run("tp2_full", 2, 2, "");
  const std::string at5 = run("tp2_at5", 2, 2, " --train.stop_at_step=5");
  const std::string same = resume_copy(at5, "tp2_resumed", 2, 2);
  const std::string a = same + "/checkpoints/latest", b = tp + "/checkpoints/latest";
  EXPECT_EQ(max_param_rel_diff(a, b), 0.0);
  EXPECT_EQ(max_param_rel_diff(a, b, "optim.rank1.safetensors"), 0.0);
  EXPECT_EQ(logged_losses(same), logged_losses(tp));
  expect_run_matches(resume_copy(at5, "tp2_as_one", 1, 1), one_, 1e-5, 1e-5);
}

TEST_F(TensorParallelMoeTest, ExpertParallelismIsRefusedNamingTheKey) {
  auto r = run_command(lmtrain_on_ranks(2, "train") + flags(dir_->file("refused")) +
                       " --dist.ep=2 --dist.tp=2 --train.micro_batch_size=12");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("'dist.ep' > 1 (under dist.tp each TP rank holds every expert"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
