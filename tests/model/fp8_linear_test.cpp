// FP8 linear layers (train.precision=fp8) on the CPU, through the same at::_scaled_mm and
// scaling math the GPU runs: the per-tensor scale maps the largest magnitude to the format's
// maximum; the fp8 product equals the dequantized operands' product up to bf16 rounding and a
// float linear up to fp8's rounding, forward and backward; build_model switches exactly the
// blocks' linears; a tiny decoder trains with fp8 as it does with bf16.
#include "model/fp8_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "cli/dist_setup.h"
#include "core/config.h"
#include "core/runtime.h"
#include "fused_op_checks.h"
#include "model/build_model.h"
#include "model/layers.h"
#include "options/read_model.h"

namespace lmtrain::model {
namespace {

at::Tensor dequantize(const Fp8Tensor& q) { return q.data.to(at::kFloat) * q.inv_scale; }

TEST(Fp8Quantize, TheLargestMagnitudeMapsToTheFormatsMaximum) {
  torch::manual_seed(1);
  auto t = torch::randn({64, 32}) * 5;
  // half_gap: half the spacing of a binade's values relative to its smallest, 2^-(mantissa+1).
  for (auto [type, fmax, half_gap] : {std::tuple{at::kFloat8_e4m3fn, 448.0, 0.0625},
                                      std::tuple{at::kFloat8_e5m2, 57344.0, 0.125}}) {
    const Fp8Tensor q = quantize_fp8(t, type);
    EXPECT_EQ(q.data.scalar_type(), type);
    EXPECT_DOUBLE_EQ(q.data.to(at::kFloat).abs().max().item<double>(), fmax);
    EXPECT_NEAR(q.inv_scale.item<double>(), t.abs().max().item<double>() / fmax, 1e-9);
    // Each value rounds to the nearest representable one: within half a gap, for normal values.
    auto back = dequantize(q);
    auto normal = t.abs() > t.abs().max() / 64;
    auto rel = ((back - t).abs() / t.abs()).masked_select(normal);
    EXPECT_LE(rel.max().item<double>(), half_gap + 1e-6);
    EXPECT_GT(rel.max().item<double>(), half_gap / 4);  // it does round: fp8 is coarse
  }
  const Fp8Tensor zero = quantize_fp8(torch::zeros({16, 16}), at::kFloat8_e4m3fn);
  EXPECT_EQ(zero.inv_scale.item<double>(), 1.0);
  EXPECT_EQ(zero.data.to(at::kFloat).abs().sum().item<double>(), 0.0);
}

// quantize_fp8 takes amax from one min/max pass in the input's dtype and clamps in place: it
// must equal, bit for bit, the plain formula (an fp32 copy, |t|, amax, divide, clamp, cast),
// for fp32 and bf16 inputs, either sign of the largest magnitude, zeros, and a NaN.
TEST(Fp8Quantize, EqualsThePlainFormulaBitForBit) {
  auto plain = [](const at::Tensor& t, at::ScalarType type, double fmax) {
    const at::Tensor tf = t.to(at::kFloat);
    const at::Tensor amax = tf.abs().amax();
    const at::Tensor inv = at::where(amax > 0, amax / fmax, at::ones_like(amax));
    return Fp8Tensor{(tf / inv).clamp(-fmax, fmax).to(type), inv};
  };
  torch::manual_seed(3);
  auto neg_max = torch::randn({48, 32});
  neg_max[7][5] = -40;  // the largest magnitude negative
  auto with_nan = torch::randn({16, 16});
  with_nan[2][3] = std::nanf("");
  for (const auto& base : {torch::randn({48, 32}) * 3, neg_max, torch::zeros({16, 16}), with_nan}) {
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
      const at::Tensor t = base.to(dtype), before = t.clone();
      for (auto [type, fmax] :
           {std::pair{at::kFloat8_e4m3fn, 448.0}, std::pair{at::kFloat8_e5m2, 57344.0}}) {
        const Fp8Tensor q = quantize_fp8(t, type), p = plain(t, type, fmax);
        EXPECT_TRUE(torch::equal(q.inv_scale, p.inv_scale) ||
                    (q.inv_scale.isnan().item<bool>() && p.inv_scale.isnan().item<bool>()));
        const at::Tensor qb = q.data.view(at::kByte), pb = p.data.view(at::kByte);
        EXPECT_TRUE(torch::equal(qb, pb)) << at::toString(dtype) << " -> " << at::toString(type);
      }
      EXPECT_TRUE(torch::equal(t.isnan(), before.isnan()));
      EXPECT_TRUE(torch::equal(t.nan_to_num(), before.nan_to_num()));  // t is not written
    }
  }
}

TEST(Fp8Linear, ForwardAndBackwardMatchTheDequantizedAndTheFloatProducts) {
  torch::manual_seed(2);
  // 37 rows: not a multiple of 16 (padded inside); in 64, out 48.
  auto x = (torch::randn({37, 64}) * 3).requires_grad_(true);
  auto w = (torch::randn({48, 64}) * 0.1).requires_grad_(true);
  auto b = torch::randn({48}).requires_grad_(true);
  ASSERT_TRUE(fp8_linear_supported(x, w));
  auto y = fp8_linear(x, w, b);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{37, 48}));
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  // The product of the dequantized operands, in fp32: only the bf16 output rounding differs.
  auto exact = at::matmul(dequantize(quantize_fp8(x.detach(), at::kFloat8_e4m3fn)),
                          dequantize(quantize_fp8(w.detach(), at::kFloat8_e4m3fn)).t()) +
               b.detach();
  EXPECT_LE(testing::relative_error(y, exact), 1e-2);
  // Against the float linear: fp8's rounding of both operands, averaged over 64 products.
  auto ref_x = x.detach().clone().requires_grad_(true);
  auto ref_w = w.detach().clone().requires_grad_(true);
  auto ref_b = b.detach().clone().requires_grad_(true);
  auto ref = torch::linear(ref_x, ref_w, ref_b);
  EXPECT_LE(testing::relative_error(y, ref), 0.05);
  auto probe = torch::randn({37, 48});
  auto g = torch::autograd::grad({(y.to(at::kFloat) * probe).sum()}, {x, w, b});
  auto r = torch::autograd::grad({(ref * probe).sum()}, {ref_x, ref_w, ref_b});
  EXPECT_EQ(g[0].scalar_type(), at::kFloat);
  EXPECT_EQ(g[1].scalar_type(), at::kFloat);
  EXPECT_LE(testing::relative_error(g[0], r[0]), 0.1) << "dx (e5m2 gradient)";
  EXPECT_LE(testing::relative_error(g[1], r[1]), 0.1) << "dW";
  EXPECT_LE(testing::relative_error(g[2], r[2]), 1e-2) << "db (from the bf16 gradient)";
}

TEST(Fp8Linear, ShapesOffTheGemmAlignmentStayOnTheBf16Path) {
  EXPECT_FALSE(fp8_linear_supported(torch::randn({4, 64}), torch::randn({40, 64})));
  EXPECT_FALSE(fp8_linear_supported(torch::randn({4, 24}), torch::randn({48, 24})));
  EXPECT_TRUE(fp8_linear_supported(torch::randn({3, 4, 32}), torch::randn({16, 32})));
  Linear layer(32, 40, /*bias=*/false);  // out 40: the layer keeps torch::linear
  {
    torch::NoGradGuard no_grad;
    layer->weight.normal_();
  }
  layer->fp8 = true;
  auto x = torch::randn({5, 32});
  EXPECT_TRUE(torch::equal(layer->forward(x), torch::linear(x, layer->weight)));
}

core::Config fp8_config(const std::string& precision) {
  auto cfg = core::Config::defaults();
  for (const auto& [k, v] :
       std::vector<std::pair<std::string, std::string>>{{"model.n_layer", "2"},
                                                        {"model.n_head", "2"},
                                                        {"model.n_embd", "64"},
                                                        {"model.vocab_size", "96"},
                                                        {"model.block_size", "32"},
                                                        {"data.seq_len", "32"},
                                                        {"train.precision", precision}}) {
    cfg.set(k, v, "test");
  }
  return cfg;
}

TEST(Fp8Training, BuildModelSwitchesTheBlocksLinearsOnlyAndTracksBf16) {
  const auto rt8 = cli::read_runtime(fp8_config("fp8"), 0);
  EXPECT_EQ(rt8.compute_dtype, at::kBFloat16);
  EXPECT_TRUE(rt8.autocast());
  EXPECT_NE(rt8.describe().find("fp8"), std::string::npos) << rt8.describe();
  const auto rt16 = cli::read_runtime(fp8_config("bf16"), 0);

  auto train = [&](const core::Runtime& rt, const std::string& precision) {
    torch::manual_seed(4);
    auto model = build_model(options::read_model_options(fp8_config(precision), 0), rt);
    int64_t fp8_layers = 0;
    for (const auto& item : model->named_modules()) {
      if (auto* l = dynamic_cast<LinearImpl*>(item.value().get())) {
        fp8_layers += l->fp8;
        if (l->fp8) {
          EXPECT_EQ(item.key().rfind("transformer.h.", 0), 0u) << item.key();
        }
      }
    }
    torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(3e-3));
    auto ids = torch::randint(96, {4, 32}, torch::kLong);
    auto targets = ids.roll(-1, 1);  // a learnable rule: predict the next id of a fixed batch
    return std::make_pair(fp8_layers, testing::bf16_training_losses(*model, ids, targets, opt, 25));
  };
  const auto [layers8, loss8] = train(rt8, "fp8");
  const auto [layers16, loss16] = train(rt16, "bf16");
  EXPECT_EQ(layers8, 8);  // 2 blocks x (c_attn, attn c_proj, c_fc, mlp c_proj)
  EXPECT_EQ(layers16, 0);
  EXPECT_NEAR(loss8.front(), loss16.front(), 0.02 * loss16.front());
  EXPECT_LT(loss8.back(), 0.8 * loss8.front());
  EXPECT_NEAR(loss8.back(), loss16.back(), 0.05 * loss16.front());
}

}  // namespace
}  // namespace lmtrain::model
