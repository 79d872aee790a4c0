// A ZeRO-3 resume reads only what each rank keeps (issue 42: "each rank writes its shards, with
// no gather on rank 0 of a model that does not fit it"; the resume maps them to the new layout).
// Two real Gloo ranks in this process save a ZeRO-3 checkpoint of a ~49 MB fp32 model (shards,
// no gather: checkpoint/sharded_save.h) with random Adam moments; two fresh ranks then resume
// it as a run does (CheckpointStore::load by range, restore_training_checkpoint after the flat
// layout and the stage-3 optimizer are built, before FullyShard). On the CPU host memory is the
// device's, so the resume's peak resident memory over the built ranks is measured (VmHWM, reset
// through /proc/self/clear_refs): it must stay below one model for both ranks together. Before,
// each rank assembled the whole model.safetensors and the whole flat Adam moments (12 bytes per
// parameter) beside its shard: about 8 models for the two ranks. Measured since: +19.5 to
// +26.9 MiB over six runs (the read pieces: one parameter tensor, 4 MiB of moments, per rank).
// Also checks that each rank restored the saved parameters and exactly its shard of the moments.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/sharded_save.h"
#include "checkpoint/training_checkpoint.h"
#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "objective/objective.h"
#include "optim/flat_params.h"
#include "optim/optimizer_factory.h"
#include "optim/zero_adamw.h"
#include "parallel/fully_shard.h"
#include "rss_probe.h"
#include "test_util.h"

namespace lmtrain::train {
namespace {

TEST(ResumeMemoryTest, Zero3ResumeReadsOnlyEachRanksShard) {
  const testing::MallocFollowsTensors malloc_settings;
  testing::TempDir tmp("lmtrain_resume_memory");
  const std::string run_dir = tmp.path() + "/run";
  auto cfg = model::tiny_gpt_config(384, 4096, 64);  // ~12.2M parameters, ~49 MB fp32
  cfg.n_layer = 6;
  cfg.n_head = 6;
  const int world = 2;
  optim::OptimizerOptions opts;
  opts.zero = 3;
  // Built up front (the global RNG is not for threads): the saving ranks' models, the resuming
  // ranks' (other weights, which the resume must replace) and the saved weights' flat layout.
  std::vector<model::Gpt> saving, resuming;
  for (int r = 0; r < world; ++r) {
    torch::manual_seed(3);
    saving.push_back(model::Gpt(cfg));
    torch::manual_seed(4);
    resuming.push_back(model::Gpt(cfg));
  }
  torch::manual_seed(3);
  model::Gpt reference(cfg);
  optim::FlatParams whole(*reference, reference->param_tags(), 16 * world);
  const int64_t shard = whole.numel() / world;
  torch::manual_seed(5);
  const auto saved_avg = torch::rand({whole.numel()}), saved_avg_sq = torch::rand({whole.numel()});

  std::string ckpt_dir;
  auto errors = testing::run_ranks_in_process(world, [&](int r, dist::Group& group) {
    auto& m = *saving[r];
    optim::FlatParams flat(m, m.param_tags(), optim::flat_pad_multiple(opts, world),
                           optim::flat_grad_buffer(opts, world));
    optim::ZeroAdamW adam(flat, opts.adamw, group, 3);
    auto state = adam.state_tensors();  // this rank's moments, (shard,) each
    state[0].second.copy_(saved_avg.narrow(0, r * shard, shard));
    state[1].second.copy_(saved_avg_sq.narrow(0, r * shard, shard));
    parallel::FullyShard fsdp(m, flat, group, nullptr, /*reshard_after_forward=*/true);
    ShardedSave save;
    save.flat = &flat;
    save.shard_ranks = world;
    save.world_size = world;
    save.zero = 3;
    save.objective_prefix = kObjectivePrefix;
    save.optim_ranks = world;
    TrainingState ts;
    ts.step = 1;
    if (r != 0) write_rank_shards(run_dir, ts.step, r, save, adam);
    group.barrier();
    if (r == 0) {
      CheckpointStore store(run_dir, 0);
      const std::string yaml = "model: {}\n";
      CheckpointInputs in{yaml, m, adam, ts, world, "{}", "none", nullptr, &save};
      ckpt_dir = save_training_checkpoint(store, in, std::nullopt, 1.0);
    }
    group.barrier();
  });
  for (int r = 0; r < world; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;

  std::vector<bool> params_equal(world, false), moments_equal(world, false);
  int64_t base_kb = -1, peak_kb = -1;
  bool reset_ok = true;
  errors = testing::run_ranks_in_process(world, [&](int r, dist::Group& group) {
    auto sync = [&] { group.barrier(); };
    // What a run builds before its resume (train/run_setup.cpp).
    auto& m = *resuming[r];
    optim::FlatParams flat(m, m.param_tags(), optim::flat_pad_multiple(opts, world),
                           optim::flat_grad_buffer(opts, world));
    optim::ZeroAdamW adam(flat, opts.adamw, group, 3);
    sync();
    if (r == 0) {
      reset_ok = testing::reset_peak_rss();
      base_kb = testing::proc_status_kb("VmRSS");
    }
    sync();
    const auto ckpt = CheckpointStore::load(ckpt_dir, /*allow_fallback=*/false, {},
                                            /*tensors_by_range=*/true);
    restore_training_checkpoint(ckpt, m, adam);
    sync();
    if (r == 0) peak_kb = testing::proc_status_kb("VmHWM");
    sync();
    params_equal[r] = torch::equal(flat.params(), whole.params());
    const auto state = adam.state_tensors();
    moments_equal[r] = torch::equal(state[0].second, saved_avg.narrow(0, r * shard, shard)) &&
                       torch::equal(state[1].second, saved_avg_sq.narrow(0, r * shard, shard));
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_TRUE(params_equal[r]) << "rank " << r << "'s parameters";
    EXPECT_TRUE(moments_equal[r]) << "rank " << r << "'s shard of the moments";
  }
  if (!reset_ok || base_kb < 0 || peak_kb < 0) {
    GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM here: peak RSS cannot be measured";
  }
  const double model_mib = static_cast<double>(whole.numel()) * 4 / 1048576.0;
  const double grown = (peak_kb - base_kb) / 1024.0;
  std::printf(
      "ZeRO-3 resume over %d ranks, %.1f MiB of fp32 model each: peak RSS +%.1f MiB over the "
      "built ranks (bound: one model, %.1f MiB)\n",
      world, model_mib, grown, model_mib);
  EXPECT_LT(grown, model_mib) << "the resume held about " << grown / model_mib
                              << " models beyond the built ranks";
}

}  // namespace
}  // namespace lmtrain::train
