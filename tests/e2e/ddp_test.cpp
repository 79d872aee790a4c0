// Data-parallel equivalence with real processes on loopback: N ranks on the same global batch
// end with the parameters of one rank (max relative difference <= 1e-5), with and without
// gradient accumulation, under `lmtrain launch` and under torchrun. Also: a resumed run at a
// different world size, a rank killed mid-run, and a launcher restart after that kill.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;
constexpr double kTolerance = 1e-5;

class DdpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_ddp");
    data_ = prepare_synthetic_data(dir_->path());
    baseline_ = dir_->file("one_rank");
    // Global batch: 512 tokens = 16 windows of 32; one rank: micro 8 x 2 accumulation steps.
    auto r =
        run_command(lmtrain_binary() + " train" + flags(baseline_) + " --train.micro_batch_size=8");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  // optim.eps=1e-6 rather than 1e-8: some gradients are analytically zero (the key bias:
  // softmax ignores a constant added to every score) and hold only fp32 rounding noise that
  // depends on the summation order. Adam divides that ~1e-10 noise by its own RMS, turning it
  // into full learning-rate steps of random sign; at eps=1e-8 even two one-rank runs that
  // split the same batch into different micro-batches end ~1e-4 apart. At 1e-6 such noise
  // stays noise (measured: one rank micro 4 vs 16: 3.0e-6; four ranks vs one: 3.5e-6).
  static std::string flags(const std::string& run) {
    return tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --train.max_steps=10 --dist.bucket_mb=0.02 --optim.eps=1e-6";
  }
  static std::string launch(int nproc, const std::string& extra = "") {
    return lmtrain_binary() + " launch --nproc_per_node=" + std::to_string(nproc) +
           " --master_port=" + std::to_string(free_port()) + extra + " -- train";
  }
  static std::string torchrun(int nproc) {
    return torchrun_binary() + " --no_python --nproc_per_node=" + std::to_string(nproc) +
           " --master_port=" + std::to_string(free_port()) + " " + lmtrain_binary() + " train";
  }
  // Open MPI only starts the processes and tells each its rank (OMPI_COMM_WORLD_*); the
  // rendezvous and all communication are still c10d's.
  static std::string mpirun(int nproc) {
    return "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(nproc) +
           " -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=" + std::to_string(free_port()) + " " +
           lmtrain_binary() + " train";
  }
  static void expect_matches_baseline(const std::string& run, const std::string& output) {
    ASSERT_TRUE(fs::exists(run + "/checkpoints/latest")) << output;
    const double diff =
        max_param_rel_diff(run + "/checkpoints/latest", baseline_ + "/checkpoints/latest");
    EXPECT_LE(diff, kTolerance) << output;
    EXPECT_NEAR(last_logged_loss(run), last_logged_loss(baseline_), 1e-5);
  }
  static void run_and_compare(const std::string& name, const std::string& launcher,
                              const std::string& extra) {
    const std::string run = dir_->file(name);
    auto r = run_command(launcher + flags(run) + extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_matches_baseline(run, r.output);
  }

  static TempDir* dir_;
  static std::string data_, baseline_;
};
TempDir* DdpTest::dir_ = nullptr;
std::string DdpTest::data_, DdpTest::baseline_;

TEST_F(DdpTest, LaunchTwoRanksWithAccumulationMatchesOneRank) {
  run_and_compare("launch2_accum", launch(2), " --train.micro_batch_size=4");  // 4 x 2 x 2
}

TEST_F(DdpTest, LaunchTwoRanksWithoutAccumulationMatchesOneRank) {
  run_and_compare("launch2", launch(2), " --train.micro_batch_size=8");  // 8 x 2 x 1
  // Rank 0 writes the main log, metrics and checkpoints; rank 1 only its own log.
  const std::string run = dir_->file("launch2");
  EXPECT_TRUE(fs::exists(run + "/train.log"));
  EXPECT_TRUE(fs::exists(run + "/train.rank1.log"));
  EXPECT_FALSE(fs::exists(run + "/train.rank0.log"));
  EXPECT_NE(read_text(run + "/train.rank1.log").find("rank 1 of 2"), std::string::npos);
  // Bytes sent per step: at 2 ranks a ring all-reduce sends (W-1)/W of the buffer twice, i.e.
  // the whole flat gradient buffer once, plus the loss sums (a few doubles); the tied table's
  // token rows go by all-gather. The first interval also holds the start-up broadcasts.
  const std::string log = read_text(run + "/train.log");
  const int64_t params = logged_count(log, "trained_parameters");
  ASSERT_GT(params, 0) << log;
  const int64_t grad_bytes = 4 * params;
  const auto records = step_records(run);
  ASSERT_EQ(records.size(), 10u);
  for (size_t i = 1; i < records.size(); ++i) {
    const auto& c = records[i]["comm_bytes"];
    EXPECT_GE(c["all_reduce"].get<int64_t>(), grad_bytes) << records[i].dump();
    EXPECT_LE(c["all_reduce"].get<int64_t>(), grad_bytes + 256) << records[i].dump();
    EXPECT_GT(c["all_gather"].get<int64_t>(), 0) << records[i].dump();
    EXPECT_EQ(c["reduce_scatter"].get<int64_t>(), 0) << records[i].dump();
  }
  EXPECT_NE(log.find(" | sent "), std::string::npos) << log;
}

TEST_F(DdpTest, SigintToTheLauncherStopsEveryRankAtOneStepWithACheckpoint) {
  const std::string run = dir_->file("interrupted");
  // The launcher runs in the background; once rank 0 has logged step 3 the shell sends it
  // SIGINT. Waiting on the log is a synchronisation point, not a timing assumption.
  const std::string script = dir_->file("interrupt.sh");
  write_text(script, launch(2) + flags(run) +
                         " --train.micro_batch_size=4 --train.max_steps=100000 &\n"
                         "pid=$!\n"
                         "until grep -q 'step      3/' " +
                         run +
                         "/train.log 2>/dev/null; do sleep 0.1; done\n"
                         "kill -INT $pid\n"
                         "wait $pid\n"
                         "echo launcher_exit=$?\n");
  auto r = run_command("bash " + script);
  EXPECT_NE(r.output.find("launcher_exit=130"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("forwarding it to the ranks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopping on signal 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("saved checkpoint"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(run + "/checkpoints/latest/meta.json")) << r.output;
}

TEST_F(DdpTest, LaunchFourRanksWithAndWithoutAccumulationMatchOneRank) {
  run_and_compare("launch4", launch(4), " --train.micro_batch_size=4");        // 4 x 4 x 1
  run_and_compare("launch4_accum", launch(4), " --train.micro_batch_size=2");  // 2 x 4 x 2
}

TEST_F(DdpTest, TorchrunTwoAndFourRanksMatchOneRank) {
  ASSERT_EQ(access(torchrun_binary().c_str(), X_OK), 0)
      << torchrun_binary() << " missing: run scripts/setup.sh (it installs torch into the venv)";
  run_and_compare("torchrun2", torchrun(2), " --train.micro_batch_size=4");
  run_and_compare("torchrun4", torchrun(4), " --train.micro_batch_size=4");
}

TEST_F(DdpTest, MpirunTwoRanksMatchesOneRank) {
  if (run_command("command -v mpirun").exit_code != 0) {
    GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  }
  run_and_compare("mpirun2", mpirun(2), " --train.micro_batch_size=4");
}

TEST_F(DdpTest, GlobalBatchThatDoesNotDivideIsAClearError) {
  auto r = run_command(launch(4) + flags(dir_->file("bad")) + " --train.micro_batch_size=3");
  // A config error on every rank: the launcher passes exit code 2 through (as one process
  // would exit), naming whichever rank exited first and its message on its last line.
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.total_batch_size"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("launch: rank [0-3] failed with a usage or config error \\(exit code "
                           "2\\): .*train\\.total_batch_size[^\n]*\n?$")))
      << r.output;
}

TEST_F(DdpTest, ResumeAtADifferentWorldSizeMatchesOneRank) {
  const std::string run = dir_->file("resized");
  auto a =
      run_command(launch(2) + flags(run) + " --train.micro_batch_size=4 --train.stop_at_step=5");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = run_command(launch(4) + flags(run) + " --train.micro_batch_size=2 --resume=auto");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("resumed from"), std::string::npos) << b.output;
  expect_matches_baseline(run, b.output);
}

TEST_F(DdpTest, KilledRankMakesTheLauncherFailNamingIt) {
  const std::string run = dir_->file("killed");
  auto r = run_command("LMTRAIN_FAULT_KILL=1:3 " + launch(2, " --grace_s=5") + flags(run) +
                       " --train.micro_batch_size=4");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("rank 1 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed: killed by signal 9"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("launch: rank 1 failed (killed by signal 9"), std::string::npos)
      << r.output;
}

TEST_F(DdpTest, MaxRestartsResumesAfterAKilledRankAndMatchesUninterrupted) {
  const std::string run = dir_->file("restarted");
  auto r = run_command("LMTRAIN_FAULT_KILL=1:7 " + launch(2, " --max_restarts=1 --grace_s=5") +
                       flags(run) + " --train.micro_batch_size=4 --checkpoint.every=5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("restart 1 of 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  expect_matches_baseline(run, r.output);
}

}  // namespace
}  // namespace lmtrain::testing
