// Expert-parallel gradient sync on 4 real Gloo ranks (threads of this process, loopback): ranks
// {0, 1} and {2, 3} are EP groups of ep=2 splitting 4 experts; ranks {0, 2} and {1, 3} hold the
// same experts. After optimizer steps on different data per rank, the replicas of an expert hold
// identical parameters, the two EP ranks' experts differ, and the shared (non-expert) parameters
// agree on all four ranks. Also: the dispatcher's exchange equals the local computation.
#include "parallel/expert_parallel.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "core/runtime.h"
#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/adamw.h"
#include "optim/flat_params.h"
#include "train/train_step.h"

namespace lmtrain::train {
namespace {

model::GptConfig moe_config() { return model::tiny_moe_config(model::MlpKind::kSwiGlu, 4, 2, 16); }

// Every rank's copy of `local` (same shape everywhere), gathered over the world.
std::vector<at::Tensor> gather_all(dist::Group& world, const at::Tensor& local) {
  std::vector<at::Tensor> parts;
  for (int r = 0; r < world.size(); ++r) parts.push_back(torch::empty_like(local));
  world.allgather(parts, local.contiguous())->wait();
  return parts;
}

TEST(ExpertParallel, ReplicasOfAnExpertAgreeAndEpRanksDiffer) {
  auto errors = testing::run_ranks_in_process(4, [](int rank, dist::Group& world) {
    auto ep = make_expert_parallel(world, 2, 4);
    ASSERT_EQ(ep.placement.first, rank % 2 == 0 ? 0 : 2);
    // The ranks are threads sharing libtorch's global generator: initialise one at a time.
    static std::mutex init_mutex;
    model::Gpt model{nullptr};
    {
      std::lock_guard<std::mutex> lock(init_mutex);
      torch::manual_seed(3);
      model = model::Gpt(moe_config(), true, ep.placement);
    }
    model->set_expert_dispatcher(std::make_shared<AllToAllExpertDispatcher>(*ep.ep_group, 4));
    optim::FlatParams flat(*model, model->param_tags());
    flat.set_expert_first(ep.placement.first);
    optim::AdamWOptions adam;
    adam.eps = 1e-6;
    optim::AdamW opt(flat, adam, ep.ep_group.get());
    TrainStepper stepper(*model, flat, opt, world, core::Runtime::cpu(), 1, 7, 1 << 12,
                         LossScaler(false, 1, 1), &ep);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + rank);  // different data per rank
    for (int s = 0; s < 3; ++s) {
      auto batch = torch::randint(64, {2, 9}, gen, torch::kLong);
      stepper.step(
          1, [&](int64_t) { return std::make_pair(batch.narrow(1, 0, 8), batch.narrow(1, 1, 8)); },
          1e-2, 1.0);
    }
    const int64_t eb = flat.expert_begin();
    ASSERT_LT(eb, flat.numel());
    auto experts = gather_all(world, flat.params().narrow(0, eb, flat.numel() - eb));
    auto shared = gather_all(world, flat.params().narrow(0, 0, eb));
    if (rank != 0) return;
    EXPECT_TRUE(experts[0].equal(experts[2])) << "replicas of experts 0-1";
    EXPECT_TRUE(experts[1].equal(experts[3])) << "replicas of experts 2-3";
    EXPECT_FALSE(experts[0].equal(experts[1])) << "EP ranks hold different experts";
    for (int r = 1; r < 4; ++r) EXPECT_TRUE(shared[r].equal(shared[0])) << "rank " << r;
  });
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(ExpertParallel, DispatcherExchangeEqualsLocalExperts) {
  auto errors = testing::run_ranks_in_process(2, [](int rank, dist::Group& world) {
    auto ep = make_expert_parallel(world, 2, 4);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(9);  // the same weights on both ranks
    model::MoeImpl full(moe_config(), {0, 4});
    {
      torch::NoGradGuard g;
      for (auto& p : full.parameters()) p.normal_(0, 0.3, gen);
    }
    model::MoeImpl mine(moe_config(), ep.placement);
    {
      torch::NoGradGuard g;
      mine.router->weight.copy_(full.router->weight);
      mine.experts->c_fc->weight.copy_(full.experts->c_fc->weight.narrow(0, ep.placement.first, 2));
      mine.experts->c_proj->weight.copy_(
          full.experts->c_proj->weight.narrow(0, ep.placement.first, 2));
    }
    mine.set_dispatcher(std::make_shared<AllToAllExpertDispatcher>(*ep.ep_group, 4));
    auto data_gen = at::make_generator<at::CPUGeneratorImpl>(50 + rank);
    auto x = torch::randn({2, 5, 16}, data_gen);
    auto want = full.run(x).y;
    auto got = mine.run(x).y;
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6)) << (got - want).abs().max();
  });
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace
}  // namespace lmtrain::train
