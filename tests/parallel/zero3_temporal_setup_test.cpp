// A temporal run's frozen LM under ZeRO-3's sharded set-up (issue 42; train/init_from_shard.h's
// init_temporal_lm_shard): read by range from its model.safetensors straight into the frozen
// shards (parallel::FrozenSource), never loaded whole, on two real Gloo ranks in this process.
// - The sharded model's loss and the encoder's soft tokens (projector vocab_mix: a mix of the
//   LM's token embeddings, read through the gathered root unit) equal, bit for bit, those of
//   the same run's whole set-up (the LM loaded whole, as ZeRO-2 and one process load it); the
//   encoder's starting RMS read by range equals the whole table's.
// - Peak resident memory of the set-up (VmHWM, reset through /proc/self/clear_refs) stays below
//   what the ranks hold (the frozen shards: half the LM each, the encoder's shards and moments)
//   plus a margin, while the whole set-up (each rank the LM whole, then sharding it) lands above
//   that bound.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/lora_checkpoint.h"
#include "core/log.h"
#include "core/runtime.h"
#include "core/safetensors.h"
#include "e2e/dist_harness.h"
#include "model/build_model.h"
#include "model/gpt.h"
#include "model/temporal/temporal_encoder.h"
#include "model_fixtures.h"
#include "objective/objective.h"
#include "optim/flat_params.h"
#include "optim/optimizer_factory.h"
#include "optim/zero_adamw.h"
#include "parallel/fully_shard.h"
#include "rss_probe.h"
#include "test_util.h"
#include "train/init_from_shard.h"
#include "train/temporal_setup.h"

namespace lmtrain::parallel {
namespace {

namespace mt = model::temporal;

constexpr uint64_t kSeed = 7;

// A temporal run's set-up of one rank, whole or sharded, as train/run_build.cpp makes it: the LM
// built unwritten (from the seed, which a whole temporal build does not draw from), then filled.
struct TemporalRank {
  explicit TemporalRank(const model::ModelOptions& mo) {
    torch::manual_seed(kSeed);
    lm = model::build_model(mo, core::Runtime::cpu(), {/*init=*/false, {}});
  }
  model::Gpt lm{nullptr};
  std::shared_ptr<train::TemporalAlignmentObjective> objective;
  std::unique_ptr<optim::FlatParams> flat;
  std::unique_ptr<optim::ZeroAdamW> adam;
  std::unique_ptr<FullyShard> fsdp;
};

TEST(Zero3TemporalSetupTest, FrozenLmIsReadByRangeIntoTheFrozenShards) {
  const testing::MallocFollowsTensors malloc_scope;
  testing::TempDir dir("lmtrain_sharded_temporal_lm");
  model::ModelOptions mo;
  mo.shape = model::tiny_gpt_config(384, 4096, 64);  // ~23.4M parameters, ~92 MB fp32
  mo.shape.n_layer = 12;
  mo.shape.n_head = 6;
  mo.freeze_base = true;  // model.temporal.enabled
  const int world = 2;
  {
    torch::manual_seed(5);
    model::Gpt saved(mo.shape);
    core::NamedTensors tensors;
    for (auto& [name, t] : saved->state_tensors()) tensors.emplace_back(name, t);
    core::write_safetensors(dir.file("model.safetensors"), tensors);
  }
  train::LoadedCheckpoint lm;  // as temporal_lm_checkpoint leaves it: meta only
  lm.dir = dir.path();
  lm.meta = {{"files", {{"model.safetensors", {{"sha256", "0"}}}}}};
  mt::TemporalEncoderOptions enc;
  enc.projector = mt::ProjectorKind::kVocabMix;
  enc = train::encoder_for_lm(enc, mo.shape);
  const auto rt = core::Runtime::cpu();
  optim::OptimizerOptions opts;
  opts.zero = 3;
  const int64_t pad = optim::flat_pad_multiple(opts, world);
  // Per rank: token rows, and a batch of 2 curves for the encoder (B, C, L).
  std::vector<at::Tensor> ids, series;
  for (int r = 0; r < world; ++r) {
    torch::manual_seed(100 + r);
    ids.push_back(torch::randint(0, 4096, {2, 33}));
    series.push_back(torch::randn({2, enc.channels, enc.max_length}));
  }
  const auto valid = torch::ones({2, enc.channels, enc.max_length}, torch::kBool);

  // What a rank computes with its set-up held: the LM's loss and the encoder's soft tokens.
  auto evaluate = [&](TemporalRank& rank, int r, float* loss, at::Tensor* tokens) {
    torch::NoGradGuard no_grad;
    if (rank.fsdp) rank.fsdp->begin_forward_only();  // the root unit (wte) gathered
    *loss = rank.lm->loss(ids[r].narrow(1, 0, 32), ids[r].narrow(1, 1, 32)).item<float>();
    *tokens = rank.objective->encoder()->forward(series[r], valid).tokens.clone();
    if (rank.fsdp) rank.fsdp->end_forward_only();
  };

  std::mutex generator;  // the global generator is not for threads: the ranks draw in turn
  // The whole set-up (ZeRO-3 before this change; ZeRO-2 and one process still): the LM built,
  // loaded whole on every rank, then the encoder, the layout and the shards.
  std::vector<float> want(world);
  std::vector<at::Tensor> want_tokens(world);
  double whole_rms = 0;
  const auto whole = testing::measure_ranks_setup(
      world, [&](int r, dist::Group& group, const testing::MarkPeak& mark_peak) {
        std::unique_lock<std::mutex> lock(generator);
        TemporalRank rank(mo);  // (its FullyShard goes first, while the group lives)
        {
          train::LoadedCheckpoint loaded = lm;
          train::read_temporal_lm_tensors(loaded);
          train::load_init_weights(*rank.lm, loaded);
        }
        const double rms = mt::token_embedding_rms(rank.lm->transformer->wte->weight.detach());
        if (r == 0) whole_rms = rms;
        rank.objective = train::make_temporal_objective(enc, *rank.lm, rms, rt, kSeed);
        lock.unlock();
        rank.flat = std::make_unique<optim::FlatParams>(
            train::trained_param_sources(*rank.lm, rank.objective.get()), pad,
            optim::flat_grad_buffer(opts, world));
        rank.adam = std::make_unique<optim::ZeroAdamW>(*rank.flat, opts.adamw, group, 3);
        rank.fsdp = std::make_unique<FullyShard>(*rank.lm, *rank.flat, group, nullptr, true);
        mark_peak();
        rank.fsdp->install();
        evaluate(rank, r, &want[r], &want_tokens[r]);
        return int64_t{0};
      });
  for (int r = 0; r < world; ++r) ASSERT_EQ(whole.errors[r], "") << "rank " << r;
  EXPECT_EQ(train::temporal_lm_embedding_rms(lm), whole_rms);

  // The sharded set-up: built unwritten, the encoder, the born-sharded layout, the LM by range.
  std::vector<float> got(world, -1);
  std::vector<at::Tensor> got_tokens(world);
  std::vector<int64_t> frozen_held(world, 0);
  int64_t lm_bytes = 0;
  const auto sharded = testing::measure_ranks_setup(
      world, [&](int r, dist::Group& group, const testing::MarkPeak& mark_peak) {
        std::unique_lock<std::mutex> lock(generator);
        TemporalRank rank(mo);  // (its FullyShard goes first, while the group lives)
        rank.objective = train::make_temporal_objective(
            enc, *rank.lm, train::temporal_lm_embedding_rms(lm), rt, kSeed);
        rank.flat = std::make_unique<optim::FlatParams>(
            train::trained_param_sources(*rank.lm, rank.objective.get()), pad,
            optim::ShardOnly{r, world, false, torch::TensorOptions().dtype(at::kFloat)});
        auto frozen =
            train::init_temporal_lm_shard(lm, *rank.lm, *rank.flat, /*adapters=*/false, kSeed);
        lock.unlock();
        rank.adam = std::make_unique<optim::ZeroAdamW>(*rank.flat, opts.adamw, group, 3);
        rank.fsdp = std::make_unique<FullyShard>(*rank.lm, *rank.flat, group, nullptr, true,
                                                 std::nullopt, false, frozen.read);
        mark_peak();
        const auto b = rank.fsdp->bytes();
        frozen_held[r] = b.frozen_shard;
        if (r == 0) lm_bytes = b.frozen_whole;
        rank.fsdp->install();
        evaluate(rank, r, &got[r], &got_tokens[r]);
        // The encoder whole (its tensors stay real beside the layout) and one block of the RMS's
        // rows (fp32 and fp64).
        int64_t encoder_bytes = 0;
        for (const auto& p : rank.objective->encoder()->parameters()) {
          encoder_bytes += p.numel() * 4;
        }
        const int64_t rms_block = mt::kEmbeddingRmsRows * mo.shape.n_embd * 12;
        return b.param_shard + b.grad_shard + rank.adam->state_bytes() + b.frozen_shard +
               encoder_bytes + rms_block;
      });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(sharded.errors[r], "") << "rank " << r;
    EXPECT_EQ(got[r], want[r]) << "rank " << r << ": the LM's loss";
    EXPECT_TRUE(torch::equal(got_tokens[r], want_tokens[r])) << "rank " << r << ": soft tokens";
    // Half the LM each (and the units' padding to 16 x 2 elements).
    EXPECT_GE(frozen_held[r], lm_bytes / world) << "rank " << r;
    EXPECT_LE(frozen_held[r], lm_bytes / world * 1.01) << "rank " << r;
  }
  testing::expect_set_up_within_bound(
      sharded, whole,
      log::format("temporal run's frozen LM (%.1f MiB fp32) under ZeRO-3 over %d ranks, read by "
                  "range",
                  lm_bytes / 1048576.0, world));
}

}  // namespace
}  // namespace lmtrain::parallel
