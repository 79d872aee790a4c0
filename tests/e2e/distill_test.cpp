// Knowledge distillation through the CLI, on the fortunes corpus (the demo's): a distilled
// student beats the same student trained alone for as many steps, and feature distillation
// beats logits alone; 2 ranks equal 1 rank; a
// resumed distillation equals an uninterrupted one (as ZeRO-3 on 2 ranks, through the sharded
// set-up, within float tolerance); the teacher's checkpoint is untouched; the
// seed's flags (teacher trained first, --save_checkpoint, --load_checkpoint, generate
// --use_teacher); a teacher with another vocabulary is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class DistillTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_distill");
    data_ = dir_->file("fortunes");
    auto r = run_command(
        "find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | "
        "sort | xargs " +
        lmtrain_binary() + " prepare --vocab_size 2048 --doc_separator % --output " + data_ +
        " --input");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // Each ctest entry is its own process and runs this again: the shared teacher is small
    // (width 128, 40 steps); the quality test trains a better one of its own.
    teacher_ = train_teacher("teacher", 40);
    teacher_ckpt_ = fs::canonical(teacher_ + "/checkpoints/latest").string();
    teacher_bytes_ = read_text(teacher_ckpt_ + "/model.safetensors");
  }
  static std::string train_teacher(const std::string& name, int steps) {
    const std::string run = dir_->file(name);
    auto r = run_command(lmtrain_binary() + " train" + common() + " --run.dir=" + run +
                         " --model.n_embd=128 --train.max_steps=" + std::to_string(steps));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return run;
  }
  static void TearDownTestSuite() { delete dir_; }

  // gpt2-tiny's shape at sequence length 64, 16 windows a step, one rank with 2 threads, no
  // periodic eval.
  static std::string common() {
    return " --config " + source_dir() + "/configs/gpt2-tiny.yaml --data.dir=" + data_ +
           " --data.seq_len=64 --train.total_batch_size=1024 --train.threads=2 "
           "--train.eval_every=0 --train.eval_batches=40"
           " --log.every=10 --checkpoint.every=0";
  }
  // A width-64 student distilled from `teacher` at alpha 0.5, T 1.
  static std::string student(const std::string& run, int steps,
                             const std::string& teacher = teacher_) {
    return common() + " --run.dir=" + run +
           " --model.n_embd=64 --train.max_steps=" + std::to_string(steps) +
           " --distill.enabled=true --distill.teacher=" + teacher +
           " --distill.alpha=0.5 --distill.temperature=1 --optim.eps=1e-6";
  }
  static double val_loss(const std::string& run) {
    double v = -1;
    std::ifstream in(run + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("val_loss")) v = j["val_loss"].get<double>();
    }
    return v;
  }

  static TempDir* dir_;
  static std::string data_, teacher_, teacher_ckpt_, teacher_bytes_;
};
TempDir* DistillTest::dir_ = nullptr;
std::string DistillTest::data_, DistillTest::teacher_, DistillTest::teacher_ckpt_,
    DistillTest::teacher_bytes_;

TEST_F(DistillTest, DistilledStudentBeatsStudentTrainedAlone) {
  const std::string teacher = train_teacher("good_teacher", 200);
  const std::string distilled = dir_->file("distilled"), alone = dir_->file("alone");
  auto r = run_command(lmtrain_binary() + " train" + student(distilled, 120, teacher));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_binary() + " train" + common() + " --run.dir=" + alone +
                  " --model.n_embd=64 --train.max_steps=120");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Plus feature distillation on every layer (through learned 64 -> 128 projections).
  const std::string features = dir_->file("features");
  r = run_command(lmtrain_binary() + " train" + student(features, 120, teacher) +
                  " --distill.feature_layers=all --distill.feature_weight=0.1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double with_teacher = val_loss(distilled), without = val_loss(alone),
               with_features = val_loss(features);
  std::cout << "val loss after 120 steps: distilled " << with_teacher << ", with features "
            << with_features << ", alone " << without << "\n";
  ASSERT_GT(with_teacher, 0);
  EXPECT_LT(with_teacher, without - 0.05);
  // Feature distillation adds to the logits' (0.017 to 0.04 lower on the corpora this test has
  // seen; the margin depends on the prepared split).
  EXPECT_LT(with_features, with_teacher - 0.01);
  // Metrics carry both terms: loss = alpha kd + (1 - alpha) ce.
  std::ifstream in(distilled + "/metrics.jsonl");
  int records = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("loss")) continue;
    ++records;
    ASSERT_TRUE(j.contains("kd_loss") && j.contains("ce_loss")) << line;
    EXPECT_NEAR(j["loss"].get<double>(),
                0.5 * j["kd_loss"].get<double>() + 0.5 * j["ce_loss"].get<double>(), 1e-4);
  }
  EXPECT_GT(records, 0);
}

TEST_F(DistillTest, TwoRanksEqualOneRankAndResumeEqualsUninterrupted) {
  // With feature distillation on layers 1 and 3 through learned 64 -> 128 projections, which
  // train beside the student and live in the checkpoint's objective.safetensors.
  const std::string one = dir_->file("one"), two = dir_->file("two"), cut = dir_->file("cut");
  auto features = [](const std::string& run) {
    return student(run, 8) + " --distill.feature_layers=1,3 --distill.feature_weight=0.5";
  };
  auto r = run_command(lmtrain_binary() + " train" + features(one));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("feature MSE on layers (student:teacher) 1:1,3:3 through learned "
                          "64->128 projections"),
            std::string::npos)
      << r.output;
  r = run_command(lmtrain_binary() + " launch --nproc_per_node=2 --master_port=" +
                  std::to_string(free_port()) + " -- train" + features(two) + " --train.threads=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string latest = "/checkpoints/latest";
  EXPECT_LE(max_param_rel_diff(two + latest, one + latest), 1e-5);
  EXPECT_LE(max_param_rel_diff(two + latest, one + latest, "objective.safetensors"), 1e-5);
  r = run_command(lmtrain_binary() + " train" + features(cut) + " --train.stop_at_step=5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The step-5 checkpoint also resumes as ZeRO-3 on 2 ranks through the sharded set-up (each
  // rank's shard of the student by range, the projections whole into their module and their
  // part into the shard): within float tolerance of the uninterrupted run.
  const std::string cut_z3 = dir_->file("cut_z3");
  fs::copy(cut, cut_z3, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  r = run_command(
      lmtrain_binary() + " launch --nproc_per_node=2 --master_port=" + std::to_string(free_port()) +
      " -- train" + features(cut_z3) + " --train.threads=1 --dist.zero=3 --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ZeRO-3 sharded set-up: the model built unwritten"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(this rank's shard only, read by range)"), std::string::npos)
      << r.output;
  EXPECT_LE(max_param_rel_diff(cut_z3 + latest, one + latest), 1e-5);
  // (Its objective.safetensors is assembled from the shards in layout order: by name.)
  EXPECT_LE(max_rel_diff_by_name(cut_z3 + latest, one + latest, "objective.safetensors"), 1e-5);
  r = run_command(lmtrain_binary() + " train" + features(cut) + " --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(max_param_rel_diff(cut + latest, one + latest), 0.0);
  EXPECT_EQ(max_param_rel_diff(cut + latest, one + latest, "objective.safetensors"), 0.0);
  // The projections trained: they moved from their initial draw (step 5 -> 8).
  EXPECT_GT(
      max_param_rel_diff(cut + "/checkpoints/step_00000005", one + latest, "objective.safetensors"),
      1e-4);
  // The student's own file holds the student only; the feature loss is logged.
  for (const auto& name : core::read_safetensors(one + latest + "/model.safetensors").names) {
    EXPECT_EQ(name.find("feature"), std::string::npos) << name;
  }
  EXPECT_NE(read_text(one + "/metrics.jsonl").find("\"feature_loss\""), std::string::npos);
  // The teacher's checkpoint was read by all of these, never written.
  EXPECT_EQ(read_text(teacher_ckpt_ + "/model.safetensors"), teacher_bytes_);
  EXPECT_EQ(fs::canonical(teacher_ + "/checkpoints/latest").string(), teacher_ckpt_);
}

// An MoE student with feature projections: one process's step-5 checkpoint resumes as ZeRO-3 on
// 2 ranks under expert parallelism (dist.ep=2) through the sharded set-up: each rank reads its
// experts' rows of the saved stacks and its shard of the rest by range, the projections whole
// into their module (their moments in the shard's range, beside the experts' by name). The
// resumed run ends within float tolerance of the uninterrupted one.
TEST_F(DistillTest, MoeStudentResumesAsZero3UnderExpertParallelism) {
  const std::string one = dir_->file("moe_one"), cut = dir_->file("moe_cut");
  auto moe = [](const std::string& run) {
    return student(run, 8) +
           " --model.mlp=swiglu --model.moe.num_experts=4 --model.moe.top_k=2"
           " --model.moe.expert_hidden=64 --model.moe.aux_loss_coef=0 --log.every=1"
           " --distill.feature_layers=1,3 --distill.feature_weight=0.5";
  };
  auto r = run_command(lmtrain_binary() + " train" + moe(one));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_binary() + " train" + moe(cut) + " --train.stop_at_step=5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(
      lmtrain_binary() + " launch --nproc_per_node=2 --master_port=" + std::to_string(free_port()) +
      " -- train" + moe(cut) + " --train.threads=1 --dist.zero=3 --dist.ep=2 --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"ZeRO-3 sharded set-up: the model built unwritten",
                           "resume: this rank reads only its own experts' rows of the saved stacks",
                           "(this rank's shard only, read by range)"}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  }
  const std::string latest = "/checkpoints/latest";
  const double student = max_param_rel_diff(cut + latest, one + latest);
  const double projections =
      max_rel_diff_by_name(cut + latest, one + latest, "objective.safetensors");
  const auto l = logged_losses(cut), want = logged_losses(one);
  ASSERT_EQ(l.size(), want.size());
  double loss = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    loss = std::max(loss, std::abs(l[i] - want[i]) / std::abs(want[i]));
  }
  std::cout << "resumed as ZeRO-3 with dist.ep=2 vs uninterrupted: loss " << loss << ", student "
            << student << ", projections " << projections << " (relative)\n";
  EXPECT_LE(loss, 1e-6);
  EXPECT_LE(student, 1e-5);
  EXPECT_LE(projections, 1e-5);
}

TEST_F(DistillTest, LoraStudentWithZeroOnTwoRanksEqualsOneRank) {
  // A width-64 base, then LoRA adapters on its attention distilled from the teacher; the base
  // stays frozen, only the adapters are trained, sharded over 2 ranks with ZeRO-1.
  const std::string base = dir_->file("lora_base");
  auto r = run_command(lmtrain_binary() + " train" + common() + " --run.dir=" + base +
                       " --model.n_embd=64 --train.max_steps=10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string lora = " --model.init_from=" + base + " --lora.rank=4 --lora.targets=q,k,v,o";
  const std::string one = dir_->file("lora_one"), two = dir_->file("lora_two");
  r = run_command(lmtrain_binary() + " train" + student(one, 6) + lora);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_binary() +
                  " launch --nproc_per_node=2 --master_port=" + std::to_string(free_port()) +
                  " -- train" + student(two, 6) + lora + " --dist.zero=1 --train.threads=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kd "), std::string::npos) << r.output;
  EXPECT_LE(max_param_rel_diff(two + "/checkpoints/latest", one + "/checkpoints/latest"), 1e-5);
  EXPECT_NEAR(last_logged_loss(two), last_logged_loss(one), 1e-5);
}

TEST_F(DistillTest, SeedFlagsTrainATeacherFirstAndGenerateFromIt) {
  const std::string run = dir_->file("seed"), saved = dir_->file("ckpt.pth");
  const std::string flags = common() + " --run.dir=" + run +
                            " --model.n_embd=32 --model.n_head=2 --max_steps=4"
                            " --distill.teacher_steps=3 --use_distillation"
                            " --teacher_hidden_size 64 --distillation_temperature 2.0"
                            " --distillation_alpha 0.8";
  auto r = run_command(lmtrain_binary() + " train" + flags + " --save_checkpoint " + saved);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The teacher: width 64, trained 3 steps in RUN_DIR/teacher, recorded in the student's config.
  ASSERT_TRUE(fs::exists(run + "/teacher/checkpoints/step_00000003/model.safetensors")) << r.output;
  const std::string config = read_text(run + "/config.yaml");
  const std::string teacher_dir = fs::absolute(run + "/teacher/checkpoints/step_00000003").string();
  EXPECT_NE(config.find("teacher: \"" + teacher_dir + "\""), std::string::npos) << config;
  EXPECT_NE(config.find("alpha: 0.8"), std::string::npos) << config;
  ASSERT_TRUE(fs::exists(saved + "/meta.json")) << r.output;
  // Sampling from the teacher and from the student.
  for (const std::string extra : {" --use_teacher", ""}) {
    r = run_command(lmtrain_binary() + " generate --checkpoint " + saved + extra +
                    " --max_tokens 6 --print_ids --stop_at_eot=false --temperature 0");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  auto teacher_ids = run_command(lmtrain_binary() + " generate --checkpoint " + saved +
                                 " --use_teacher --max_tokens 6 --print_ids --temperature 0"
                                 " --stop_at_eot=false");
  auto direct_ids = run_command(lmtrain_binary() + " generate --checkpoint " + run +
                                "/teacher --max_tokens 6 --print_ids --temperature 0"
                                " --stop_at_eot=false");
  EXPECT_EQ(teacher_ids.output, direct_ids.output);
  // --load_checkpoint continues from the saved copy (the teacher is not retrained).
  r = run_command(lmtrain_binary() + " train" + flags + " --max_steps=6 --load_checkpoint " +
                  saved);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from "), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(run + "/teacher/checkpoints/step_00000004")) << r.output;
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_00000006")) << r.output;
}

TEST_F(DistillTest, ClearErrors) {
  // A teacher trained on another tokenizer (the synthetic corpus, vocabulary 384).
  fs::create_directories(dir_->file("other"));
  const std::string other = prepare_synthetic_data(dir_->file("other"));
  const std::string foreign = dir_->file("foreign");
  auto r = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + other +
                       " --run.dir=" + foreign + " --train.max_steps=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_binary() + " train" + common() + " --run.dir=" + dir_->file("bad") +
                  " --model.n_embd=64 --train.max_steps=2 --distill.enabled=true"
                  " --distill.teacher=" +
                  foreign);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("tokenizer"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("vocabulary"), std::string::npos) << r.output;
  // --use_teacher on a checkpoint of plain training.
  r = run_command(lmtrain_binary() + " generate --checkpoint " + teacher_ + " --use_teacher");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("not from a distillation run"), std::string::npos) << r.output;
  // A teacher path with no checkpoint.
  r = run_command(
      lmtrain_binary() + " train" + common() + " --run.dir=" + dir_->file("bad2") +
      " --train.max_steps=2 --distill.enabled=true --distill.teacher=" + dir_->file("nowhere"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("distill.teacher"), std::string::npos) << r.output;
  // Feature layers outside the teacher, and MoE-output distillation of dense models: exit 2
  // naming the key.
  const std::pair<std::string, std::string> bad_features[] = {
      {" --distill.feature_layers=1:7",
       "'distill.feature_layers' = '1:7': layer 7 is outside the teacher's 4 layers"},
      {" --distill.expert_weight=1",
       "'distill.expert_weight' > 0 distills MoE outputs, which needs MoE layers in both models: "
       "the student has 0, the teacher 0"}};
  for (const auto& [flags, message] : bad_features) {
    r = run_command(lmtrain_binary() + " train" + student(dir_->file("bad3"), 2) + flags);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
}

TEST_F(DistillTest, OfflineCacheEqualsOnlineTopKAndResumes) {
  // The synthetic corpus (small, so the cache is quick to write) and a teacher trained on it.
  fs::create_directories(dir_->file("syn"));
  const std::string data = prepare_synthetic_data(dir_->file("syn"));
  const std::string base = tiny_train_flags() + " --data.dir=" + data + " --optim.eps=1e-6";
  const std::string teacher = dir_->file("syn_teacher");
  auto r = run_command(lmtrain_binary() + " train" + base + " --run.dir=" + teacher +
                       " --model.n_embd=64 --train.max_steps=30");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string cache = dir_->file("top8.bin");
  r = run_command(lmtrain_binary() + " distill-cache" + base + " --distill.teacher=" + teacher +
                  " --top_k 8 --output " + cache);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string kd = base + " --train.max_steps=8 --distill.enabled=true --distill.alpha=0.5";
  const std::string offline = dir_->file("offline"), online = dir_->file("online"),
                    cut = dir_->file("offline_cut");
  r = run_command(lmtrain_binary() + " train" + kd + " --run.dir=" + offline +
                  " --distill.cache=" + cache);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_binary() + " train" + kd + " --run.dir=" + online +
                  " --distill.teacher=" + teacher + " --distill.top_k=8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The same loss as the online teacher restricted to the same top-k, step by step.
  const auto a = logged_losses(offline), b = logged_losses(online);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
  EXPECT_LE(max_param_rel_diff(offline + "/checkpoints/latest", online + "/checkpoints/latest"),
            1e-5);
  // Resume keeps its place in the cache: bitwise the uninterrupted run.
  r = run_command(lmtrain_binary() + " train" + kd + " --run.dir=" + cut +
                  " --distill.cache=" + cache + " --train.stop_at_step=5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_binary() + " train" + kd + " --run.dir=" + cut +
                  " --distill.cache=" + cache + " --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(max_param_rel_diff(cut + "/checkpoints/latest", offline + "/checkpoints/latest"), 0.0);
  // A cache for other windows, and a damaged one, are refused naming what is wrong.
  r = run_command(lmtrain_binary() + " train" + kd + " --run.dir=" + dir_->file("bad_len") +
                  " --data.seq_len=16 --distill.cache=" + cache);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.seq_len: cache 32, run 16"), std::string::npos) << r.output;
  const std::string bytes = read_text(cache);
  write_text(dir_->file("short.bin"), bytes.substr(0, bytes.size() - 100));
  r = run_command(lmtrain_binary() + " train" + kd + " --run.dir=" + dir_->file("bad_file") +
                  " --distill.cache=" + dir_->file("short.bin"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("is damaged or not a teacher cache"), std::string::npos) << r.output;
  // Feature terms need the teacher's hidden states, which a cache does not hold.
  r = run_command(lmtrain_binary() + " train" + kd + " --run.dir=" + dir_->file("bad_features") +
                  " --distill.cache=" + cache + " --distill.feature_layers=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("distill.feature_layers and distill.expert_weight compare the "
                          "teacher's hidden states, which distill.cache does not hold"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
