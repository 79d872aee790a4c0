// Checkpoints under expert parallelism without a gather (checkpoint/sharded_save.h): ZeRO-3 with
// dist.ep=2 on 2 ranks, real processes over Gloo. Each EP rank writes its own experts
// (model.ep<e>, optim.ep<e>: E/2 of each stack), the shared region goes into the ZeRO-3 shard
// files, and rank 0 never holds the other rank's experts. One run stopped at step 3 gives the
// checkpoint every check reads: a resume on 2 ranks equals the uninterrupted run bit for bit; one
// process and 2 ranks at dist.ep=1 with ZeRO-2 resume it within float tolerance of one process;
// `lmtrain eval`, `export hf` and model.init_from read it; a missing expert file is named. The
// replicated AdamW and ZeRO-2 with dist.ep=2 resume their own checkpoints bit for bit too, and
// an unsharded (one-process) checkpoint still resumes under dist.ep=2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/shard_layout_check.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class ExpertCheckpointTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_expert_ckpt");
    data_ = prepare_synthetic_data(dir_->path());
    one_ = dir_->file("one");
    auto r = run_command(lmtrain_binary() + " train" + flags(one_) + " --train.micro_batch_size=8");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  // The moe-tiny preset (Llama attention, SwiGLU experts, top-2, dropless) shrunk to 2 layers of
  // 4 experts, which `export hf` writes as Mixtral (so no balancing bias); 16 windows of 32
  // tokens per step, blocks recomputed, clipping that bites. optim.eps=1e-6: see ddp_test.cpp.
  static std::string flags(const std::string& run) {
    return " --config " + source_dir() +
           "/configs/moe-tiny.yaml --model.n_layer=2 --model.n_embd=32 --model.n_head=2"
           " --model.mlp_hidden=64 --model.moe.num_experts=4 --model.moe.expert_hidden=32"
           " --model.moe.aux_loss_coef=0 --model.moe.z_loss_coef=0.01 --model.block_size=32"
           " --data.seq_len=32 --train.total_batch_size=512 --optim.warmup_steps=5"
           " --train.eval_batches=4 --train.threads=1 --log.every=1 --train.eval_every=0"
           " --checkpoint.every=0 --train.max_steps=6 --dist.bucket_mb=0.02 --optim.eps=1e-6"
           " --train.activation_checkpointing=block --train.grad_clip=0.1 --data.dir=" +
           data_ + " --run.dir=" + run;
  }
  static std::string on_two(const std::string& run, const std::string& extra) {
    return lmtrain_on_ranks(2, "train") + flags(run) + " --train.micro_batch_size=4" + extra;
  }
  static std::string copy_of(const std::string& run, const std::string& name) {
    const std::string to = dir_->file(name);
    fs::copy(run, to, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    return to;
  }

  static TempDir* dir_;
  static std::string data_, one_;
};
TempDir* ExpertCheckpointTest::dir_ = nullptr;
std::string ExpertCheckpointTest::data_, ExpertCheckpointTest::one_;

TEST_F(ExpertCheckpointTest, Zero3EachEpRankWritesItsExpertsResumesBitwiseAndReshards) {
  const std::string ep = " --dist.ep=2 --dist.zero=3";
  const std::string full = dir_->file("full");
  auto a = run_command(on_two(full, ep));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::string run = dir_->file("stopped");
  auto b = run_command(on_two(run, ep + " --train.stop_at_step=3"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::string ckpt = run + "/checkpoints/latest";

  // The layout: no model.safetensors; the expert stacks are EP slices of 2 experts each.
  EXPECT_FALSE(fs::exists(ckpt + "/model.safetensors"));
  const auto meta = nlohmann::json::parse(read_text(ckpt + "/meta.json"));
  const auto& shards = meta.at("model_shards");
  EXPECT_EQ(shards.at("format"), 2);
  EXPECT_EQ(shards.at("ep"), 2);
  const std::string stack = "transformer.h.1.mlp.experts.c_fc.weight";
  int64_t expert_begin = -1;
  for (const auto& t : shards.at("tensors")) {
    if (t.at("name") != stack) continue;
    EXPECT_EQ(t.at("shape")[0], 4);
    ASSERT_EQ(t.at("slices").size(), 2u) << t.dump();
    EXPECT_EQ(t["slices"][0].at("ranges"), nlohmann::json::parse("[[0, 2]]"));
    EXPECT_EQ(t["slices"][1].at("ranges"), nlohmann::json::parse("[[2, 4]]"));
    EXPECT_EQ(t["slices"][1].at("ep_rank"), 1);
  }
  for (const auto& f : shards.at("files")) {
    if (f.at("file") == "model.ep1.safetensors") expert_begin = f.at("flat")[0].get<int64_t>();
  }
  ASSERT_GT(expert_begin, 0) << shards.dump();
  const int64_t flat_numel = shards.at("flat_numel").get<int64_t>();
  // Rank 0's files: half the shared region, and its expert region (its 2 experts) only.
  const auto rank0 = core::read_safetensors(ckpt + "/model.rank0.safetensors");
  EXPECT_EQ(rank0.tensors.at("params").numel(), expert_begin / 2);
  for (int e = 0; e < 2; ++e) {
    const std::string i = std::to_string(e);
    const auto m = core::read_safetensors(ckpt + "/model.ep" + i + ".safetensors");
    EXPECT_EQ(m.tensors.at("params").numel(), flat_numel - expert_begin) << e;
    const auto o = core::read_safetensors(ckpt + "/optim.ep" + i + ".safetensors");
    EXPECT_EQ(o.tensors.at("exp_avg_sq").numel(), flat_numel - expert_begin) << e;
    EXPECT_GT(o.tensors.at("exp_avg_sq").abs().max().item<double>(), 0.0) << e;
  }
  const auto rank0_optim = core::read_safetensors(ckpt + "/optim.rank0.safetensors");
  for (const auto& name : rank0_optim.names) EXPECT_EQ(name.find("experts"), std::string::npos);
  // Assembled, the stack is whole: EP rank e's rows [2e, 2e + 2) from model.ep<e>.
  const auto loaded = train::CheckpointStore::load(ckpt, false, {"model.safetensors"});
  const auto whole = loaded.files.at("model.safetensors").tensors.at(stack);
  ASSERT_EQ(whole.size(0), 4);
  for (const auto& t : shards.at("tensors")) {
    if (t.at("name") != stack) continue;
    for (int e = 0; e < 2; ++e) {
      const auto m =
          core::read_safetensors(ckpt + "/model.ep" + std::to_string(e) + ".safetensors");
      const int64_t b = t["slices"][e]["flat"][0].get<int64_t>() - expert_begin;
      const auto piece = m.tensors.at("params").narrow(0, b, whole.numel() / 2);
      EXPECT_TRUE(piece.equal(whole.narrow(0, 2 * e, 2).reshape({-1}))) << e;
    }
  }
  const std::string as_one = copy_of(run, "as_one");
  const std::string as_dp = copy_of(run, "as_dp");
  const std::string missing = copy_of(run, "missing");

  // Resumed in the same layout: bit for bit the uninterrupted run.
  auto r = run_command(on_two(run, ep + " --resume=auto"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reads only its own experts' slices"), std::string::npos) << r.output;
  for (const char* file :
       {"model.safetensors", "optim.rank0.safetensors", "optim.rank1.safetensors",
        "optim.ep0.safetensors", "optim.ep1.safetensors"}) {
    EXPECT_EQ(max_param_rel_diff(ckpt, full + "/checkpoints/latest", file), 0.0) << file;
  }
  EXPECT_EQ(logged_losses(run), logged_losses(full));

  // Resharded: one process (replicated AdamW, every expert), and 2 ranks at dist.ep=1 with
  // ZeRO-2 (flat shards over the whole model), each within tolerance of one process.
  auto one = run_command(lmtrain_binary() + " train" + flags(as_one) +
                         " --train.micro_batch_size=8 --resume=auto");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("resumed from"), std::string::npos) << one.output;
  expect_run_matches(as_one, one_, 1e-6, 1e-5);
  EXPECT_EQ(one.output.find("reads only its own experts"), std::string::npos) << one.output;
  auto dp = run_command(on_two(as_dp, " --dist.zero=2 --resume=auto"));
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  expect_run_matches(as_dp, one_, 1e-6, 1e-5);

  // The commands read the final EP checkpoint as the one-process model; init_from starts from it.
  expect_commands_read_alike(full + "/checkpoints/latest", one_ + "/checkpoints/latest", data_,
                             dir_->file("scratch"));
  // generate, greedy: the same tokens as the one-process model (within 1e-5 of it).
  auto greedy_ids = [](const std::string& checkpoint) {
    auto g = run_command(lmtrain_binary() + " generate --checkpoint " + checkpoint +
                         " --prompt 'The old man' --max_new_tokens 8 --temperature 0"
                         " --stop_at_eot=false --print_ids");
    EXPECT_EQ(g.exit_code, 0) << g.output;
    return g.output;  // the token ids, space-separated
  };
  EXPECT_EQ(greedy_ids(full + "/checkpoints/latest"), greedy_ids(one_ + "/checkpoints/latest"));
  const std::string init = dir_->file("init");
  auto i = run_command(lmtrain_binary() + " train" + flags(init) + " --train.micro_batch_size=8" +
                       " --train.max_steps=1 --model.init_from=" + full + "/checkpoints/latest");
  ASSERT_EQ(i.exit_code, 0) << i.output;
  EXPECT_NE(i.output.find("initial weights from"), std::string::npos) << i.output;

  // A missing expert file is named, with the rank that wrote it.
  fs::remove(missing + "/checkpoints/latest/model.ep1.safetensors");
  auto e = run_command(lmtrain_binary() + " eval --checkpoint " + missing +
                       "/checkpoints/latest --data_dir " + data_ + " --batches 1");
  EXPECT_NE(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("model.ep1.safetensors"), std::string::npos) << e.output;
  EXPECT_NE(e.output.find("rank 1"), std::string::npos) << e.output;
}

// Without ZeRO-3 the experts leave rank 0's files too (the shared region whole in
// model.rank0, the moments replicated in optim.rank0 or ZeRO-2's shards), and a resume in the
// same layout, each rank reading only its experts' slices, is bit for bit the uninterrupted run.
TEST_F(ExpertCheckpointTest, ReplicatedAndZero2EpCheckpointsResumeBitwise) {
  for (const std::string zero : {"0", "2"}) {
    SCOPED_TRACE("dist.zero=" + zero);
    const std::string ep = " --dist.ep=2 --dist.zero=" + zero;
    const std::string full = dir_->file("full_z" + zero), run = dir_->file("stopped_z" + zero);
    auto a = run_command(on_two(full, ep));
    ASSERT_EQ(a.exit_code, 0) << a.output;
    auto b = run_command(on_two(run, ep + " --train.stop_at_step=3"));
    ASSERT_EQ(b.exit_code, 0) << b.output;
    const std::string ckpt = run + "/checkpoints/latest";
    EXPECT_FALSE(fs::exists(ckpt + "/model.safetensors"));
    EXPECT_FALSE(fs::exists(ckpt + "/model.rank1.safetensors"));  // no ZeRO-3: rank 0's, whole
    const auto optim0 = core::read_safetensors(ckpt + "/optim.rank0.safetensors");
    for (const auto& name : optim0.names) EXPECT_EQ(name.find("experts"), std::string::npos);
    auto r = run_command(on_two(run, ep + " --resume=auto"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("reads only its own experts' slices"), std::string::npos) << r.output;
    std::vector<std::string> files = {"model.safetensors", "optim.rank0.safetensors",
                                      "optim.ep0.safetensors", "optim.ep1.safetensors"};
    if (zero == "2") files.push_back("optim.rank1.safetensors");
    for (const auto& file : files) {
      EXPECT_EQ(max_param_rel_diff(ckpt, full + "/checkpoints/latest", file), 0.0) << file;
    }
    EXPECT_EQ(logged_losses(run), logged_losses(full));
  }
}

// A checkpoint without shards (one process's: whole stacks in model.safetensors, moments by
// name, as dist.ep runs wrote theirs before) still resumes under dist.ep=2 with ZeRO-3: through
// the sharded set-up, each rank reads by range its experts' rows of the stacks and its shard of
// the rest (train/init_from_shard.h); within tolerance of one process.
TEST_F(ExpertCheckpointTest, AnUnshardedCheckpointResumesUnderExpertParallelism) {
  const std::string run = dir_->file("unsharded");
  auto a = run_command(lmtrain_binary() + " train" + flags(run) +
                       " --train.micro_batch_size=8 --train.stop_at_step=3");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_TRUE(fs::exists(run + "/checkpoints/latest/model.safetensors"));
  auto r = run_command(on_two(run, " --dist.ep=2 --dist.zero=3 --resume=auto"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reads only its own experts' rows of the saved stacks"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("ZeRO-3 sharded set-up: the model built unwritten"), std::string::npos)
      << r.output;
  expect_run_matches(run, one_, 1e-6, 1e-5);
}

// The structure check knows the EP fields (the fuzz seed ep_sharded_meta.json: ep=2, a stack in
// two EP slices): an EP degree or rank outside the layout is refused, naming it.
TEST(ExpertShardLayoutCheck, RefusesEpRanksOutsideTheLayout) {
  std::ifstream in(source_dir() + "/fuzz/corpus/meta_json/ep_sharded_meta.json");
  const auto shards = nlohmann::json::parse(in)["model_shards"];
  EXPECT_NO_THROW(train::check_model_shards(shards));
  auto error_of = [&](const std::function<void(nlohmann::json&)>& edit) -> std::string {
    auto bad = shards;
    edit(bad);
    try {
      train::check_model_shards(bad);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of([](auto& s) {
              s["files"][6]["ep_rank"] = 2;
            }).find("file model.ep1.safetensors has ep_rank 2 outside [0, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([](auto& s) {
              s["tensors"][1]["slices"][1]["ep_rank"] = -1;
            }).find("tensor 'experts.w''s slice has ep_rank -1"),
            std::string::npos);
  EXPECT_NE(error_of([](auto& s) { s["ep"] = 3; }).find("ep 3 is not in [1, world_size]"),
            std::string::npos);
  EXPECT_NE(error_of([](auto& s) {
              s["tensors"][1]["slices"][1]["ranges"] = {{0, 2}};
            }).find("do not cover dimension 0 exactly once"),
            std::string::npos);
}

}  // namespace
}  // namespace lmtrain::testing
