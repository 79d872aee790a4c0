// The MoE row moves' CPU references (model/fused_moe_rows.h, kernels/moe_rows_reference.h),
// through the autograd functions the GPU runs (train.fused_kernels=on): the permute and the
// combine against libtorch's path, forward and backward, fp32, bf16 and autocast's mixed types,
// dropless and with capacity (tests/moe_rows_checks.h); the default path being the code MoE ran
// before the kernels, bit for bit; MoE decoders with the kernels on against off.
#include "model/fused_moe_rows.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "core/runtime.h"
#include "fused_op_checks.h"
#include "kernels/kernel_switch.h"
#include "model/gpt.h"
#include "model/moe.h"
#include "model/moe_routing.h"
#include "model_fixtures.h"
#include "moe_rows_checks.h"

namespace lmtrain::model {
namespace {

using kernels::FusedKernelMode;
using testing::KernelModeScope;

class FusedMoeRows : public ::testing::TestWithParam<testing::MoeRowsCase> {};
TEST_P(FusedMoeRows, ReferenceMatchesLibtorchForwardAndAutogradBackward) {
  testing::check_moe_rows(GetParam(), c10::kCPU);
}
INSTANTIATE_TEST_SUITE_P(Cases, FusedMoeRows, ::testing::ValuesIn(testing::moe_rows_cases()),
                         [](const auto& info) { return testing::moe_rows_case_name(info.param); });

TEST(FusedMoeRowsMap, InverseRowsNameEachKeptAssignmentsSortedRow) {
  // The plan of MoeRouting.TiesGoToTheLowerExpertAndCapacityKeepsFirstChoicesFirst: sorted rows
  // hold assignments (slot) 1, 0, 4, 2, 5; assignment 3 is dropped.
  auto expert = torch::tensor({1, 0, 2, 1, 1, 2}).view({3, 2});
  auto plan = plan_dispatch(expert, 3, 1.0);
  EXPECT_TRUE(torch::equal(moe_inverse_rows(plan, 6), torch::tensor({1, 0, 3, -1, 2, 4})));
}

// auto leaves an unproven kernel off: MoeImpl::run computes what it computed before the kernels
// existed (this test's copy of that code), to the bit.
TEST(FusedMoeRowsModel, DefaultPathIsThePreviousCodeBitForBit) {
  KernelModeScope scope(FusedKernelMode::kAuto);
  for (const double capacity : {0.0, 0.5}) {
    auto cfg = tiny_moe_config(MlpKind::kSwiGlu, 4, 2);
    cfg.moe.capacity_factor = capacity;
    torch::manual_seed(3);
    MoeImpl m(cfg, {0, 4});
    {
      torch::NoGradGuard no_grad;  // the layer alone: its expert weights start uninitialised
      for (auto& p : m.parameters()) p.normal_(0, 0.3);
    }
    auto x = torch::randn({3, 7, 16});
    auto y = m.run(x).y;
    // The code that stood in MoeImpl::run.
    const int64_t N = 21, k = 2, C = 16;
    auto flat = x.reshape({N, C});
    auto logits = torch::linear(flat, m.router->weight);
    auto routing = route(logits, at::Tensor(), k, cfg.moe.gate, cfg.moe.renormalize);
    auto plan = plan_dispatch(routing.expert, 4, capacity);
    auto rows = flat.index_select(0, plan.token);
    auto out_rows = m.experts(rows, plan.counts);
    auto weights = routing.weight.reshape({-1}).index_select(0, plan.slot).unsqueeze(1);
    auto weighted = (out_rows.to(at::kFloat) * weights).to(x.scalar_type());
    auto per_slot = torch::zeros({N * k, C}, weighted.options()).index_copy(0, plan.slot, weighted);
    auto before = per_slot.view({N, k, C}).sum(1).view({3, 7, C});
    EXPECT_TRUE(torch::equal(y, before))
        << "capacity " << capacity << ": max diff " << (y - before).abs().max().item<double>();
  }
}

// Whole MoE decoders (dropless and with capacity, a shared expert, top-2 and top-3) with every
// fused kernel on (CPU references) give the unfused loss and every gradient.
TEST(FusedMoeRowsModel, MoeDecodersGiveTheUnfusedLossAndGradients) {
  std::vector<GptConfig> configs;
  configs.push_back(tiny_moe_config(MlpKind::kSwiGlu, 4, 2));
  configs.push_back(tiny_moe_config(MlpKind::kGelu, 4, 3));
  configs.back().moe.capacity_factor = 0.6;
  configs.push_back(with_llama_family(tiny_moe_config(MlpKind::kSwiGlu, 5, 2), Arch::kLlama));
  configs.back().moe.shared_experts = 1;
  configs.back().moe.capacity_factor = 0.8;
  for (size_t i = 0; i < configs.size(); ++i) {
    const GptConfig& cfg = configs[i];
    torch::manual_seed(12);
    Gpt m(cfg);
    auto ids = torch::randint(cfg.vocab_size, {2, 12}, torch::kLong);
    auto targets = torch::randint(cfg.vocab_size, {2, 12}, torch::kLong);
    testing::expect_fused_model_matches(*m, ids, targets, FusedKernelMode::kOff, false, 1e-5, 1e-4,
                                        "config " + std::to_string(i));
  }
}

// bf16 autocast on the CPU: the fused rows are stored in bf16 (the experts' compute type), and a
// few SGD steps follow the unfused run within bf16's noise.
TEST(FusedMoeRowsModel, Bf16AutocastTrainingFollowsTheUnfusedRun) {
  const GptConfig cfg = tiny_moe_config(MlpKind::kSwiGlu, 4, 2);
  auto train = [&](FusedKernelMode mode) {
    KernelModeScope scope(mode);
    torch::manual_seed(21);
    Gpt m(cfg);
    auto ids = torch::randint(cfg.vocab_size, {2, 12}, torch::kLong);
    auto targets = torch::randint(cfg.vocab_size, {2, 12}, torch::kLong);
    torch::optim::SGD opt(m->parameters(), 0.1);
    return testing::bf16_training_losses(*m, ids, targets, opt, 4);
  };
  const auto off = train(FusedKernelMode::kOff);
  const auto on = train(FusedKernelMode::kOn);
  for (size_t i = 0; i < off.size(); ++i) EXPECT_NEAR(on[i], off[i], 0.02 * off[i]) << i;
}

}  // namespace
}  // namespace lmtrain::model
