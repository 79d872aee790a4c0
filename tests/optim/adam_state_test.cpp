// Adam moments read back by flat range (optim/adam_state.h): whatever layout saved them (flat
// shards over W ranks, or by parameter name) and whatever range a rank of another world size
// asks for, the range equals the same range of the saved moments, and only the saved elements
// overlapping it are read (counted through the reader).
#include "optim/adam_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/counting_saved_tensors.h"
#include "optim/flat_params.h"

namespace lmtrain::optim {
namespace {

TEST(ReadAdamRange, AnyRankOfAnyWorldSizeReadsExactlyItsRangeOfEitherLayout) {
  torch::manual_seed(1);
  model::Gpt m(model::tiny_gpt_config(16, 40, 8));
  FlatParams flat(*m, m->param_tags(), 16 * 6);  // splits evenly over 1, 2, 3 and 6 ranks
  const int64_t numel = flat.numel();
  // Saved moments: random on the parameters, 0 on the alignment padding (as an optimizer's).
  auto avg = torch::zeros({numel}), avg_sq = torch::zeros({numel});
  for (const auto& seg : flat.segments()) {
    flat.view(avg, seg).copy_(torch::randn(seg.shape));
    flat.view(avg_sq, seg).copy_(torch::rand(seg.shape));
  }
  // By name, as replicated AdamW saves them.
  std::vector<NamedTensors> named(1);
  for (const auto& seg : flat.segments()) {
    named[0].emplace_back("exp_avg." + seg.name, flat.view(avg, seg));
  }
  for (const auto& seg : flat.segments()) {
    named[0].emplace_back("exp_avg_sq." + seg.name, flat.view(avg_sq, seg));
  }
  const nlohmann::json named_layout = {{"kind", "named"}};
  for (int saved_world : {0, 1, 2, 3}) {  // 0: by name, else flat shards over that many ranks
    std::vector<NamedTensors> shards;
    nlohmann::json layout = named_layout;
    if (saved_world > 0) {
      const int64_t s = numel / saved_world;
      for (int r = 0; r < saved_world; ++r) {
        shards.push_back(
            {{"exp_avg", avg.narrow(0, r * s, s)}, {"exp_avg_sq", avg_sq.narrow(0, r * s, s)}});
      }
      layout = {{"kind", "flat_shards"},
                {"world_size", saved_world},
                {"shard_numel", s},
                {"flat_layout", flat.layout_signature()}};
    }
    for (int world : {1, 2, 3, 6}) {
      const int64_t shard = numel / world;
      for (int r = 0; r < world; ++r) {
        SCOPED_TRACE("saved at " + std::to_string(saved_world) + ", rank " + std::to_string(r) +
                     " of " + std::to_string(world));
        const CountingSavedTensors saved(saved_world > 0 ? shards : named);
        auto m_out = torch::full({shard}, 7.0), v_out = torch::full({shard}, 7.0);
        read_adam_range(flat, saved, layout, r * shard, m_out, v_out);
        EXPECT_TRUE(torch::equal(m_out, avg.narrow(0, r * shard, shard)));
        EXPECT_TRUE(torch::equal(v_out, avg_sq.narrow(0, r * shard, shard)));
        // Flat shards: exactly the range, twice (both moments). By name: the parameters'
        // elements in it (not the padding between them).
        int64_t in_params = 0;
        for (const auto& seg : flat.segments()) {
          in_params += std::max<int64_t>(0, std::min(seg.offset + seg.numel, (r + 1) * shard) -
                                                std::max(seg.offset, r * shard));
        }
        EXPECT_EQ(saved.elements_read(), 2 * (saved_world > 0 ? shard : in_params));
      }
    }
  }
}

TEST(ReadAdamRange, ALayoutOfAnotherModelOrAMissingFileIsNamed) {
  torch::manual_seed(1);
  model::Gpt m(model::tiny_gpt_config(16, 40, 8));
  FlatParams flat(*m, m->param_tags(), 16 * 2);
  const int64_t s = flat.numel() / 2;
  const std::vector<NamedTensors> one{
      {{"exp_avg", torch::zeros({s})}, {"exp_avg_sq", torch::zeros({s})}}};
  auto out_m = torch::zeros({s}), out_v = torch::zeros({s});
  const nlohmann::json layout = {{"kind", "flat_shards"},
                                 {"world_size", 2},
                                 {"shard_numel", s},
                                 {"flat_layout", flat.layout_signature()}};
  try {
    read_adam_range(flat, SavedTensorsInMemory(one), layout, 0, out_m, out_v);
    FAIL() << "a missing rank file was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("sharded over 2 ranks but 1 rank files"),
              std::string::npos)
        << e.what();
  }
  auto other = layout;
  other["flat_layout"] = "another model";
  EXPECT_THROW(read_adam_range(flat, SavedTensorsInMemory(one), other, 0, out_m, out_v),
               std::exception);
}

}  // namespace
}  // namespace lmtrain::optim
