// A transformer block (model/gpt.h BlockImpl: attention and feed-forward, each added to the
// residual stream), its outputs packed as tensors for activation checkpointing, and the stack
// of blocks between the embeddings and the final norm (TransformerImpl).
#include "model/dropout.h"
#include "model/gpt.h"

namespace lmtrain::model {

BlockImpl::BlockImpl(const GptConfig& cfg, int64_t layer, ExpertPlacement experts)
    : dropout(cfg.dropout) {
  const bool rms = cfg.norm == Norm::kRmsNorm;
  ln_1 =
      register_module("ln_1", LayerNorm(cfg.n_embd, cfg.bias, rms, cfg.norm_eps, cfg.norm_weight));
  attn = register_module("attn", CausalSelfAttention(cfg, layer));
  ln_2 =
      register_module("ln_2", LayerNorm(cfg.n_embd, cfg.bias, rms, cfg.norm_eps, cfg.norm_weight));
  if (cfg.moe.is_moe_layer(layer)) {
    mlp = register_module("mlp", std::make_shared<MoeImpl>(cfg, experts));
  } else {
    mlp = register_module("mlp", std::make_shared<MlpImpl>(cfg));
  }
}

torch::Tensor BlockImpl::residual(const torch::Tensor& h, const torch::Tensor& m) {
  return h + (is_training() && dropout > 0 ? model::dropout(m, dropout) : m);
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, KvCache* cache, int64_t layer,
                                 const torch::Tensor& ve) {
  auto [h, normed] = ln_2->forward_add(x, attn(ln_1(x), cache, layer, ve));  // h = x + attn
  return residual(h, mlp->run(normed).y);
}

BlockOutput BlockImpl::forward_train(const torch::Tensor& x, bool keep_ffn_out,
                                     const torch::Tensor& ve, const DocumentLayout* docs) {
  // h = x + attn, normed = ln_2(h)
  auto [h, normed] = ln_2->forward_add(x, attn(ln_1(x), nullptr, 0, ve, docs));
  auto out = mlp->run(normed);
  BlockOutput b;
  b.y = residual(h, out.y);
  if (keep_ffn_out) b.ffn_out = out.y;
  b.balance = std::move(out.balance);
  return b;
}

std::vector<torch::Tensor> BlockOutput::to_tensors() const {
  std::vector<torch::Tensor> t{y};
  if (ffn_out.defined()) t.push_back(ffn_out);
  if (balance.objective.defined()) {
    const auto& s = balance.stats;
    t.insert(t.end(), {balance.objective, s.load, s.dropped, s.aux, s.z});
  }
  return t;
}

BlockOutput BlockOutput::from_tensors(const std::vector<torch::Tensor>& t, bool has_ffn_out,
                                      bool has_balance) {
  BlockOutput b;
  size_t i = 0;
  b.y = t.at(i++);
  if (has_ffn_out) b.ffn_out = t.at(i++);
  if (has_balance) {
    b.balance.objective = t.at(i++);
    b.balance.stats = {t.at(i), t.at(i + 1), t.at(i + 2), t.at(i + 3)};
  }
  return b;
}

TransformerImpl::TransformerImpl(const GptConfig& cfg, ExpertPlacement experts) {
  wte = register_module("wte", Embedding(cfg.vocab_size, cfg.n_embd, LrGroup::kEmbedding));
  if (cfg.pos == PosEncoding::kLearned) {
    wpe = register_module("wpe", Embedding(cfg.block_size, cfg.n_embd, LrGroup::kEmbedding));
  }
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    blocks.push_back(Block(cfg, i, experts));
    h->push_back(blocks.back());
  }
  ln_f = register_module("ln_f", LayerNorm(cfg.n_embd, cfg.bias, cfg.norm == Norm::kRmsNorm,
                                           cfg.norm_eps, cfg.norm_weight));
}

}  // namespace lmtrain::model
