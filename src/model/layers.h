// Minimal parameter-holding layers with Hugging Face-style parameter names ("weight", "bias").
// Written directly on ATen ops rather than torch::nn::Linear/LayerNorm so that bias can be
// switched off everywhere (LayerNorm included) and the forward is exactly the ops we intend.
#pragma once
#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <vector>

#include "model/decoder_options.h"
#include "model/deferred_lookup.h"
#include "model/fused_add_norm.h"
#include "model/lora_adapter.h"
#include "model/param_tags.h"

namespace lmtrain::model {

// y = x W^T + b; weight (out, in), bias (out) or absent. `weight_tag`: how the weight is
// initialised and optimised (the bias is always zero-initialised and not decayed).
// LoRA (model/lora.h) may attach adapters, each adding scaling * B A x to a slice of the output
// rows; without adapters the forward is exactly torch::linear.
class LinearImpl : public TaggedModule {
 public:
  LinearImpl(int64_t in, int64_t out, bool bias, ParamTag weight_tag = block_matrix_tag());
  torch::Tensor forward(const torch::Tensor& x) const;
  // Registers `adapter` as submodule `name` (e.g. "lora_q").
  void add_adapter(const std::string& name, LoraAdapter adapter);
  torch::Tensor weight, bias;
  std::vector<std::pair<std::string, LoraAdapter>> adapters;
  // train.precision=fp8: the product runs through fp8 GEMMs (model/fp8_linear.h) where the shapes
  // allow; build_model sets it on the blocks' linears.
  bool fp8 = false;
  // What runs instead of x W^T + b when set from outside the model (tensor parallelism's
  // column- and row-parallel products over a shard of weight, parallel/tensor_parallel_plan.h):
  // (x, weight, bias) -> y. Adapters and fp8 are not applied then.
  using Product = std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& weight,
                                              const torch::Tensor& bias)>;
  void set_product(Product p) { product_ = std::move(p); }

 private:
  Product product_;
};
TORCH_MODULE(Linear);

// Normalisation over the last dim: LayerNorm (weight, bias or absent) or, with rms, RMSNorm
// x / sqrt(mean(x^2) + eps) * weight (no bias; computed in fp32 like HF's LlamaRMSNorm).
class LayerNormImpl : public TaggedModule {
 public:
  // with_weight false: an RMSNorm without any parameter (nanochat's norm()).
  LayerNormImpl(int64_t dim, bool bias, bool rms = false, double eps = 1e-5,
                bool with_weight = true);
  torch::Tensor forward(const torch::Tensor& x) const;
  // The residual add before the norm, fused with it where the kernel is on (fused_add_norm.h):
  // h = x + delta, y = forward(h).
  AddNormOutput forward_add(const torch::Tensor& x, const torch::Tensor& delta) const;
  torch::Tensor weight, bias;
  int64_t dim;
  bool rms;
  double eps;
};
TORCH_MODULE(LayerNorm);

// Lookup table; weight (num, dim).
class EmbeddingImpl : public TaggedModule {
 public:
  // lr_group: kEmbedding for the decoder's token and position tables (Muon's embedding_lr).
  EmbeddingImpl(int64_t num, int64_t dim, LrGroup lr_group = LrGroup::kBase);
  torch::Tensor forward(const torch::Tensor& ids) const;
  // Where the lookup's weight gradient goes instead of the accumulator (deferred_lookup.h);
  // null (the default) for the usual path. Set from outside the model, by data parallelism.
  void set_lookup_grad_sink(LookupGradSink* sink) { sink_ = sink; }
  // What runs instead of the lookup when set from outside the model (tensor parallelism's
  // vocabulary-parallel lookup): (ids, weight) -> rows. The sink is not used then.
  using Lookup =
      std::function<torch::Tensor(const torch::Tensor& ids, const torch::Tensor& weight)>;
  void set_lookup(Lookup f) { lookup_ = std::move(f); }
  torch::Tensor weight;

 private:
  LookupGradSink* sink_ = nullptr;
  Lookup lookup_;
};
TORCH_MODULE(Embedding);

// The MLP nonlinearity on h = c_fc(x): SwiGLU (h = [gate; up], (R, 2 hidden) -> silu(gate) * up),
// relu² (relu(h)^2) or GELU (tanh approximation).
torch::Tensor mlp_activation(const torch::Tensor& h, MlpKind kind, int64_t hidden);

}  // namespace lmtrain::model
