// The sizes the fused CPU attention kernels (fused_attention.cpp, fused_document_attention.cpp)
// read off their packed input: qkv (B, T, 3C) with n_head heads of D = C / n_head.
#pragma once
#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdint>

namespace lmtrain::model {

struct FusedAttentionShape {
  int64_t B, T, C, H, D;
  float scale;  // 1 / sqrt(D)
};

inline FusedAttentionShape fused_attention_shape(const at::Tensor& qkv, int64_t n_head) {
  FusedAttentionShape s;
  s.B = qkv.size(0);
  s.T = qkv.size(1);
  s.C = qkv.size(2) / 3;
  s.H = n_head;
  s.D = s.C / n_head;
  s.scale = 1.f / std::sqrt(static_cast<float>(s.D));
  return s;
}

}  // namespace lmtrain::model
