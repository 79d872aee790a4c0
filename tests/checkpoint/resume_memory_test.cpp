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
#include <stdexcept>
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
#include "train/init_from_shard.h"

namespace lmtrain::train {
namespace {

// Saves a ZeRO-3 checkpoint of step 1 over saving.size() real Gloo ranks in this process (shards,
// no gather: checkpoint/sharded_save.h), the Adam moments set to `saved_avg` / `saved_avg_sq`
// (whole flat, (numel,) each); returns its directory.
std::string save_zero3_checkpoint_for_resume(const std::string& run_dir,
                                             std::vector<model::Gpt>& saving,
                                             const optim::OptimizerOptions& opts,
                                             const at::Tensor& saved_avg,
                                             const at::Tensor& saved_avg_sq) {
  const int world = static_cast<int>(saving.size());
  std::string ckpt_dir;
  const int64_t shard = saved_avg.numel() / world;
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
  for (int r = 0; r < world; ++r) {
    if (!errors[r].empty())
      throw std::runtime_error("rank " + std::to_string(r) + ": " + errors[r]);
  }
  return ckpt_dir;
}

// What both resume tests start from: a ZeRO-3 checkpoint of step 1 over 2 ranks of a ~49 MB
// fp32 model (seed 3) with random moments (seed 5), and the ranks that will resume it.
struct SavedZero3Checkpoint {
  int world = 2;
  optim::OptimizerOptions opts;
  std::vector<model::Gpt> resuming;  // one model per resuming rank
  at::Tensor whole_params;           // the saved weights, flat (numel,)
  int64_t shard = 0;                 // elements per rank of the flat layout
  at::Tensor saved_avg, saved_avg_sq;
  std::string dir;
};

// `unwritten`: the resuming models are built unwritten (as ZeRO-3's sharded set-up builds
// them); else with other weights (seed 4), which the resume must replace.
SavedZero3Checkpoint save_zero3_for_resume(const std::string& run_dir, bool unwritten) {
  SavedZero3Checkpoint out;
  auto cfg = model::tiny_gpt_config(384, 4096, 64);  // ~12.2M parameters, ~49 MB fp32
  cfg.n_layer = 6;
  cfg.n_head = 6;
  out.opts.zero = 3;
  // Built up front (the global RNG is not for threads).
  std::vector<model::Gpt> saving;
  for (int r = 0; r < out.world; ++r) {
    torch::manual_seed(3);
    saving.push_back(model::Gpt(cfg));
    if (unwritten) {
      out.resuming.push_back(model::Gpt(cfg, /*init=*/false));
    } else {
      torch::manual_seed(4);
      out.resuming.push_back(model::Gpt(cfg));
    }
  }
  torch::manual_seed(3);
  model::Gpt reference(cfg);
  optim::FlatParams whole(*reference, reference->param_tags(), 16 * out.world);
  out.whole_params = whole.params();
  out.shard = whole.numel() / out.world;
  torch::manual_seed(5);
  out.saved_avg = torch::rand({whole.numel()});
  out.saved_avg_sq = torch::rand({whole.numel()});
  out.dir =
      save_zero3_checkpoint_for_resume(run_dir, saving, out.opts, out.saved_avg, out.saved_avg_sq);
  return out;
}

TEST(ResumeMemoryTest, Zero3ResumeReadsOnlyEachRanksShard) {
  const testing::MallocFollowsTensors malloc_settings;
  testing::TempDir tmp("lmtrain_resume_memory");
  const auto saved = save_zero3_for_resume(tmp.path() + "/run", /*unwritten=*/false);
  const int world = saved.world;
  const auto& opts = saved.opts;
  const int64_t shard = saved.shard;
  auto resuming = saved.resuming;

  std::vector<bool> params_equal(world, false), moments_equal(world, false);
  int64_t base_kb = -1, peak_kb = -1;
  bool reset_ok = true;
  auto errors = testing::run_ranks_in_process(world, [&](int r, dist::Group& group) {
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
    const auto ckpt = CheckpointStore::load(saved.dir, /*allow_fallback=*/false, {},
                                            /*tensors_by_range=*/true);
    restore_training_checkpoint(ckpt, m, adam);
    sync();
    if (r == 0) peak_kb = testing::proc_status_kb("VmHWM");
    sync();
    params_equal[r] = torch::equal(flat.params(), saved.whole_params);
    const auto state = adam.state_tensors();
    moments_equal[r] =
        torch::equal(state[0].second, saved.saved_avg.narrow(0, r * shard, shard)) &&
        torch::equal(state[1].second, saved.saved_avg_sq.narrow(0, r * shard, shard));
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_TRUE(params_equal[r]) << "rank " << r << "'s parameters";
    EXPECT_TRUE(moments_equal[r]) << "rank " << r << "'s shard of the moments";
  }
  if (!reset_ok || base_kb < 0 || peak_kb < 0) {
    GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM here: peak RSS cannot be measured";
  }
  const double model_mib = static_cast<double>(saved.whole_params.numel()) * 4 / 1048576.0;
  const double grown = (peak_kb - base_kb) / 1024.0;
  std::printf(
      "ZeRO-3 resume over %d ranks, %.1f MiB of fp32 model each: peak RSS +%.1f MiB over the "
      "built ranks (bound: one model, %.1f MiB)\n",
      world, model_mib, grown, model_mib);
  EXPECT_LT(grown, model_mib) << "the resume held about " << grown / model_mib
                              << " models beyond the built ranks";
}

// ZeRO-3's sharded set-up resuming (issue 42; train/run_build.cpp): the model is built unwritten,
// the flat layout born sharded (optim::ShardOnly), and restore_training_shard reads each rank's
// rows of the saved tensors straight into its shard, its moments by range. The parameters and
// moments equal the saved ones' slices, and the restore grows the resident memory by less than
// one model for both ranks together: writing the whole model (as the resume through a whole
// build did) would commit one per rank.
TEST(ResumeMemoryTest, Zero3ShardedSetUpResumesIntoTheShardsOnly) {
  const testing::MallocFollowsTensors malloc_settings;
  testing::TempDir tmp("lmtrain_resume_shard_memory");
  const auto saved = save_zero3_for_resume(tmp.path() + "/run", /*unwritten=*/true);
  const int world = saved.world;
  const auto& opts = saved.opts;
  const int64_t shard = saved.shard;
  auto resuming = saved.resuming;

  std::vector<bool> params_equal(world, false), moments_equal(world, false);
  std::vector<int64_t> steps(world, -1);
  int64_t base_kb = -1, peak_kb = -1;
  bool reset_ok = true;
  auto errors = testing::run_ranks_in_process(world, [&](int r, dist::Group& group) {
    auto sync = [&] { group.barrier(); };
    auto& m = *resuming[r];
    optim::FlatParams flat(std::vector<optim::ParamSource>{{"", &m, m.param_tags()}},
                           optim::flat_pad_multiple(opts, world),
                           optim::ShardOnly{r, world, false, torch::TensorOptions()});
    optim::ZeroAdamW adam(flat, opts.adamw, group, 3);
    sync();
    if (r == 0) {
      reset_ok = testing::reset_peak_rss();
      base_kb = testing::proc_status_kb("VmRSS");
    }
    sync();
    const auto ckpt = CheckpointStore::load(saved.dir, /*allow_fallback=*/false, {},
                                            /*tensors_by_range=*/true);
    FrozenInit no_base;  // not a LoRA checkpoint: stays empty
    steps[r] = restore_training_shard(ckpt, m, flat, adam, no_base).step;
    sync();
    if (r == 0) peak_kb = testing::proc_status_kb("VmHWM");
    sync();
    params_equal[r] = flat.shard_begin() == r * shard &&
                      torch::equal(flat.param_slice(r * shard, shard),
                                   saved.whole_params.narrow(0, r * shard, shard));
    const auto state = adam.state_tensors();
    moments_equal[r] =
        torch::equal(state[0].second, saved.saved_avg.narrow(0, r * shard, shard)) &&
        torch::equal(state[1].second, saved.saved_avg_sq.narrow(0, r * shard, shard));
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(steps[r], 1) << "rank " << r;
    EXPECT_TRUE(params_equal[r]) << "rank " << r << "'s shard of the parameters";
    EXPECT_TRUE(moments_equal[r]) << "rank " << r << "'s shard of the moments";
  }
  if (!reset_ok || base_kb < 0 || peak_kb < 0) {
    GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM here: peak RSS cannot be measured";
  }
  const double model_mib = static_cast<double>(saved.whole_params.numel()) * 4 / 1048576.0;
  const double grown = (peak_kb - base_kb) / 1024.0;
  std::printf(
      "ZeRO-3 sharded set-up resume over %d ranks, %.1f MiB of fp32 model each: peak RSS +%.1f "
      "MiB over the built shards (bound: one model, %.1f MiB)\n",
      world, model_mib, grown, model_mib);
  EXPECT_LT(grown, model_mib) << "the resume held about " << grown / model_mib
                              << " models beyond the shards";
}

}  // namespace
}  // namespace lmtrain::train
