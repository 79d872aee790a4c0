// ZeRO-3 (dist.zero=3) and HSDP with real processes over Gloo: equal to ZeRO-2 bit for bit at
// 2 and 3 ranks (an all-gather does no arithmetic; the reduce-scatter is ZeRO-2's), equal to
// one process within float tolerance, HSDP 2x2 likewise, a resume in the same layout bit for
// bit, the model state per rank from the log's byte accounting, and the clear refusals.
// Few launches of a 2-layer model: every case shares its runs with the others.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

// The validation losses a run logged (metrics.jsonl's eval records), in step order.
std::vector<double> zero3_val_losses(const std::string& run_dir) {
  std::vector<double> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) out.push_back(j["val_loss"].get<double>());
  }
  return out;
}

class Zero3Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_zero3");
    data_ = prepare_synthetic_data(dir_->path());
    one_ = dir_->file("one");
    auto r = run_command(train(1) + flags(one_) + " --train.micro_batch_size=12");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  // 24 windows of 32 tokens per step, 2 micro-steps of accumulation at every world size used;
  // blocks recomputed in backward, tied embeddings (gpt2-tiny), clipping that bites.
  // optim.eps=1e-6: see ddp_test.cpp.
  static std::string flags(const std::string& run) {
    return tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --train.total_batch_size=768 --train.max_steps=10 --dist.bucket_mb=0.02"
           " --optim.eps=1e-6 --train.activation_checkpointing=block --train.grad_clip=0.1";
  }
  static std::string train(int ranks) { return lmtrain_on_ranks(ranks, "train"); }
  // A run at `ranks` ranks, each accumulating 2 micro-steps.
  static std::string run(const std::string& name, int ranks, const std::string& extra) {
    const std::string dir = dir_->file(name);
    auto r = run_command(train(ranks) + flags(dir) + extra +
                         " --train.micro_batch_size=" + std::to_string(12 / ranks));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(fs::exists(dir + "/checkpoints/latest")) << r.output;
    outputs_[name] = r.output;
    return dir;
  }
  static void expect_bitwise(const std::string& a, const std::string& b, size_t steps = 10) {
    EXPECT_EQ(max_param_rel_diff(a + "/checkpoints/latest", b + "/checkpoints/latest"), 0.0);
    EXPECT_EQ(max_param_rel_diff(a + "/checkpoints/latest", b + "/checkpoints/latest",
                                 "optim.rank0.safetensors"),
              0.0);
    const auto la = logged_losses(a), lb = logged_losses(b);
    ASSERT_EQ(la.size(), steps);
    EXPECT_EQ(la, lb);
  }
  // Loss within 1e-6 relative at every step, parameters within 1e-5 after 10 steps.
  static void expect_matches_one_process(const std::string& run) {
    expect_run_matches(run, one_, 1e-6, 1e-5);
  }

  static TempDir* dir_;
  static std::string data_, one_;
  static std::map<std::string, std::string> outputs_;
};
TempDir* Zero3Test::dir_ = nullptr;
std::string Zero3Test::data_, Zero3Test::one_;
std::map<std::string, std::string> Zero3Test::outputs_;

// Evaluated at steps 5 and 10: ZeRO-3 evaluates block by block (FullyShard::begin_forward_only),
// never whole, and its validation losses are ZeRO-2's bit for bit.
TEST_F(Zero3Test, EqualsZero2BitwiseAt2And3RanksAndOneProcessWithinTolerance) {
  for (int ranks : {2, 3}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const std::string n = std::to_string(ranks);
    const std::string eval = " --train.eval_every=5";
    const std::string z2 = run("z2_" + n, ranks, " --dist.zero=2" + eval);
    // At 3 ranks the gathered blocks stay until backward (dist.reshard_after_forward=false).
    const std::string z3 =
        run("z3_" + n, ranks,
            " --dist.zero=3" + eval +
                std::string(ranks == 3 ? " --dist.reshard_after_forward=false" : ""));
    const auto val2 = zero3_val_losses(z2);
    EXPECT_EQ(val2.size(), 2u) << outputs_["z2_" + n];
    EXPECT_EQ(zero3_val_losses(z3), val2);
    const std::string& out = outputs_["z3_" + n];
    EXPECT_NE(out.find("optimizer: adamw-zero3"), std::string::npos) << out;
    EXPECT_NE(out.find("ZeRO-3: 3 units (root + 2 blocks) sharded over " + n + " ranks"),
              std::string::npos)
        << out;
    expect_bitwise(z3, z2);
    expect_matches_one_process(z3);
  }
  // Bytes of model state per rank: 16 per parameter over N, plus the padding of the flat
  // buffers (to 16 N elements): the log's accounting against the parameter count.
  const std::string& out = outputs_["z3_2"];
  const int64_t state = logged_count(out, "model_state_bytes_per_rank");
  const int64_t params = logged_count(out, "trained_parameters");
  ASSERT_GT(state, 0) << out;
  ASSERT_GT(params, 0) << out;
  EXPECT_GE(state, 16 * params / 2);
  EXPECT_LE(state, 16 * params / 2 * 1.05) << out;
  // Gathered block parameters at most, in steps and evaluations: the computing block and the
  // prefetched one.
  const int64_t peak = logged_count(out, "zero3_gathered_peak_bytes");
  const int64_t block = logged_count(out, "largest block unit");
  ASSERT_GT(block, 0) << out;
  EXPECT_GT(peak, 0) << out;
  EXPECT_LE(peak, 2 * block) << out;
}

TEST_F(Zero3Test, Hsdp2x2EqualsOneProcessAndAResumeIsBitwise) {
  const std::string hsdp = run("hsdp", 4, " --dist.zero=3 --dist.shard_group_size=2");
  EXPECT_NE(outputs_["hsdp"].find("replicated over 2 groups (HSDP)"), std::string::npos)
      << outputs_["hsdp"];
  expect_matches_one_process(hsdp);

  const std::string whole = run("z3_whole", 2, " --dist.zero=3");
  const std::string resumed = run("z3_resumed", 2, " --dist.zero=3 --train.stop_at_step=5");
  auto r = run_command(train(2) + flags(resumed) +
                       " --dist.zero=3 --train.micro_batch_size=6 --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  // ZeRO-3's sharded set-up: read by range into each rank's shard, no whole model built.
  EXPECT_NE(r.output.find("(this rank's shard only, read by range)"), std::string::npos)
      << r.output;
  EXPECT_EQ(max_param_rel_diff(resumed + "/checkpoints/latest", whole + "/checkpoints/latest"),
            0.0);
  EXPECT_EQ(max_param_rel_diff(resumed + "/checkpoints/latest", whole + "/checkpoints/latest",
                               "optim.rank1.safetensors"),
            0.0);
}

// ZeRO-3 saves shards, no gather (checkpoint/sharded_save.h): a 2-rank checkpoint taken at
// step 5 of 15 resumes for 10 more steps as one process (ZeRO-0), as ZeRO-3 on 3 ranks and as
// ZeRO-1 on 2, each ending within 1e-5 of the uninterrupted one-process run (whose unsharded
// checkpoint of step 5 resumes as ZeRO-3 on 2 ranks as well); `lmtrain export hf`
// reads it directly; a missing shard file is an error naming the file and its rank.
TEST_F(Zero3Test, ShardedCheckpointResumesUnderOtherLayoutsAndCommandsReadIt) {
  const std::string longer = " --train.max_steps=15";
  const std::string base = dir_->file("one15");
  auto b = run_command(train(1) + flags(base) + longer +
                       " --train.micro_batch_size=12 --checkpoint.every=5");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::string saved = run("z3_at5", 2, " --dist.zero=3 --train.stop_at_step=5" + longer);
  const std::string ckpt = saved + "/checkpoints/latest";
  for (const char* f :
       {"model.rank0.safetensors", "model.rank1.safetensors", "optim.rank1.safetensors"}) {
    EXPECT_TRUE(fs::exists(ckpt + "/" + f)) << f;
  }
  EXPECT_FALSE(fs::exists(ckpt + "/model.safetensors"));

  struct Layout {
    const char* name;
    int ranks;
    const char* flags;
  };
  for (const Layout& l :
       {Layout{"as_one", 1, " --dist.zero=0"}, Layout{"as_z3_3", 3, " --dist.zero=3"},
        Layout{"as_z1_2", 2, " --dist.zero=1"}}) {
    SCOPED_TRACE(l.name);
    const std::string dir = dir_->file(l.name);
    fs::copy(saved, dir, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    auto r =
        run_command(train(l.ranks) + flags(dir) + longer + l.flags +
                    " --train.micro_batch_size=" + std::to_string(12 / l.ranks) + " --resume=auto");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
    // ZeRO-3 at 3 ranks takes the sharded set-up: 2 ranks' shards read by range into 3's.
    EXPECT_EQ(r.output.find("(this rank's shard only, read by range)") != std::string::npos,
              l.ranks == 3)
        << r.output;
    const auto losses = logged_losses(dir), want = logged_losses(base);
    ASSERT_EQ(losses.size(), want.size());
    for (size_t i = 0; i < losses.size(); ++i) {
      EXPECT_LE(std::abs(losses[i] - want[i]), 1e-5 * std::abs(want[i])) << "step " << i + 1;
    }
    EXPECT_LE(max_param_rel_diff(dir + "/checkpoints/latest", base + "/checkpoints/latest"), 1e-5);
  }

  // The one-process run's unsharded checkpoint of step 5 resumed as ZeRO-3 on 2 ranks: each
  // rank reads its shard's rows of model.safetensors and its range of the named moments.
  {
    const std::string dir = dir_->file("one_as_z3");
    auto r = run_command(train(2) + flags(dir) + longer +
                         " --dist.zero=3 --train.micro_batch_size=6 --resume=" + base +
                         "/checkpoints/step_00000005");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("(this rank's shard only, read by range)"), std::string::npos)
        << r.output;
    const auto losses = logged_losses(dir), want = logged_losses(base);
    ASSERT_EQ(losses.size(), 10u);
    for (size_t i = 0; i < losses.size(); ++i) {
      EXPECT_LE(std::abs(losses[i] - want[i + 5]), 1e-5 * std::abs(want[i + 5]))
          << "step " << i + 6;
    }
    EXPECT_LE(max_param_rel_diff(dir + "/checkpoints/latest", base + "/checkpoints/latest"), 1e-5);
  }

  // export hf and eval assemble the shards on one process: the same model as the
  // one-process run's checkpoint of step 5.
  expect_commands_read_alike(ckpt, base + "/checkpoints/step_00000005", data_, dir_->path());

  const std::string broken = dir_->file("missing_shard");
  fs::copy(saved, broken, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::remove(broken + "/checkpoints/latest/model.rank1.safetensors");
  auto r = run_command(train(2) + flags(broken) + longer +
                       " --dist.zero=3 --train.micro_batch_size=6 --resume=auto");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model.rank1.safetensors"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 of the 2-rank ZeRO-3 layout"), std::string::npos) << r.output;
}

// A rank killed while a ZeRO-3 checkpoint is being saved (after writing its own shard files,
// before rank 0 publishes): the run fails and the previous checkpoint stays complete and latest.
TEST_F(Zero3Test, RankKilledMidSaveLeavesThePreviousCheckpointLatest) {
  const std::string dir = dir_->file("killed_mid_save");
  expect_killed_save_keeps_previous(dir, flags(dir) + " --dist.zero=3 --train.micro_batch_size=6");
}

// `lmtrain plan` (train/memory_plan.h) against the byte accounting that runs log, before any
// memory is spent: ZeRO-3 at 2 ranks, ZeRO-1 at 3 and one replicated process.
TEST_F(Zero3Test, PlanMatchesTheModelStateRunsLog) {
  struct Case {
    const char* name;
    int ranks;
    const char* flags;
  };
  for (const Case& c : {Case{"plan_z3", 2, " --dist.zero=3"}, Case{"plan_z1", 3, " --dist.zero=1"},
                        Case{"plan_z0", 1, " --dist.zero=0"}}) {
    SCOPED_TRACE(c.name);
    const std::string extra = std::string(c.flags) + " --train.max_steps=1";
    run(c.name, c.ranks, extra);
    const std::string& out = outputs_[c.name];
    auto p = run_command(lmtrain_binary() + " plan --nproc " + std::to_string(c.ranks) +
                         flags(dir_->file("unused")) + extra +
                         " --train.micro_batch_size=" + std::to_string(12 / c.ranks));
    ASSERT_EQ(p.exit_code, 0) << p.output;
    EXPECT_EQ(logged_count(p.output, "trained_parameters"), logged_count(out, "trained_parameters"))
        << p.output;
    const int64_t measured = logged_count(out, "model_state_bytes_per_rank");
    const int64_t planned = logged_count(p.output, "model_state_bytes_per_rank");
    ASSERT_GT(measured, 0) << out;
    EXPECT_LE(std::abs(planned - measured), measured / 10) << p.output << out;
  }
}

// bf16 runs gather the blocks' linear weights in bf16 (parallel/fully_shard.h): every matmul
// still sees autocast's bf16 copy of the fp32 master, so ZeRO-3 equals ZeRO-2 bit for bit,
// and those gathers send half the bytes. 2 ranks, no accumulation, 3 steps; the bytes against
// an fp32 ZeRO-3 run of the same model (the same gathers, all in fp32).
TEST_F(Zero3Test, Bf16GathersTheBlocksMatricesInBf16AndEqualsZero2Bitwise) {
  // 384 tokens = 12 windows per step: 2 ranks x 6, one micro-step.
  const std::string one_micro = " --train.total_batch_size=384";
  const std::string bf16 = one_micro + " --train.precision=bf16";
  const std::string three = " --train.max_steps=3";
  std::map<std::string, std::string> dirs;
  for (const auto& [name, extra] : std::vector<std::pair<std::string, std::string>>{
           // Evaluated after the last step (its gathers count in no step's bytes below): the
           // blocks' matrices arrive in bf16 there too, and the loss is ZeRO-2's (autocast
           // rounds them to bf16 before every use anyway).
           {"bf16_z2", bf16 + " --dist.zero=2 --train.eval_every=3"},
           {"bf16_z3", bf16 + " --dist.zero=3 --train.eval_every=3"},
           {"fp32_z3", one_micro + " --dist.zero=3"}}) {
    dirs[name] = run(name, 2, extra + three);
  }
  EXPECT_NE(outputs_["bf16_z3"].find("linear weights gathered in bf16"), std::string::npos)
      << outputs_["bf16_z3"];
  expect_bitwise(dirs["bf16_z3"], dirs["bf16_z2"], 3);
  const auto val2 = zero3_val_losses(dirs["bf16_z2"]);
  EXPECT_EQ(val2.size(), 1u) << outputs_["bf16_z2"];
  EXPECT_EQ(zero3_val_losses(dirs["bf16_z3"]), val2);
  // Per step each block is gathered twice (forward, backward); at 2 ranks a rank sends half of
  // each gather. The blocks' matrices: n_layer x (3C C + C C + 4C C + C 4C) = 2 x 12 x 32^2
  // elements, 2 bytes fewer each: 2 x 1/2 x 24576 x 2 = 49152 bytes less per step.
  const auto fp32 = step_records(dirs["fp32_z3"]), low = step_records(dirs["bf16_z3"]);
  ASSERT_EQ(fp32.size(), 3u);
  ASSERT_EQ(low.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    const int64_t a = fp32[i]["comm_bytes"]["broadcast"].get<int64_t>();
    const int64_t b = low[i]["comm_bytes"]["broadcast"].get<int64_t>();
    EXPECT_EQ(a - b, 49152) << fp32[i].dump() << "\n" << low[i].dump();
    EXPECT_EQ(fp32[i]["comm_bytes"]["reduce_scatter"], low[i]["comm_bytes"]["reduce_scatter"]);
  }
}

// train.grad_reduce_dtype=bf16: each unit's gradient buffer, divided in fp32, is
// reduce-scattered as a bf16 copy (GradSync's ZeRO-2 arithmetic, summed in rank order), so
// ZeRO-3 still equals ZeRO-2 bit for bit, and the reduce-scatter sends half the bytes of an
// fp32 ZeRO-3 run of the same model (those buffers are all it sends); the gathers are alike.
// 2 ranks, 2 micro-steps of accumulation, 3 steps.
TEST_F(Zero3Test, Bf16GradientReduceEqualsZero2BitwiseAndHalvesTheReduceScatter) {
  const std::string bf16 = " --train.grad_reduce_dtype=bf16";
  const std::string three = " --train.max_steps=3";
  const std::map<std::string, std::string> dirs = {
      {"rbf16_z2", run("rbf16_z2", 2, bf16 + " --dist.zero=2" + three)},
      {"rbf16_z3", run("rbf16_z3", 2, bf16 + " --dist.zero=3" + three)},
      {"rfp32_z3", run("rfp32_z3", 2, " --dist.zero=3" + three)}};
  EXPECT_NE(outputs_["rbf16_z3"].find("gradients reduced in BFloat16"), std::string::npos)
      << outputs_["rbf16_z3"];
  expect_bitwise(dirs.at("rbf16_z3"), dirs.at("rbf16_z2"), 3);
  // bf16 rounding shows: not the fp32 run's parameters.
  EXPECT_GT(max_param_rel_diff(dirs.at("rbf16_z3") + "/checkpoints/latest",
                               dirs.at("rfp32_z3") + "/checkpoints/latest"),
            0.0);
  const auto fp32 = step_records(dirs.at("rfp32_z3")), low = step_records(dirs.at("rbf16_z3"));
  ASSERT_EQ(fp32.size(), 3u);
  ASSERT_EQ(low.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    const int64_t a = fp32[i]["comm_bytes"]["reduce_scatter"].get<int64_t>();
    const int64_t b = low[i]["comm_bytes"]["reduce_scatter"].get<int64_t>();
    EXPECT_GT(a, 0) << fp32[i].dump();
    EXPECT_EQ(2 * b, a) << fp32[i].dump() << "\n" << low[i].dump();
    EXPECT_EQ(fp32[i]["comm_bytes"]["broadcast"], low[i]["comm_bytes"]["broadcast"]);
  }
}

TEST_F(Zero3Test, OneRankRunsZeroThreeAsZeroTwoAndWhatItCannotDoIsAClearError) {
  // One rank: nothing is sharded, gathered or copied (no units are made).
  auto one = run_command(train(1) + flags(dir_->file("z3_1")) +
                         " --dist.zero=3 --train.micro_batch_size=12 --train.max_steps=2");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("optimizer: adamw-zero3"), std::string::npos) << one.output;
  EXPECT_EQ(one.output.find("ZeRO-3: "), std::string::npos) << one.output;
  const std::vector<std::pair<std::string, std::string>> refused = {
      {" --dist.zero=3 --optim.name=muon", "dist.zero=3 needs optim.name=adamw"},
      // MoE runs under ZeRO-3 with EP, HSDP and fp16 too (tests/e2e/zero3_moe_test.cpp,
      // tests/parallel/zero3_expert_scaler_test.cpp): nothing of it is refused.
      {" --dist.zero=2 --dist.shard_group_size=2", "'dist.shard_group_size'"},
      {" --dist.zero=3 --dist.shard_group_size=3", "'dist.shard_group_size' = 3"},
  };
  for (const auto& [extra, message] : refused) {
    auto r = run_command(train(1) + flags(dir_->file("refused")) + extra +
                         " --train.micro_batch_size=12");
    EXPECT_EQ(r.exit_code, 2) << extra << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << extra << "\n" << r.output;
  }
}

}  // namespace
}  // namespace lmtrain::testing
