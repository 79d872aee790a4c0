#include "kernels/fused_reference.h"

#include <cmath>
#include <vector>

#include "kernels/fused_math.h"

namespace lmtrain::kernels {

void add_norm_forward_reference(const float* x, const float* delta, const float* w, const float* b,
                                int64_t N, int64_t C, float eps, bool rms, bool bf16, bool bf16_y,
                                float* h, float* y, float* mean, float* rstd) {
  for (int64_t r = 0; r < N; ++r) {
    const float* xr = x + r * C;
    // The row the norm reads: x + delta as stored (h), or x itself.
    const float* hr = xr;
    if (delta) {
      float* out = h + r * C;
      for (int64_t c = 0; c < C; ++c) out[c] = store_round(xr[c] + delta[r * C + c], bf16);
      hr = out;
    }
    float sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += hr[c];
    const float mu = rms ? 0.0f : sum / static_cast<float>(C);
    float square_sum = 0;
    for (int64_t c = 0; c < C; ++c) square_sum += (hr[c] - mu) * (hr[c] - mu);
    const float rs = norm_rstd(square_sum, C, eps);
    for (int64_t c = 0; c < C; ++c)
      y[r * C + c] = store_round(norm_output(hr[c], mu, rs, w[c], b ? b[c] : 0.0f), bf16_y);
    mean[r] = mu;
    rstd[r] = rs;
  }
}

void add_norm_backward_reference(const float* h, const float* w, const float* mean,
                                 const float* rstd, const float* dy, const float* dh, int64_t N,
                                 int64_t C, bool rms, bool bf16, float* dx, float* dw, float* db) {
  for (int64_t r = 0; r < N; ++r) {
    const float* hr = h + r * C;
    const float* dyr = dy + r * C;
    const float mu = mean[r], rs = rstd[r];
    float sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < C; ++c) {
      const float g = dyr[c] * w[c];
      sum_g += g;
      sum_gx += g * (hr[c] - mu) * rs;
    }
    const float mean_g = rms ? 0.0f : sum_g / static_cast<float>(C);
    const float mean_gx = sum_gx / static_cast<float>(C);
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (hr[c] - mu) * rs;
      const float g = dyr[c] * w[c];
      const float grad =
          norm_input_grad(g, xhat, rs, mean_g, mean_gx) + (dh ? dh[r * C + c] : 0.0f);
      dx[r * C + c] = store_round(grad, bf16);
      dw[c] += dyr[c] * xhat;
      if (db) db[c] += dyr[c];
    }
  }
}

void swiglu_forward_reference(const float* h, int64_t N, int64_t H, bool bf16, float* y) {
  for (int64_t r = 0; r < N; ++r)
    for (int64_t i = 0; i < H; ++i)
      y[r * H + i] = store_round(swiglu_output(h[r * 2 * H + i], h[r * 2 * H + H + i]), bf16);
}

void swiglu_backward_reference(const float* h, const float* dy, int64_t N, int64_t H, bool bf16,
                               float* dh) {
  for (int64_t r = 0; r < N; ++r) {
    for (int64_t i = 0; i < H; ++i) {
      float dgate, dup;
      swiglu_grads(h[r * 2 * H + i], h[r * 2 * H + H + i], dy[r * H + i], &dgate, &dup);
      dh[r * 2 * H + i] = store_round(dgate, bf16);
      dh[r * 2 * H + H + i] = store_round(dup, bf16);
    }
  }
}

void qkv_split_forward_reference(const float* packed, const float* q_w, const float* k_w,
                                 const float* cos, const float* sin, const QkvShape& s, float eps,
                                 bool bf16, float* q, float* k, float* v, float* rstd) {
  const int64_t D = s.D, half = D / 2, slots = s.H + 2 * s.K;
  std::vector<float> n(D);
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t t = 0; t < s.T; ++t) {
      for (int64_t j = 0; j < slots; ++j) {
        const float* src = packed + ((b * s.T + t) * slots + j) * D;
        const QkvRow row = qkv_row(s, b, t, j);
        float* out = qkv_pick(row.part, q, k, v) + row.offset;
        const float* w = qkv_pick<const float>(row.part, q_w, k_w, nullptr);
        const bool rotate = row.part != QkvPart::kValue && cos;
        float rs = 1.0f;
        if (w) {
          float square_sum = 0;
          for (int64_t i = 0; i < D; ++i) square_sum += src[i] * src[i];
          rs = norm_rstd(square_sum, D, eps);
          rstd[row.norm_row] = rs;
        }
        for (int64_t i = 0; i < D; ++i)
          n[i] = w ? norm_output(src[i], 0.0f, rs, w[i], 0.0f) : src[i];
        if (rotate) {
          for (int64_t i = 0; i < half; ++i) {
            float y1, y2;
            rope_rotate(n[i], n[i + half], cos[t * half + i], sin[t * half + i], &y1, &y2);
            out[i] = store_round(y1, bf16);
            out[i + half] = store_round(y2, bf16);
          }
        } else {
          for (int64_t i = 0; i < D; ++i) out[i] = store_round(n[i], bf16);
        }
      }
    }
  }
}

void qkv_split_backward_reference(const float* packed, const float* q_w, const float* k_w,
                                  const float* cos, const float* sin, const QkvShape& s,
                                  const float* rstd, const float* dq, const float* dk,
                                  const float* dv, bool bf16, float* dpacked, float* dq_w,
                                  float* dk_w) {
  const int64_t D = s.D, half = D / 2, slots = s.H + 2 * s.K;
  std::vector<float> dn(D);
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t t = 0; t < s.T; ++t) {
      for (int64_t j = 0; j < slots; ++j) {
        const float* src = packed + ((b * s.T + t) * slots + j) * D;
        float* dsrc = dpacked + ((b * s.T + t) * slots + j) * D;
        const QkvRow row = qkv_row(s, b, t, j);
        const float* dy = qkv_pick(row.part, dq, dk, dv) + row.offset;
        const float* w = qkv_pick<const float>(row.part, q_w, k_w, nullptr);
        if (row.part != QkvPart::kValue && cos) {
          for (int64_t i = 0; i < half; ++i)
            rope_rotate_back(dy[i], dy[i + half], cos[t * half + i], sin[t * half + i], &dn[i],
                             &dn[i + half]);
        } else {
          for (int64_t i = 0; i < D; ++i) dn[i] = dy[i];
        }
        if (!w) {
          for (int64_t i = 0; i < D; ++i) dsrc[i] = store_round(dn[i], bf16);
          continue;
        }
        const float rs = rstd[row.norm_row];
        float sum_gx = 0;
        for (int64_t i = 0; i < D; ++i) sum_gx += dn[i] * w[i] * src[i] * rs;
        const float mean_gx = sum_gx / static_cast<float>(D);
        float* dw = j < s.H ? dq_w : dk_w;
        for (int64_t i = 0; i < D; ++i) {
          const float xhat = src[i] * rs;
          dsrc[i] = store_round(norm_input_grad(dn[i] * w[i], xhat, rs, 0.0f, mean_gx), bf16);
          dw[i] += dn[i] * xhat;
        }
      }
    }
  }
}

void classifier_reference(float* logits, const int64_t* targets, const float* row_scale, int64_t n,
                          int64_t V, float cap, bool bf16, bool write_grad, float* loss) {
  for (int64_t r = 0; r < n; ++r) {
    float* lr = logits + r * V;
    SoftmaxStats st{-INFINITY, 0.0f};
    for (int64_t i = 0; i < V; ++i) st = softmax_stats_add(st, classifier_logit(lr[i], cap));
    const int64_t t = targets[r];
    const bool in_range = t >= 0 && t < V;  // out of range: a NaN loss, as the kernel gives
    loss[r] = in_range ? classifier_loss(st, classifier_logit(lr[t], cap)) : NAN;
    if (!write_grad) continue;
    for (int64_t i = 0; i < V; ++i) {
      const float z = classifier_logit(lr[i], cap);
      lr[i] = store_round(classifier_logit_grad(z, st, i == t, row_scale[r], cap), bf16);
    }
  }
}

}  // namespace lmtrain::kernels
