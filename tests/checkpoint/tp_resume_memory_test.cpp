// A tensor-parallel resume from a checkpoint saved without shards (one process: model.safetensors
// whole, the Adam moments by name) reads only each rank's slices, one tensor at a time, straight
// into its model and its moment buffers (checkpoint/unsharded_local_read.h: local_model_reader,
// local_adam_moments; issue 42). Two real Gloo ranks in this process, set up as a TP=2 run is
// (parallel/tp_local_init.h: no whole model), restore a ~49 MB fp32 model's checkpoint with
// random moments: every parameter and moment equals its slice of the saved one, and the
// restore's peak resident memory (VmHWM, reset through /proc/self/clear_refs) over the set-up
// ranks stays below one model for both ranks together (measured +11.9 to +12.4 MiB for the
// 46.7 MiB model). Reading each rank's moments all at once before handing them over (as the
// restore did before) is measured beside it: it holds the rank's whole share of the moments
// (+54 to +102 MiB, as the two ranks overlap).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/training_checkpoint.h"
#include "checkpoint/unsharded_local_read.h"
#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/adamw.h"
#include "optim/flat_params.h"
#include "parallel/tensor_parallel_plan.h"
#include "rss_probe.h"
#include "test_util.h"

namespace lmtrain::train {
namespace {

TEST(TpResumeMemoryTest, ReadsEachRanksSlicesOneTensorAtATime) {
  const testing::MallocFollowsTensors malloc_settings;
  testing::TempDir tmp("lmtrain_tp_resume_memory");
  auto cfg = model::tiny_gpt_config(384, 4096, 64);  // ~12.2M parameters, ~49 MB fp32
  cfg.n_layer = 6;
  cfg.n_head = 6;
  // The one-process checkpoint of step 1: weights of seed 3, random moments (seed 5).
  torch::manual_seed(3);
  model::Gpt saved_model(cfg);
  optim::FlatParams saved_flat(*saved_model, saved_model->param_tags(), 16);
  optim::AdamW saved_adam(saved_flat, {});
  torch::manual_seed(5);
  for (auto& [name, t] : saved_adam.state_tensors()) t.copy_(torch::rand(t.sizes()));
  std::string dir;
  {
    CheckpointStore store(tmp.path() + "/run", 0);
    const std::string yaml = "model: {}\n";
    TrainingState ts;
    ts.step = 1;
    CheckpointInputs in{yaml, *saved_model, saved_adam, ts, 1, "{}", "none"};
    dir = save_training_checkpoint(store, in, std::nullopt, 1.0);
  }
  // Each saved moment by its name ("exp_avg.<p>"), whole: (the parameter's shape).
  std::map<std::string, at::Tensor> saved_moments;
  for (const auto& [name, t] : saved_adam.state_tensors()) saved_moments[name] = t;
  const auto saved_params = saved_model->named_parameters();
  const double model_mib = static_cast<double>(saved_flat.numel()) * 4 / 1048576.0;

  std::mutex generator;  // the global generator is not for threads: one set-up at a time
  // Peak RSS growth (MiB) of the restore over the set-up ranks, -1 where it cannot be measured.
  auto resume = [&](bool at_once, std::vector<std::string>& differ) {
    int64_t base_kb = -1, peak_kb = -1;
    bool reset_ok = true;
    const auto errors = testing::run_ranks_in_process(2, [&](int r, dist::Group& group) {
      // What a TP=2 run sets up before its resume (train/run_build.cpp).
      model::Gpt m(nullptr);
      std::unique_ptr<parallel::TensorParallel> plan;
      {
        std::lock_guard<std::mutex> lock(generator);
        torch::manual_seed(7);
        m = model::Gpt(cfg, /*init=*/false);
        plan = std::make_unique<parallel::TensorParallel>(*m, group, parallel::TpFromSeed{});
      }
      optim::FlatParams flat(*m, m->param_tags(), 16);
      optim::AdamW adam(flat, {});
      group.barrier();
      if (r == 0) {
        reset_ok = testing::reset_peak_rss();
        base_kb = testing::proc_status_kb("VmRSS");
      }
      group.barrier();
      const auto ckpt = CheckpointStore::load(dir, /*allow_fallback=*/false, {},
                                              /*tensors_by_range=*/true);
      const auto localize = plan->localizer();
      if (at_once) {
        load_local_model_tensors(ckpt, *m, localize);
        adam.load_state({local_optimizer_state(ckpt, *m, localize)}, {{"kind", "named"}}, 1);
      } else {
        restore_training_checkpoint(ckpt, *m, adam, nullptr, localize);
      }
      group.barrier();
      if (r == 0) peak_kb = testing::proc_status_kb("VmHWM");
      group.barrier();
      for (const auto& [name, t] : adam.state_tensors()) {
        const std::string param = name.substr(name.find('.') + 1);
        const auto& s = plan->slices().at(param);
        if (!torch::equal(t, parallel::tp_local_piece(saved_moments.at(name), s)) ||
            !torch::equal(m->named_parameters()[param],
                          parallel::tp_local_piece(saved_params[param], s))) {
          differ[r] += " " + name;
        }
      }
    });
    for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
    return reset_ok && base_kb >= 0 && peak_kb >= 0 ? (peak_kb - base_kb) / 1024.0 : -1.0;
  };
  std::vector<std::string> differ(2), differ_at_once(2);
  const double streamed = resume(/*at_once=*/false, differ);
  const double at_once = resume(/*at_once=*/true, differ_at_once);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(differ[r], "") << "rank " << r << "'s slices differ from the saved ones";
    EXPECT_EQ(differ_at_once[r], "") << "rank " << r;
  }
  if (streamed < 0) {
    GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM here: peak RSS cannot be measured";
  }
  std::printf(
      "TP=2 resume of a one-process checkpoint, %.1f MiB fp32 model: peak RSS +%.1f MiB over the "
      "set-up ranks (bound: one model, %.1f MiB); moments read all at once +%.1f MiB\n",
      model_mib, streamed, model_mib, at_once);
  EXPECT_LT(streamed, model_mib);
  // All at once, a rank holds its whole share of both moments (about one model's bytes) beside
  // the buffers: whatever the two ranks' overlap, well above the streamed restore.
  EXPECT_GT(at_once - streamed, model_mib / 2);
}

}  // namespace
}  // namespace lmtrain::train
