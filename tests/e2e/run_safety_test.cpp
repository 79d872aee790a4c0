// "Never lose a run" (issue 17), with the real binary on real files: a fresh run never writes
// over an earlier one, one job at a time per run dir (a lock that dies with its holder),
// corrupt token ids and over-long generations are named, and exit codes tell the truth.
// Part 3 (issue 38): a rewind to an earlier checkpoint never overwrites a later timeline's
// checkpoints (asserted on their bytes), a fresh timeline starts a fresh metrics.jsonl and keeps
// the old one aside, a user's file in a run dir is never replaced, a refused start leaves
// run_state.json as it was, a closed console does not kill a run, and start-up says which of
// max_steps and epochs wins.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "checkpoint/checkpoint_store.h"
#include "core/sha256.h"
#include "e2e/corpus.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

// A train run started in the background by a shell that records its exit code in `exit_file`.
// The process is killed (SIGKILL) when the object dies, should the test end early.
class BackgroundRun {
 public:
  BackgroundRun(const std::string& command, const std::string& log, const std::string& exit_file)
      : exit_file_(exit_file) {
    fs::remove(exit_file);
    auto r = run_command("sh -c '" + command + "; echo $? > " + exit_file + "' > " + log +
                         " 2>&1 & echo $!");
    shell_pid_ = std::stoi(r.output);
  }
  ~BackgroundRun() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    ::kill(shell_pid_, SIGKILL);
  }
  // Waits until lmtrain holds the run dir's lock and returns its pid (from the lock's text).
  // A guard of a few minutes turns a hang into a failure; it asserts no timing.
  int wait_for_lock(const std::string& run_dir) {
    const std::string lock = run_dir + "/.lock";
    for (int i = 0; i < 3000 && pid_ <= 0; ++i) {
      std::ifstream in(lock);
      std::string word;
      int pid = 0;
      if (in >> word >> pid && word == "pid" && pid > 0 && ::kill(pid, 0) == 0) pid_ = pid;
      if (pid_ <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return pid_;
  }
  // Waits for the run to end; its exit code (-1 if the guard ran out).
  int wait_exit() {
    for (int i = 0; i < 3000; ++i) {
      std::ifstream in(exit_file_);
      int code = -1;
      if (in >> code) return code;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
  // Waits until the process is gone (after a SIGKILL).
  void wait_gone() {
    for (int i = 0; i < 3000 && ::kill(pid_, 0) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  std::string exit_file_;
  int shell_pid_ = -1;
  int pid_ = -1;
};

// Every file under RUN/checkpoints (step dirs and what links resolve to): path -> sha256.
std::map<std::string, std::string> checkpoint_bytes(const std::string& checkpoints) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(checkpoints)) {
    if (e.is_regular_file() && !e.is_symlink()) {
      out[fs::relative(e.path(), checkpoints).string()] = core::sha256_file_hex(e.path().string());
    }
  }
  return out;
}

// The checkpoints/ links: name -> target.
std::map<std::string, std::string> checkpoint_links(const std::string& checkpoints) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(checkpoints)) {
    if (e.is_symlink()) out[e.path().filename().string()] = fs::read_symlink(e.path()).string();
  }
  return out;
}

class RunSafetyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_run_safety");
    data_ = prepare_synthetic_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string train_cmd(const std::string& run, const std::string& extra) {
    return lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
           " --run.dir=" + run + extra;
  }
  static CommandResult train(const std::string& run, const std::string& extra) {
    return run_command(train_cmd(run, extra));
  }
  static std::string launch2() {
    return lmtrain_binary() + " launch --standalone --nproc_per_node=2 -- train";
  }
  static std::string checkpoint_hash(const std::string& ckpt) {
    return core::sha256_file_hex(ckpt + "/model.safetensors");
  }
  // A finished run of 10 steps with checkpoints at 5 and 10 (what a later run must not lose):
  // the sha256 of its last weights and its config.yaml.
  static std::pair<std::string, std::string> train_earlier_run(const std::string& run) {
    auto r = train(run, " --train.max_steps=10 --checkpoint.every=5");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return {checkpoint_hash(run + "/checkpoints/step_00000010"), read_text(run + "/config.yaml")};
  }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* RunSafetyTest::dir_ = nullptr;
std::string RunSafetyTest::data_;

TEST_F(RunSafetyTest, FreshRunIntoARunDirWithCheckpointsIsRefused) {
  const std::string run = dir_->file("used");
  const auto [hash, config] = train_earlier_run(run);

  auto second = train(run, " --train.max_steps=10 --checkpoint.every=5 --optim.lr=1e-4");
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_TRUE(contains(second.output, "run dir " + run +
                                          " already holds 2 checkpoints (step_00000005, "
                                          "step_00000010) of an earlier run"))
      << second.output;
  for (const char* choice : {"--resume=auto", "another run.dir", "--overwrite"}) {
    EXPECT_TRUE(contains(second.output, choice)) << choice << "\n" << second.output;
  }
  // Nothing of the first run changed.
  EXPECT_EQ(checkpoint_hash(run + "/checkpoints/step_00000010"), hash);
  EXPECT_EQ(read_text(run + "/config.yaml"), config);
  EXPECT_EQ(fs::read_symlink(run + "/checkpoints/latest").string(), "step_00000010");

  // --resume=none is a fresh run too.
  EXPECT_EQ(train(run, " --train.max_steps=10 --resume=none").exit_code, 2);
}

TEST_F(RunSafetyTest, OverwriteMovesTheEarlierRunAsideAndKeepsIt) {
  const std::string run = dir_->file("overwritten");
  const auto [hash, config] = train_earlier_run(run);

  auto second = train(run, " --train.max_steps=4 --optim.lr=1e-4 --overwrite");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(contains(second.output, "moved the earlier run in " + run)) << second.output;
  const std::string old = run + "/previous-1";
  EXPECT_EQ(checkpoint_hash(old + "/checkpoints/step_00000010"), hash);
  EXPECT_EQ(checkpoint_hash(old + "/checkpoints/latest"), hash);  // the link still resolves
  EXPECT_TRUE(fs::exists(old + "/checkpoints/step_00000005/meta.json"));
  EXPECT_EQ(read_text(old + "/config.yaml"), config);
  EXPECT_TRUE(fs::exists(old + "/metrics.jsonl"));
  // The new run is alone in the run dir.
  EXPECT_EQ(fs::read_symlink(run + "/checkpoints/latest").string(), "step_00000004");
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step_00000010"));
  EXPECT_TRUE(contains(read_text(run + "/config.yaml"), "max_steps: 4"));

  // A second --overwrite keeps both earlier runs.
  auto third = train(run, " --train.max_steps=2 --overwrite");
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_EQ(checkpoint_hash(old + "/checkpoints/step_00000010"), hash);
  EXPECT_TRUE(fs::exists(run + "/previous-2/checkpoints/step_00000004/meta.json"));
  EXPECT_EQ(fs::read_symlink(run + "/checkpoints/latest").string(), "step_00000002");
}

TEST_F(RunSafetyTest, SecondTrainOnALockedRunDirIsRefusedAndKill9FreesIt) {
  const std::string run = dir_->file("locked");
  BackgroundRun holder(train_cmd(run, " --train.max_steps=1000000"), dir_->file("locked.log"),
                       dir_->file("locked.exit"));
  const int pid = holder.wait_for_lock(run);
  ASSERT_GT(pid, 0) << read_text(dir_->file("locked.log"));

  auto second = train(run, " --train.max_steps=3 --resume=auto");
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_TRUE(contains(second.output,
                       "run dir " + run + " is in use by pid " + std::to_string(pid) + " on host "))
      << second.output;
  // The refused run wrote nothing into the run dir's log: it holds the holder's start only.
  const std::string log = read_text(run + "/train.log");
  const std::string start = "lmtrain train: rank 0 of 1";
  EXPECT_EQ(log.find(start), log.rfind(start)) << log;

  // kill -9 leaves no lock behind: the next run proceeds.
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  holder.wait_gone();
  auto third = train(run, " --train.max_steps=3 --resume=auto");
  EXPECT_EQ(third.exit_code, 0) << third.output;
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_00000003/meta.json")) << third.output;
}

TEST_F(RunSafetyTest, TwoRankJobSharesTheLockAndIsRefusedAsOne) {
  const std::string run = dir_->file("two_ranks");
  const std::string flags = tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
                            " --train.micro_batch_size=4 --train.max_steps=3";
  auto job = run_command(launch2() + flags);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_00000003/meta.json"));

  // While a single process holds the run dir, a 2-rank job on it stops at once on every rank
  // with the holder named, and the launcher passes the usage error's exit code 2 through.
  BackgroundRun holder(train_cmd(run, " --train.max_steps=1000000 --resume=auto"),
                       dir_->file("two_ranks.log"), dir_->file("two_ranks.exit"));
  const int pid = holder.wait_for_lock(run);
  ASSERT_GT(pid, 0) << read_text(dir_->file("two_ranks.log"));
  auto refused = run_command(launch2() + flags + " --resume=auto");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  const std::string held = "is in use by pid " + std::to_string(pid);
  EXPECT_TRUE(contains(refused.output, "[rank 0] error: run dir " + run + " " + held))
      << refused.output;
  EXPECT_TRUE(
      contains(refused.output, "failed with a usage or config error (exit code 2): run dir"))
      << refused.output;
}

TEST_F(RunSafetyTest, SignalStopSavesACheckpointAndExitsWith128PlusTheSignal) {
  for (const int sig : {SIGTERM, SIGINT}) {
    const std::string name = "signal" + std::to_string(sig);
    const std::string run = dir_->file(name);
    BackgroundRun training(train_cmd(run, " --train.max_steps=1000000"), dir_->file(name + ".log"),
                           dir_->file(name + ".exit"));
    const int pid = training.wait_for_lock(run);
    ASSERT_GT(pid, 0) << read_text(dir_->file(name + ".log"));
    // The stop handlers are in place once steps are logged.
    for (int i = 0; i < 3000; ++i) {
      std::error_code ec;
      if (fs::file_size(run + "/metrics.jsonl", ec) > 0 && !ec) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_EQ(::kill(pid, sig), 0);
    EXPECT_EQ(training.wait_exit(), 128 + sig) << read_text(dir_->file(name + ".log"));
    const std::string log = read_text(dir_->file(name + ".log"));
    EXPECT_TRUE(contains(log, "stopped by signal " + std::to_string(sig))) << log;
    EXPECT_FALSE(contains(log, "done:")) << log;
    EXPECT_TRUE(fs::exists(run + "/checkpoints/latest/meta.json")) << log;
  }
}

TEST_F(RunSafetyTest, ResumingAFinishedRunSaysItIsComplete) {
  const std::string run = dir_->file("finished");
  ASSERT_EQ(train(run, " --train.max_steps=4").exit_code, 0);
  auto again = train(run, " --train.max_steps=4 --resume=auto");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_TRUE(contains(again.output, "is already complete")) << again.output;
  EXPECT_TRUE(contains(again.output, "at step 4 of 4")) << again.output;
  EXPECT_FALSE(contains(again.output, "last loss 0.0000")) << again.output;
}

TEST_F(RunSafetyTest, TokenIdOutsideTheVocabularyNamesFileOffsetAndId) {
  const std::string data = dir_->file("bad_data");
  fs::create_directories(data);
  for (const char* f : {"tokenizer.json", "train_00000.bin", "val_00000.bin"}) {
    fs::copy_file(data_ + "/" + f, data + "/" + f);
  }
  {
    // Every id after the 64-byte header becomes 60000 (uint16 shard, vocabulary 384).
    std::fstream f(data + "/train_00000.bin", std::ios::in | std::ios::out | std::ios::binary);
    const auto size = static_cast<std::streamoff>(fs::file_size(data + "/train_00000.bin"));
    f.seekp(64);
    for (std::streamoff off = 64; off + 1 < size; off += 2) f.write("\x60\xea", 2);
  }
  auto r = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data +
                       " --run.dir=" + dir_->file("bad_data_run") + " --train.max_steps=2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "token shard " + data + "/train_00000.bin: token id 60000 at byte offset "))
      << r.output;
  EXPECT_TRUE(contains(r.output, "outside the tokenizer's vocabulary of")) << r.output;
  EXPECT_FALSE(contains(r.output, "index out of range")) << r.output;
}

TEST_F(RunSafetyTest, GenerateBeyondTheContextWarns) {
  const std::string run = dir_->file("for_generate");
  ASSERT_EQ(train(run, " --train.max_steps=2").exit_code, 0);
  auto r = run_command(lmtrain_binary() + " generate --checkpoint " + run +
                       " --max_new_tokens=100000 --stop_at_eot=false --print_ids --threads=1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "max_new_tokens = 100000 is more than the model's context allows: "
                       "block_size 32 minus the 1-token prompt leaves at most 31 new tokens"))
      << r.output;
}

// Item 1: 3 epochs, then a resume from epoch 1's link into the same run dir.
TEST_F(RunSafetyTest, ARewindNeverOverwritesTheLaterTimelinesCheckpoints) {
  const std::string run = dir_->file("rewind");
  const std::string epochs = " --train.max_steps=0 --checkpoint.every_epoch=true";
  auto r = train(run, epochs + " --train.epochs=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("\\((\\d+) steps/epoch\\)"))) << r.output;
  const int64_t S = std::stoll(m[1]);
  const std::string ckpts = run + "/checkpoints";
  const auto bytes = checkpoint_bytes(ckpts);
  const auto links = checkpoint_links(ckpts);
  ASSERT_EQ(links.at(train::CheckpointStore::epoch_link_name(3, 3 * S)),
            train::CheckpointStore::step_dir_name(3 * S));
  const std::string from = " --resume=" + train::CheckpointStore::epoch_link_name(1, S);

  // Refused, naming the checkpoints the new timeline would replace and the flag; nothing moved.
  r = train(run, epochs + " --train.epochs=5" + from);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_refused(r, {"would replace the later ones already there",
                     "checkpoints/" + train::CheckpointStore::step_dir_name(2 * S),
                     "checkpoints/" + train::CheckpointStore::step_dir_name(3 * S),
                     "checkpoints/" + train::CheckpointStore::epoch_link_name(3, 3 * S),
                     "--overwrite", run + "/previous-<n>/checkpoints/"});
  EXPECT_EQ(checkpoint_bytes(ckpts), bytes);
  EXPECT_EQ(checkpoint_links(ckpts), links);

  // --overwrite: the later checkpoints and their links go aside byte for byte, then it trains.
  r = train(run, epochs + " --train.epochs=5 --overwrite" + from);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "moved the later checkpoints")) << r.output;
  const std::string aside = run + "/previous-1/checkpoints";
  for (int64_t step : {2 * S, 3 * S}) {
    const std::string name = train::CheckpointStore::step_dir_name(step);
    for (const char* file : {"model.safetensors", "meta.json", "optim.rank0.safetensors"}) {
      const std::string rel = name + "/" + file;
      EXPECT_EQ(core::sha256_file_hex(aside + "/" + rel), bytes.at(rel)) << rel;
    }
  }
  // The original final model is still reachable by its epoch link.
  EXPECT_EQ(core::sha256_file_hex(aside + "/" + train::CheckpointStore::epoch_link_name(3, 3 * S) +
                                  "/model.safetensors"),
            bytes.at(train::CheckpointStore::step_dir_name(3 * S) + "/model.safetensors"));
  // What the rewind started from was never touched.
  const std::string first = train::CheckpointStore::step_dir_name(S) + "/model.safetensors";
  EXPECT_EQ(core::sha256_file_hex(ckpts + "/" + first), bytes.at(first));
  EXPECT_TRUE(fs::exists(ckpts + "/" + train::CheckpointStore::step_dir_name(5 * S)));
}

// Item 2: a user's file in a run dir without checkpoints is refused, named, and untouched; a
// config.yaml alone (lmtrain writes one there) is moved aside with a notice, never replaced.
TEST_F(RunSafetyTest, AFreshRunNeverReplacesAFileItFindsInTheRunDir) {
  const std::string run = dir_->file("users");
  fs::create_directories(run);
  write_text(run + "/notes.txt", "my notes\n");
  auto r = train(run, " --train.max_steps=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_refused(
      r, {"run dir " + run + " holds notes.txt, which lmtrain did not write there", "--overwrite"});
  EXPECT_EQ(read_text(run + "/notes.txt"), "my notes\n");
  EXPECT_FALSE(fs::exists(run + "/config.yaml"));

  const std::string own = dir_->file("own_config");
  fs::create_directories(own);
  const std::string mine = "# my own config\ntrain:\n  max_steps: 1\n";
  write_text(own + "/config.yaml", mine);
  r = train(own, " --train.max_steps=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: run dir " + own + " held the files of an earlier run"))
      << r.output;
  EXPECT_EQ(read_text(own + "/previous-1/config.yaml"), mine);
  EXPECT_NE(read_text(own + "/config.yaml"), mine);
}

// Item 8: an abandoned run (metrics logged, no checkpoint) then --resume=auto, which finds none.
TEST_F(RunSafetyTest, AFreshTimelineStartsAFreshMetricsFileAndKeepsTheOldOne) {
  const std::string run = dir_->file("abandoned");
  fs::create_directories(run);
  const std::string old_metrics = "{\"step\":41,\"loss\":9.5}\n{\"step\":42,\"loss\":9.25}\n";
  write_text(run + "/metrics.jsonl", old_metrics);
  write_text(run + "/train.log", "an earlier run's log\n");
  auto r = train(run, " --train.max_steps=2 --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_text(run + "/previous-1/metrics.jsonl"), old_metrics);
  EXPECT_EQ(read_text(run + "/previous-1/train.log"), "an earlier run's log\n");
  // The new file holds this run's steps only, from its first.
  const std::string fresh = read_text(run + "/metrics.jsonl");
  EXPECT_FALSE(contains(fresh, "\"step\":41")) << fresh;
  EXPECT_FALSE(contains(fresh, "\"step\":42")) << fresh;
  EXPECT_EQ(nlohmann::json::parse(fresh.substr(0, fresh.find('\n')))["step"], 1) << fresh;
}

// Item 14: a resume refused for a changed model.n_embd leaves run_state.json byte for byte.
TEST_F(RunSafetyTest, ARefusedResumeLeavesTheRunStateAsItWas) {
  const std::string run = dir_->file("state");
  auto r = train(run, " --train.max_steps=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string state = read_text(run + "/run_state.json");
  ASSERT_TRUE(contains(state, "\"finished\"")) << state;
  r = train(run, " --train.max_steps=4 --resume=auto --model.n_embd=64");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "n_embd")) << r.output;
  EXPECT_EQ(read_text(run + "/run_state.json"), state);

  // Item 22: the same LM's checkpoint under eval --temporal_qa says it is no temporal run.
  r = run_command(lmtrain_binary() + " eval --checkpoint " + run + " --temporal_qa");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_refused(r, {"--temporal_qa needs a temporal-encoder run's checkpoint",
                     run + " is not one (model.temporal.enabled is false)"});
  EXPECT_FALSE(contains(r.output, "objective.safetensors")) << r.output;
}

// Item 11: stderr and stdout into `head -1`, which exits after one line: the run finishes.
TEST_F(RunSafetyTest, AClosedConsoleDoesNotKillTheRun) {
  const std::string run = dir_->file("piped");
  auto r = run_command("bash -c '" + train_cmd(run, " --train.max_steps=6") +
                       " 2>&1 | head -1; exit ${PIPESTATUS[0]}'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_00000006/meta.json"));
  EXPECT_TRUE(fs::exists(run + "/config.yaml"));
  EXPECT_TRUE(contains(read_text(run + "/run_state.json"), "\"finished\""));
  EXPECT_TRUE(contains(read_text(run + "/train.log"), "done: 6 steps"));
}

// Item 10: the preset (gpt2-tiny) sets train.max_steps; --train.epochs beside it is named.
TEST_F(RunSafetyTest, EpochsBesideAPresetsMaxStepsSaysWhichWins) {
  auto r = train(dir_->file("both"), " --train.epochs=3 --train.stop_at_step=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "warning: train.max_steps = 1500 and train.epochs = 3 are both set: "
                       "train.max_steps wins (1500 steps"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "--train.max_steps=0 to train for train.epochs")) << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
