// DistMuon's state read back at another world size (Muon::load_saved_state): saved by 2 matrix
// owners, resumed by 3 real Gloo ranks in this process, each rank restores the AdamW groups'
// moments (every rank keeps them) and the momentum of the matrices it owns now, equal to the
// saved values, and reads nothing else from the files (counted through the reader). Before,
// every rank read every saved tensor whole, the other owners' momentum included.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/counting_saved_tensors.h"
#include "optim/flat_params.h"
#include "optim/muon.h"
#include "optim/optimizer_factory.h"

namespace lmtrain::optim {
namespace {

TEST(MuonResume, EachRankOfAnotherWorldSizeReadsTheSharedMomentsAndOnlyTheMatricesItOwns) {
  const auto cfg = model::tiny_gpt_config(16, 40, 8);
  OptimizerOptions opts;
  opts.name = OptimizerName::kMuon;
  const int saved_world = 2, world = 3;
  // Built up front (the global RNG is not for threads).
  std::vector<model::Gpt> models;
  for (int i = 0; i < saved_world + world; ++i) models.push_back(model::Gpt(cfg));

  // Each saving rank's file: its state_tensors() set to values that name the tensor.
  std::vector<NamedTensors> files(saved_world);
  nlohmann::json layout;
  auto errors = testing::run_ranks_in_process(saved_world, [&](int r, dist::Group& group) {
    auto& m = *models[r];
    FlatParams flat(m, m.param_tags(), flat_pad_multiple(opts, saved_world));
    auto opt = make_optimizer(opts, flat, group);
    for (auto& [name, t] : opt->state_tensors()) {
      const double mark = static_cast<double>(std::hash<std::string>{}(name) % 997);
      files[r].emplace_back(name,
                            torch::arange(t.numel(), torch::kFloat).reshape(t.sizes()) + mark);
    }
    if (r == 0) layout = opt->state_layout();
  });
  for (const auto& e : errors) ASSERT_TRUE(e.empty()) << e;
  std::map<std::string, at::Tensor> saved_by_name;
  for (const auto& f : files) {
    for (const auto& [name, t] : f) saved_by_name[name] = t;
  }

  std::vector<int64_t> read(world, -1), want_read(world, 0), tensors(world, 0);
  std::vector<bool> equal(world, false);
  errors = testing::run_ranks_in_process(world, [&](int r, dist::Group& group) {
    auto& m = *models[saved_world + r];
    FlatParams flat(m, m.param_tags(), flat_pad_multiple(opts, world));
    auto opt = make_optimizer(opts, flat, group);
    const auto& muon = dynamic_cast<const Muon&>(*opt);
    for (const auto& seg : flat.segments()) {
      const int own = muon.owner(seg.name);
      if (own < 0) want_read[r] += 2 * seg.numel;  // exp_avg and exp_avg_sq
      if (own == r) want_read[r] += seg.numel;     // momentum
    }
    const CountingSavedTensors saved(files);
    opt->load_saved_state(saved, layout, 7);
    read[r] = saved.elements_read();
    equal[r] = opt->step_count() == 7;
    for (const auto& [name, t] : opt->state_tensors()) {
      equal[r] = equal[r] && torch::equal(t, saved_by_name.at(name));
      ++tensors[r];
    }
  });
  int64_t held = 0;
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(errors[r].empty()) << errors[r];
    EXPECT_TRUE(equal[r]);
    EXPECT_EQ(read[r], want_read[r]);
    held += tensors[r];
  }
  // Together the ranks hold every saved tensor: rank 0 the AdamW moments, each owner its own.
  EXPECT_EQ(held, static_cast<int64_t>(saved_by_name.size()));
}

}  // namespace
}  // namespace lmtrain::optim
