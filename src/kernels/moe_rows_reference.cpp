#include "kernels/moe_rows_reference.h"

#include <vector>

#include "kernels/moe_rows_math.h"

namespace lmtrain::kernels {
namespace {

// out[n] = sum_j w[n, j] rows[inv[n, j]] over kept slots in slot order; w null: unit weights.
void slot_sums(const float* rows, const float* w, const int64_t* inv, int64_t N, int64_t k,
               int64_t C, bool bf16, float* out) {
  std::vector<float> acc(C);
  for (int64_t n = 0; n < N; ++n) {
    acc.assign(C, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t m = inv[n * k + j];
      if (!moe_slot_kept(m)) continue;
      const float* row = rows + m * C;
      if (w) {
        for (int64_t c = 0; c < C; ++c) acc[c] = moe_combine_add(acc[c], w[n * k + j], row[c]);
      } else {
        for (int64_t c = 0; c < C; ++c) acc[c] = moe_gather_add(acc[c], row[c]);
      }
    }
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = store_round(acc[c], bf16);
  }
}

}  // namespace

void moe_permute_forward_reference(const float* x, const int64_t* slot, int64_t M, int64_t k,
                                   int64_t C, float* rows) {
  for (int64_t m = 0; m < M; ++m) {
    const float* src = x + moe_row_token(slot[m], k) * C;
    for (int64_t c = 0; c < C; ++c) rows[m * C + c] = src[c];
  }
}

void moe_permute_backward_reference(const float* drows, const int64_t* inv, int64_t N, int64_t k,
                                    int64_t C, bool bf16, float* dx) {
  slot_sums(drows, nullptr, inv, N, k, C, bf16, dx);
}

void moe_combine_forward_reference(const float* out_rows, const float* w, const int64_t* inv,
                                   int64_t N, int64_t k, int64_t C, bool bf16_y, float* y) {
  slot_sums(out_rows, w, inv, N, k, C, bf16_y, y);
}

void moe_combine_backward_reference(const float* out_rows, const float* w, const int64_t* inv,
                                    const float* dy, int64_t N, int64_t k, int64_t C,
                                    bool bf16_rows, float* d_out_rows, float* dw) {
  for (int64_t n = 0; n < N; ++n) {
    const float* dyr = dy + n * C;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t m = inv[n * k + j];
      float dot = 0.0f;
      if (moe_slot_kept(m)) {
        const float wj = w[n * k + j];
        for (int64_t c = 0; c < C; ++c) {
          dot += moe_weight_grad_term(dyr[c], out_rows[m * C + c]);
          d_out_rows[m * C + c] = store_round(moe_combine_row_grad(wj, dyr[c]), bf16_rows);
        }
      }
      dw[n * k + j] = dot;
    }
  }
}

}  // namespace lmtrain::kernels
