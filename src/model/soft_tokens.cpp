#include "model/soft_tokens.h"

#include <torch/torch.h>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::model {

torch::Tensor place_soft_tokens(const torch::Tensor& x, const SoftTokens& soft) {
  const auto& slots = soft.slots;
  const auto& values = soft.values;
  if (!slots.defined() || !values.defined() || slots.dim() != 2 || values.dim() != 2 ||
      slots.size(0) != x.size(0) || slots.size(1) != x.size(1) || values.size(1) != x.size(2)) {
    throw Error(log::format(
        "soft tokens: slots must be (B, T) = (%lld, %lld) and values (n, C) with C = %lld",
        (long long)x.size(0), (long long)x.size(1), (long long)x.size(2)));
  }
  if (slots.device().is_cpu()) {
    const int64_t n = slots.sum().item<int64_t>();
    if (n != values.size(0)) {
      throw Error(log::format("soft tokens: %lld slots but %lld values", (long long)n,
                              (long long)values.size(0)));
    }
  }
  // masked_scatter fills the masked positions in row-major order and differentiates to both
  // inputs; values are cast to the embeddings' dtype (an fp32 encoder under a bf16 LM).
  return x.masked_scatter(slots.unsqueeze(-1).to(torch::kBool), values.to(x.dtype()));
}

}  // namespace lmtrain::model
