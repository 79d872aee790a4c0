// Adds a token lookup's gradient rows into its table's gradient:
//   grad (V, C) += alpha * rows[i] at row ids[i], for every i of n (ids (n,) int64, rows (n, C)).
// On the CPU through index_add_, which touches only the n rows and adds them one after another
// in the order given (deterministic), where embedding_backward would fill a dense (V, C)
// temporary and a second pass would add all of it: for GPT-2's 50,257 x 768 table that is two
// passes over 154 MB for a few thousand rows. On CUDA through embedding_backward, which sorts
// the ids and so stays deterministic where index_add_ adds with atomics.
#pragma once
#include <ATen/ATen.h>

namespace lmtrain::kernels {

inline void add_lookup_rows(at::Tensor& grad, const at::Tensor& ids, const at::Tensor& rows,
                            double alpha) {
  if (grad.device().is_cpu()) {
    grad.index_add_(0, ids, rows.to(grad.scalar_type()), alpha);
    return;
  }
  const auto dense = at::embedding_backward(rows, ids, grad.size(0), /*padding_idx=*/-1,
                                            /*scale_grad_by_freq=*/false, /*sparse=*/false);
  grad.add_(dense, alpha);
}

}  // namespace lmtrain::kernels
