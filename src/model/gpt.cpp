#include "model/gpt.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "model/attention.h"
#include "model/document_mask.h"
#include "model/dropout.h"
#include "model/full_kv_cache.h"
#include "model/param_init.h"
#include "model/rope.h"

namespace lmtrain::model {

namespace {
// nanochat's norm() of the token embeddings: RMSNorm without a weight, in fp32.
torch::Tensor normed_embedding(const torch::Tensor& x, double eps) {
  auto x32 = x.to(torch::kFloat);
  return (x32 * torch::rsqrt(x32.square().mean(-1, true) + eps)).to(x.scalar_type());
}

// Scalars: AdamW without decay at optim.lr, never Muon.
ParamTag scalar_tag() {
  ParamTag t;
  t.init = InitRule::kZero;  // NanochatPartsImpl::init_weights sets the values
  t.decay = false;
  return t;
}
}  // namespace

NanochatPartsImpl::NanochatPartsImpl(const GptConfig& cfg) {
  const int64_t L = cfg.n_layer;
  if (cfg.x0_lambdas) {
    resid_lambdas = register_tagged("resid_lambdas", torch::ones({L}), scalar_tag());
    x0_lambdas = register_tagged("x0_lambdas", torch::zeros({L}), scalar_tag());
  }
  if (cfg.smear) {
    smear_gate = register_module("smear_gate", Linear(kSmearGateWidth, 1, false, scalar_tag()));
    smear_lambda = register_tagged("smear_lambda", torch::zeros({1}), scalar_tag());
  }
  if (cfg.backout)
    backout_lambda = register_tagged("backout_lambda", torch::zeros({1}), scalar_tag());
  value_embeds.resize(static_cast<size_t>(L), Embedding(nullptr));
  if (cfg.value_embeds) {
    auto holder = register_module("value_embeds", std::make_shared<torch::nn::Module>());
    for (int64_t l = 0; l < L; ++l) {
      if (!cfg.has_value_embed(l)) continue;
      value_embeds[l] = holder->register_module(
          std::to_string(l),
          Embedding(cfg.vocab_size, cfg.kv_heads() * cfg.head_dim(), LrGroup::kEmbedding));
    }
  }
}

void NanochatPartsImpl::init_weights(const GptConfig& cfg) {
  init_nanochat_weights(*this, cfg, "", write_in_place);  // model/param_init.h
}

GptImpl::GptImpl(const GptConfig& cfg, bool init, ExpertPlacement experts) : cfg_(cfg) {
  if (experts.count == 0) experts = {0, cfg.moe.num_experts};
  experts_ = experts;
  transformer = register_module("transformer", Transformer(cfg, experts));
  if (!cfg.tie_embeddings) {
    ParamTag head_tag;  // decayed, but not one of the blocks' matrices (Muon leaves it to AdamW)
    head_tag.lr_group = LrGroup::kHead;
    lm_head = register_module("lm_head", Linear(cfg.n_embd, cfg.vocab_size, false, head_tag));
  }
  if (cfg.x0_lambdas || cfg.value_embeds || cfg.smear || cfg.backout) {
    nanochat = register_module("nanochat", NanochatParts(cfg));
  }
  for (auto& block : transformer->blocks) {
    if (auto* moe = block->mlp->moe_layer()) moe_layers_.push_back(moe);
  }
  tags_ = collect_param_tags(*this);
  if (init) init_weights();
}

// model/param_init.h: the same writes, parameter by parameter, serve ZeRO-3's sharded set-up.
void GptImpl::init_weights() { init_model_weights(*this, write_in_place); }

std::vector<std::pair<std::string, torch::Tensor>> GptImpl::state_tensors() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : named_parameters()) out.emplace_back(item.key(), item.value());
  for (const auto& item : named_buffers()) out.emplace_back(item.key(), item.value());
  return out;
}

void GptImpl::set_expert_dispatcher(const std::shared_ptr<ExpertDispatcher>& d) {
  for (auto* moe : moe_layers_) moe->set_dispatcher(d);
}

torch::Tensor GptImpl::hidden(const torch::Tensor& ids, int64_t start, KvCache* cache,
                              HiddenTaps* taps, const SoftTokens* soft,
                              const DocumentLayout* docs_in) {
  if (docs_in && (cache || start != 0)) {
    throw Error("packed rows (documents) are a training and scoring forward: no KV cache");
  }
  // A copy the recompute of a checkpointed block holds (it runs in backward, after the caller's
  // layout is gone); copies share the layout's masks.
  std::optional<DocumentLayout> docs_copy;
  if (docs_in) docs_copy.emplace(*docs_in);
  const DocumentLayout* docs = docs_copy ? &*docs_copy : nullptr;
  const int64_t T = ids.size(1);
  if (start + T > cfg_.block_size) {
    throw Error(log::format("sequence of %lld tokens exceeds the model's block_size %lld",
                            (long long)(start + T), (long long)cfg_.block_size));
  }
  auto x = transformer->wte(ids);  // (B, T, C)
  if (soft) x = place_soft_tokens(x, *soft);
  if (transformer->wpe) {
    auto pos = cache  ? cache->positions(start, T, ids.options())  // (T,) or (B, T) padded
               : docs ? docs->positions()                          // (B, T) packed rows
                      : torch::arange(start, start + T, ids.options().dtype(torch::kLong));
    x = x + transformer->wpe(pos);  // + (T, C) or (B, T, C)
  }
  if (is_training() && cfg_.dropout > 0) x = model::dropout(x, cfg_.dropout);
  if (cfg_.embed_norm) x = normed_embedding(x, cfg_.norm_eps);
  if (cfg_.smear) x = smear(x, start, cache, docs);
  const torch::Tensor x0 = x;  // what model.x0_lambdas mixes back in
  torch::Tensor x_backout;     // model.backout: the residual after layer n_layer / 2
  const bool recompute = is_training() && torch::GradMode::is_enabled() && !cache;
  // The autograd inputs of a recomputed block: its parameters that take gradients (frozen ones,
  // e.g. a LoRA base, are constants of the recompute).
  auto grad_params = [](BlockImpl* block) {
    std::vector<at::Tensor> out;
    for (const auto& p : block->parameters()) {
      if (p.requires_grad()) out.push_back(p);
    }
    return out;
  };
  const bool keep_ffn_out = taps && taps->moe_outputs;
  if (taps) taps->blocks.assign(taps->block_layers.size(), torch::Tensor());
  for (int64_t layer = 0; layer < cfg_.n_layer; ++layer) {
    BlockImpl* block = transformer->blocks[layer].get();
    if (nanochat && nanochat->resid_lambdas.defined()) {
      x = nanochat->resid_lambdas[layer] * x + nanochat->x0_lambdas[layer] * x0;
    }
    torch::Tensor ve;  // (B, T, K D): this layer's value embedding, if it has one
    if (nanochat && nanochat->value_embeds[layer]) ve = nanochat->value_embeds[layer](ids);
    if (cache) {
      x = block->forward(x, cache, layer, ve);
    } else {
      // Training and scoring: keep the MoE layers' balance terms (and outputs when asked).
      const bool moe = block->is_moe(), keep = keep_ffn_out && moe;
      auto run = [block, keep, ve, docs_copy](const at::Tensor& in) {
        return block->forward_train(in, keep, ve, docs_copy ? &*docs_copy : nullptr).to_tensors();
      };
      // Hooks from outside (ZeRO-3's gathers) wrap the block and its recompute wrapper.
      // A layer with a value embedding is not recomputed: the recompute would hold ve as a
      // constant and drop its gradient.
      const at::Tensor in = block_hooks_ ? block_hooks_->before_block(layer, x) : x;
      auto outs = recompute && checkpoint_.applies_to(layer) && !ve.defined()
                      ? checkpointed(run, in, grad_params(block))
                      : run(in);
      if (block_hooks_) outs = block_hooks_->after_block(layer, std::move(outs));
      const auto out = BlockOutput::from_tensors(outs, keep, moe);
      x = out.y;
      if (taps && moe) {
        taps->moe.push_back(out.balance);
        if (keep) taps->moe_out.push_back(out.ffn_out);
      }
    }
    if (taps) {
      for (size_t i = 0; i < taps->block_layers.size(); ++i) {
        if (taps->block_layers[i] == layer) taps->blocks[i] = x;
      }
    }
    if (cfg_.backout && layer == cfg_.n_layer / 2) x_backout = x;
  }
  if (cfg_.backout) x = x - nanochat->backout_lambda * x_backout;
  return transformer->ln_f(x);
}

torch::Tensor GptImpl::smear(const torch::Tensor& x, int64_t start, KvCache* cache,
                             const DocumentLayout* docs) {
  const int64_t T = x.size(1);
  torch::Tensor prev;  // (B, T, C): the embedding before each position (zeros where none)
  if (start == 0) {
    prev = sequence_piece_.shift_right
               ? sequence_piece_.shift_right(x)
               : torch::cat({torch::zeros_like(x.narrow(1, 0, 1)), x.narrow(1, 0, T - 1)}, 1);
  } else {
    if (!cache || cache != smear_cache_ || start != smear_next_) {
      throw Error(
          "model.smear: decoding from position " + std::to_string(start) +
          " needs the embedding before it, which only a call on the same cache that ended there "
          "keeps");
    }
    prev = torch::cat({smear_prev_, x.narrow(1, 0, T - 1)}, 1);
  }
  if (docs) {
    auto follows = docs->positions() != 0;  // (B, T): not a document's first token
    if (sequence_piece_.local) follows = sequence_piece_.local(follows);
    prev = prev * follows.unsqueeze(-1).to(prev.scalar_type());
  }
  if (cache)
    smear_prev_ = x.narrow(1, T - 1, 1).detach(), smear_cache_ = cache, smear_next_ = start + T;
  // Position 0 has nothing before it: its gate multiplies zeros.
  auto gate = nanochat->smear_lambda *
              torch::sigmoid(nanochat->smear_gate(x.narrow(-1, 0, kSmearGateWidth)));  // (B, T, 1)
  return x + gate * prev;
}

torch::Tensor GptImpl::head(const torch::Tensor& x) const {
  // lm_head(x) is torch::linear(x, weight) (no bias), plus its LoRA adapter when it has one.
  auto logits =
      cfg_.tie_embeddings ? torch::linear(x, transformer->wte->weight) : lm_head->forward(x);
  if (cfg_.logit_softcap > 0) {
    logits = cfg_.logit_softcap * torch::tanh(logits / cfg_.logit_softcap);
  }
  return logits;
}

torch::Tensor GptImpl::forward(const torch::Tensor& ids, const DocumentLayout* docs) {
  return head(hidden(ids, 0, nullptr, nullptr, nullptr, docs));
}

torch::Tensor GptImpl::forward_cached(const torch::Tensor& ids, KvCache& cache,
                                      const SoftTokens* soft) {
  if (ids.size(1) > cache.room()) {
    throw Error(log::format("KV cache full: %lld more tokens do not fit (room for %lld, %lld held)",
                            (long long)ids.size(1), (long long)cache.room(),
                            (long long)cache.held()));
  }
  auto logits = head(hidden(ids, cache.next_position(), &cache, nullptr, soft));
  cache.advance(ids.size(1));
  return logits;
}

std::unique_ptr<KvCache> GptImpl::make_cache(int64_t batch, int64_t max_len) const {
  auto opts = transformer->wte->weight.options().requires_grad(false);
  auto cache = std::make_unique<FullKvCache>(cfg_.n_layer, batch, cfg_.kv_heads(),
                                             std::min(max_len, cfg_.block_size), cfg_.head_dim(),
                                             opts, rope_spec());
  cache->bound_to_windows(cfg_.layer_windows());
  return cache;
}

}  // namespace lmtrain::model
