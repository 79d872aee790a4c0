// Tensor parallelism (dist.tp) with real processes over Gloo, against one process: TP=2 on 2
// ranks and TP=2 x ZeRO-3 on 4 ranks (2 data-parallel replicas, each sharding its slices) equal
// one process within float tolerance (loss within 1e-6 relative at every step, parameters within
// 1e-5 after 10 steps), a repeated TP run equal bit for bit, the model state per rank halved, and
// the refusals named by their keys. The flags are ZeRO-3's test's (blocks recomputed in
// backward, tied head, clipping that bites) on the same 2-layer, 2-head model. TP checkpoints
// hold each rank's slices (checkpoint/sharded_save.h): they resume bit for bit in their own
// layout and reshard to one process and ZeRO-3, and a one-process checkpoint resumes as TP.
// LoRA with document masks under TP equals one process and exports PEFT adapters, and so does a
// nanochat model with all its newer parts, resumed across layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class TensorParallelE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_tp");
    data_ = prepare_synthetic_data(dir_->path());
    one_ = run("one", 1, 1, "");
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string flags(const std::string& run) {
    return tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --train.total_batch_size=768 --train.max_steps=10 --dist.bucket_mb=0.02"
           " --optim.eps=1e-6 --train.activation_checkpointing=block --train.grad_clip=0.1";
  }
  // A run on `ranks` ranks with dist.tp = tp: world / tp replicas, each accumulating 2
  // micro-steps of 12 / replicas windows.
  static std::string run(const std::string& name, int ranks, int tp, const std::string& extra) {
    const std::string dir = dir_->file(name);
    const int replicas = ranks / tp;
    auto r = run_command(lmtrain_on_ranks(ranks, "train") + flags(dir) + extra +
                         " --dist.tp=" + std::to_string(tp) +
                         " --train.micro_batch_size=" + std::to_string(12 / replicas));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(fs::exists(dir + "/checkpoints/latest")) << r.output;
    outputs_[name] = r.output;
    return dir;
  }

  // A copy of run `from` (stopped at step 5) resumed in another layout as run `name`.
  static std::string resume_copy(const std::string& from, const std::string& name, int ranks,
                                 int tp, const std::string& extra) {
    fs::copy(from, dir_->file(name), fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    const std::string dir = run(name, ranks, tp, " --resume=auto" + extra);
    EXPECT_NE(outputs_[name].find("resumed from"), std::string::npos) << outputs_[name];
    return dir;
  }
  // Run `resumed` ended bit for bit as `whole`: parameters, TP rank 1's optimizer file, losses.
  static void expect_same_bitwise(const std::string& resumed, const std::string& whole) {
    const std::string a = resumed + "/checkpoints/latest", b = whole + "/checkpoints/latest";
    EXPECT_EQ(max_param_rel_diff(a, b), 0.0) << resumed;
    EXPECT_EQ(max_param_rel_diff(a, b, "optim.rank1.safetensors"), 0.0) << resumed;
    EXPECT_EQ(logged_losses(resumed), logged_losses(whole)) << resumed;
  }
  static nlohmann::json meta_of(const std::string& ckpt) {
    std::ifstream in(ckpt + "/meta.json");
    return nlohmann::json::parse(in);
  }

  static TempDir* dir_;
  static std::string data_, one_;
  static std::map<std::string, std::string> outputs_;
};
TempDir* TensorParallelE2eTest::dir_ = nullptr;
std::string TensorParallelE2eTest::data_, TensorParallelE2eTest::one_;
std::map<std::string, std::string> TensorParallelE2eTest::outputs_;

TEST_F(TensorParallelE2eTest, Tp2EqualsOneProcessAndRepeatsBitwise) {
  const std::string tp = run("tp2", 2, 2, "");
  const std::string& out = outputs_["tp2"];
  EXPECT_NE(out.find("tensor parallelism: tp=2"), std::string::npos) << out;
  // Set up without the whole model (parallel/tp_local_init.h): still equal to one process.
  EXPECT_NE(out.find("this rank's slices drawn parameter by parameter"), std::string::npos) << out;
  expect_run_matches(tp, one_, 1e-6, 1e-5);
  const std::string again = run("tp2_again", 2, 2, "");
  EXPECT_EQ(max_param_rel_diff(again + "/checkpoints/latest", tp + "/checkpoints/latest"), 0.0);
  EXPECT_EQ(logged_losses(again), logged_losses(tp));
  // Each rank holds about half of the model state (the norms, biases of the row-parallel
  // layers and position table whole).
  const int64_t state = logged_count(out, "model_state_bytes_per_rank");
  const int64_t one_state = logged_count(outputs_["one"], "model_state_bytes_per_rank");
  ASSERT_GT(state, 0) << out;
  EXPECT_LT(state, one_state * 0.6) << out;
  EXPECT_GT(state, one_state * 0.5) << out;
}

// A run that starts from another run's whole weights (model.init_from, as from `lmtrain import
// hf`) under TP=2 takes its slices of them: it equals one process started from the same weights.
TEST_F(TensorParallelE2eTest, StartsFromWholeWeightsAsOneProcessDoes) {
  const std::string from = " --model.init_from=" + one_ + " --train.max_steps=4";
  const std::string whole = run("init_one", 1, 1, from);
  const std::string sliced = run("init_tp2", 2, 2, from);
  EXPECT_NE(outputs_["init_tp2"].find("initial weights from"), std::string::npos)
      << outputs_["init_tp2"];
  expect_run_matches(sliced, whole, 1e-6, 1e-5);
  // Started from the trained weights, not the seed: the first loss is the base run's last.
  EXPECT_LT(logged_losses(sliced).front(), logged_losses(one_).front() - 0.1);
}

// Its checkpoint: each of the 4 ranks writes its ZeRO-3 shard of its TP rank's slices; stopped
// at step 5 and resumed in the same layout, the run ends bit for bit as the uninterrupted one;
// resumed as TP=2 x ZeRO-1, within float tolerance of one process.
TEST_F(TensorParallelE2eTest, Tp2TimesZero3OnFourRanksEqualsOneProcessAndResumesBitwise) {
  const std::string run4 = run("tp2_z3", 4, 2, " --dist.zero=3");
  const std::string& out = outputs_["tp2_z3"];
  EXPECT_NE(out.find("2 data-parallel replica(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("sharded over 2 ranks"), std::string::npos) << out;
  expect_run_matches(run4, one_, 1e-6, 1e-5);
  for (int r = 0; r < 4; ++r) {
    for (const char* kind : {"model", "optim"}) {
      const std::string f = std::string(kind) + ".rank" + std::to_string(r) + ".safetensors";
      EXPECT_TRUE(fs::exists(run4 + "/checkpoints/latest/" + f)) << f;
    }
  }
  const std::string at5 = run("tp2_z3_at5", 4, 2, " --dist.zero=3 --train.stop_at_step=5");
  const std::string resumed = resume_copy(at5, "tp2_z3_resumed", 4, 2, " --dist.zero=3");
  EXPECT_EQ(max_param_rel_diff(resumed + "/checkpoints/latest", run4 + "/checkpoints/latest"), 0.0);
  EXPECT_EQ(max_param_rel_diff(resumed + "/checkpoints/latest", run4 + "/checkpoints/latest",
                               "optim.rank3.safetensors"),
            0.0);
  EXPECT_EQ(logged_losses(resumed), logged_losses(run4));
  // The same checkpoint as TP=2 x ZeRO-1 (the moments sharded, the parameters not): within
  // float tolerance of one process.
  expect_run_matches(resume_copy(at5, "tp2_z3_as_z1", 4, 2, " --dist.zero=1"), one_, 1e-5, 1e-5);
}

// A TP=2 checkpoint of step 5 of 15: per-rank slices, no gathered model; resumed as TP=2 it
// ends bit for bit as the uninterrupted TP=2 run; resumed as one process and as ZeRO-3 on 2
// ranks, and a one-process, ZeRO-3 or ZeRO-2 checkpoint resumed as TP=2 (a ZeRO-1 one as TP=2 x
// ZeRO-1 on 4 ranks), each ends within 1e-5 of the uninterrupted one-process run; export hf and
// eval read it; a missing slice file is named; a rank killed mid-save leaves the previous
// checkpoint latest.
TEST_F(TensorParallelE2eTest, CheckpointsHoldSlicesResumeBitwiseAndReshard) {
  const std::string longer = " --train.max_steps=15";
  const std::string base = run("one15", 1, 1, longer + " --checkpoint.every=5");
  const std::string tp15 = run("tp15", 2, 2, longer);
  const std::string at5 = run("tp_at5", 2, 2, longer + " --train.stop_at_step=5");
  const std::string ckpt = at5 + "/checkpoints/latest";
  for (const char* f : {"model.rank0.safetensors", "model.rank1.safetensors",
                        "optim.rank0.safetensors", "optim.rank1.safetensors"}) {
    EXPECT_TRUE(fs::exists(ckpt + "/" + f)) << f;
  }
  EXPECT_FALSE(fs::exists(ckpt + "/model.safetensors"));
  const auto shards = meta_of(ckpt)["model_shards"];
  EXPECT_EQ(shards["tp"], 2);
  EXPECT_EQ(shards["files"][2]["tp_rank"], 1) << shards.dump();

  // The same layout: bit for bit, parameters, TP rank 1's moments and every loss.
  const std::string same = resume_copy(at5, "as_tp2", 2, 2, longer);
  expect_same_bitwise(same, tp15);

  // Other layouts: within float tolerance of one process, loss at every step and parameters.
  const std::string one_at5 = run("one_at5", 1, 1, longer + " --train.stop_at_step=5");
  const std::string z3_at5 = run("z3_at5", 2, 1, longer + " --dist.zero=3 --train.stop_at_step=5");
  // ZeRO-1/2 moments lie in one process's flat layout, split over the ranks' files: each
  // parameter's are cut out of them, then cut again into this TP rank's pieces.
  const std::string z2_at5 = run("z2_at5", 2, 1, longer + " --dist.zero=2 --train.stop_at_step=5");
  const std::string z1_at5 = run("z1_at5", 2, 1, longer + " --dist.zero=1 --train.stop_at_step=5");
  for (const std::string& dir :
       {resume_copy(at5, "tp_as_one", 1, 1, longer),
        resume_copy(at5, "tp_as_z3", 2, 1, longer + " --dist.zero=3"),
        resume_copy(one_at5, "one_as_tp2", 2, 2, longer),
        resume_copy(z3_at5, "z3_as_tp2", 2, 2, longer),
        resume_copy(z2_at5, "z2_as_tp2", 2, 2, longer),
        resume_copy(z1_at5, "z1_as_tp2_z1", 4, 2, longer + " --dist.zero=1")}) {
    expect_run_matches(dir, base, 1e-5, 1e-5);
  }

  // export hf and eval assemble the slices: the one-process model of step 5.
  expect_commands_read_alike(ckpt, base + "/checkpoints/step_00000005", data_, dir_->path());

  const std::string broken = dir_->file("missing_slice");
  fs::copy(at5, broken, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::remove(broken + "/checkpoints/latest/model.rank1.safetensors");
  auto r = run_command(lmtrain_on_ranks(2, "train") + flags(broken) + longer +
                       " --dist.tp=2 --train.micro_batch_size=12 --resume=auto");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model.rank1.safetensors"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 of the 2-rank dist.tp=2 layout"), std::string::npos) << r.output;

  // TP rank 1 killed after writing its slices, before rank 0 publishes: no new checkpoint.
  const std::string killed = dir_->file("killed_mid_save");
  expect_killed_save_keeps_previous(killed,
                                    flags(killed) + " --dist.tp=2 --train.micro_batch_size=12");
}

// Muon under TP: each TP rank's optimizer file holds Muon's state by name in its pieces
// (momentum per matrix slice, the AdamW group's moments), "by_name" in model_shards. A TP=2 run
// of 15 steps equals one process (loss within 1e-5 relative at every step, parameters within
// 1e-5); stopped at step 5 and resumed as TP=2 it ends bit for bit as the uninterrupted TP=2 run
// (parameters, TP rank 1's state, losses); resumed as one process and as TP=2 x 2 data-parallel
// ranks (DistMuon owners) on 4, and a one-process checkpoint resumed as TP=2, each ends within
// 1e-5 of the uninterrupted one-process run.
TEST_F(TensorParallelE2eTest, MuonCheckpointsHoldPiecesResumeBitwiseAndReshard) {
  const std::string muon = " --optim.name=muon --optim.muon_momentum_warmup=5 --train.max_steps=15";
  const std::string one = run("muon_one", 1, 1, muon);
  const std::string tp = run("muon_tp", 2, 2, muon);
  for (const char* said : {"tensor parallelism: tp=2", "optimizer: muon"}) {
    EXPECT_NE(outputs_["muon_tp"].find(said), std::string::npos) << said;
  }
  expect_run_matches(tp, one, 1e-5, 1e-5);
  const std::string at5 = run("muon_tp_at5", 2, 2, muon + " --train.stop_at_step=5");
  const auto files = meta_of(at5 + "/checkpoints/latest")["model_shards"]["files"];
  EXPECT_EQ(files[1]["file"], "optim.rank0.safetensors") << files.dump();
  EXPECT_EQ(files[1]["by_name"], true) << files.dump();

  const std::string same = resume_copy(at5, "muon_as_tp2", 2, 2, muon);
  expect_same_bitwise(same, tp);

  const std::string one_at5 = run("muon_one_at5", 1, 1, muon + " --train.stop_at_step=5");
  for (const std::string& dir : {resume_copy(at5, "muon_tp_as_one", 1, 1, muon),
                                 resume_copy(at5, "muon_tp_as_tp2dp2", 4, 2, muon),
                                 resume_copy(one_at5, "muon_one_as_tp2", 2, 2, muon)}) {
    expect_run_matches(dir, one, 1e-5, 1e-5);
  }
}

// nanochat's current architecture (value embeddings, smear, backout, resid / x0 lambdas,
// embed_norm; parallel/tp_nanochat.h) with packed documents under TP=2 equals one process (loss
// within 1e-6 relative at every step, parameters within 1e-5; with Muon within 1e-5);
// `lmtrain plan --tp 2` prices its
// bytes per rank as the run holds them. Stopped at step 5 and resumed as TP=2, it ends bit for
// bit as the uninterrupted TP=2 run; resumed as one process, and a one-process checkpoint resumed
// as TP=2, each ends within 1e-5 of the uninterrupted one-process run.
TEST_F(TensorParallelE2eTest, NanochatPartsEqualOneProcessAndResumeAcrossLayouts) {
  const std::string nano =
      " --model.arch=nanochat --model.norm=rmsnorm --model.pos=rope --model.mlp=relu2"
      " --model.bias=false --model.tie_embeddings=false --model.qk_norm=true --model.qk_scale=1.2"
      " --model.norm_weight=false --model.logit_softcap=15 --model.embed_norm=true"
      " --model.x0_lambdas=true --model.value_embeds=true --model.smear=true"
      " --model.backout=true --data.document_mask=true";
  const std::string one = run("nano_one", 1, 1, nano);
  const std::string tp = run("nano_tp2", 2, 2, nano);
  expect_run_matches(tp, one, 1e-6, 1e-5);
  // With Muon, as nanochat trains (the value-embedding gates are among its matrices, split by
  // rows): within 1e-5 as MuonCheckpointsHoldPiecesResumeBitwiseAndReshard.
  const std::string muon = nano + " --optim.name=muon --optim.muon_momentum_warmup=5";
  expect_run_matches(run("nano_muon_tp2", 2, 2, muon), run("nano_muon_one", 1, 1, muon), 1e-5,
                     1e-5);
  auto p = run_command(lmtrain_binary() + " plan" + flags(dir_->file("nano_plan")) + nano +
                       " --nproc 2 --tp 2 --train.micro_batch_size=12");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_EQ(logged_count(p.output, "model_state_bytes_per_rank"),
            logged_count(outputs_["nano_tp2"], "model_state_bytes_per_rank"))
      << p.output;

  const std::string at5 = run("nano_tp2_at5", 2, 2, nano + " --train.stop_at_step=5");
  expect_same_bitwise(resume_copy(at5, "nano_tp2_resumed", 2, 2, nano), tp);
  const std::string one_at5 = run("nano_one_at5", 1, 1, nano + " --train.stop_at_step=5");
  for (const std::string& dir : {resume_copy(at5, "nano_tp2_as_one", 1, 1, nano),
                                 resume_copy(one_at5, "nano_one_as_tp2", 2, 2, nano)}) {
    expect_run_matches(dir, one, 1e-5, 1e-5);
  }
}

// TP x HSDP: 8 ranks as TP=2 inside 4 data-parallel ranks, those as 2 shard groups of 2
// (ZeRO-3 within a group, replicated across the groups): equal to one process. (On 4 ranks
// TP=2 leaves 2 data-parallel ranks: one shard group, plain TP x ZeRO-3.) A shard group size
// that does not divide the data-parallel ranks is refused naming both keys' values.
TEST_F(TensorParallelE2eTest, Tp2TimesHsdpOnEightRanksEqualsOneProcess) {
  const std::string hsdp = run("tp2_hsdp", 8, 2, " --dist.zero=3 --dist.shard_group_size=2");
  const std::string& out = outputs_["tp2_hsdp"];
  EXPECT_NE(out.find("4 data-parallel replica(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("sharded over 2 ranks, replicated over 2 groups (HSDP)"), std::string::npos)
      << out;
  expect_run_matches(hsdp, one_, 1e-6, 1e-5);
  // `lmtrain plan` prices this layout before the run (it refused it until 2026-11-27), and
  // lists it among the layouts that 8 ranks allow.
  auto plan = run_command(lmtrain_binary() + " plan --nproc 8 --tp 2 --device_memory 1" +
                          flags(dir_->file("unused")) +
                          " --dist.zero=3 --dist.shard_group_size=2 --train.micro_batch_size=3");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const int64_t measured = logged_count(out, "model_state_bytes_per_rank");
  ASSERT_GT(measured, 0) << out;
  EXPECT_LE(std::abs(logged_count(plan.output, "model_state_bytes_per_rank") - measured),
            measured / 10)
      << plan.output << out;
  EXPECT_NE(plan.output.find("| TP 2 + ZeRO-3 HSDP 2x2 |"), std::string::npos) << plan.output;
  auto r = run_command(lmtrain_on_ranks(2, "train") + flags(dir_->file("refused_hsdp")) +
                       " --dist.tp=2 --dist.zero=3 --dist.shard_group_size=3"
                       " --train.micro_batch_size=12");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'dist.shard_group_size' = 3: give 0 (all of them) or a divisor >= 2 "
                          "of the 1 data-parallel ranks (world 2 / dist.tp 2)"),
            std::string::npos)
      << r.output;
}

// LoRA under TP=2 on a Llama-style model (grouped-query attention, SwiGLU's gate and up rows,
// RoPE) with packed documents (data.document_mask), adapters on every target: B split as its
// layer's output rows on the column-parallel layers and the head, A by input columns on the
// row-parallel ones (parallel/tp_lora.h), LoRA's dropout masks cut from one process's, the
// frozen base read by range from a whole checkpoint. Equals one process (loss within 1e-6 relative
// at every step, adapters within 1e-5), saves the adapters as slices with the base by reference,
// and `lmtrain export peft` writes one process's adapters from it; `lmtrain plan` prices the run's
// bytes per rank. Stopped at step 3 and resumed as TP=2 (the base re-read by range from the
// reference in meta.json, the adapters' slices, their moments and the dropout generator), it
// ends bit for bit as the uninterrupted TP=2 run.
TEST_F(TensorParallelE2eTest, LoraWithDocumentMasksEqualsOneProcessAndExportsPeft) {
  const std::string llama =
      " --model.arch=llama --model.norm=rmsnorm --model.pos=rope --model.mlp=swiglu"
      " --model.mlp_hidden=80 --model.bias=false --model.n_head=4 --model.n_kv_head=2"
      " --model.head_dim=8 --model.norm_eps=1e-6 --model.tie_embeddings=false";
  const std::string base = run("lora_base", 1, 1, llama + " --train.max_steps=4");
  const std::string lora = llama + " --model.init_from=" + base +
                           " --lora.rank=4 --lora.alpha=8"
                           " --lora.targets=q,k,v,o,mlp_in,mlp_out,head --optim.lr=1e-2"
                           " --lora.dropout=0.1 --train.max_steps=6 --data.document_mask=true";
  const std::string one = run("lora_one", 1, 1, lora);
  const std::string tp = run("lora_tp2", 2, 2, lora);
  EXPECT_NE(outputs_["lora_tp2"].find("LoRA base (frozen) from"), std::string::npos)
      << outputs_["lora_tp2"];
  expect_run_matches(tp, one, 1e-6, 1e-5);
  const std::string ckpt = tp + "/checkpoints/latest";
  EXPECT_TRUE(fs::exists(ckpt + "/model.rank1.safetensors"));
  EXPECT_FALSE(meta_of(ckpt)["lora_base"].is_null()) << meta_of(ckpt).dump();
  for (const std::string& run_dir : {one, tp}) {
    auto r = run_command(lmtrain_binary() + " export peft --checkpoint " + run_dir + " --output " +
                         run_dir + "_peft");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  // `lmtrain plan --tp 2` prices this rank's half of the split frozen base and its adapter
  // slices as the run holds them.
  auto p = run_command(lmtrain_binary() + " plan" + flags(dir_->file("lora_plan")) + lora +
                       " --nproc 2 --tp 2 --train.micro_batch_size=12");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  for (const char* key : {"frozen_bytes_per_rank", "model_state_bytes_per_rank"}) {
    EXPECT_EQ(logged_count(p.output, key), logged_count(outputs_["lora_tp2"], key)) << key;
  }
  // The whole base's bytes are one process's, not this rank's half of the split tensors.
  EXPECT_EQ(logged_count(outputs_["lora_tp2"], "frozen_bytes_whole"),
            logged_count(outputs_["lora_one"], "frozen_bytes_whole"));
  EXPECT_LT(logged_count(outputs_["lora_tp2"], "frozen_bytes_per_rank"),
            logged_count(outputs_["lora_tp2"], "frozen_bytes_whole"));
  const auto a = core::read_safetensors(tp + "_peft/adapter_model.safetensors");
  const auto b = core::read_safetensors(one + "_peft/adapter_model.safetensors");
  ASSERT_EQ(a.names, b.names);
  ASSERT_FALSE(b.names.empty());
  for (const auto& [name, want] : b.tensors) {
    const double rel = (a.tensors.at(name) - want).abs().max().item<double>() /
                       std::max(want.abs().max().item<double>(), 1e-12);
    EXPECT_LE(rel, 1e-5) << name;
  }
  const std::string at3 = run("lora_tp2_at3", 2, 2, lora + " --train.stop_at_step=3");
  expect_same_bitwise(resume_copy(at3, "lora_tp2_resumed", 2, 2, lora), tp);
}

TEST_F(TensorParallelE2eTest, WhatItCannotDoYetIsAClearError) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {" --dist.tp=2 --train.precision=fp8 --lora.rank=4", "'train.precision' = fp8 with"},
      {" --dist.tp=2 --train.workers=2", "give train.workers=1"},
      {" --dist.tp=2 --train.cuda_graphs=true", "not yet proven on several GPUs"},
      {" --dist.tp=2", "'dist.tp' = 2 must divide the world of 1 ranks"},
  };
  for (const auto& [extra, message] : refused) {
    auto r = run_command(lmtrain_binary() + " train" + flags(dir_->file("refused")) + extra +
                         " --train.micro_batch_size=12");
    EXPECT_EQ(r.exit_code, 2) << extra << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << extra << "\n" << r.output;
  }
}

}  // namespace
}  // namespace lmtrain::testing
