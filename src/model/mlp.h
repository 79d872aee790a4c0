// The dense feed-forward: c_proj(act(c_fc x)) with act = GELU-tanh (GPT-2), SwiGLU (Llama,
// Qwen; c_fc holds [gate; up]) or relu² (nanochat). Also the shared experts of an MoE layer.
#pragma once
#include "model/feed_forward.h"
#include "model/gpt_config.h"
#include "model/layers.h"

namespace lmtrain::model {

class MlpImpl : public FeedForwardImpl {
 public:
  explicit MlpImpl(const GptConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) or (N, C)
  FeedForwardOutput run(const torch::Tensor& x) override { return {forward(x), {}}; }
  MlpImpl* dense() override { return this; }
  Linear c_fc{nullptr}, c_proj{nullptr};
  MlpKind kind;
  int64_t hidden;
};
TORCH_MODULE(Mlp);

}  // namespace lmtrain::model
