// Causal scaled-dot-product attention, the one kernel choice point of the model.
#pragma once
#include <ATen/core/Tensor.h>

#include <utility>

namespace lmtrain::model {

// q: (B, H, Tq, D), k and v: (B, H, Tk, D) with Tk >= Tq; query i sits at absolute position
// Tk - Tq + i and attends to keys 0..that position. Returns (B, H, Tq, D). k and v may have
// fewer heads K dividing H (grouped-query attention: query head h reads kv head h / (H / K)):
// the fused kernel reads them in place, the explicit path repeats them.
// dropout_p applies to the attention weights (pass 0 in eval). key_bias (optional): (B, 1, 1, Tk)
// added to every score of a key, e.g. the mask of a left-padded batch's pad slots.
// window > 0: sliding-window attention, query i attends to the `window` keys ending at its own
// (key j with Tk - Tq + i - window < j <= Tk - Tq + i; transformers' sliding_window_overlay).
// libtorch's SDPA takes no window: the window is a dense (Tq, Tk) additive mask, given to SDPA
// without dropout (its memory-efficient / cuDNN / CPU flash kernels; never the flash kernel,
// whose window_size_left is private) and to the explicit path with it.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double dropout_p, const at::Tensor& key_bias = {}, int64_t window = 0);

// The same without dropout, also returning the attention weights (B, H, Tq, Tk).
std::pair<at::Tensor, at::Tensor> causal_attention_with_weights(const at::Tensor& q,
                                                                const at::Tensor& k,
                                                                const at::Tensor& v,
                                                                int64_t window = 0);

// The additive mask (Tq, Tk) of causal attention with a window (0: none): 0 where query i may
// attend key j, -inf elsewhere. Cached per thread for the last shape.
at::Tensor causal_window_mask(int64_t tq, int64_t tk, int64_t window,
                              const at::TensorOptions& opts);

}  // namespace lmtrain::model
