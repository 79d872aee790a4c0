// Rotary position embedding (Su et al., "RoFormer"), in Hugging Face Llama's convention: the
// head dimension is split in halves (not interleaved pairs), and
//   inv_freq[i] = 1 / theta^(2i / D),  angle[t, i] = t * inv_freq[i]   (fp32, as HF computes)
//   rope(x)[t] = x[t] * cos(angle[t]) + rotate_half(x[t]) * sin(angle[t]),
//   rotate_half([x1, x2]) = [-x2, x1], with the angles repeated over both halves.
// Scaled RoPE (rope_params.h) changes inv_freq and may multiply cos and sin by an attention
// factor (YaRN), exactly as transformers' ROPE_INIT_FUNCTIONS and its rotary embedding do.
#pragma once
#include <ATen/core/Tensor.h>

#include <utility>

#include "model/rope_params.h"

namespace lmtrain::model {

// The inverse frequencies (D/2,) fp32 on `device` and the factor cos and sin are multiplied by,
// for a forward whose positions reach seq_len - 1 (only dynamic scaling reads seq_len: past
// scaling.original_max it grows the base, as HF's dynamic_rope_update does per forward).
struct RopeFrequencies {
  at::Tensor inv_freq;
  double attention_scaling = 1.0;
};
RopeFrequencies rope_frequencies(const RopeParams& rope, int64_t D, int64_t seq_len,
                                 c10::Device device);

// x: (B, H, T, D) at absolute positions start .. start+T-1. Returns the rotated (B, H, T, D).
at::Tensor apply_rope(const at::Tensor& x, int64_t start, const RopeParams& rope);
// The same at explicit positions: (T,) shared by every row, or (B, T) per row (left-padded
// batches). Equal positions give bitwise the same result as apply_rope.
at::Tensor apply_rope_at(const at::Tensor& x, const at::Tensor& positions, const RopeParams& rope);

// The fused kernels' tables: cos and sin of angle[t, i] for positions 0 .. T-1 and the first half
// i < D/2 (the second half repeats it), each (T, D/2) fp32 contiguous on `device`, times the
// attention scaling. Built with the same ops as apply_rope's, kept in fp32, and cached for the
// last shape.
std::pair<at::Tensor, at::Tensor> rope_half_tables(int64_t T, int64_t D, const RopeParams& rope,
                                                   c10::Device device);

}  // namespace lmtrain::model
