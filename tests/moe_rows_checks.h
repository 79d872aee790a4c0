// The checks of the MoE row moves (model/fused_moe_rows.h), run on any device: the fused path
// (train.fused_kernels=on: the CPU reference on the CPU, the CUDA kernels on a GPU) against
// libtorch's index_select / index_copy / sum path (off), forward and backward through autograd,
// with and without assignments dropped by capacity. The CPU suite runs them on the references
// (tests/model/fused_moe_rows_test.cpp), the GPU suite on the kernels
// (tests/cuda/cuda_moe_test.cpp).
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/runtime.h"
#include "fused_op_checks.h"
#include "kernels/kernel_switch.h"
#include "model/fused_moe_rows.h"
#include "model/moe_routing.h"

namespace lmtrain::testing {

struct MoeRowsCase {
  int64_t tokens, k, experts, C;
  double capacity;             // model.moe.capacity_factor: 0 keeps every assignment
  at::ScalarType tokens_type;  // x and y (N, C)
  at::ScalarType rows_type;    // the experts' rows (M, C): bf16 with fp32 tokens is autocast's case
};

inline std::string moe_rows_case_name(const MoeRowsCase& c) {
  return "N" + std::to_string(c.tokens) + "k" + std::to_string(c.k) + "C" + std::to_string(c.C) +
         (c.capacity > 0 ? "Capacity" : "Dropless") + "_" + dtype_name(c.tokens_type) + "_" +
         dtype_name(c.rows_type);
}

// Small shapes: packed (C % 4 == 0) and single-element column paths, k = 1, mixed types.
inline std::vector<MoeRowsCase> moe_rows_cases() {
  return {{37, 2, 4, 24, 0.0, at::kFloat, at::kFloat},
          {37, 2, 4, 24, 0.5, at::kFloat, at::kFloat},
          {29, 3, 5, 10, 0.7, at::kFloat, at::kFloat},
          {20, 1, 3, 16, 0.0, at::kFloat, at::kFloat},
          {37, 2, 4, 24, 0.0, at::kBFloat16, at::kBFloat16},
          {37, 2, 4, 24, 0.5, at::kBFloat16, at::kBFloat16},
          {37, 2, 4, 24, 0.0, at::kFloat, at::kBFloat16},
          {29, 3, 5, 10, 0.6, at::kFloat, at::kBFloat16}};
}

// Routing of random logits and its plan, made on the CPU and moved to `dev`: every device gets
// the same assignments (a GPU's softmax could order two near-equal scores the other way).
struct MoeRowsInputs {
  model::Routing routing;
  model::DispatchPlan plan;
};
inline MoeRowsInputs moe_rows_inputs(const MoeRowsCase& c, c10::Device dev) {
  torch::manual_seed(17);
  auto logits = torch::randn({c.tokens, c.experts}) * 2;
  MoeRowsInputs in;
  in.routing = model::route(logits, at::Tensor(), c.k, model::MoeGate::kSoftmax, true);
  in.plan = model::plan_dispatch(in.routing.expert, c.experts, c.capacity);
  in.routing.weight = in.routing.weight.to(dev);
  in.routing.expert = in.routing.expert.to(dev);
  in.plan.token = in.plan.token.to(dev);
  in.plan.slot = in.plan.slot.to(dev);
  return in;
}

// Tolerances against libtorch: the permute moves values (its forward is exact, with a cast to
// bf16 where the rows are bf16); sums differ in order (fp32) or where they round (bf16: libtorch
// rounds each weighted row and adds gradients in bf16, the kernels sum in fp32 and round once).
inline double moe_rows_tolerance(const MoeRowsCase& c) {
  return c.tokens_type == at::kFloat && c.rows_type == at::kFloat
             ? 1e-6
             : forward_tolerance(at::kBFloat16);
}

struct MoeRowsResult {
  at::Tensor rows, dx, y, d_out, dw;
};

// Both row moves in `mode`; the permute under autocast when the rows are bf16 and x is fp32.
inline MoeRowsResult run_moe_rows(const MoeRowsCase& c, const MoeRowsInputs& in, c10::Device dev,
                                  kernels::FusedKernelMode mode) {
  torch::manual_seed(18);
  const int64_t M = in.plan.token.size(0);
  auto x = draw(torch::randn({c.tokens, c.C}), c.tokens_type, dev).requires_grad_(true);
  auto out_rows = draw(torch::randn({M, c.C}), c.rows_type, dev).requires_grad_(true);
  auto w = in.routing.weight.detach().clone().requires_grad_(true);
  auto probe_rows = draw(torch::randn({M, c.C}), at::kFloat, dev);
  auto probe_y = draw(torch::randn({c.tokens, c.C}), at::kFloat, dev);
  KernelModeScope scope(mode);
  const bool fused = mode == kernels::FusedKernelMode::kOn;
  MoeRowsResult r;
  {
    const bool autocast = c.rows_type != c.tokens_type;
    core::AutocastScope cast(dev.type(), autocast, c.rows_type);
    EXPECT_EQ(model::moe_permute_fused(x), fused);
    r.rows = model::moe_permute(x, in.plan, c.k);
  }
  r.dx = torch::autograd::grad({(r.rows.to(at::kFloat) * probe_rows).sum()}, {x})[0];
  EXPECT_EQ(model::moe_combine_fused(out_rows, w, c.tokens_type), fused);
  r.y = model::moe_combine(out_rows, w, in.plan, c.tokens_type);
  auto g = torch::autograd::grad({(r.y.to(at::kFloat) * probe_y).sum()}, {out_rows, w});
  r.d_out = g[0];
  r.dw = g[1];
  return r;
}

inline void check_moe_rows(const MoeRowsCase& c, c10::Device dev) {
  const auto in = moe_rows_inputs(c, dev);
  if (c.capacity > 0) {
    EXPECT_GT(in.plan.dropped, 0) << "the case must drop assignments";
  }
  const auto ref = run_moe_rows(c, in, dev, kernels::FusedKernelMode::kOff);
  const auto got = run_moe_rows(c, in, dev, kernels::FusedKernelMode::kOn);
  const double tol = moe_rows_tolerance(c);
  // The permute is a move (a round-to-nearest-even cast where the rows are bf16): exact.
  EXPECT_EQ(got.rows.scalar_type(), c.rows_type);
  EXPECT_TRUE(torch::equal(got.rows, ref.rows.to(c.rows_type)));
  EXPECT_EQ(got.dx.scalar_type(), c.tokens_type);
  EXPECT_LE(relative_error(got.dx, ref.dx), tol) << "dx";
  EXPECT_EQ(got.y.scalar_type(), c.tokens_type);
  EXPECT_LE(relative_error(got.y, ref.y), tol) << "y";
  EXPECT_EQ(got.d_out.scalar_type(), c.rows_type);
  EXPECT_LE(relative_error(got.d_out, ref.d_out), tol) << "d out_rows";
  EXPECT_EQ(got.dw.scalar_type(), at::kFloat);
  EXPECT_LE(relative_error(got.dw, ref.dw), c.rows_type == at::kFloat ? 1e-5 : 1e-2) << "dw";
  // A dropped assignment's gate weight gets no gradient.
  const auto dropped = model::moe_inverse_rows(in.plan, c.tokens * c.k).lt(0).view({c.tokens, c.k});
  EXPECT_EQ(got.dw.masked_select(dropped).abs().sum().item<double>(), 0.0);
  // The same bits on a second run (no atomics, sums in a fixed order).
  const auto again = run_moe_rows(c, in, dev, kernels::FusedKernelMode::kOn);
  EXPECT_TRUE(torch::equal(again.dx, got.dx));
  EXPECT_TRUE(torch::equal(again.y, got.y));
  EXPECT_TRUE(torch::equal(again.d_out, got.d_out));
  EXPECT_TRUE(torch::equal(again.dw, got.dw));
}

}  // namespace lmtrain::testing
