// Sliding-window attention (model.windows): the mask is transformers' sliding_window_overlay
// on the causal mask (a query sees the `window` keys ending at its own), the attention paths
// (SDPA with the mask, the explicit path with dropout's mask, grouped-query heads, the pad
// slots' key bias) agree with a softmax written out here, and a model's layers take their own
// windows from model.windows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "core/error.h"
#include "interop/hf_format.h"
#include "model/attention.h"
#include "model/gpt.h"
#include "model_fixtures.h"

namespace lmtrain::model {
namespace {

// Attention written out: query i (at position tk - tq + i) over keys j with
// pos - window < j <= pos; k, v repeated to H heads.
at::Tensor windowed_reference_attention(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, int64_t window,
                                        const at::Tensor& key_bias = {}) {
  const int64_t H = q.size(1), K = k.size(1), Tq = q.size(2), Tk = k.size(2);
  auto kk = k.repeat_interleave(H / K, 1), vv = v.repeat_interleave(H / K, 1);
  auto scores = torch::matmul(q, kk.transpose(2, 3)) / std::sqrt(static_cast<double>(q.size(3)));
  auto allowed = torch::zeros({Tq, Tk}, torch::kBool);
  for (int64_t i = 0; i < Tq; ++i) {
    const int64_t pos = Tk - Tq + i;
    for (int64_t j = 0; j < Tk; ++j) allowed[i][j] = j <= pos && (window == 0 || j > pos - window);
  }
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  if (key_bias.defined()) scores = scores + key_bias;
  return torch::matmul(torch::softmax(scores, -1), vv);
}

TEST(SlidingWindow, MaskIsTheCausalMaskWithTransformersOverlay) {
  // 3 queries at positions 5, 6, 7 over 8 keys, window 3: keys (pos - 3, pos].
  auto m = causal_window_mask(3, 8, 3, torch::TensorOptions().dtype(torch::kFloat));
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 8; ++j) {
      const int64_t pos = 5 + i;
      const bool allowed = j <= pos && j > pos - 3;
      EXPECT_EQ(m[i][j].item<float>(), allowed ? 0.f : -inf) << i << "," << j;
    }
  }
  // No window: the causal mask alone.
  auto c = causal_window_mask(2, 4, 0, torch::TensorOptions().dtype(torch::kFloat));
  EXPECT_EQ(c[0][0].item<float>(), 0.f);
  EXPECT_EQ(c[0][3].item<float>(), -inf);
  EXPECT_EQ(c[1][3].item<float>(), 0.f);
}

TEST(SlidingWindow, AttentionPathsEqualTheWrittenOutSoftmax) {
  torch::manual_seed(0);
  for (const int64_t kv_heads : {4, 2}) {
    auto q = torch::randn({2, 4, 12, 8}), k = torch::randn({2, kv_heads, 12, 8}),
         v = torch::randn({2, kv_heads, 12, 8});
    for (const int64_t window : {1, 3, 12}) {
      SCOPED_TRACE(std::to_string(kv_heads) + " kv heads, window " + std::to_string(window));
      auto want = windowed_reference_attention(q, k, v, window);
      EXPECT_LE((causal_attention(q, k, v, 0.0, {}, window) - want).abs().max().item<double>(),
                1e-5);
      // Decoding: the last 2 queries over all keys.
      auto q2 = q.narrow(2, 10, 2);
      EXPECT_LE((causal_attention(q2, k, v, 0.0, {}, window) - want.narrow(2, 10, 2))
                    .abs()
                    .max()
                    .item<double>(),
                1e-5);
      auto [y, w] =
          causal_attention_with_weights(q.narrow(2, 10, 2), k.repeat_interleave(4 / kv_heads, 1),
                                        v.repeat_interleave(4 / kv_heads, 1), window);
      EXPECT_LE((y - want.narrow(2, 10, 2)).abs().max().item<double>(), 1e-5);
      // Weights outside the window are exactly 0.
      if (window < 12) {
        EXPECT_EQ(w.narrow(3, 0, 11 - window).abs().max().item<float>(), 0.f);
      }
    }
    // A pad slot's key bias with a window (left-padded batches in generation).
    auto bias = torch::zeros({2, 1, 1, 12});
    bias[0].narrow(-1, 0, 4).fill_(-1e4);
    auto want = windowed_reference_attention(q, k, v, 5, bias);
    EXPECT_LE((causal_attention(q, k, v, 0.0, bias, 5) - want).abs().max().item<double>(), 1e-5);
  }
}

TEST(SlidingWindow, LayersTakeTheirWindowsFromTheConfig) {
  GptConfig c = with_llama_family(tiny_gpt_config(32, 64, 32), Arch::kMistral);
  c.n_layer = 3;
  c.windows = {4, 0};  // tiled: layers 0 and 2 windowed
  EXPECT_EQ(c.window(0), 4);
  EXPECT_EQ(c.window(1), 0);
  EXPECT_EQ(c.window(2), 4);
  Gpt m(c);
  EXPECT_EQ(m->transformer->blocks[0]->attn->window, 4);
  EXPECT_EQ(m->transformer->blocks[1]->attn->window, 0);
  EXPECT_EQ(m->transformer->blocks[2]->attn->window, 4);
  // The window changes the logits past it, and only there.
  m->eval();
  torch::NoGradGuard g;
  auto ids = torch::randint(64, {1, 12});
  auto windowed = m->forward(ids);
  GptConfig full = c;
  full.windows.clear();
  Gpt plain(full);
  plain->eval();
  torch::NoGradGuard g2;
  for (auto& p : plain->named_parameters()) p.value().copy_(m->named_parameters()[p.key()]);
  auto reference = plain->forward(ids);
  EXPECT_LE((windowed.narrow(1, 0, 4) - reference.narrow(1, 0, 4)).abs().max().item<double>(),
            1e-5);
  EXPECT_GT((windowed.narrow(1, 4, 8) - reference.narrow(1, 4, 8)).abs().max().item<double>(),
            1e-3);
}

// GPT-2's attention with a window leaves the CPU kernel (which has none) for the masked path,
// training included: the loss differs from the windowless model's and has gradients.
TEST(SlidingWindow, Gpt2AttentionTakesTheWindowInTraining) {
  GptConfig c = tiny_gpt_config(32, 64, 16);
  c.windows = {3};
  torch::manual_seed(1);
  Gpt m(c);
  GptConfig full = c;
  full.windows.clear();
  torch::manual_seed(1);
  Gpt plain(full);
  auto ids = torch::randint(64, {2, 16}), targets = torch::randint(64, {2, 16});
  auto loss = m->loss(ids, targets);
  loss.backward();
  EXPECT_GT(std::abs(loss.item<double>() - plain->loss(ids, targets).item<double>()), 1e-4);
  EXPECT_GT(m->transformer->blocks[0]->attn->c_attn->weight.grad().abs().sum().item<double>(), 0);
}

// Export writes the windows a family can hold (Mistral: one for every layer; Qwen2/Qwen3: full
// layers, then sliding ones of one window) and refuses the rest, naming model.windows; what
// it writes imports back to the same windows.
TEST(SlidingWindow, ExportWritesWhatTheFamilyHoldsAndRefusesTheRest) {
  auto family = [](Arch arch, std::vector<int64_t> windows) {
    GptConfig c = with_llama_family(tiny_gpt_config(32, 64, 32), arch);
    c.n_layer = 3;
    c.qkv_bias = arch == Arch::kQwen2;
    c.windows = std::move(windows);
    return c;
  };
  auto refused = [](const GptConfig& c, const std::string& part) {
    try {
      hf::hf_config(c);
      ADD_FAILURE() << "exported " << describe_windows(c);
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused(family(Arch::kLlama, {8}), "model.windows = 8: Hugging Face's llama has no");
  refused(family(Arch::kMistral, {8, 0}), "one sliding window for every layer");
  refused(family(Arch::kQwen2, {8, 0}), "slides the layers from max_window_layers on");
  refused(family(Arch::kQwen3, {0, 8, 4}), "all with one window");
  auto windows_after_round_trip = [](const GptConfig& c) {
    for (const auto& [key, value] : hf::config_overrides(hf::hf_config(c))) {
      if (key == "model.windows") return value;
    }
    return std::string("(none)");
  };
  EXPECT_EQ(windows_after_round_trip(family(Arch::kMistral, {8})), "8");
  EXPECT_EQ(windows_after_round_trip(family(Arch::kQwen2, {0, 8, 8})), "0,8,8");
  EXPECT_EQ(windows_after_round_trip(family(Arch::kQwen3, {0, 0, 8})), "0,0,8");
  EXPECT_EQ(windows_after_round_trip(family(Arch::kQwen3, {})), "");
}

}  // namespace
}  // namespace lmtrain::model
