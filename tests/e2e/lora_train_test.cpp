// LoRA with the real binary on real files: a base is trained first (gpt2 with an untied head,
// and a Qwen3-style model), then adapters on it. Checks what a LoRA checkpoint holds, resume
// (bitwise, and refused on a different base), 2 ranks = 1 rank (also ZeRO-1), `lora merge` =
// the adapter forward, and `export peft` loaded by peft onto `export hf` of the base with the
// same logits (tests/fixtures/peft_check.py).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_model.h"
#include "core/safetensors.h"
#include "core/sha256.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

const char* kAllTargets = "q,k,v,o,mlp_in,mlp_out,head";
const std::vector<int64_t> kIds = {1, 5, 9, 23, 42, 7, 100, 3, 250, 17};

nlohmann::json read_meta(const std::string& ckpt) {
  return nlohmann::json::parse(read_text(ckpt + "/meta.json"));
}

at::Tensor logits_of(const std::string& ckpt) {
  auto m = train::load_inference_model(ckpt);
  torch::NoGradGuard no_grad;
  return m.model->forward(torch::tensor(kIds, torch::kLong).unsqueeze(0))[0];  // (T, V)
}

at::Tensor json_matrix(const nlohmann::json& j) {
  std::vector<at::Tensor> rows;
  for (const auto& row : j) rows.push_back(torch::tensor(row.get<std::vector<double>>()));
  return torch::stack(rows).to(torch::kFloat);
}

class LoraTrain : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_lora");
    data_ = prepare_synthetic_data(dir_->path());
    for (const auto& [name, flags] :
         std::vector<std::pair<std::string, std::string>>{{"base_gpt2", gpt2_flags()},
                                                          {"base_gpt2_b", gpt2_flags()},
                                                          {"base_qwen3", qwen3_flags()}}) {
      const std::string seed = name == "base_gpt2_b" ? " --train.seed=99" : "";
      auto r = run_command(lmtrain_binary() + " train" + flags + " --data.dir=" + data_ +
                           " --run.dir=" + dir_->file(name) + " --train.max_steps=8" + seed);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string gpt2_flags() { return tiny_train_flags() + " --model.tie_embeddings=false"; }
  static std::string qwen3_flags() {
    return " --config " + source_dir() +
           "/configs/qwen3-tiny.yaml --model.n_layer=2 --model.n_head=2 --model.n_kv_head=1"
           " --model.head_dim=16 --model.n_embd=32 --model.mlp_hidden=48 --model.block_size=32"
           " --model.tie_embeddings=false --data.seq_len=32 --train.micro_batch_size=8"
           " --train.total_batch_size=512 --optim.warmup_steps=2 --train.eval_batches=4"
           " --train.threads=1 --log.every=1 --train.eval_every=0 --checkpoint.every=0";
  }
  // A LoRA run on `base` (a run dir of the fixture).
  static std::string lora_cmd(const std::string& flags, const std::string& base,
                              const std::string& run, const std::string& extra) {
    return " train" + flags + " --data.dir=" + data_ + " --run.dir=" + run +
           " --model.init_from=" + dir_->file(base) +
           " --lora.rank=4 --lora.alpha=8 --optim.lr=1e-2 --train.max_steps=6" + extra;
  }
  static CommandResult lora(const std::string& flags, const std::string& base,
                            const std::string& run, const std::string& extra = "") {
    return run_command(lmtrain_binary() + lora_cmd(flags, base, run, extra));
  }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* LoraTrain::dir_ = nullptr;
std::string LoraTrain::data_;

TEST_F(LoraTrain, RankWithoutInitFromIsAUsageError) {
  auto r =
      run_command(lmtrain_binary() + " train" + gpt2_flags() + " --data.dir=" + data_ +
                  " --run.dir=" + dir_->file("no_base") + " --lora.rank=4 --train.max_steps=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'lora.rank'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.init_from"), std::string::npos) << r.output;
  auto t = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
                       " --run.dir=" + dir_->file("tied") + " --model.init_from=" +
                       dir_->file("base_gpt2") + " --lora.rank=4 --lora.targets=q,head");
  EXPECT_EQ(t.exit_code, 2) << t.output;
  EXPECT_NE(t.output.find("'lora.targets'"), std::string::npos) << t.output;
  auto u = lora(gpt2_flags(), "base_gpt2", dir_->file("unknown"), " --lora.targets=q,qq");
  EXPECT_EQ(u.exit_code, 2) << u.output;
  EXPECT_NE(u.output.find("unknown target 'qq'"), std::string::npos) << u.output;
}

TEST_F(LoraTrain, CheckpointHoldsAdaptersAndTheBaseHash) {
  const std::string run = dir_->file("lora_gpt2");
  auto r = lora(gpt2_flags(), "base_gpt2", run, " --lora.targets=" + std::string(kAllTargets));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ckpt = run + "/checkpoints/latest";
  auto file = core::read_safetensors(ckpt + "/model.safetensors");
  EXPECT_EQ(file.tensors.size(), 2u * (2 * 6 + 1));  // A and B of 6 adapters a layer + head
  for (const auto& [name, t] : file.tensors) {
    EXPECT_NE(name.find(".lora"), std::string::npos) << name;
  }
  const auto meta = read_meta(ckpt),
             base_meta = read_meta(dir_->file("base_gpt2") + "/checkpoints/latest");
  ASSERT_TRUE(meta.contains("lora_base")) << meta.dump();
  EXPECT_EQ(meta["lora_base"]["sha256"], base_meta["files"]["model.safetensors"]["sha256"]);
  EXPECT_EQ(meta["lora_base"]["path"],
            fs::canonical(dir_->file("base_gpt2") + "/checkpoints/latest").string());
  // The optimizer file holds moments for the adapters only.
  auto optim = core::read_safetensors(ckpt + "/optim.rank0.safetensors");
  for (const auto& [name, t] : optim.tensors) {
    if (name.rfind("rng.", 0) == 0) continue;
    EXPECT_NE(name.find(".lora"), std::string::npos) << name;
  }
  // generate and eval read a LoRA checkpoint (base + adapters).
  auto g = run_command(lmtrain_binary() + " generate --checkpoint " + run +
                       " --prompt The --max_new_tokens 5 --seed 1");
  EXPECT_EQ(g.exit_code, 0) << g.output;
  auto e = run_command(lmtrain_binary() + " eval --checkpoint " + run + " --data_dir " + data_ +
                       " --batches 2");
  EXPECT_EQ(e.exit_code, 0) << e.output;
  // export hf refuses it, pointing at merge / export peft.
  auto x = run_command(lmtrain_binary() + " export hf " + run + " " + dir_->file("x_hf"));
  EXPECT_EQ(x.exit_code, 2) << x.output;
  EXPECT_NE(x.output.find("lora merge"), std::string::npos) << x.output;
}

TEST_F(LoraTrain, ResumedRunEqualsUninterruptedBitwise) {
  const std::string a = dir_->file("lora_a"), b = dir_->file("lora_b");
  // Also a fully trained base group (the norms): saved in the checkpoint beside the adapters.
  const std::string extra =
      " --lora.targets=q,v,mlp_out --lora.dropout=0.1 --train.workers=2 --lora.unfreeze=norms";
  ASSERT_EQ(lora(gpt2_flags(), "base_gpt2", a, extra).exit_code, 0);
  auto first = lora(gpt2_flags(), "base_gpt2", b, extra + " --train.stop_at_step=3");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto second = lora(gpt2_flags(), "base_gpt2", b, extra + " --resume=auto");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from"), std::string::npos) << second.output;
  auto ra = step_records(a), rb = step_records(b);
  ASSERT_EQ(ra.size(), 6u);
  ASSERT_EQ(rb.size(), 6u);
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i]["loss"].get<double>(), rb[i]["loss"].get<double>()) << "step " << i + 1;
  }
  for (const char* f : {"model.safetensors", "optim.rank0.safetensors"}) {
    EXPECT_EQ(core::sha256_file_hex(a + "/checkpoints/latest/" + f),
              core::sha256_file_hex(b + "/checkpoints/latest/" + f))
        << f;
  }
}

TEST_F(LoraTrain, ActivationCheckpointingGivesTheSameAdaptersBitwise) {
  // Recomputed blocks take only the trainable parameters as autograd inputs (the frozen base
  // is a constant of the recompute); dropout masks are replayed.
  const std::string a = dir_->file("lora_plain"), b = dir_->file("lora_recompute");
  const std::string extra =
      " --lora.targets=" + std::string(kAllTargets) + " --lora.dropout=0.1 --model.dropout=0.1";
  ASSERT_EQ(lora(gpt2_flags(), "base_gpt2", a, extra).exit_code, 0);
  auto r = lora(gpt2_flags(), "base_gpt2", b, extra + " --train.activation_checkpointing=block");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(core::sha256_file_hex(a + "/checkpoints/latest/model.safetensors"),
            core::sha256_file_hex(b + "/checkpoints/latest/model.safetensors"));
}

TEST_F(LoraTrain, ResumeOnADifferentBaseIsAnErrorNamingBothHashes) {
  // A copy of base_gpt2 that is replaced by another model (base_gpt2_b) mid-run.
  const std::string base = dir_->file("base_copy");
  fs::copy(dir_->file("base_gpt2"), base,
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  const std::string run = dir_->file("lora_rebased");
  auto r = lora(gpt2_flags(), "base_copy", run, " --train.stop_at_step=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ckpt = fs::canonical(base + "/checkpoints/latest").string();
  const std::string other = fs::canonical(dir_->file("base_gpt2_b") + "/checkpoints/latest");
  const std::string old_hash = read_meta(ckpt)["files"]["model.safetensors"]["sha256"];
  const std::string new_hash = read_meta(other)["files"]["model.safetensors"]["sha256"];
  ASSERT_NE(old_hash, new_hash);
  for (const char* f : {"model.safetensors", "meta.json"}) {
    fs::copy_file(other + "/" + f, ckpt + "/" + f, fs::copy_options::overwrite_existing);
  }
  auto resumed = lora(gpt2_flags(), "base_copy", run, " --resume=auto");
  EXPECT_EQ(resumed.exit_code, 1) << resumed.output;
  EXPECT_NE(resumed.output.find(old_hash), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find(new_hash), std::string::npos) << resumed.output;
}

TEST_F(LoraTrain, TwoRanksEqualOneRank) {
  // Global batch 16 windows of 32 tokens: 1 rank x 16, or 2 ranks x 8.
  const std::string extra = " --lora.targets=q,k,v,o --optim.eps=1e-6 --dist.bucket_mb=0.001";
  const std::string one = dir_->file("lora_1rank");
  auto r1 = lora(gpt2_flags(), "base_gpt2", one, extra + " --train.micro_batch_size=16");
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  for (int zero : {0, 1}) {
    const std::string two = dir_->file("lora_2ranks_zero" + std::to_string(zero));
    auto r2 = run_command(
        lmtrain_binary() +
        " launch --nproc_per_node=2 --master_port=" + std::to_string(free_port()) + " --" +
        lora_cmd(gpt2_flags(), "base_gpt2", two,
                 extra + " --train.micro_batch_size=8 --dist.zero=" + std::to_string(zero)));
    ASSERT_EQ(r2.exit_code, 0) << r2.output;
    EXPECT_LE(max_param_rel_diff(two + "/checkpoints/latest", one + "/checkpoints/latest"), 1e-5)
        << "dist.zero=" << zero;
    EXPECT_NEAR(last_logged_loss(two), last_logged_loss(one), 1e-5) << "dist.zero=" << zero;
  }
}

TEST_F(LoraTrain, MergeEqualsTheAdapterForward) {
  for (const auto& [flags, base] : std::vector<std::pair<std::string, std::string>>{
           {gpt2_flags(), "base_gpt2"}, {qwen3_flags(), "base_qwen3"}}) {
    SCOPED_TRACE(base);
    const std::string run = dir_->file("merge_src_" + base), merged = dir_->file("merged_" + base);
    auto r = lora(flags, base, run, " --lora.targets=" + std::string(kAllTargets));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto m =
        run_command(lmtrain_binary() + " lora merge --checkpoint " + run + " --output " + merged);
    ASSERT_EQ(m.exit_code, 0) << m.output;
    auto adapted = logits_of(run), folded = logits_of(merged), plain = logits_of(dir_->file(base));
    EXPECT_LT((adapted - folded).abs().max().item<double>(), 2e-5);
    EXPECT_GT((adapted - plain).abs().max().item<double>(), 1e-3);  // the adapters matter
    // The merged checkpoint is an ordinary one: export hf and init_from take it.
    auto x = run_command(lmtrain_binary() + " export hf " + merged + " " + merged + "_hf");
    EXPECT_EQ(x.exit_code, 0) << x.output;
    EXPECT_FALSE(read_meta(merged + "/checkpoints/latest").contains("lora_base"));
    // Its config.yaml fine-tunes from it as is, into MERGED-finetune (never into the merge).
    auto f = run_command(lmtrain_binary() + " train --config " + merged +
                         "/config.yaml --data.dir=" + data_ + " --train.max_steps=2");
    ASSERT_EQ(f.exit_code, 0) << f.output;
    EXPECT_TRUE(contains(f.output, "initial weights from " + merged)) << f.output;
    EXPECT_TRUE(fs::exists(merged + "-finetune/checkpoints/latest/meta.json"));
  }
}

TEST_F(LoraTrain, PeftLoadsTheExportWithTheSameLogits) {
  for (const auto& [flags, base] : std::vector<std::pair<std::string, std::string>>{
           {gpt2_flags(), "base_gpt2"}, {qwen3_flags(), "base_qwen3"}}) {
    for (const std::string& targets : {std::string(kAllTargets), std::string("q,v")}) {
      SCOPED_TRACE(base + " " + targets);
      const std::string tag = base + "_" + (targets == "q,v" ? "qv" : "all");
      const std::string run = dir_->file("peft_src_" + tag);
      auto r = lora(flags, base, run, " --lora.targets=" + targets);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      const std::string base_hf = dir_->file("peft_base_hf_" + tag),
                        adapter = dir_->file("peft_adapter_" + tag);
      auto h = run_command(lmtrain_binary() + " export hf " + dir_->file(base) + " " + base_hf);
      ASSERT_EQ(h.exit_code, 0) << h.output;
      auto p = run_command(lmtrain_binary() + " export peft --checkpoint " + run + " --output " +
                           adapter);
      ASSERT_EQ(p.exit_code, 0) << p.output;
      std::string ids;
      for (auto i : kIds) ids += (ids.empty() ? "" : ",") + std::to_string(i);
      auto c =
          run_command(lmtrain_python() + " " + source_dir() + "/tests/fixtures/peft_check.py " +
                      base_hf + " " + adapter + " --ids " + ids);
      ASSERT_EQ(c.exit_code, 0) << c.output;
      const auto j = check_result(c);
      const auto theirs = json_matrix(j["logits"]), their_base = json_matrix(j["base_logits"]);
      const auto ours = logits_of(run);
      const double diff = (theirs - ours).abs().max().item<double>();
      EXPECT_LT(diff, 1e-4);
      EXPECT_GT((theirs - their_base).abs().max().item<double>(), 1e-3);
      std::cout << "[peft parity] " << tag << ": max |logit diff| " << diff << ", "
                << j["lora_layers"] << " peft LoRA layers\n";
    }
  }
}

}  // namespace
}  // namespace lmtrain::testing
