#include "model/temporal/patching.h"

#include <torch/torch.h>

namespace lmtrain::model::temporal {

Patches make_patches(const torch::Tensor& values, const torch::Tensor& valid,
                     const TemporalEncoderOptions& options) {
  const int64_t B = values.size(0), C = values.size(1), L = values.size(2);
  const int64_t N = options.patch_len, S = options.stride;
  const int64_t P = options.patches_for(L);
  const int64_t padded = (P - 1) * S + N;  // >= L
  auto mask = valid.to(values.scalar_type());
  auto x = torch::where(valid, values, torch::zeros_like(values));
  // The local deviation x_t - (x_{t-1} + x_{t+1}) / 2 where all three are valid, else 0: a spike
  // is one value far from both neighbours whatever the trend or level around it, which a
  // patch's linear embedding of the values alone separates from a steep stretch only slowly.
  auto prev = torch::constant_pad_nd(x, {1, 0}).narrow(2, 0, L);
  auto next = torch::constant_pad_nd(x, {0, 1}).narrow(2, 1, L);
  auto both = mask * torch::constant_pad_nd(mask, {1, 0}).narrow(2, 0, L) *
              torch::constant_pad_nd(mask, {0, 1}).narrow(2, 1, L);
  auto dev = (x - 0.5 * (prev + next)) * both;  // (B, C, L)
  if (padded > L) {
    x = torch::constant_pad_nd(x, {0, padded - L});
    dev = torch::constant_pad_nd(dev, {0, padded - L});
    mask = torch::constant_pad_nd(mask, {0, padded - L});
  }
  // unfold(dim=2, size=N, step=S): (B, C, P, N) -> (B, P, C, N) -> (B, P, C N)
  auto cut = [&](const torch::Tensor& t) {
    return t.unfold(2, N, S).permute({0, 2, 1, 3}).reshape({B, P, C * N});
  };
  auto mp = cut(mask);
  return {torch::cat({cut(x), cut(dev), mp}, -1), mp.sum(-1) > 0};
}

int64_t soft_token_count(const torch::Tensor& valid, const TemporalEncoderOptions& options) {
  if (options.num_tokens > 0) return options.num_tokens;
  const int64_t C = valid.size(0), L = valid.size(1);
  auto padded = torch::zeros({1, C, options.max_length}, torch::kBool);
  padded.narrow(2, 0, L).copy_(valid.unsqueeze(0));
  // The valid patches and the summary token after them (temporal_encoder.h).
  return make_patches(torch::zeros({1, C, options.max_length}), padded, options)
             .valid.sum()
             .item<int64_t>() +
         1;
}

}  // namespace lmtrain::model::temporal
