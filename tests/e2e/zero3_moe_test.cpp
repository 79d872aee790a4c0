// ZeRO-3 (dist.zero=3) with MoE blocks, real processes over Gloo (parallel/moe_shard.h): with
// expert parallelism (dist.ep=2 on 2 ranks: the shared region sharded and gathered per block,
// each rank's experts local and whole) and without (the router and all experts sharded with
// their block), each equal to ZeRO-2 in the same layout bit for bit and to one process within
// float tolerance; under bf16 the routers, which the layer reads in fp32, are gathered exactly;
// a resume of the EP run is bitwise, its checkpoint resumes as one process, and the sharded
// checkpoint of the run without EP resumes at dist.ep=2, each resume through the sharded
// set-up (each rank's shard and its own experts read by range); model.init_from under EP is
// read the same way and trains as ZeRO-2. HSDP with dist.ep=2 (4 ranks) is ZeRO-2 with EP
// within float tolerance, through a resume.
// A 2-layer model, both layers MoE (4 SwiGLU experts, top-2, dropless, z-loss and the
// balancing bias on, as tests/e2e/moe_train_test.cpp), 6 steps of 2 micro-steps per rank,
// blocks recomputed in backward, clipping that bites.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "checkpoint/checkpoint_store.h"
#include "core/safetensors.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class Zero3MoeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_zero3_moe");
    data_ = prepare_synthetic_data(dir_->path());
    one_ = dir_->file("one");
    auto r = run_command(lmtrain_binary() + " train" + flags(one_));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  // 16 windows of 32 tokens per step: one process takes 2 micro-batches of 8, two ranks 2 of 4.
  // optim.eps=1e-6: see ddp_test.cpp.
  static std::string flags(const std::string& run) {
    return tiny_moe_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --train.max_steps=6 --dist.bucket_mb=0.02 --optim.eps=1e-6"
           " --train.activation_checkpointing=block --train.grad_clip=0.1";
  }
  // A run on 2 ranks (2 micro-steps of 4 windows each), or 4 (of 2); its output is kept in
  // outputs_.
  static std::string run_on(const std::string& name, const std::string& extra, int ranks = 2) {
    const std::string dir = dir_->file(name);
    auto r = run_command(lmtrain_on_ranks(ranks, "train") + flags(dir) + extra +
                         " --train.micro_batch_size=" + std::to_string(8 / ranks));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    outputs_[name] = r.output;
    return dir;
  }
  static void expect_bitwise(const std::string& a, const std::string& b) {
    EXPECT_EQ(max_param_rel_diff(a + "/checkpoints/latest", b + "/checkpoints/latest"), 0.0);
    EXPECT_EQ(max_param_rel_diff(a + "/checkpoints/latest", b + "/checkpoints/latest",
                                 "optim.rank0.safetensors"),
              0.0);
    const auto la = logged_losses(a), lb = logged_losses(b);
    ASSERT_FALSE(la.empty());
    EXPECT_EQ(la, lb);
  }
  static void expect_zero3_log(const std::string& name) {
    const std::string& out = outputs_[name];
    EXPECT_NE(out.find("optimizer: adamw-zero3"), std::string::npos) << out;
    EXPECT_NE(out.find("ZeRO-3: 3 units (root + 2 blocks) sharded over 2 ranks"), std::string::npos)
        << out;
    // Gathered block parameters at most: the computing block and the prefetched one (the
    // balance terms' gradient hooks fire in the graph's order, not all at once).
    const int64_t peak = logged_count(out, "zero3_gathered_peak_bytes");
    const int64_t block = logged_count(out, "largest block unit");
    ASSERT_GT(block, 0) << out;
    EXPECT_LE(peak, 2 * block) << out;
  }

  // A ZeRO-3 resume under expert parallelism takes the sharded set-up: each rank reads its
  // shard of the shared region and its own experts whole, by range, the model never whole.
  static void expect_sharded_resume(const std::string& out) {
    EXPECT_NE(out.find("ZeRO-3 sharded set-up: the model built unwritten"), std::string::npos)
        << out;
    EXPECT_NE(out.find("(this rank's shard only, read by range)"), std::string::npos) << out;
  }

  static TempDir* dir_;
  static std::string data_, one_;
  static std::map<std::string, std::string> outputs_;
};
TempDir* Zero3MoeTest::dir_ = nullptr;
std::string Zero3MoeTest::data_, Zero3MoeTest::one_;
std::map<std::string, std::string> Zero3MoeTest::outputs_;

// dist.ep=2 (on 2 ranks, and on 4 as 2 replicas): ZeRO-3 equals ZeRO-2 with EP bit for bit,
// and one process within tolerance; its checkpoint (the shared region in ZeRO-3 shards, each EP
// rank's experts in its own files: checkpoint/sharded_save.h) resumes bitwise on 2 ranks and as
// one process. HSDP 2x2 with ep=2 within tolerance.
TEST_F(Zero3MoeTest, ExpertParallelEqualsZero2BitwiseResumesAndReshardsToOneProcess) {
  const std::string z2 = run_on("ep_z2", " --dist.ep=2 --dist.zero=2");
  const std::string z3 = run_on("ep_z3", " --dist.ep=2 --dist.zero=3");
  expect_zero3_log("ep_z3");
  EXPECT_NE(outputs_["ep_z3"].find("this rank holds experts [0, 2) of 4"), std::string::npos);
  expect_bitwise(z3, z2);
  expect_run_matches(z3, one_, 1e-6, 1e-5);
  // 4 ranks as 2 replicas of ep=2: the experts' gradients are averaged over their replicas.
  const std::string z2r = run_on("ep_z2_4", " --dist.ep=2 --dist.zero=2", 4);
  const std::string z3r = run_on("ep_z3_4", " --dist.ep=2 --dist.zero=3", 4);
  expect_bitwise(z3r, z2r);
  // HSDP 2x2 with ep=2: shard groups {0, 1}, {2, 3}, experts placed by rank % ep as without
  // HSDP. The shared region's gradient is averaged within a group, then across the groups: two
  // means round unlike ZeRO-2's one 4-rank mean, hence float tolerance. Stopped at step 3 and
  // resumed: its checkpoint holds the first group's optimizer shards (the others are copies).
  const std::string hsdp_flags = " --dist.ep=2 --dist.zero=3 --dist.shard_group_size=2";
  const std::string hsdp = run_on("ep_hsdp", hsdp_flags + " --train.stop_at_step=3", 4);
  EXPECT_NE(outputs_["ep_hsdp"].find("sharded over 2 ranks, replicated over 2 groups (HSDP)"),
            std::string::npos)
      << outputs_["ep_hsdp"];
  EXPECT_TRUE(fs::exists(hsdp + "/checkpoints/latest/optim.rank1.safetensors"));
  EXPECT_FALSE(fs::exists(hsdp + "/checkpoints/latest/optim.rank2.safetensors"));
  // Model state per rank: half the shared region (a group of 2 shards it) plus 2 experts whole.
  auto hplan =
      run_command(lmtrain_binary() + " plan --nproc 4 --device_memory 1" +
                  flags(dir_->file("unused")) + hsdp_flags + " --train.micro_batch_size=2");
  ASSERT_EQ(hplan.exit_code, 0) << hplan.output;
  // --device_memory's table lists HSDP with EP among the layouts 4 ranks allow.
  for (const std::string row : {"| EP 2 + ZeRO-3 HSDP 2x2 |", "| EP 4 + ZeRO-3 |"}) {
    EXPECT_NE(hplan.output.find(row), std::string::npos) << row << "\n" << hplan.output;
  }
  const int64_t hsdp_state = logged_count(outputs_["ep_hsdp"], "model_state_bytes_per_rank");
  EXPECT_LE(std::abs(logged_count(hplan.output, "model_state_bytes_per_rank") - hsdp_state),
            hsdp_state / 10)
      << hplan.output;
  auto h = run_command(lmtrain_on_ranks(4, "train") + flags(hsdp) + hsdp_flags +
                       " --train.micro_batch_size=2 --resume=auto");
  ASSERT_EQ(h.exit_code, 0) << h.output;
  expect_sharded_resume(h.output);
  expect_run_matches(hsdp, z2r, 1e-6, 1e-5);

  // Model state per rank: half the shared region plus this rank's 2 experts whole, as
  // `lmtrain plan` accounts it before the run (train/memory_plan.h).
  auto plan = run_command(lmtrain_binary() + " plan --nproc 2" + flags(dir_->file("unused")) +
                          " --dist.ep=2 --dist.zero=3 --train.micro_batch_size=4");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const int64_t measured = logged_count(outputs_["ep_z3"], "model_state_bytes_per_rank");
  ASSERT_GT(measured, 0) << outputs_["ep_z3"];
  EXPECT_LE(std::abs(logged_count(plan.output, "model_state_bytes_per_rank") - measured),
            measured / 10)
      << plan.output;
  EXPECT_LT(measured, logged_count(outputs_["ep_z2"], "model_state_bytes_per_rank"));
  // The checkpoint holds every expert, whole.
  const auto ckpt = train::CheckpointStore::load(z3 + "/checkpoints/latest", false,
                                                 {"model.safetensors"});  // from its EP shards
  const auto& model = ckpt.files.at("model.safetensors");
  EXPECT_EQ(model.tensors.at("transformer.h.1.mlp.experts.c_fc.weight").size(0), 4);

  // Stopped at step 3, resumed on 2 ranks: bit for bit the uninterrupted run.
  const std::string resumed =
      run_on("ep_z3_resumed", " --dist.ep=2 --dist.zero=3 --train.stop_at_step=3");
  const std::string as_one = dir_->file("ep_z3_as_one");
  fs::copy(resumed, as_one, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  auto r = run_command(lmtrain_on_ranks(2, "train") + flags(resumed) +
                       " --dist.ep=2 --dist.zero=3 --train.micro_batch_size=4 --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_sharded_resume(r.output);
  for (const char* file :
       {"model.safetensors", "optim.rank0.safetensors", "optim.rank1.safetensors"}) {
    EXPECT_EQ(max_param_rel_diff(resumed + "/checkpoints/latest", z3 + "/checkpoints/latest", file),
              0.0)
        << file;
  }

  // The step-3 checkpoint resumed by one process (replicated AdamW, every expert).
  auto one = run_command(lmtrain_binary() + " train" + flags(as_one) + " --resume=auto");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("resumed from"), std::string::npos) << one.output;
  EXPECT_LE(max_param_rel_diff(as_one + "/checkpoints/latest", one_ + "/checkpoints/latest"), 1e-5);

  // model.init_from under expert parallelism (one process's checkpoint, every expert in each
  // stack): ZeRO-3 reads each rank's experts' rows and its shard of the rest by range, and
  // trains bit for bit as ZeRO-2 does from the whole load.
  const std::string init = " --dist.ep=2 --model.init_from=" + one_ + " --train.max_steps=2";
  const std::string i2 = run_on("init_z2", init + " --dist.zero=2");
  const std::string i3 = run_on("init_z3", init + " --dist.zero=3");
  EXPECT_NE(outputs_["init_z3"].find("ZeRO-3 sharded set-up: the model built unwritten"),
            std::string::npos)
      << outputs_["init_z3"];
  EXPECT_NE(outputs_["init_z3"].find("(this rank's shard only, read by range)"), std::string::npos)
      << outputs_["init_z3"];
  expect_bitwise(i3, i2);
}

// dist.ep=1: MoE blocks are units like dense ones (router, experts, all sharded); fp32 and bf16
// equal ZeRO-2 bit for bit (bf16 gathers the blocks' linear weights in bf16, the routers in
// fp32), fp32 equals one process within tolerance, and its sharded checkpoint resumes at
// dist.ep=2.
TEST_F(Zero3MoeTest, WithoutExpertParallelEqualsZero2BitwiseAndReshardsToExpertParallel) {
  const std::string z2 = run_on("z2", " --dist.zero=2");
  const std::string z3 = run_on("z3", " --dist.zero=3");
  expect_zero3_log("z3");
  expect_bitwise(z3, z2);
  expect_run_matches(z3, one_, 1e-6, 1e-5);

  // Its sharded checkpoint (every expert in the shards) resumes under expert parallelism, each
  // rank taking its experts' slices of the parameters and moments: stopped at step 3, resumed
  // at dist.ep=2 with ZeRO-3, within tolerance of one process.
  const std::string at3 = run_on("z3_at3", " --dist.zero=3 --train.stop_at_step=3");
  EXPECT_TRUE(fs::exists(at3 + "/checkpoints/latest/model.rank1.safetensors"));
  auto r = run_command(lmtrain_on_ranks(2, "train") + flags(at3) +
                       " --dist.ep=2 --dist.zero=3 --train.micro_batch_size=4 --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_sharded_resume(r.output);
  EXPECT_LE(max_param_rel_diff(at3 + "/checkpoints/latest", one_ + "/checkpoints/latest"), 1e-5);

  const std::string bf16 = " --train.precision=bf16 --train.max_steps=3";
  const std::string b2 = run_on("bf16_z2", bf16 + " --dist.zero=2");
  const std::string b3 = run_on("bf16_z3", bf16 + " --dist.zero=3");
  EXPECT_NE(outputs_["bf16_z3"].find("linear weights gathered in bf16"), std::string::npos)
      << outputs_["bf16_z3"];
  expect_bitwise(b3, b2);
}

}  // namespace
}  // namespace lmtrain::testing
