// train.precision=fp8 under tensor parallelism (parallel/tp_fp8.h) on 2 Gloo ranks against one
// process's fp8 layers: a column-parallel then row-parallel MLP with sequence parallelism. The
// split operands take the whole tensors' scales (a MAX all-reduce), so both GEMMs see one
// process's fp8 values, and the products summed over the ranks are rounded to bf16 after the
// sum: the output and every gradient equal one process's up to fp32 summation order (and the
// rare bf16 rounding it tips).
#include "parallel/tp_fp8.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "e2e/dist_harness.h"
#include "model/fp8_linear.h"
#include "parallel/tp_layers.h"

namespace lmtrain::parallel {
namespace {

constexpr int kFp8Ranks = 2;

// max |got - want| / max |want|.
double rel_to_max(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<double>() /
         want.abs().max().item<double>();
}

TEST(TpFp8, SlicesTakeTheWholeTensorsScale) {
  torch::manual_seed(5);
  const auto w = torch::randn({64, 32});
  w[40][3] = 9.0;  // the amax sits in rank 1's rows
  const auto whole = model::quantize_fp8(w, at::kFloat8_e4m3fn);
  const auto errors = testing::run_ranks_in_process(kFp8Ranks, [&](int r, dist::Group& g) {
    const auto splits = make_tp_fp8_splits(g);
    const auto slice = train::shard_of(w, 0, r, kFp8Ranks);
    const auto got = model::quantize_fp8(slice, at::kFloat8_e4m3fn, splits->column.w);
    EXPECT_EQ(got.inv_scale.item<float>(), whole.inv_scale.item<float>()) << "rank " << r;
    EXPECT_TRUE(torch::equal(got.data.to(at::kFloat),
                             train::shard_of(whole.data.to(at::kFloat), 0, r, kFp8Ranks)))
        << "rank " << r;
    // Without the agreement rank 0's scale is its own (smaller) amax's.
    if (r == 0) {
      EXPECT_LT(model::quantize_fp8(slice, at::kFloat8_e4m3fn).inv_scale.item<float>(),
                whole.inv_scale.item<float>());
    }
  });
  for (int r = 0; r < kFp8Ranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(TpFp8, ColumnThenRowParallelEqualsOneProcessFp8Mlp) {
  torch::manual_seed(6);
  // x (B, T_seq, C) = (2, 16, 32); w1 (F, C) = (64, 32); w2 (C, F) = (32, 64).
  const auto x0 = torch::randn({2, 16, 32}), w10 = torch::randn({64, 32}) * 0.3,
             b10 = torch::randn({64}) * 0.1, w20 = torch::randn({32, 64}) * 0.3,
             b20 = torch::randn({32}) * 0.1, probe = torch::randn({2, 16, 32});
  auto x = x0.clone().requires_grad_(true), w1 = w10.clone().requires_grad_(true),
       b1 = b10.clone().requires_grad_(true), w2 = w20.clone().requires_grad_(true),
       b2 = b20.clone().requires_grad_(true);
  const auto y = model::fp8_linear(at::gelu(model::fp8_linear(x, w1, b1)), w2, b2);
  (y.to(at::kFloat) * probe).sum().backward();

  std::vector<std::vector<at::Tensor>> got(kFp8Ranks);
  const auto errors = testing::run_ranks_in_process(kFp8Ranks, [&](int r, dist::Group& g) {
    const auto splits = make_tp_fp8_splits(g);
    auto xr = x0.chunk(kFp8Ranks, 1)[r].clone().requires_grad_(true);
    auto w1r = train::shard_of(w10, 0, r, kFp8Ranks).clone().requires_grad_(true);
    auto b1r = train::shard_of(b10, 0, r, kFp8Ranks).clone().requires_grad_(true);
    auto w2r = train::shard_of(w20, 1, r, kFp8Ranks).clone().requires_grad_(true);
    auto b2r = b20.clone().requires_grad_(true);
    const auto h = at::gelu(column_parallel_fp8_linear(xr, w1r, b1r, g, *splits));
    const auto yr = row_parallel_fp8_linear(h, w2r, b2r, g, *splits);  // (2, 8, 32) bf16
    (yr.to(at::kFloat) * probe.chunk(kFp8Ranks, 1)[r]).sum().backward();
    got[r] = {yr.detach(), xr.grad(), w1r.grad(), b1r.grad(), w2r.grad(), b2r.grad()};
  });
  for (int r = 0; r < kFp8Ranks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    const std::string at = "rank " + std::to_string(r);
    EXPECT_EQ(got[r][0].scalar_type(), at::kBFloat16) << at;
    const std::vector<std::pair<double, std::string>> rel = {
        {rel_to_max(got[r][0], y.detach().chunk(kFp8Ranks, 1)[r]), " output"},
        {rel_to_max(got[r][1], x.grad().chunk(kFp8Ranks, 1)[r]), " input grad"},
        {rel_to_max(got[r][2], train::shard_of(w1.grad(), 0, r, kFp8Ranks)), " column weight grad"},
        {rel_to_max(got[r][3], train::shard_of(b1.grad(), 0, r, kFp8Ranks)), " column bias grad"},
        {rel_to_max(got[r][4], train::shard_of(w2.grad(), 1, r, kFp8Ranks)), " row weight grad"},
        {rel_to_max(got[0][5] + got[1][5], b2.grad()), " row bias grad (summed)"}};
    for (const auto& [d, what] : rel) {
      std::printf("%s%s: %.3g\n", at.c_str(), what.c_str(), d);
      EXPECT_LE(d, 1e-6) << at << what;
    }
  }
}

}  // namespace
}  // namespace lmtrain::parallel
