// Tensor parallelism's set-up without the whole model (parallel/tp_local_init.h; issue 42):
// each TP rank builds the model unwritten and draws only its slices of the seed's initial
// weights, one parameter at a time.
// - The slices equal, bit for bit, those TensorParallel cuts from a whole model build_model drew
//   from the same seed, on both ranks of TP=2: a GPT-2 block (tied head, learned positions,
//   biases) and a Llama-style one (grouped-query attention, SwiGLU's gate and up rows, untied
//   head) with LoRA adapters on every target (A's kaiming bound from the whole input width; B by
//   rows on column-parallel layers and the head, A by columns on row-parallel ones), placed in
//   bf16 as a bf16 run places them, and a nanochat one with all its parts (value embeddings
//   by kv-head columns, their gates by rows); the generator ends where the whole build leaves it.
// - Peak resident memory (VmHWM, reset through /proc/self/clear_refs; tests/rss_probe.h) of the
//   set-up on two real Gloo ranks in this process, for a 140.4 MiB fp32 model, stays below the two
//   ranks' slices plus one parameter's scratch each plus a margin; the set-up that cuts a whole
//   built model is measured beside it, printed, and exceeds that bound.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/runtime.h"
#include "e2e/dist_harness.h"
#include "model/build_model.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "parallel/tensor_parallel_plan.h"
#include "rss_probe.h"

namespace lmtrain::parallel {
namespace {

// The model of `options` on TP rank `rank` of the 2-rank `group`: built whole from `seed` and
// cut (from_seed false), or built unwritten with its slices drawn from the seed. Returns the
// next draw of the generator after the set-up (where the build left it).
struct TpLocalBuilt {
  model::Gpt model{nullptr};
  std::unique_ptr<TensorParallel> plan;
  at::Tensor next_draw;
};
TpLocalBuilt tp_local_build(const model::ModelOptions& options, const core::Runtime& rt,
                            dist::Group& group, bool from_seed) {
  TpLocalBuilt b;
  core::Runtime cpu_rt;  // the set-up's build: CPU, fp32, unwritten
  torch::manual_seed(5);
  b.model = model::build_model(options, from_seed ? cpu_rt : rt, {/*init=*/!from_seed, {}});
  if (from_seed) {
    torch::manual_seed(5);
    b.plan =
        std::make_unique<TensorParallel>(*b.model, group, TpFromSeed{rt.device, rt.param_dtype});
  } else {
    b.plan = std::make_unique<TensorParallel>(*b.model, group);
  }
  b.next_draw = torch::rand({4});
  return b;
}

TEST(TpLocalInit, SlicesFromTheSeedEqualTheWholeBuildsCut) {
  model::ModelOptions gpt2;
  gpt2.shape = model::tiny_gpt_config(32, 64, 16);
  model::ModelOptions llama;
  llama.shape = model::with_llama_family(model::tiny_gpt_config(32, 64, 16), model::Arch::kLlama);
  llama.shape.n_head = 4;
  llama.shape.n_kv_head = 2;
  llama.shape.tie_embeddings = false;
  llama.lora.rank = 4;
  llama.lora.targets = model::parse_lora_targets("q,k,v,o,mlp_in,mlp_out,head");
  // nanochat's parts: value embeddings split by kv-head columns, their gates by rows, the
  // lambdas and smear gate whole (drawn after the blocks, the gates a second time).
  model::ModelOptions nano;
  nano.shape = model::with_llama_family(model::tiny_gpt_config(32, 64, 16), model::Arch::kNanochat);
  nano.shape.n_layer = 3;
  nano.shape.tie_embeddings = false;
  nano.shape.embed_norm = nano.shape.x0_lambdas = nano.shape.value_embeds = true;
  nano.shape.smear = nano.shape.backout = true;
  core::Runtime bf16;
  bf16.param_dtype = at::kBFloat16;
  struct Case {
    const char* name;
    model::ModelOptions options;
    core::Runtime rt;
  };
  for (const Case& c : {Case{"gpt2", gpt2, {}}, Case{"llama lora", llama, {}},
                        Case{"llama lora bf16", llama, bf16}, Case{"nanochat", nano, {}}}) {
    SCOPED_TRACE(c.name);
    std::mutex generator;  // the global generator is not for threads: one rank at a time
    std::vector<std::string> differ(2);
    const auto errors = testing::run_ranks_in_process(2, [&](int r, dist::Group& group) {
      std::lock_guard<std::mutex> lock(generator);
      auto whole = tp_local_build(c.options, c.rt, group, /*from_seed=*/false);
      auto local = tp_local_build(c.options, c.rt, group, /*from_seed=*/true);
      const auto want = whole.model->named_parameters();
      int64_t lora_params = 0;
      for (const auto& item : local.model->named_parameters()) {
        const auto& p = item.value();
        const auto& w = want[item.key()];
        if (item.key().find("lora_") != std::string::npos) ++lora_params;
        if (p.scalar_type() != w.scalar_type() || p.requires_grad() != w.requires_grad() ||
            !torch::equal(p, w)) {
          differ[r] += " " + item.key();
        }
      }
      if (c.options.lora.enabled() && lora_params == 0) differ[r] += " (no adapters)";
      if (!torch::equal(local.next_draw, whole.next_draw)) differ[r] += " (generator)";
    });
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(errors[r], "") << "rank " << r;
      EXPECT_EQ(differ[r], "") << "rank " << r << "'s slices differ from the whole build's cut";
    }
  }
}

TEST(TpLocalInit, SetUpHoldsOnlyItsSlicesAndOneParameter) {
  const testing::MallocFollowsTensors malloc_scope;
  model::ModelOptions options;
  options.shape = model::tiny_gpt_config(512, 4096, 64);  // 36.8M parameters, 140.4 MiB fp32
  options.shape.n_layer = 11;
  options.shape.n_head = 8;
  std::mutex generator;
  int64_t model_bytes = 0;
  // Both ranks' set-ups, one after the other (the generator), each kept until both are done.
  auto measure = [&](bool from_seed) {
    return testing::measure_ranks_setup(
        2, [&](int r, dist::Group& group, const testing::MarkPeak& mark_peak) {
          TpLocalBuilt built;
          {
            std::lock_guard<std::mutex> lock(generator);
            built = tp_local_build(options, core::Runtime{}, group, from_seed);
          }
          int64_t largest = 0, whole = 0, held = 0;
          for (const auto& [name, s] : built.plan->slices()) {
            int64_t n = 4;
            for (int64_t d : s.whole_shape) n *= d;
            largest = std::max(largest, n);
            whole += n;
          }
          for (const auto& p : built.model->parameters()) held += p.numel() * 4;
          if (r == 0) model_bytes = whole;
          mark_peak();
          return held + largest;  // its slices and one parameter's scratch
        });
  };
  const auto local = measure(/*from_seed=*/true);
  const auto whole = measure(/*from_seed=*/false);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(local.errors[r], "") << "rank " << r;
    ASSERT_EQ(whole.errors[r], "") << "rank " << r;
  }
  // The whole build holds a whole model on the second rank beside the first rank's slices.
  testing::expect_set_up_within_bound(
      local, whole,
      log::format("TP=2 set-up of a %.1f MiB fp32 model on 2 ranks, slices drawn from the seed",
                  model_bytes / 1048576.0));
}

}  // namespace
}  // namespace lmtrain::parallel
