// ZeRO-3's frozen parameters (parallel/frozen_shard.h) over a real two-rank Gloo group in one
// process: a LoRA model's frozen base leaves each rank with half of it (plus the units'
// padding) and no whole tensor; gathering a unit brings back exactly the base's values (the
// blocks' linear weights rounded to bf16 once under a bf16 wire, the rest exact), and
// releasing it frees them again.
#include "parallel/frozen_shard.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <optional>

#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model/lora.h"
#include "model_fixtures.h"
#include "parallel/shard_units.h"

namespace lmtrain::parallel {
namespace {

TEST(FrozenShardTest, EachRankKeepsHalfTheBaseAndAGatherGivesItBack) {
  auto cfg = model::tiny_gpt_config(32, 96, 16);
  cfg.tie_embeddings = false;
  model::LoraOptions lora;
  lora.rank = 2;
  lora.targets = model::parse_lora_targets("q,v,head");
  for (const std::optional<at::ScalarType> wire :
       {std::optional<at::ScalarType>(), std::optional<at::ScalarType>(at::kBFloat16)}) {
    SCOPED_TRACE(wire ? "bf16 wire" : "fp32 wire");
    std::vector<model::Gpt> models;
    for (int r = 0; r < 2; ++r) {  // built up front: the global RNG is not for two threads
      torch::manual_seed(3);
      models.emplace_back(cfg);
      model::apply_lora(*models.back(), lora, /*init=*/true);
    }
    // The base before sharding, by name, as each parameter should come back from a gather.
    std::map<std::string, at::Tensor> want;
    const auto& tags = models[0]->param_tags();
    for (const auto& item : models[0]->named_parameters()) {
      const auto& tag = tags.at(item.key());
      if (tag.trainable) continue;
      const bool lowered = wire && tag.block_matrix;
      want[item.key()] =
          lowered ? item.value().to(at::kBFloat16).to(at::kFloat) : item.value().detach().clone();
    }
    ASSERT_FALSE(want.empty());
    const int64_t whole = frozen_param_bytes(*models[0]);
    const size_t units = static_cast<size_t>(cfg.n_layer) + 1;
    std::vector<std::string> failures(2);
    std::vector<int64_t> held(2);
    const auto errors = testing::run_ranks_in_process(2, [&](int r, dist::Group& group) {
      auto& m = *models[r];
      FrozenShard frozen(m, group, units, wire);
      held[r] = frozen.shard_bytes();
      auto check_all = [&](bool gathered) {
        for (const auto& item : m.named_parameters()) {
          auto it = want.find(item.key());
          if (it == want.end()) continue;
          const bool released = storage_released(item.value());
          if (released == gathered) {
            failures[r] += item.key() + (gathered ? " not gathered; " : " still held; ");
          } else if (gathered && !torch::equal(item.value(), it->second)) {
            failures[r] += item.key() + " differs after the gather; ";
          }
        }
      };
      check_all(/*gathered=*/false);  // nothing whole once sharded
      for (size_t u = 0; u < units; ++u) frozen.issue(u);
      for (size_t u = 0; u < units; ++u) frozen.wait(u);
      check_all(/*gathered=*/true);
      for (size_t u = 0; u < units; ++u) frozen.release(u);
      check_all(/*gathered=*/false);
    });
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(errors[r], "") << "rank " << r;
      EXPECT_EQ(failures[r], "") << "rank " << r;
      EXPECT_GE(held[r], whole / 2);
      EXPECT_LE(held[r], whole / 2 + 64 * 4 * static_cast<int64_t>(want.size()))
          << "rank " << r;  // padding: under 16 x 2 elements per tensor and per part
    }
  }
}

}  // namespace
}  // namespace lmtrain::parallel
