#include "model/fused_document_attention.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <vector>

#include "kernels/cpu_kernels.h"
#include "model/fused_attention_shape.h"

namespace lmtrain::model {
namespace {

// The probabilities P of one (row, head) are its documents' (n, n) blocks one after another:
// offsets[b][k] is where document k of row b starts in that row's span, whose size is
// offsets[b].back() (the sum of n^2; at most T^2).
std::vector<std::vector<int64_t>> doc_p_offsets(const std::vector<std::vector<int64_t>>& bounds) {
  std::vector<std::vector<int64_t>> out(bounds.size());
  for (size_t b = 0; b < bounds.size(); ++b) {
    int64_t at = 0;
    out[b].push_back(0);
    for (size_t k = 0; k + 1 < bounds[b].size(); ++k) {
      const int64_t n = bounds[b][k + 1] - bounds[b][k];
      at += n * n;
      out[b].push_back(at);
    }
  }
  return out;
}

int64_t doc_p_span(const std::vector<std::vector<int64_t>>& offsets) {
  int64_t span = 0;
  for (const auto& o : offsets) span = std::max(span, o.back());
  return span;
}

// One document of one (row, head) pair: positions [t0, t0 + n) of row b, head h; bh = b H + h;
// k the document's index in its row; q_at / y_at where its first position's head starts in the
// packed (B, T, 3C) qkv and in the (B, T, C) output.
struct DocumentHead {
  int64_t bh, b, h;
  size_t k;
  int64_t t0, n, q_at, y_at;
};

// Calls fn(DocumentHead, scratch) for every document of every (row, head) pair, the pairs split
// over threads, each thread with its own kernel scratch: forward and backward walk alike.
template <class Fn>
void for_each_document_head(const FusedAttentionShape& s,
                            const std::vector<std::vector<int64_t>>& bounds, const Fn& fn) {
  const int64_t longest = longest_document(bounds);
  at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(kernels::attention_scratch_floats(longest, s.D));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      const auto& bd = bounds[static_cast<size_t>(b)];
      for (size_t k = 0; k + 1 < bd.size(); ++k) {
        const int64_t t0 = bd[k];
        fn(DocumentHead{bh, b, h, k, t0, bd[k + 1] - t0, (b * s.T + t0) * 3 * s.C + h * s.D,
                        (b * s.T + t0) * s.C + h * s.D},
           scratch.data());
      }
    }
  });
}

class FusedDocumentAttention : public torch::autograd::Function<FusedDocumentAttention> {
 public:
  // P: (B, H, span) per-document probability blocks, y: (B, T, C).
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv,
                            int64_t n_head, const at::Tensor& doc) {
    const FusedAttentionShape s = fused_attention_shape(qkv, n_head);
    const auto bounds = document_bounds(doc);
    const auto offsets = doc_p_offsets(bounds);
    const int64_t span = doc_p_span(offsets);
    auto P = at::empty({s.B, s.H, span}, qkv.options());
    auto y = at::empty({s.B, s.T, s.C}, qkv.options());
    const float* base = qkv.data_ptr<float>();
    float* pbase = P.data_ptr<float>();
    float* ybase = y.data_ptr<float>();
    for_each_document_head(s, bounds, [&](const DocumentHead& d, float* scratch) {
      const float* q = base + d.q_at;
      kernels::attention_forward_head(q, q + s.C, q + 2 * s.C, 3 * s.C, d.n, s.D, s.scale,
                                      pbase + d.bh * span + offsets[static_cast<size_t>(d.b)][d.k],
                                      ybase + d.y_at, s.C, scratch);
    });
    // The document indices, not the layout: backward may run after the layout is gone.
    ctx->save_for_backward({qkv, P, y, doc});
    ctx->saved_data["n_head"] = n_head;
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto& qkv = saved[0];
    const FusedAttentionShape s = fused_attention_shape(qkv, ctx->saved_data["n_head"].toInt());
    const auto bounds = document_bounds(saved[3]);
    const auto offsets = doc_p_offsets(bounds);
    const int64_t span = saved[1].size(2);
    auto dy = grads[0].contiguous();
    auto dqkv = at::empty_like(qkv);
    const float* base = qkv.data_ptr<float>();
    const float* pbase = saved[1].data_ptr<float>();
    const float* ybase = saved[2].data_ptr<float>();
    const float* dybase = dy.data_ptr<float>();
    float* gbase = dqkv.data_ptr<float>();
    for_each_document_head(s, bounds, [&](const DocumentHead& d, float* scratch) {
      const float* q = base + d.q_at;
      float* dq = gbase + d.q_at;
      kernels::attention_backward_head(q, q + s.C, q + 2 * s.C, 3 * s.C, d.n, s.D, s.scale,
                                       pbase + d.bh * span + offsets[static_cast<size_t>(d.b)][d.k],
                                       ybase + d.y_at, dybase + d.y_at, s.C, dq, dq + s.C,
                                       dq + 2 * s.C, scratch);
    });
    return {dqkv, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_document_attention(const at::Tensor& qkv, int64_t n_head,
                                    const DocumentLayout& docs) {
  return FusedDocumentAttention::apply(qkv, n_head, docs.doc());
}

}  // namespace lmtrain::model
