// The command lines users bring from the trainers lmtrain replaces (issue 16; README "Coming
// from ..."): each system's documented invocation, shrunk to a tiny model and a few steps and
// run at 2 ranks where the original is distributed, exits 0 and writes the run dir its flags
// ask for; each flat alias resolves to the same config.yaml as its native key; the bad
// combinations are usage errors naming both sides.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/config.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

// No launcher variables from the environment ctest runs in.
const char* kNoLauncher =
    "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT ";

class SeedCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_seedcli");
    data_ = prepare_synthetic_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }

  // Run-time settings of every run here: one thread, a line per step, no evaluation.
  static std::string common() {
    return " --data_dir " + data_ +
           " --train.threads=1 --log.every=1 --train.eval_every=0 --train.eval_batches=2"
           " --optim.warmup_steps=0";
  }
  // Shrinks a preset's model to 2 blocks of width 32 and 32-token windows.
  static std::string tiny_model() {
    return " --model.n_layer=2 --model.n_embd=32 --model.n_head=2 --model.n_kv_head=0"
           " --model.head_dim=0 --model.mlp_hidden=64 --model.block_size=32";
  }
  static std::string config_file(const std::string& name) {
    return " --config " + source_dir() + "/configs/" + name;
  }
  // RUN_DIR/config.yaml with the run dir's own path blanked (two runs compared need two dirs).
  static std::string resolved_config(const std::string& run) {
    std::string text = read_text(run + "/config.yaml");
    for (size_t at; (at = text.find(run)) != std::string::npos;)
      text.replace(at, run.size(), "RUN");
    return text;
  }
  static void expect_run_dir(const std::string& run, const CommandResult& r, int ranks) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(fs::exists(run + "/config.yaml")) << r.output;
    EXPECT_TRUE(fs::exists(run + "/checkpoints/latest/meta.json")) << r.output;
    EXPECT_EQ(fs::exists(run + "/train.rank1.log"), ranks > 1) << r.output;
  }
  // Their YAML (the temporal-encoder pretrainer's training: / data: sections).
  static std::string seed_yaml() {
    const std::string path = dir_->file("pretrain.yaml");
    write_text(path,
               "training:\n  num_epochs: 1\n  learning_rate: 0.0005\n"
               "  gradient_accumulation_steps: 2\n  fp16: false\n  gradient_clip: 0.5\n"
               "  batch_size: 2\n"
               "data:\n  batch_size: 2\n  num_workers: 4\n  pin_memory: true\n"
               "  prefetch_factor: 2\n  seq_len: 32\n");
    return path;
  }

  static TempDir* dir_;
  static std::string data_;
};
TempDir* SeedCliTest::dir_ = nullptr;
std::string SeedCliTest::data_;

TEST_F(SeedCliTest, NanochatBaseTrainUnderTorchrunOnTwoRanks) {
  // torchrun --nproc_per_node=2 -m scripts.base_train -- --depth=20 --device_batch_size=32
  //     --total_batch_size=1048576 --max_seq_len=2048
  const std::string run = dir_->file("nanochat");
  auto r = run_command(torchrun_binary() + " --no_python --nproc_per_node=2 --master_port=" +
                       std::to_string(free_port()) + " " + lmtrain_binary() + " train" +
                       config_file("nanochat-d12.yaml") +
                       " --depth=1 --device_batch_size=2 --total_batch_size=256 --max_seq_len=32"
                       " --max_steps=3 --output_dir=" +
                       run + common());
  expect_run_dir(run, r, 2);
  // 256 tokens = 2 windows x 32 tokens x 2 ranks x 2 accumulation steps.
  EXPECT_NE(r.output.find("micro-batch 2 x 2 rank(s) x 2 accumulation step(s)"), std::string::npos)
      << r.output;
}

TEST_F(SeedCliTest, NanochatTodaysDashedFlagsTrainItsCurrentModel) {
  // python -m scripts.base_train --depth=1 --device-batch-size=2 --total-batch-size=64
  //     --max-seq-len=32 --window-pattern=SL --target-param-data-ratio=0.002 --eval-every=-1
  const std::string run = dir_->file("nanochat_dashed");
  auto r = run_command(lmtrain_binary() + " train" + config_file("nanochat-d12.yaml") +
                       " --depth=2 --device-batch-size=2 --total-batch-size=64 --max-seq-len=32"
                       " --window-pattern=SL --target-param-data-ratio=0.002 --eval-every=0"
                       " --embedding-lr=0.1 --output_dir=" +
                       run + common());
  expect_run_dir(run, r, 1);
  for (const char* part : {"train.target_param_data_ratio = 0.002: ", "sliding windows 513,0",
                           "nanochat parts: value-embeds smear backout x0-lambdas"}) {
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  }
  const std::string cfg = read_text(run + "/config.yaml");
  EXPECT_NE(cfg.find("window_pattern: \"SL\""), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("embedding_lr: 0.1"), std::string::npos) << cfg;
}

TEST_F(SeedCliTest, NanochatTotalBatchThatDoesNotDivideNamesAllFourNumbersAndFlags) {
  auto r = run_command(lmtrain_binary() + " train" + config_file("nanochat-d12.yaml") +
                       " --depth=1 --device_batch_size=2 --total_batch_size=300 --max_seq_len=32"
                       " --max_steps=3 --output_dir=" +
                       dir_->file("nanochat_bad") + common());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  for (const char* part : {"train.total_batch_size (--total_batch_size) = 300",
                           "(--batch_size, --device_batch_size) 2",
                           "(--max_seq_len, --max_length) 32", "world size 1"}) {
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  }
}

TEST_F(SeedCliTest, Qwen3TrainerUnderTorchDistributedLaunchOnTwoRanks) {
  // python -m torch.distributed.launch --nproc_per_node=4 run_distributed_training.py
  //     --batch_size 4 --max_length 256 --num_epochs 10 --model_size tiny --lr 0.0005 --save_dir D
  // lmtrain takes the script's place; the deprecated launcher passes --local-rank=N to it.
  const std::string shim = dir_->file("run_distributed_training.py");
  write_text(shim, "import os, sys\nos.execv('" + lmtrain_binary() + "', ['" + lmtrain_binary() +
                       "', 'train'] + sys.argv[1:])\n");
  const std::string run = dir_->file("qwen3");
  auto r = run_command(lmtrain_python() +
                       " -m torch.distributed.launch --nproc_per_node=2 --master_port=" +
                       std::to_string(free_port()) + " " + shim +
                       " --batch_size 4 --max_length 32 --num_epochs 1 --model_size tiny"
                       " --lr 0.0005 --save_dir " +
                       run + " --max_steps 3" + tiny_model() + common());
  expect_run_dir(run, r, 2);
  EXPECT_NE(read_text(run + "/config.yaml").find("arch: \"qwen3\""), std::string::npos);
  EXPECT_NE(read_text(run + "/train.rank1.log").find("rank 1 of 2"), std::string::npos);
}

TEST_F(SeedCliTest, Qwen3TrainerWithoutALauncherIsOneProcess) {
  const std::string run = dir_->file("qwen3_alone");
  auto r = run_command(std::string(kNoLauncher) + lmtrain_binary() +
                       " train --local_rank 0 --batch_size 4 --max_length 32 --model_size tiny"
                       " --save_dir " +
                       run + " --max_steps 2" + tiny_model() + common());
  expect_run_dir(run, r, 1);
  EXPECT_NE(r.output.find("lmtrain train: rank 0 of 1,"), std::string::npos) << r.output;
}

TEST_F(SeedCliTest, LocalRankAndWorldSizeFlagsMakeTwoRanksWithoutLauncherVariables) {
  // What torch.distributed.launch scripts get without --use-env, here with no RANK/WORLD_SIZE at
  // all: the flags alone say which rank of how many (rendezvous on MASTER_PORT).
  const std::string run = dir_->file("flag_ranks");
  const std::string base =
      std::string(kNoLauncher) + "MASTER_PORT=" + std::to_string(free_port()) +
      " TORCH_DISTRIBUTED_DEBUG=INFO " + lmtrain_binary() + " train --world_size 2 --save_dir " +
      run + " --max_steps 2 --batch_size 4 --max_length 32" + tiny_model() + common();
  auto rs = run_parallel({base + " --local_rank 0", base + " --local-rank=1"});
  for (const auto& r : rs) EXPECT_EQ(r.exit_code, 0) << r.output;
  expect_run_dir(run, rs[0], 2);
  const std::string log = read_text(run + "/train.log");
  // INFO: the group and the bucket layout, but not every collective (that is DETAIL).
  EXPECT_NE(log.find("TORCH_DISTRIBUTED_DEBUG: rank 0 of 2: gloo process group"), std::string::npos)
      << log;
  EXPECT_NE(log.find("TORCH_DISTRIBUTED_DEBUG:   bucket 0:"), std::string::npos) << log;
  EXPECT_EQ(log.find("allreduce call"), std::string::npos) << log;
  EXPECT_EQ(log.find("bucket timeline"), std::string::npos) << log;
}

TEST_F(SeedCliTest, EnvironmentSetByHandWithoutALauncherAndDetailedDebugLog) {
  const std::string run = dir_->file("by_hand");
  const std::string port = std::to_string(free_port());
  std::vector<std::string> commands;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    commands.push_back("env MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " WORLD_SIZE=2 RANK=" + r +
                       " LOCAL_RANK=" + r +
                       " TORCH_DISTRIBUTED_DEBUG=DETAIL NCCL_DEBUG=WARN CUDA_VISIBLE_DEVICES="
                       " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True " +
                       lmtrain_binary() + " train --output_dir " + run +
                       " --max_steps 2 --batch_size 4 --data.seq_len=32" + tiny_model() + common());
  }
  auto rs = run_parallel(commands);
  for (const auto& r : rs) EXPECT_EQ(r.exit_code, 0) << r.output;
  expect_run_dir(run, rs[0], 2);
  const std::string log0 = read_text(run + "/train.log");
  const std::string log1 = read_text(run + "/train.rank1.log");
  for (const char* part : {"rank 0 of 2: gloo process group", "NCCL_DEBUG=WARN",
                           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                           "bucket 0:", "TORCH_DISTRIBUTED_DEBUG: rank 0 allreduce call",
                           // DETAIL: each step's bucket timeline, ready to done, against the
                           // end of backward (issue 43's picture).
                           "TORCH_DISTRIBUTED_DEBUG: rank 0: bucket timeline (ms since backward",
                           "communication after backward:"}) {
    EXPECT_NE(log0.find(part), std::string::npos) << part << "\n" << log0;
  }
  EXPECT_NE(log1.find("TORCH_DISTRIBUTED_DEBUG: rank 1 allreduce call"), std::string::npos) << log1;
}

TEST_F(SeedCliTest, TemporalEncoderPretrainerYamlOnTwoRanksThenResumeFromACheckpointPath) {
  const std::string yaml = seed_yaml();
  const std::string run = dir_->file("temporal");
  auto r = run_command(lmtrain_binary() + " launch --nproc_per_node=2 --master_port=" +
                       std::to_string(free_port()) + " -- train --config " + yaml +
                       " --output_dir " + run + " --max_steps 3" + tiny_model() + common());
  expect_run_dir(run, r, 2);
  for (const char* key :
       {"data.num_workers = 4", "data.pin_memory = true", "data.prefetch_factor = 2"}) {
    EXPECT_NE(r.output.find(std::string(key) + " (" + yaml +
                            ") has no effect: lmtrain's data is "
                            "memory-mapped"),
              std::string::npos)
        << key << "\n"
        << r.output;
  }
  // Their keys resolve to the same config as ours written natively.
  const std::string native_yaml = dir_->file("native.yaml");
  write_text(native_yaml,
             "train:\n  epochs: 1\n  grad_accum_steps: 2\n  precision: fp32\n  grad_clip: 0.5\n"
             "  micro_batch_size: 2\noptim:\n  lr: 0.0005\ndata:\n  seq_len: 32\n");
  const std::string native = dir_->file("temporal_native");
  auto n = run_command(lmtrain_binary() + " train --config " + native_yaml + " --output_dir " +
                       native + " --max_steps 3" + tiny_model() + common());
  ASSERT_EQ(n.exit_code, 0) << n.output;
  EXPECT_EQ(resolved_config(run), resolved_config(native));

  // --resume PATH/TO/epoch_5_step_5000: a directory holding an lmtrain checkpoint resumes (one
  // process, 4 accumulation steps: the same 256-token global batch as 2 ranks x 2).
  fs::create_directories(dir_->file("saved"));
  const std::string saved = dir_->file("saved/epoch_5_step_5000");
  ASSERT_EQ(run_command("cp -rL " + run + "/checkpoints/latest " + saved).exit_code, 0);
  const std::string resumed = dir_->file("temporal_resumed");
  auto c = run_command(lmtrain_binary() + " train --config " + yaml + " --output_dir " + resumed +
                       " --resume " + saved + " --gradient_accumulation_steps 4 --max_steps 5" +
                       tiny_model() + common());
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from "), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("epoch_5_step_5000: step 3"), std::string::npos) << c.output;
  EXPECT_TRUE(fs::exists(resumed + "/checkpoints/latest/meta.json")) << c.output;

  // ... and one the pretrainer itself wrote (PyTorch pickles) is a clear error.
  const std::string theirs = dir_->file("theirs/epoch_5_step_5000");
  fs::create_directories(theirs);
  write_text(theirs + "/model.pt", "not ours");
  auto bad = run_command(lmtrain_binary() + " train --config " + yaml + " --output_dir " +
                         dir_->file("temporal_bad") + " --resume " + theirs + " --max_steps 5" +
                         tiny_model() + common());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find(theirs + " is not an lmtrain checkpoint dir (no meta.json)"),
            std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("it holds model.pt, a PyTorch checkpoint"), std::string::npos)
      << bad.output;
}

TEST_F(SeedCliTest, PikvTrainerFlagsWithSelfSpawnedRanks) {
  // python train_distributed.py --epochs 10 --save_every 5 --model_type standard --use_spawn
  const std::string run = dir_->file("pikv");
  auto r = run_command(lmtrain_binary() +
                       " train --nproc_per_node=2 --epochs 1 --save_every 2 --model_type standard"
                       " --use_spawn --output_dir " +
                       run +
                       " --max_steps 3 --batch_size 2 --data.seq_len=32"
                       " --train.total_batch_size=0" +
                       tiny_model() + common());
  expect_run_dir(run, r, 2);
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_00000002/meta.json")) << r.output;
}

TEST_F(SeedCliTest, EveryAliasResolvesToTheConfigOfItsNativeKey) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      // nanochat, the temporal-encoder pretrainer and the PiKV trainer, on the nanochat preset
      {config_file("nanochat-d12.yaml") +
           " --depth=1 --device_batch_size=2 --total_batch_size=128 --max_seq_len=32"
           " --num_epochs=3 --learning_rate=0.002 --gradient_clip=0.5 --save_every=7 --seed=5",
       config_file("nanochat-d12.yaml") +
           " --model.depth=1 --train.micro_batch_size=2 --train.total_batch_size=128"
           " --data.seq_len=32 --train.epochs=3 --optim.lr=0.002 --train.grad_clip=0.5"
           " --checkpoint.every=7 --train.seed=5"},
      // nanochat's chat_sft (its --num_iterations: tests/e2e/chat_sft_test; --eval_every would
      // clash with common()'s --train.eval_every)
      {config_file("nanochat-d12.yaml") +
           " --depth=1 --max_seq_len=32 --total_batch_size=128 --device_batch_size=2"
           " --embedding_lr=0.2 --unembedding_lr=0.004 --matrix_lr=0.03"
           " --warmdown_ratio=0.4 --final_lr_frac=0.05",
       config_file("nanochat-d12.yaml") +
           " --model.depth=1 --data.seq_len=32 --train.total_batch_size=128"
           " --train.micro_batch_size=2 --optim.embedding_lr=0.2"
           " --optim.head_lr=0.004 --optim.muon_lr=0.03 --optim.decay_fraction=0.4"
           " --optim.min_lr_ratio=0.05"},
      // the Qwen3 trainer and the seeds' flat flags
      {" --batch_size 4 --max_length 16 --epochs 2 --lr 0.003 --gradient_accumulation_steps 2",
       " --train.micro_batch_size=4 --data.seq_len=16 --train.epochs=2 --optim.lr=0.003"
       " --train.grad_accum_steps=2"},
      // the PiKV distillation trainer's settings (its --use_distillation: tests/e2e/distill_test)
      {" --teacher_hidden_size 64 --distillation_temperature 2.5 --distillation_alpha 0.8",
       " --distill.teacher_hidden_size=64 --distill.temperature=2.5 --distill.alpha=0.8"},
  };
  int i = 0;
  for (const auto& [alias_flags, native_flags] : pairs) {
    const std::string a = dir_->file("alias" + std::to_string(i));
    const std::string b = dir_->file("native" + std::to_string(i++));
    // Alias spellings of run.dir: --save_dir and --output_dir; of the step count: --max_steps.
    auto ra = run_command(std::string(kNoLauncher) + lmtrain_binary() + " train" + alias_flags +
                          " --save_dir " + a + " --max_steps 1" + common());
    auto rb = run_command(std::string(kNoLauncher) + lmtrain_binary() + " train" + native_flags +
                          " --run.dir=" + b + " --train.max_steps=1" + common());
    ASSERT_EQ(ra.exit_code, 0) << ra.output;
    ASSERT_EQ(rb.exit_code, 0) << rb.output;
    EXPECT_EQ(resolved_config(a), resolved_config(b)) << alias_flags;
  }
}

TEST_F(SeedCliTest, BadCombinationsAreUsageErrorsNamingBothSides) {
  const std::string base = lmtrain_binary() + " train --output_dir " + dir_->file("bad") +
                           " --max_steps 1 --data.seq_len=32" + tiny_model() + common();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"env LOCAL_RANK=0 RANK=0 WORLD_SIZE=1 " + base + " --local_rank=1",
       {"--local_rank=1 contradicts LOCAL_RANK=0"}},
      {"env LOCAL_RANK=0 RANK=0 WORLD_SIZE=1 " + base + " --local-rank 0 --world_size 4",
       {"--world_size=4 contradicts WORLD_SIZE=1"}},
      {std::string(kNoLauncher) + base + " --local_rank=1",
       {"--local_rank=1 without --world_size or WORLD_SIZE"}},
      {base + " --model_size huge", {"--model_size='huge'", "tiny, small, medium or large"}},
      {base + " --model_size tiny --model_type pikv", {"--model_type=pikv and --model_size=tiny"}},
      {base + " --total_batch_size 512 --gradient_accumulation_steps 3",
       {"(--total_batch_size) = 512 tokens contradicts", "(--gradient_accumulation_steps) = 3"}},
      {"TORCH_DISTRIBUTED_DEBUG=LOUD " + base, {"TORCH_DISTRIBUTED_DEBUG='LOUD'"}},
  };
  for (const auto& [command, parts] : cases) {
    auto r = run_command(command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
    for (const auto& part : parts) {
      EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
    }
  }
}

TEST_F(SeedCliTest, TrainHelpListsEveryAlias) {
  auto r = run_command(lmtrain_binary() + " train --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& [alias, target] : core::config_aliases()) {
    EXPECT_NE(r.output.find("--" + alias), std::string::npos) << alias;
    EXPECT_NE(r.output.find(target), std::string::npos) << target;
  }
  for (const char* flag : {"--local_rank", "--world_size", "--model_size", "--model_type"}) {
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace lmtrain::testing
