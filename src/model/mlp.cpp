#include "model/mlp.h"

namespace lmtrain::model {

MlpImpl::MlpImpl(const GptConfig& cfg) : kind(cfg.mlp), hidden(cfg.hidden_dim()) {
  const int64_t fc = mlp_fc_rows(kind, hidden);
  c_fc = register_module("c_fc", Linear(cfg.n_embd, fc, cfg.bias));
  c_proj = register_module(
      "c_proj", Linear(hidden, cfg.n_embd, cfg.bias, block_matrix_tag(InitRule::kResidualProj)));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return c_proj(mlp_activation(c_fc(x), kind, hidden));
}

}  // namespace lmtrain::model
