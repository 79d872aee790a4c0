// ZeRO-3's sharded set-up under expert parallelism (train/init_from_shard.h with
// train/expert_resume.h's ep_localizer): model.init_from, or a resumed checkpoint, holds every
// expert of each stack (whole, as one process saves them); an EP rank keeps its experts whole
// beside its shard of the shared region (optim::ShardOnly keep_experts), and reads only those
// rows of each stack and its shard's rows of the rest, by range. What it reads equals, bit for
// bit, the same file loaded whole into a model of its placement (the whole path's narrowing,
// checkpoint/training_checkpoint.h's load_model_tensors) and laid out flat. Collective-free:
// the two EP ranks run one after the other in this process.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/training_checkpoint.h"
#include "core/safetensors.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/flat_params.h"
#include "test_util.h"
#include "train/expert_resume.h"
#include "train/init_from_shard.h"

namespace lmtrain::train {
namespace {

TEST(Zero3ShardedExpertsTest, EachEpRankReadsItsExpertsWholeAndItsShardOfTheRest) {
  testing::TempDir dir("lmtrain_sharded_experts");
  // 2 layers, 4 SwiGLU experts each, top-2; ep=2 on 2 ranks: rank r holds experts [2r, 2r + 2).
  const auto cfg = model::tiny_moe_config(model::MlpKind::kSwiGlu, 4, 2);
  const int ep = 2;
  const int64_t pad = 16 * ep;
  {
    torch::manual_seed(7);
    model::Gpt saved(cfg);  // every expert
    core::NamedTensors tensors;
    for (auto& [name, t] : saved->state_tensors()) tensors.emplace_back(name, t);
    core::write_safetensors(dir.file("model.safetensors"), tensors);
  }
  LoadedCheckpoint src;
  src.dir = dir.path();
  src.meta = nlohmann::json::object();
  const auto whole_file = core::read_safetensors(dir.file("model.safetensors"));
  for (int r = 0; r < ep; ++r) {
    SCOPED_TRACE("EP rank " + std::to_string(r));
    const model::ExpertPlacement placement{2 * r, 2};
    model::Gpt m(cfg, /*init=*/false, placement);
    optim::FlatParams flat(
        std::vector<optim::ParamSource>{{"", &*m, m->param_tags()}}, pad,
        optim::ShardOnly{r, ep, /*keep_experts=*/true, torch::TensorOptions().dtype(at::kFloat)});
    load_init_shard(src, *m, flat, /*adapters=*/false, ep_localizer(*m, r, ep));

    // The reference: the whole file into a built model of this placement (its stacks narrowed
    // to this rank's experts), laid out flat.
    model::Gpt ref(cfg, /*init=*/true, placement);
    load_model_tensors(*ref, whole_file, dir.file("model.safetensors"));
    optim::FlatParams whole(*ref, ref->param_tags(), pad);
    ASSERT_EQ(flat.numel(), whole.numel());
    ASSERT_LT(flat.expert_begin(), flat.numel());  // the stacks are there, apart
    EXPECT_TRUE(torch::equal(flat.param_slice(flat.shard_begin(), flat.shard_numel()),
                             whole.params().narrow(0, flat.shard_begin(), flat.shard_numel())));
    EXPECT_TRUE(torch::equal(flat.expert_params(), whole.expert_params()));
    // The reference itself holds this rank's rows of the saved stack.
    const std::string stack = "transformer.h.1.mlp.experts.c_fc.weight";
    for (const auto& [name, t] : ref->state_tensors()) {
      if (name == stack) {
        EXPECT_TRUE(torch::equal(t, whole_file.tensors.at(stack).narrow(0, 2 * r, 2)));
      }
    }
  }

  // A file whose stacks hold other experts than the model's layout wants is named.
  {
    testing::TempDir other("lmtrain_sharded_experts_bad");
    auto cfg8 = model::tiny_moe_config(model::MlpKind::kSwiGlu, 8, 2);
    torch::manual_seed(7);
    model::Gpt eight(cfg8);
    core::NamedTensors tensors;
    for (auto& [name, t] : eight->state_tensors()) tensors.emplace_back(name, t);
    core::write_safetensors(other.file("model.safetensors"), tensors);
    LoadedCheckpoint bad = src;
    bad.dir = other.path();
    model::Gpt m(cfg, /*init=*/false, model::ExpertPlacement{0, 2});
    optim::FlatParams flat(std::vector<optim::ParamSource>{{"", &*m, m->param_tags()}}, pad,
                           optim::ShardOnly{0, ep, true, torch::TensorOptions().dtype(at::kFloat)});
    try {
      load_init_shard(bad, *m, flat, false, ep_localizer(*m, 0, ep));
      ADD_FAILURE() << "no error for stacks of 8 experts";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("the model expects"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lmtrain::train
