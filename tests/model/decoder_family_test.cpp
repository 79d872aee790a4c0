// The Llama / Qwen3 / nanochat members of the decoder family against straightforward
// reference implementations written here loop by loop: RoPE, RMSNorm, grouped-query attention
// with QK-norm, SwiGLU and relu² MLPs, soft-capping; the KV cache with RoPE and GQA; and the
// presets' parameter counts against their built models.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "core/config.h"
#include "model/gpt.h"
#include "model/rope.h"
#include "model_fixtures.h"
#include "options/read_model.h"
#include "test_util.h"

namespace lmtrain::model {
namespace {

GptConfig qwen_like() {
  GptConfig c = with_llama_family(tiny_gpt_config(32, 64, 32), Arch::kQwen3);
  c.n_head = 4;
  c.n_kv_head = 2;
  c.head_dim_ = 16;  // H * D = 64 != n_embd, as in Qwen3
  c.mlp_hidden = 48;
  c.norm_eps = 1e-6;
  c.rope_theta = 1e6;
  c.tie_embeddings = false;
  return c;
}

// Reference RoPE: element i < D/2 pairs with i + D/2, angle t / theta^(2i/D), in double.
torch::Tensor rope_reference(const torch::Tensor& x, int64_t start, double theta) {
  auto xd = x.to(torch::kFloat64);
  auto out = xd.clone();
  const int64_t T = x.size(2), D = x.size(3);
  auto a = xd.accessor<double, 4>();
  auto o = out.accessor<double, 4>();
  for (int64_t b = 0; b < x.size(0); ++b)
    for (int64_t h = 0; h < x.size(1); ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < D / 2; ++i) {
          const double ang = (start + t) / std::pow(theta, 2.0 * i / D);
          const double x1 = a[b][h][t][i], x2 = a[b][h][t][i + D / 2];
          o[b][h][t][i] = x1 * std::cos(ang) - x2 * std::sin(ang);
          o[b][h][t][i + D / 2] = x2 * std::cos(ang) + x1 * std::sin(ang);
        }
  return out.to(torch::kFloat32);
}

TEST(Rope, MatchesTheReferenceAndDependsOnlyOnRelativePosition) {
  torch::manual_seed(0);
  auto x = torch::randn({2, 3, 5, 8});
  for (int64_t start : {0, 7}) {
    EXPECT_TRUE(torch::allclose(apply_rope(x, start, 10000.0), rope_reference(x, start, 10000.0),
                                1e-5, 1e-5));
  }
  // Rotation keeps norms; q·k depends on the position difference only.
  auto q = torch::randn({1, 1, 1, 8}), k = torch::randn({1, 1, 1, 8});
  EXPECT_NEAR(apply_rope(q, 5, 1e6).norm().item<double>(), q.norm().item<double>(), 1e-5);
  const double d1 = (apply_rope(q, 9, 1e4) * apply_rope(k, 4, 1e4)).sum().item<double>();
  const double d2 = (apply_rope(q, 25, 1e4) * apply_rope(k, 20, 1e4)).sum().item<double>();
  EXPECT_NEAR(d1, d2, 1e-4);
}

TEST(RmsNorm, MatchesTheFormula) {
  LayerNorm n(6, /*bias=*/true, /*rms=*/true, 1e-6);
  EXPECT_FALSE(n->bias.defined());  // RMSNorm has no bias
  torch::NoGradGuard g;
  n->weight.copy_(torch::arange(1, 7, torch::kFloat));
  auto x = torch::randn({3, 6});
  auto want = x / torch::sqrt(x.pow(2).mean(-1, true) + 1e-6) * n->weight;
  EXPECT_TRUE(torch::allclose(n(x), want, 1e-5, 1e-6));
}

// Attention layer against explicit per-head loops: q/k/v split from the fused projection,
// per-head RMSNorm on q and k, RoPE, query head h reading kv head h / (H / K), causal softmax.
TEST(GroupedQueryAttention, MatchesPerHeadReference) {
  const auto cfg = qwen_like();
  torch::manual_seed(1);
  CausalSelfAttention attn(cfg, 0);
  {
    torch::NoGradGuard g;
    for (auto& p : attn->parameters()) p.normal_(0, 0.3);
  }
  attn->eval();
  const int64_t B = 2, T = 5, H = 4, K = 2, D = 16;
  auto x = torch::randn({B, T, cfg.n_embd});
  auto got = attn(x);

  auto packed = torch::linear(x, attn->c_attn->weight);  // (B, T, (H + 2K) D)
  auto rms = [](const torch::Tensor& v, const torch::Tensor& w) {
    return v / torch::sqrt(v.pow(2).mean(-1, true) + 1e-6) * w;
  };
  std::vector<torch::Tensor> heads;
  for (int64_t h = 0; h < H; ++h) {
    const int64_t kv = h / (H / K);
    auto q = rms(packed.narrow(2, h * D, D), attn->q_norm->weight);
    auto k = rms(packed.narrow(2, H * D + kv * D, D), attn->k_norm->weight);
    auto v = packed.narrow(2, (H + K) * D + kv * D, D);
    q = rope_reference(q.unsqueeze(1), 0, cfg.rope_theta).squeeze(1);
    k = rope_reference(k.unsqueeze(1), 0, cfg.rope_theta).squeeze(1);
    auto s = torch::matmul(q, k.transpose(1, 2)) / std::sqrt(double(D));  // (B, T, T)
    s = s.masked_fill(torch::ones({T, T}).triu(1).to(torch::kBool), -INFINITY);
    heads.push_back(torch::matmul(torch::softmax(s, -1), v));
  }
  auto want = torch::linear(torch::cat(heads, -1), attn->c_proj->weight);
  EXPECT_TRUE(torch::allclose(got, want, 1e-4, 1e-5)) << (got - want).abs().max();
}

TEST(Mlp, SwiGluAndReluSquaredMatchTheirFormulas) {
  auto cfg = qwen_like();
  torch::manual_seed(2);
  auto init = [](Mlp& m) {
    torch::NoGradGuard g;
    for (auto& p : m->parameters()) p.normal_(0, 0.2);  // layers start uninitialised
  };
  Mlp swiglu(cfg);
  init(swiglu);
  auto x = torch::randn({2, 3, cfg.n_embd});
  auto gu = torch::linear(x, swiglu->c_fc->weight);
  auto gate = gu.narrow(-1, 0, 48), up = gu.narrow(-1, 48, 48);
  auto want = torch::linear(gate * torch::sigmoid(gate) * up, swiglu->c_proj->weight);
  EXPECT_TRUE(torch::allclose(swiglu(x), want, 1e-5, 1e-6));
  cfg.mlp = MlpKind::kRelu2;
  Mlp relu2(cfg);
  init(relu2);
  auto h = torch::linear(x, relu2->c_fc->weight).clamp_min(0);
  EXPECT_TRUE(torch::allclose(relu2(x), torch::linear(h * h, relu2->c_proj->weight), 1e-5, 1e-6));
}

TEST(DecoderFamily, KvCacheWithRopeAndGqaMatchesFullForward) {
  auto cfg = qwen_like();
  cfg.logit_softcap = 15;
  torch::manual_seed(3);
  Gpt m(cfg);
  m->eval();
  torch::NoGradGuard g;
  auto ids = torch::randint(cfg.vocab_size, {2, 9}, torch::kLong);
  auto full = m->forward(ids);
  EXPECT_LE(full.abs().max().item<double>(), 15.0);  // soft-capped
  auto cache = m->make_cache(2, 16);
  // kv heads only: 2 per token and layer, keys and values, fp32
  auto probe = m->make_cache(2, 16);
  m->forward_cached(ids.narrow(1, 0, 1), *probe);
  EXPECT_EQ(probe->bytes(), 2 * cfg.n_layer * 2 * 2 * cfg.head_dim() * 4);
  auto first = m->forward_cached(ids.narrow(1, 0, 6), *cache);
  auto rest = m->forward_cached(ids.narrow(1, 6, 3), *cache);
  EXPECT_TRUE(torch::allclose(torch::cat({first, rest}, 1), full, 1e-4, 1e-5));
}

TEST(DecoderFamily, ParameterNamesAndCountsOfTheBuiltModel) {
  const auto cfg = qwen_like();
  Gpt m(cfg);
  auto named = m->named_parameters();
  EXPECT_TRUE(named.contains("transformer.h.0.attn.q_norm.weight"));
  EXPECT_FALSE(named.contains("transformer.wpe.weight"));  // RoPE: no position table
  EXPECT_FALSE(named.contains("transformer.h.0.ln_1.bias"));
  EXPECT_EQ(named["transformer.h.0.attn.c_attn.weight"].sizes(),
            (std::vector<int64_t>{(4 + 2 * 2) * 16, 32}));
  EXPECT_EQ(named["transformer.h.0.mlp.c_fc.weight"].size(0), 2 * 48);
  int64_t n = 0;
  for (const auto& p : m->parameters()) n += p.numel();
  EXPECT_EQ(n, cfg.num_params());
  EXPECT_FALSE(m->decays("transformer.h.0.attn.q_norm.weight"));
  EXPECT_TRUE(m->decays("transformer.h.0.attn.c_attn.weight"));
}

// Every preset in configs/: GptConfig::num_params() equals the built model's count, and the
// required shapes hold (Qwen3: head_dim 64, fewer kv heads than heads, RoPE theta 1e6).
TEST(Presets, ParameterCountsAndShapes) {
  namespace fs = std::filesystem;
  int seen = 0;
  for (const auto& e : fs::directory_iterator(testing::source_dir() + "/configs")) {
    if (e.path().extension() != ".yaml") continue;
    auto cfg = core::Config::defaults();
    cfg.merge_yaml_file(e.path().string());
    if (cfg.get_int("model.vocab_size") == 0) cfg.set("model.vocab_size", "50304", "test");
    const auto mcfg = options::read_gpt_config(cfg, 0);
    Gpt m(mcfg, /*init=*/false);
    int64_t n = 0;
    for (const auto& p : m->parameters()) n += p.numel();
    EXPECT_EQ(n, mcfg.num_params()) << e.path();
    const std::string name = e.path().stem().string();
    if (name.rfind("qwen3-", 0) == 0) {
      EXPECT_LT(mcfg.kv_heads(), mcfg.n_head) << name;
      EXPECT_EQ(mcfg.rope_theta, 1e6) << name;
      EXPECT_TRUE(mcfg.qk_norm) << name;
      // The dense Qwen3 presets use head_dim 64; the real shapes and the MoE ones their own.
      if (name != "qwen3-0.6b" && !mcfg.moe.enabled()) {
        EXPECT_EQ(mcfg.head_dim(), 64) << name;
      }
    }
    ++seen;
  }
  EXPECT_GE(seen, 16);
  // The nanochat preset's shape comes from model.depth.
  auto cfg = core::Config::defaults();
  cfg.merge_yaml_file(testing::source_dir() + "/configs/nanochat-d12.yaml");
  cfg.set("model.vocab_size", "65536", "test");
  cfg.set("model.depth", "20", "test");
  const auto nc = options::read_gpt_config(cfg, 0);
  EXPECT_EQ(nc.n_layer, 20);
  EXPECT_EQ(nc.n_embd, 1280);
  EXPECT_EQ(nc.n_head, 10);  // ceil(1280 / 128)
}

}  // namespace
}  // namespace lmtrain::model
