#include "model/gpt.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <map>

#include "core/config.h"
#include "core/error.h"
#include "infer/generator.h"
#include "kernels/kernel_switch.h"
#include "model/attention.h"
#include "model_fixtures.h"
#include "options/read_model.h"

namespace lmtrain::model {
namespace {

GptConfig tiny(bool bias = true, bool tie = true) {
  GptConfig c = tiny_gpt_config(8, 11, 16);
  c.bias = bias;
  c.tie_embeddings = tie;
  return c;
}

TEST(Gpt, OutputShapesAndParameterCount) {
  for (bool bias : {true, false}) {
    for (bool tie : {true, false}) {
      torch::manual_seed(0);
      Gpt m(tiny(bias, tie));
      auto ids = torch::randint(11, {3, 5}, torch::kLong);
      auto logits = m->forward(ids);
      EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 5, 11}));
      int64_t n = 0;
      for (auto& p : m->parameters()) n += p.numel();
      EXPECT_EQ(n, tiny(bias, tie).num_params()) << "bias=" << bias << " tie=" << tie;
      EXPECT_EQ(m->named_parameters().contains("lm_head.weight"), !tie);
      EXPECT_EQ(m->named_parameters().contains("transformer.h.1.attn.c_attn.bias"), bias);
    }
  }
}

TEST(Gpt, HuggingFaceParameterNames) {
  Gpt m(tiny());
  auto params = m->named_parameters();
  for (const char* name :
       {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight",
        "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_proj.weight",
        "transformer.h.0.ln_2.bias", "transformer.h.1.mlp.c_fc.weight",
        "transformer.h.1.mlp.c_proj.bias", "transformer.ln_f.weight"}) {
    EXPECT_TRUE(params.contains(name)) << name;
  }
  EXPECT_EQ(params["transformer.h.0.attn.c_attn.weight"].sizes(),
            (std::vector<int64_t>{24, 8}));  // (out, in)
}

TEST(Gpt, InitFollowsGpt2) {
  GptConfig c = tiny();
  c.n_embd = 64;
  c.n_head = 4;
  c.n_layer = 8;
  c.vocab_size = 512;
  torch::manual_seed(0);
  Gpt m(c);
  auto p = m->named_parameters();
  EXPECT_NEAR(p["transformer.wte.weight"].std().item<double>(), 0.02, 0.002);
  EXPECT_NEAR(p["transformer.h.0.mlp.c_proj.weight"].std().item<double>(), 0.02 / 4.0, 0.001);
  EXPECT_EQ(p["transformer.h.0.attn.c_attn.bias"].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(p["transformer.ln_f.weight"].mean().item<double>(), 1.0);
  EXPECT_TRUE(m->decays("transformer.h.0.attn.c_attn.weight"));
  EXPECT_FALSE(m->decays("transformer.h.0.attn.c_attn.bias"));
  EXPECT_FALSE(m->decays("transformer.wte.weight"));
  EXPECT_FALSE(m->decays("transformer.h.0.ln_1.weight"));
}

// Muon's AdamW learning-rate groups come from these tags (optim/muon.cpp): the token and position
// tables take optim.embedding_lr, an untied head optim.head_lr, every other parameter optim.lr.
TEST(Gpt, TagsPutTheEmbeddingsAndAnUntiedHeadInTheirLearningRateGroups) {
  for (bool tie : {true, false}) {
    Gpt m(tiny(/*bias=*/true, tie));
    const std::map<std::string, LrGroup> grouped = {{"transformer.wte.weight", LrGroup::kEmbedding},
                                                    {"transformer.wpe.weight", LrGroup::kEmbedding},
                                                    {"lm_head.weight", LrGroup::kHead}};
    size_t found = 0;
    for (const auto& [name, tag] : m->param_tags()) {
      const auto it = grouped.find(name);
      EXPECT_EQ(tag.lr_group, it == grouped.end() ? LrGroup::kBase : it->second) << name;
      found += it != grouped.end();
    }
    EXPECT_EQ(found, tie ? 2u : 3u);
  }
}

TEST(Gpt, IsCausal) {
  torch::manual_seed(1);
  Gpt m(tiny());
  m->eval();
  auto ids = torch::randint(11, {1, 6}, torch::kLong);
  auto a = m->forward(ids);
  auto ids2 = ids.clone();
  ids2[0][5] = (ids[0][5].item<int64_t>() + 1) % 11;
  auto b = m->forward(ids2);
  EXPECT_TRUE(torch::allclose(a.narrow(1, 0, 5), b.narrow(1, 0, 5), 0, 0));
  EXPECT_FALSE(torch::allclose(a.narrow(1, 5, 1), b.narrow(1, 5, 1)));
}

TEST(Attention, MatchesNaiveSoftmaxAttention) {
  torch::manual_seed(2);
  auto q = torch::randn({2, 3, 4, 5}), k = torch::randn({2, 3, 7, 5}),
       v = torch::randn({2, 3, 7, 5});
  auto out = causal_attention(q, k, v, 0.0);
  // Query i sits at position 3 + i of the 7 keys.
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(5.0);
  for (int i = 0; i < 4; ++i) {
    for (int j = 3 + i + 1; j < 7; ++j) scores.select(2, i).select(2, j).fill_(-1e30);
  }
  auto ref = torch::matmul(scores.softmax(-1), v);
  EXPECT_TRUE(torch::allclose(out, ref, 1e-5, 1e-6));
}

// Central differences in float64 against autograd, on a few entries of every parameter.
TEST(Gpt, FiniteDifferenceGradientCheck) {
  torch::manual_seed(3);
  Gpt m(tiny());
  m->to(torch::kDouble);
  auto ids = torch::randint(11, {2, 6}, torch::kLong);
  auto targets = torch::randint(11, {2, 6}, torch::kLong);
  m->zero_grad();
  m->loss(ids, targets).backward();
  const double h = 1e-6;
  int checked = 0;
  for (auto& item : m->named_parameters()) {
    auto p = item.value();
    auto flat = p.view({-1});
    auto grad = p.grad().view({-1});
    for (int64_t idx : {int64_t{0}, flat.numel() / 2, flat.numel() - 1}) {
      torch::NoGradGuard g;
      const double orig = flat[idx].item<double>();
      flat[idx] = orig + h;
      const double up = m->loss(ids, targets).item<double>();
      flat[idx] = orig - h;
      const double down = m->loss(ids, targets).item<double>();
      flat[idx] = orig;
      const double numeric = (up - down) / (2 * h);
      const double analytic = grad[idx].item<double>();
      EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-4 * std::abs(numeric))
          << item.key() << "[" << idx << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

TEST(Gpt, KvCacheLogitsMatchFullForward) {
  torch::manual_seed(4);
  Gpt m(tiny());
  m->eval();
  torch::NoGradGuard g;
  auto ids = torch::randint(11, {2, 9}, torch::kLong);
  auto full = m->forward(ids);
  auto cache = m->make_cache(2, 16);
  auto prefill = m->forward_cached(ids.narrow(1, 0, 4), *cache);  // 4 at once, then 1 by 1
  EXPECT_TRUE(torch::allclose(prefill, full.narrow(1, 0, 4), 1e-5, 1e-6));
  for (int t = 4; t < 9; ++t) {
    auto step = m->forward_cached(ids.narrow(1, t, 1), *cache);
    EXPECT_TRUE(torch::allclose(step, full.narrow(1, t, 1), 1e-5, 1e-6)) << "t=" << t;
  }
  EXPECT_EQ(cache->held(), 9);
  EXPECT_THROW(m->forward_cached(torch::zeros({2, 8}, torch::kLong), *cache), Error);
}

TEST(Gpt, GreedyDecodingWithCacheEqualsFullRecompute) {
  GptConfig c = tiny();
  c.vocab_size = 50;
  c.block_size = 64;
  c.n_embd = 32;
  c.n_head = 4;
  torch::manual_seed(5);
  Gpt m(c);
  m->eval();
  infer::SamplingOptions greedy;
  greedy.temperature = 0;
  std::vector<uint32_t> prompt = {3, 14, 15, 9, 2};
  auto cached = infer::generate(*m, prompt, 40, greedy, 0, -1);
  auto full = infer::generate_uncached(*m, prompt, 40, greedy, 0, -1);
  EXPECT_EQ(cached.size(), 40u);
  EXPECT_EQ(cached, full);
  // Sampling with the same seed is reproducible and also equal between the two paths.
  infer::SamplingOptions sample;
  sample.temperature = 1.0;
  sample.top_k = 10;
  EXPECT_EQ(infer::generate(*m, prompt, 20, sample, 7, -1),
            infer::generate_uncached(*m, prompt, 20, sample, 7, -1));
}

TEST(Sampler, TopKAndTopPRestrictTheChoice) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  auto logits = torch::tensor({{0.0f, 5.0f, 4.0f, 1.0f}});
  infer::SamplingOptions o;
  o.top_k = 2;
  for (int i = 0; i < 50; ++i) {
    auto id = infer::sample_next(logits, o, gen).item<int64_t>();
    EXPECT_TRUE(id == 1 || id == 2);
  }
  o.top_k = 0;
  o.top_p = 0.5;  // token 1 alone holds ~71% of the mass
  for (int i = 0; i < 20; ++i) EXPECT_EQ(infer::sample_next(logits, o, gen).item<int64_t>(), 1);
  o.temperature = 0;
  EXPECT_EQ(infer::sample_next(logits, o, gen).item<int64_t>(), 1);
}

// A padded vocabulary: the rows past the tokenizer's size are never drawn, greedy or sampled,
// even when they hold nearly all the mass.
TEST(Sampler, NeverDrawsPastTheVocabularyLimit) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  auto logits = torch::tensor({{0.0f, 0.5f, 9.0f, 10.0f}, {1.0f, 0.0f, 8.0f, 0.0f}});  // (2, 4)
  infer::SamplingOptions o;
  o.vocab_limit = 2;
  for (int i = 0; i < 50; ++i) {
    auto ids = infer::sample_next(logits, o, gen);
    EXPECT_LT(ids[0].item<int64_t>(), 2);
    EXPECT_LT(ids[1].item<int64_t>(), 2);
  }
  o.temperature = 0;
  auto greedy = infer::sample_next(logits, o, gen);
  EXPECT_EQ(greedy[0].item<int64_t>(), 1);
  EXPECT_EQ(greedy[1].item<int64_t>(), 0);
  o.vocab_limit = 0;  // off: the padding wins
  EXPECT_EQ(infer::sample_next(logits, o, gen)[0].item<int64_t>(), 3);
}

// OpenAI's logit_bias: added to the logits before anything else, so -100 bans a token greedy or
// sampled, a positive bias makes one win, and the caller's logits are left as they were.
TEST(Sampler, LogitBiasBansAndFavoursTokens) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto logits = torch::tensor({{0.0f, 5.0f, 4.0f, 1.0f}, {2.0f, 0.0f, 0.0f, 0.0f}});
  const auto before = logits.clone();
  infer::SamplingOptions o;
  o.logit_bias = {{1, -100.0f}, {3, 2.5f}};
  for (int i = 0; i < 50; ++i) {
    const auto ids = infer::sample_next(logits, o, gen);  // (2,)
    EXPECT_NE(ids[0].item<int64_t>(), 1);
    EXPECT_NE(ids[1].item<int64_t>(), 1);
  }
  o.temperature = 0;
  const auto greedy = infer::sample_next(logits, o, gen);
  EXPECT_EQ(greedy[0].item<int64_t>(), 2);  // 5 - 100 loses to 4
  EXPECT_EQ(greedy[1].item<int64_t>(), 3);  // 0 + 2.5 beats 2
  EXPECT_TRUE(torch::equal(logits, before));
}

TEST(GptConfig, ValidatesShapesAgainstConfig) {
  auto cfg = core::Config::defaults();
  cfg.set("model.n_embd", "10", "t");
  cfg.set("model.n_head", "4", "t");
  EXPECT_THROW(options::read_gpt_config(cfg, 100), UsageError);
  cfg.set("model.n_embd", "16", "t");
  auto c = options::read_gpt_config(cfg, 100);
  EXPECT_EQ(c.vocab_size, 128);  // rounded up to 64
  cfg.set("model.vocab_size", "50", "t");
  EXPECT_THROW(options::read_gpt_config(cfg, 100), UsageError);
  cfg.set("model.vocab_size", "0", "t");
  cfg.set("data.seq_len", "4096", "t");
  EXPECT_THROW(options::read_gpt_config(cfg, 100), UsageError);
}

}  // namespace
}  // namespace lmtrain::model

namespace lmtrain::model {
namespace {

// The whole model through the hand-written CPU kernels (fused attention, GELU, linear +
// cross-entropy) equals the model through libtorch's ops: loss and every parameter gradient,
// for GPT-2 (all three kernels) and a Qwen3-style decoder (RoPE/GQA attention stays on
// libtorch; the fused loss applies).
TEST(Gpt, FusedCpuKernelsMatchLibtorchOpsForLossAndGradients) {
  GptConfig qwen = with_llama_family(tiny(false, false), Arch::kQwen3);
  qwen.n_head = 4;
  qwen.n_kv_head = 2;
  qwen.head_dim_ = 4;
  for (const GptConfig& cfg : {tiny(), qwen}) {
    torch::manual_seed(7);
    Gpt m(cfg);
    auto ids = torch::randint(cfg.vocab_size, {3, 9}, torch::kLong);
    auto targets = torch::randint(cfg.vocab_size, {3, 9}, torch::kLong);
    auto run = [&](bool fused) {
      kernels::set_fused_cpu_kernels_enabled(fused);
      m->zero_grad();
      auto loss = m->loss(ids, targets);
      loss.backward();
      std::map<std::string, at::Tensor> grads;
      for (auto& p : m->named_parameters()) grads[p.key()] = p.value().grad().clone();
      kernels::set_fused_cpu_kernels_enabled(true);
      return std::make_pair(loss.item<double>(), grads);
    };
    auto [loss_lib, grads_lib] = run(false);
    auto [loss_fused, grads_fused] = run(true);
    EXPECT_NEAR(loss_fused, loss_lib, 1e-6 * loss_lib) << core::to_string(cfg.arch);
    for (auto& [name, g] : grads_lib) {
      const double scale = g.abs().max().item<double>() + 1e-12;
      EXPECT_LT((grads_fused[name] - g).abs().max().item<double>() / scale, 1e-5)
          << core::to_string(cfg.arch) << " " << name;
    }
  }
}

}  // namespace
}  // namespace lmtrain::model
