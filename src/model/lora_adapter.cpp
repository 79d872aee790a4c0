#include "model/lora_adapter.h"

#include "model/dropout.h"

namespace lmtrain::model {

LoraAdapterImpl::LoraAdapterImpl(int64_t in, int64_t rows_, int64_t offset, int64_t r, double scale,
                                 double p, bool decay)
    : row_offset(offset), rows(rows_), rank(r), scaling(scale), dropout(p) {
  ParamTag a;
  a.init = InitRule::kKaimingUniform;
  a.decay = decay;
  a.lora = true;
  ParamTag b = a;
  b.init = InitRule::kZero;
  lora_A = register_tagged("lora_A", torch::zeros({rank, in}), a);
  lora_B = register_tagged("lora_B", torch::zeros({rows, rank}), b);
}

torch::Tensor LoraAdapterImpl::delta(const torch::Tensor& x) const {
  // PEFT's order: lora_B(lora_A(dropout(x))) * scaling. (..., in) -> (..., rank) -> (..., rows)
  const auto in = is_training() && dropout > 0 ? model::dropout(x, dropout) : x;
  return torch::linear(torch::linear(in, lora_A), lora_B) * scaling;
}

torch::Tensor LoraAdapterImpl::merged_delta() const {
  return torch::matmul(lora_B, lora_A) * scaling;  // (rows, rank) x (rank, in)
}

}  // namespace lmtrain::model
