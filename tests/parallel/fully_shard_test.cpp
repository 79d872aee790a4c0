// ZeRO-3's units and gathers (parallel/shard_units.h, parallel/fully_shard.h) over a real
// two-rank Gloo group in one process: the units cover the flat layout once, released storage
// comes back under the same views, and a sharded forward + backward (accumulation, activation
// checkpointing, tied head) leaves in each rank's gradient shard the mean of the two ranks'
// single-process gradients, with the gathered blocks freed after use.
#include "parallel/fully_shard.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/flat_params.h"

namespace lmtrain::parallel {
namespace {

TEST(ShardUnitsTest, CoverTheLayoutOnceWithEachBlockInOneRun) {
  auto cfg = model::tiny_gpt_config(32, 256, 16);
  cfg.n_layer = 3;
  model::Gpt m(cfg);
  optim::FlatParams flat(*m, m->param_tags(), /*pad=*/48);
  const auto units = plan_shard_units(flat, cfg.n_layer);
  ASSERT_EQ(units.size(), 4u);
  std::vector<int> covered(static_cast<size_t>(flat.numel()), 0);
  int64_t total = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    for (const auto& [lo, hi] : units[u].ranges) {
      for (int64_t i = lo; i < hi; ++i) ++covered[static_cast<size_t>(i)];
    }
    for (size_t i : units[u].segments) {
      EXPECT_EQ(unit_of_name(flat.segments()[i].name, cfg.n_layer), u);
      EXPECT_EQ(units[u].buffer_offset(flat.segments()[i].offset) % 16, 0);
    }
    if (u > 0) {
      EXPECT_EQ(units[u].ranges.size(), 1u) << "block " << u - 1;
    }
    total += units[u].numel;
  }
  // The root: the final norm at the start of the layout, the embeddings at its end.
  EXPECT_EQ(units[0].ranges.size(), 2u);
  EXPECT_EQ(total, flat.numel());
  for (int c : covered) ASSERT_EQ(c, 1);
  using Piece = std::pair<int64_t, int64_t>;
  EXPECT_EQ(shard_piece(10, 30, 0, 16), Piece(10, 16));
  EXPECT_EQ(shard_piece(10, 30, 1, 16), Piece(16, 30));
  EXPECT_EQ(shard_piece(10, 30, 2, 16), Piece(30, 30));
}

TEST(ShardUnitsTest, ReleasedStorageComesBackUnderTheSameViews) {
  auto t = torch::zeros({8});
  auto v = t.narrow(0, 2, 3);
  release_storage(t);
  EXPECT_TRUE(storage_released(v));
  EXPECT_EQ(t.storage().nbytes(), 0u);
  restore_storage(t, 8 * 4);
  EXPECT_FALSE(storage_released(t));
  v.fill_(1);
  t.narrow(0, 0, 2).zero_();
  t.narrow(0, 5, 3).zero_();
  EXPECT_EQ(t.sum().item<float>(), 3.0f);
}

TEST(FullyShardTest, ShardGradientsAreTheRanksMeanAndBlocksAreFreedAfterUse) {
  auto cfg = model::tiny_gpt_config(32, 256, 16);  // tied head
  cfg.n_layer = 3;
  const int accum = 2;
  auto data = torch::randint(256, {2, accum, 4, 17}, torch::kLong);
  struct Replica {
    model::Gpt model;
    std::unique_ptr<optim::FlatParams> flat;
  };
  std::vector<Replica> replicas;
  for (int i = 0; i < 4; ++i) {  // built up front: the global RNG is not for two threads
    torch::manual_seed(1);
    Replica r{model::Gpt(cfg), nullptr};
    r.model->set_checkpointing(model::CheckpointPolicy::parse("block"));
    r.model->train();
    r.flat = std::make_unique<optim::FlatParams>(*r.model, r.model->param_tags(), /*pad=*/32);
    replicas.push_back(std::move(r));
  }
  auto loss = [&](model::GptImpl& m, int rank, int s) {
    auto rows = data[rank][s];
    return m.loss(rows.narrow(1, 0, 16), rows.narrow(1, 1, 16)) / accum;
  };
  at::Tensor expected;
  for (int rank = 0; rank < 2; ++rank) {
    auto& rep = replicas[rank];
    rep.flat->zero_grad();
    for (int s = 0; s < accum; ++s) loss(*rep.model, rank, s).backward();
    expected = expected.defined() ? (expected + rep.flat->grads()) / 2 : rep.flat->grads().clone();
  }
  std::vector<at::Tensor> got(2);
  std::vector<ShardBytes> bytes(2);
  std::vector<bool> freed(2, false);
  const auto errors = testing::run_ranks_in_process(2, [&](int r, dist::Group& group) {
    auto& rep = replicas[2 + r];
    FullyShard fsdp(*rep.model, *rep.flat, group, nullptr, /*reshard_after_forward=*/true);
    fsdp.install();
    rep.flat->zero_grad();
    for (int s = 0; s < accum; ++s) {
      fsdp.begin_micro_step(s == accum - 1);
      loss(*rep.model, r, s).backward();
    }
    fsdp.finish();
    const int64_t shard = rep.flat->numel() / 2;
    got[r] = rep.flat->grad_slice(r * shard, shard).clone();
    bytes[r] = fsdp.bytes();
    freed[r] = storage_released(rep.model->transformer->blocks[1]->attn->c_attn->weight) &&
               storage_released(rep.model->transformer->wte->weight);
  });
  const int64_t shard = replicas[0].flat->numel() / 2;
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    const auto want = expected.narrow(0, r * shard, shard);
    EXPECT_TRUE(torch::allclose(got[r], want, 1e-6, 1e-7))
        << "rank " << r << ": max diff " << (got[r] - want).abs().max().item<float>();
    EXPECT_TRUE(freed[r]) << "rank " << r;
    EXPECT_GT(bytes[r].gathered_peak, 0);
    EXPECT_LE(bytes[r].gathered_peak, 2 * bytes[r].largest_block) << "rank " << r;
    EXPECT_EQ(bytes[r].param_shard, shard * 4);
  }
}

// Evaluation (begin_forward_only): no gradient mode, each block gathered before its forward and
// released after it, the root held until end_forward_only. The loss is the unsharded model's
// bit for bit, at most two of the three blocks are ever gathered at once (never the whole
// model), and nothing stays gathered afterwards.
TEST(FullyShardTest, EvaluationRunsBlockByBlockAndEqualsTheWholeModel) {
  auto cfg = model::tiny_gpt_config(32, 256, 16);
  cfg.n_layer = 3;
  auto rows = torch::randint(256, {2, 4, 17}, torch::kLong);  // (rank, batch, T + 1)
  std::vector<model::Gpt> models;
  std::vector<std::unique_ptr<optim::FlatParams>> flats;
  for (int i = 0; i < 3; ++i) {  // built up front: the global RNG is not for two threads
    torch::manual_seed(2);
    models.push_back(model::Gpt(cfg));
    models.back()->eval();
    flats.push_back(std::make_unique<optim::FlatParams>(*models.back(), models.back()->param_tags(),
                                                        /*pad=*/32));
  }
  auto loss = [&](model::GptImpl& m, int rank) {
    torch::NoGradGuard no_grad;
    const auto r = rows[rank];
    return m.loss(r.narrow(1, 0, 16), r.narrow(1, 1, 16)).item<float>();
  };
  const float want[2] = {loss(*models[0], 0), loss(*models[0], 1)};
  float got[2] = {0, 0};
  std::vector<ShardBytes> bytes(2);
  std::vector<bool> freed(2, false);
  const auto errors = testing::run_ranks_in_process(2, [&](int r, dist::Group& group) {
    auto& m = *models[1 + r];
    FullyShard fsdp(m, *flats[1 + r], group, nullptr, /*reshard_after_forward=*/true);
    fsdp.install();
    fsdp.begin_forward_only();
    got[r] = loss(m, r);
    fsdp.end_forward_only();
    bytes[r] = fsdp.bytes();
    freed[r] = storage_released(m.transformer->blocks[2]->attn->c_attn->weight) &&
               storage_released(m.transformer->wte->weight);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(got[r], want[r]) << "rank " << r;
    EXPECT_GT(bytes[r].gathered_peak, 0);
    EXPECT_LE(bytes[r].gathered_peak, 2 * bytes[r].largest_block) << "rank " << r;
    EXPECT_TRUE(freed[r]) << "rank " << r;
  }
}

}  // namespace
}  // namespace lmtrain::parallel
