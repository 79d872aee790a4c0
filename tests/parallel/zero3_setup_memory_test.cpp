// ZeRO-3's set-up memory (issue 42: models bigger than one device): building the flat layout,
// the stage-3 optimizer and FullyShard over a built model must hold no second copy of it. On
// the CPU host memory is the device's, so the set-up's peak resident memory is measured
// (VmHWM, reset through /proc/self/clear_refs) on two real Gloo ranks in this process, each
// with a ~49 MB fp32 model, and must stay below the built models plus, per rank, one unit's
// buffers, one parameter (moved into the flat buffer) and its shards (parameters, gradients,
// Adam moments) plus a margin. Before the fix the set-up held the model about 4-5 times
// (whole flat parameters and gradients, every unit's buffers at once): measured +465 MiB
// over the built models here against a bound of 250 MiB; since, +143 to +181 MiB over six
// runs (the shards and the moments, 187 MiB for both ranks, are all that is left; the two
// ranks' peaks coincide or not).
// Also checks that each rank's master shard is its slice of the unsharded layout, and that
// nothing of the units stays allocated after the set-up.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/flat_params.h"
#include "optim/optimizer_factory.h"
#include "optim/zero_adamw.h"
#include "parallel/fully_shard.h"
#include "rss_probe.h"

namespace lmtrain::parallel {
namespace {

TEST(Zero3SetupMemoryTest, HoldsTheModelOncePlusOneUnitAndTheShards) {
  const testing::MallocFollowsTensors malloc_settings;  // RSS follows the live tensors
  auto cfg = model::tiny_gpt_config(384, 4096, 64);     // ~12.2M parameters, ~49 MB fp32
  cfg.n_layer = 6;
  cfg.n_head = 6;
  const int world = 2;
  optim::OptimizerOptions opts;
  opts.zero = 3;
  std::vector<model::Gpt> models;
  for (int r = 0; r < world + 1; ++r) {  // built up front: the global RNG is not for threads
    torch::manual_seed(3);
    models.push_back(model::Gpt(cfg));
  }
  // The unsharded layout every rank's shard is a slice of.
  optim::FlatParams whole(*models[world], models[world]->param_tags(), 16 * world);
  int64_t largest_param = 0;
  for (const auto& p : models[0]->parameters()) {
    largest_param = std::max(largest_param, p.numel() * 4);
  }

  std::vector<at::Tensor> shard(world);
  std::vector<int64_t> held(world, 0);
  std::vector<bool> released(world, false);
  int64_t base_kb = -1, peak_kb = -1;
  bool reset_ok = true;
  const auto errors = testing::run_ranks_in_process(world, [&](int r, dist::Group& group) {
    auto sync = [&] {
      auto t = torch::zeros({1});
      group.allreduce(t, dist::ReduceOp::kSum)->wait();
    };
    sync();
    if (r == 0) {
      reset_ok = testing::reset_peak_rss();
      base_kb = testing::proc_status_kb("VmRSS");
    }
    sync();
    // The set-up of a ZeRO-3 run (train/run_setup.cpp, train/trainer.cpp), on each rank.
    auto& m = *models[r];
    optim::FlatParams flat(m, m.param_tags(), optim::flat_pad_multiple(opts, world),
                           optim::flat_grad_buffer(opts, world));
    optim::ZeroAdamW adam(flat, opts.adamw, group, 3);
    FullyShard fsdp(m, flat, group, nullptr, /*reshard_after_forward=*/true);
    sync();
    if (r == 0) peak_kb = testing::proc_status_kb("VmHWM");
    const auto b = fsdp.bytes();
    int64_t unit = 0;  // the largest unit's parameter and gradient buffers
    for (const auto& u : fsdp.units()) unit = std::max(unit, 2 * u.numel * 4);
    held[r] = b.param_shard + b.grad_shard + adam.state_bytes() + unit + largest_param;
    shard[r] = flat.param_slice(r * (flat.numel() / world), flat.numel() / world).clone();
    released[r] = storage_released(m.transformer->blocks[0]->attn->c_attn->weight) &&
                  storage_released(m.transformer->wte->weight) &&
                  storage_released(m.transformer->wte->weight.grad());
    sync();
  });
  for (int r = 0; r < world; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  if (!reset_ok || base_kb < 0 || peak_kb < 0) {
    GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM here: peak RSS cannot be measured";
  }
  const int64_t shard_numel = whole.numel() / world;
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(torch::equal(shard[r], whole.params().narrow(0, r * shard_numel, shard_numel)))
        << "rank " << r << "'s master shard";
    EXPECT_TRUE(released[r]) << "rank " << r << ": a unit's buffer is still allocated";
  }
  const double mib = 1024.0;
  const double grown = (peak_kb - base_kb) / mib;
  const double bound = (held[0] + held[1]) / 1048576.0 + 24;  // + threads, Gloo, small tensors
  const double model_mib = static_cast<double>(whole.numel()) * 4 / 1048576.0;
  std::printf(
      "ZeRO-3 set-up over %d ranks, %.1f MiB of fp32 model each: peak RSS +%.1f MiB over "
      "the built models (bound %.1f MiB)\n",
      world, model_mib, grown, bound);
  EXPECT_LT(grown, bound) << "the set-up held about " << grown / model_mib
                          << " models beyond the built ones";
}

}  // namespace
}  // namespace lmtrain::parallel
