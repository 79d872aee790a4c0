// The shape of a time-series encoder (model.temporal.*): what turns curves into soft tokens for
// a frozen decoder (model/soft_tokens.h). See temporal_encoder.h for the computation.
#pragma once
#include <cstdint>
#include <string>

#include "core/config_schema.h"

namespace lmtrain::model::temporal {

// How the encoder's tokens become soft tokens (model.temporal.projector).
enum class ProjectorKind {
  kMlp,       // fc1, GELU, fc2, RMSNorm: anywhere in the LM's width (LLaVA)
  kVocabMix,  // fc1, GELU, logits over the LM's vocabulary, softmax @ its token-embedding table:
              // each soft token is a mix of the LM's own word embeddings (Time-LLM's
              // reprogramming), which a frozen LM already knows how to read
};

// "mlp" or "vocab_mix" (model.temporal.projector); another name is a UsageError listing both.
ProjectorKind parse_projector_kind(const std::string& name);

// The model.temporal.* readable members start at their keys' schema defaults
// (core/config_schema.h); lm_width and lm_vocab come from the LM, the last two are fixed.
struct TemporalEncoderOptions {
  int64_t channels = core::default_int("model.temporal.channels");  // C: variables per series
  // L_max: the longest series accepted (sizes the position table).
  int64_t max_length = core::default_int("model.temporal.max_length");
  int64_t patch_len = core::default_int("model.temporal.patch_len");  // values per patch
  // Step between patch starts (= patch_len: no overlap).
  int64_t stride = core::default_int("model.temporal.stride");
  int64_t layers = core::default_int("model.temporal.layers");  // encoder blocks
  int64_t width = core::default_int("model.temporal.width");    // encoder width
  // Attention heads (width % heads == 0).
  int64_t heads = core::default_int("model.temporal.heads");
  // Encoder MLP hidden = mlp_ratio * width.
  int64_t mlp_ratio = core::default_int("model.temporal.mlp_ratio");
  // Soft tokens per series: 0 = one per patch, else pooled to this.
  int64_t num_tokens = core::default_int("model.temporal.num_tokens");
  int64_t lm_width = 0;  // the decoder's embedding width the projector maps to
  ProjectorKind projector = parse_projector_kind(core::default_string("model.temporal.projector"));
  int64_t lm_vocab = 0;    // the decoder's vocabulary size (rows of its wte): vocab_mix's logits
  double norm_eps = 1e-5;  // LayerNorm / RMSNorm epsilon
  double init_std = 0.02;  // N(0, init_std) weights at initialisation

  // Patches of a series of `length` values: 1 + ceil((length - patch_len) / stride), at least 1.
  int64_t patches_for(int64_t length) const {
    if (length <= patch_len) return 1;
    return 1 + (length - patch_len + stride - 1) / stride;
  }
  int64_t max_patches() const { return patches_for(max_length); }
};

}  // namespace lmtrain::model::temporal
