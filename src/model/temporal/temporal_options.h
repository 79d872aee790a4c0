// The shape of a time-series encoder (model.temporal.*): what turns curves into soft tokens for
// a frozen decoder (model/soft_tokens.h). See temporal_encoder.h for the computation.
#pragma once
#include <cstdint>

namespace lmtrain::model::temporal {

// How the encoder's tokens become soft tokens (model.temporal.projector).
enum class ProjectorKind {
  kMlp,       // fc1, GELU, fc2, RMSNorm: anywhere in the LM's width (LLaVA)
  kVocabMix,  // fc1, GELU, logits over the LM's vocabulary, softmax @ its token-embedding table:
              // each soft token is a mix of the LM's own word embeddings (Time-LLM's
              // reprogramming), which a frozen LM already knows how to read
};

struct TemporalEncoderOptions {
  int64_t channels = 1;       // C: variables per series (1 = univariate)
  int64_t max_length = 1024;  // L_max: the longest series accepted (sizes the position table)
  int64_t patch_len = 16;     // values per patch
  int64_t stride = 16;        // step between patch starts (= patch_len: no overlap)
  int64_t layers = 2;         // encoder blocks
  int64_t width = 128;        // encoder width
  int64_t heads = 4;          // attention heads (width % heads == 0)
  int64_t mlp_ratio = 4;      // encoder MLP hidden = mlp_ratio * width
  int64_t num_tokens = 0;     // soft tokens per series: 0 = one per patch, else pooled to this
  int64_t lm_width = 0;       // the decoder's embedding width the projector maps to
  ProjectorKind projector = ProjectorKind::kMlp;
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
