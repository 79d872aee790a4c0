// The time-series encoder: curves in, soft tokens for a frozen decoder out (model/soft_tokens.h),
// in the LLaVA / Time-LLM / ChatTS way: a small encoder of its own and a projector into the LM's
// embedding space; the LM is frozen and only these train.
//
//   values (B, C, L), valid (B, C, L)
//     -> normalise_series (series_norm.h): shape, plus each channel's mean and std
//     -> make_patches (patching.h): (B, P, 3 C patch_len) tokens (values, local deviations,
//        masks), valid (B, P)
//     -> patch_embed, and one "stats" token first from [slog(mean), log(std)] (B, 2C): the
//        encoder knows the series' level and scale, which normalisation removed
//     -> + learned positions, `layers` pre-norm transformer blocks (bidirectional attention,
//        padding patches masked as keys), ln_f                          (B, 1 + P, width)
//     -> the P patch tokens and then the stats token (the series' summary: S = P + 1), or with
//        num_tokens > 0 that many learned queries attending over all 1 + P tokens (attention
//        pooling)                                                       (B, S, width)
//     -> projector: fc1, GELU, fc2, RMSNorm whose gain starts at the LM's token-embedding RMS,
//        so the soft tokens start at the scale the LM expects         (B, S, lm_width)
//        or (projector vocab_mix) fc1, GELU, proj_vocab to logits over the LM's vocabulary
//        (B, S, V), softmax, @ the LM's token-embedding table (V, lm_width): each soft token is
//        a mix of the LM's own word embeddings (Time-LLM's reprogramming); the table is the
//        frozen LM's, lent by set_vocab_table, never a parameter of the encoder
//
// slog(m) = sign(m) log(1 + |m|). bench/reference/temporal_encoder.py is the same computation in
// PyTorch (parameter names alike) for the parity test.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cstdint>
#include <functional>
#include <string>

#include "model/layers.h"
#include "model/param_tags.h"
#include "model/temporal/temporal_options.h"

namespace lmtrain::model::temporal {

// One pre-norm transformer block without a causal mask: x + attn(ln_1 x), then x + mlp(ln_2 x).
class SeriesEncoderBlockImpl : public torch::nn::Module {
 public:
  explicit SeriesEncoderBlockImpl(const TemporalEncoderOptions& o);
  // x (B, S, W); key_valid (B, S) bool: which tokens may be attended to.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& key_valid);

  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Linear attn_qkv{nullptr}, attn_proj{nullptr}, fc{nullptr}, proj{nullptr};
  int64_t heads;
};
TORCH_MODULE(SeriesEncoderBlock);

struct EncodedSeries {
  torch::Tensor tokens;  // (B, S, lm_width): the soft tokens
  torch::Tensor valid;   // (B, S) bool: false for the tokens of padding patches (per patch only)
};

class TemporalEncoderImpl : public TaggedModule {
 public:
  // init: draw the weights with the global generator (N(0, init_std), residual projections
  // N(0, init_std / sqrt(2 layers)), pooling and projector matrices U(+-1/sqrt(fan_in)), zero
  // biases, unit norms); false leaves them for a load.
  explicit TemporalEncoderImpl(const TemporalEncoderOptions& options, bool init = true);

  // values (B, C, L) float, valid (B, C, L) bool; L <= options.max_length.
  EncodedSeries forward(const torch::Tensor& values, const torch::Tensor& valid);

  // Sets the output RMSNorm's gain to `rms` (the LM's token-embedding RMS,
  // token_embedding_rms below), so that every soft token starts with that RMS.
  void set_output_rms(double rms);

  // projector vocab_mix: the LM's token-embedding table (lm_vocab, lm_width) the soft tokens
  // mix; held by reference (the LM's frozen wte parameter itself, detached where it is read),
  // not saved with the encoder. By reference so that it follows the parameter's storage: under
  // ZeRO-3 that is the root unit's gathered buffer, whose values a forward sees.
  void set_vocab_table(const torch::Tensor& wte);

  const TemporalEncoderOptions& options() const { return options_; }
  // Tags of every parameter (param_tags.h): the optimizer's decay and groups read them.
  const ParamTags& param_tags() const { return tags_; }

  Linear patch_embed{nullptr}, stats_embed{nullptr};
  Embedding pos{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  LayerNorm ln_f{nullptr};
  Embedding pool_queries{nullptr};  // (num_tokens, W), only with num_tokens > 0
  Linear pool_q{nullptr}, pool_kv{nullptr}, pool_proj{nullptr};
  Linear proj_fc1{nullptr}, proj_fc2{nullptr};  // proj_fc2 and proj_norm: projector mlp
  LayerNorm proj_norm{nullptr};
  Linear proj_vocab{nullptr};  // projector vocab_mix: (lm_width -> lm_vocab) logits

 private:
  TemporalEncoderOptions options_;
  ParamTags tags_;
  torch::Tensor vocab_table_;  // (lm_vocab, lm_width), projector vocab_mix only
};
TORCH_MODULE(TemporalEncoder);

// sqrt(mean(w^2)) of a token-embedding table (V, C): the RMS of the LM's input embeddings,
// summed in fp64 over blocks of kEmbeddingRmsRows rows.
double token_embedding_rms(const torch::Tensor& wte);
// The same from a table of `rows` x `width` that read_rows(first, n) gives n rows at a time
// (rows [first, first + n), any shape of n * width elements): ZeRO-3's sharded set-up reads the
// LM's wte by range from its file, one block at a time, and gets the whole table's figure bit
// for bit (the same blocks, summed in the same order).
constexpr int64_t kEmbeddingRmsRows = 1024;
double token_embedding_rms(int64_t rows, int64_t width,
                           const std::function<torch::Tensor(int64_t first, int64_t n)>& read_rows);

// Throws UsageError naming the option when `o` is not a valid encoder shape.
void check_temporal_options(const TemporalEncoderOptions& o);

}  // namespace lmtrain::model::temporal
