// ZeRO-3's sharded set-up from model.init_from (train/init_from_shard.h) with real processes
// over Gloo: a 2-rank ZeRO-3 run starting from a one-process run's checkpoint builds nothing
// whole, reads only its shard's rows of the checkpoint, and trains as the one-process run from
// the same checkpoint does (losses within 1e-6 relative at every step, parameters within 1e-5).
#include <gtest/gtest.h>

#include <string>

#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

TEST(Zero3InitFromTest, ReadsItsShardByRangeAndTrainsAsOneProcessFromTheSameWeights) {
  TempDir dir("lmtrain_zero3_init_from");
  const std::string data = prepare_synthetic_data(dir.path());
  // 24 windows of 32 tokens per step; optim.eps=1e-6: see ddp_test.cpp.
  auto flags = [&](const std::string& run, int ranks) {
    return tiny_train_flags() + " --data.dir=" + data + " --run.dir=" + run +
           " --train.total_batch_size=768 --optim.eps=1e-6 --train.micro_batch_size=" +
           std::to_string(12 / ranks);
  };
  const std::string src = dir.file("src");
  auto s = run_command(lmtrain_on_ranks(1, "train") + flags(src, 1) + " --train.max_steps=3");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const std::string init = " --train.max_steps=5 --model.init_from=" + src + "/checkpoints/latest";
  const std::string one = dir.file("one");
  auto o = run_command(lmtrain_on_ranks(1, "train") + flags(one, 1) + init);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const std::string z3 = dir.file("z3");
  auto r = run_command(lmtrain_on_ranks(2, "train") + flags(z3, 2) + init + " --dist.zero=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "ZeRO-3 sharded set-up: the model built unwritten")) << r.output;
  EXPECT_TRUE(contains(r.output, "(this rank's shard only, read by range)")) << r.output;
  EXPECT_FALSE(contains(o.output, "read by range")) << o.output;
  expect_run_matches(z3, one, 1e-6, 1e-5);
}

}  // namespace
}  // namespace lmtrain::testing
