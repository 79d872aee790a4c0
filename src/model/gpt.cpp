#include "model/gpt.h"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include "core/error.h"
#include "core/log.h"
#include "model/attention.h"
#include "model/chunked_cross_entropy.h"
#include "model/document_mask.h"
#include "model/dropout.h"
#include "model/full_kv_cache.h"
#include "model/fused_attention.h"
#include "model/fused_cross_entropy.h"
#include "model/fused_document_attention.h"
#include "model/fused_gelu.h"
#include "model/fused_qkv_split.h"
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

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptConfig& cfg, int64_t layer)
    : n_head(cfg.n_head),
      n_kv_head(cfg.kv_heads()),
      head_dim(cfg.head_dim()),
      n_embd(cfg.n_embd),
      dropout(cfg.dropout),
      rope(cfg.pos == PosEncoding::kRope),
      rope_params(cfg.rope_params()),
      window(cfg.window(layer)),
      qk_norm(cfg.qk_norm),
      qk_scale(cfg.qk_scale),
      norm_eps(cfg.norm_eps) {
  const int64_t qkv = (n_head + 2 * n_kv_head) * head_dim;
  c_attn = register_module("c_attn", Linear(cfg.n_embd, qkv, cfg.bias || cfg.qkv_bias));
  c_proj = register_module("c_proj", Linear(n_head * head_dim, cfg.n_embd, cfg.bias,
                                            block_matrix_tag(InitRule::kResidualProj)));
  if (cfg.has_value_embed(layer)) {  // nanochat: in transformer.h, so one of Muon's matrices
    ve_gate = register_module("ve_gate", Linear(kValueGateWidth, n_kv_head, false));
  }
  if (cfg.qk_norm && cfg.norm_weight) {
    q_norm = register_module("q_norm", LayerNorm(head_dim, false, true, cfg.norm_eps));
    k_norm = register_module("k_norm", LayerNorm(head_dim, false, true, cfg.norm_eps));
  }
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, KvCache* cache,
                                               int64_t layer, const torch::Tensor& ve,
                                               const DocumentLayout* docs) {
  if (docs && cache) throw Error("attention: packed rows (documents) take no KV cache");
  const double p = is_training() ? dropout : 0.0;
  auto packed = c_attn(x);  // (B, T, (H + 2K) D)
  // T from c_attn's output, not x: under sequence parallelism x holds 1 / tp of the positions
  // and c_attn gathers them (parallel/tensor_parallel_plan.h).
  const int64_t B = packed.size(0), T = packed.size(1), H = n_head, K = n_kv_head, D = head_dim;
  const bool plain = K == H && H * D == n_embd && !rope && !qk_norm && qk_scale == 1.0 &&
                     !ve.defined();  // GPT-2's attention
  // The CPU kernel has no window: a windowed layer takes the masked path below.
  if (plain && !cache && p == 0 && (window == 0 || T <= window) &&
      fused_attention_supported(packed)) {
    if (!docs) return c_proj(fused_causal_attention(packed, H));
  }
  // Packed rows: the kernel once per document when no window cuts into one.
  if (docs && plain && p == 0 && (window == 0 || docs->longest() <= window) &&
      !docs->bounds().empty() && fused_attention_supported(packed)) {
    return c_proj(fused_document_attention(packed, H, *docs));
  }
  torch::Tensor q, k, v;  // (B, H or K, T, D)
  if (plain) {
    // (B, T, 3C) -> 3 x (B, T, H, D) -> 3 x (B, H, T, D). unbind, not qkv[i]: the backward of
    // three selects zero-fills and re-adds a whole buffer each; unbind's stacks the three
    // gradients once, along dim 2, straight into the packed (B, T, 3, H, D) layout. Unbinding a
    // (3, B, H, T, D) permutation instead stacked them in that order, and the permuted result
    // then took a second full copy to become c_attn's (B, T, 3C) gradient (GPT-2 124M on an H100,
    // 2026-11-28: 1.76 ms of stacking plus 1.44 ms of copying per step, 7% of it).
    auto qkv = packed.view({B, T, 3, H, D}).unbind(2);
    q = qkv[0].transpose(1, 2), k = qkv[1].transpose(1, 2), v = qkv[2].transpose(1, 2);
  } else {
    QkvSplitSpec spec;
    spec.n_head = H;
    spec.n_kv_head = K;
    spec.head_dim = D;
    if (q_norm) {  // Qwen3: RMSNorm over each head's D, before the rotation
      spec.q_norm_weight = q_norm->weight;
      spec.k_norm_weight = k_norm->weight;
      spec.norm_eps = q_norm->eps;
    } else if (qk_norm) {
      // nanochat: norm(rope(q)) * qk_scale. The rotation keeps each head's RMS, so this is the
      // norm before the rotation with a constant weight of qk_scale.
      spec.q_norm_weight = torch::full({D}, qk_scale, packed.options().requires_grad(false));
      spec.k_norm_weight = spec.q_norm_weight;
      spec.norm_eps = norm_eps;
    }
    // With a cache, q rotates at the cache's positions (and the cache rotates the keys it keeps).
    // Packed rows rotate below at their positions within their documents.
    spec.rope = rope && !cache && !docs;
    spec.rope_params = rope_params;
    auto heads = cache ? qkv_split_unfused(packed, spec) : qkv_split(packed, spec);
    q = heads.q, k = heads.k, v = heads.v;
    if (qk_scale != 1.0 && !(qk_norm && !q_norm)) q = q * qk_scale, k = k * qk_scale;
    if (ve.defined()) {
      // nanochat's value embedding: v += 3 sigmoid(ve_gate(x[..., :12])) * ve, per kv head.
      auto gate = 3.0 * torch::sigmoid(ve_gate(x.narrow(-1, 0, kValueGateWidth)));  // (B, T, K)
      v = v + (gate.unsqueeze(-1) * ve.view({B, T, K, D})).transpose(1, 2);         // (B, K, T, D)
    }
    if (rope && cache)
      q = apply_rope_at(q, cache->positions(cache->next_position(), T, x.options()), rope_params);
    if (rope && docs) {
      q = apply_rope_at(q, docs->positions(), rope_params);
      k = apply_rope_at(k, docs->positions(), rope_params);
    }
  }
  if (docs) {
    auto y = document_attention(q, k, v, p, *docs, window);  // (B, H, T, D)
    y = c_proj(y.transpose(1, 2).reshape({B, T, H * D}));
    return p > 0 ? model::dropout(y, p) : y;
  }
  if (cache && cache->attends()) {                   // the cache reads its own (quantised) storage
    auto y = cache->attend(layer, q, k, v, window);  // (B, H, T, D)
    y = c_proj(y.transpose(1, 2).reshape({B, T, H * D}));
    return p > 0 ? model::dropout(y, p) : y;
  }
  if (cache) std::tie(k, v) = cache->update(layer, k, v);  // (B, K, L, D) each
  at::Tensor y;                                            // (B, H, T, D)
  if (cache && cache->wants_attention()) {
    if (K < H) {  // grouped-query attention: query head h reads kv head h / (H / K)
      k = k.repeat_interleave(H / K, /*dim=*/1);
      v = v.repeat_interleave(H / K, /*dim=*/1);
    }
    at::Tensor weights;
    std::tie(y, weights) = causal_attention_with_weights(q, k, v, window);
    cache->observe(layer, weights);
  } else {
    // Left-padded batches: hide each row's pad slots (undefined mask otherwise). The keys are
    // the slots that end at the newest (a windowed layer's cache dropped the ones before).
    const int64_t L = k.size(2);
    y = causal_attention(
        q, k, v, p,
        cache ? cache->key_mask(L, q.options(), cache->next_position() + T - L) : at::Tensor(),
        window);
  }
  y = y.transpose(1, 2).reshape({B, T, H * D});
  y = c_proj(y);
  if (p > 0) y = model::dropout(y, p);
  return y;
}

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
    prev = torch::cat({torch::zeros_like(x.narrow(1, 0, 1)), x.narrow(1, 0, T - 1)}, 1);
  } else {
    if (!cache || cache != smear_cache_ || start != smear_next_) {
      throw Error(
          "model.smear: decoding from position " + std::to_string(start) +
          " needs the embedding before it, which only a call on the same cache that ended there "
          "keeps");
    }
    prev = torch::cat({smear_prev_, x.narrow(1, 0, T - 1)}, 1);
  }
  if (docs) prev = prev * (docs->positions() != 0).unsqueeze(-1).to(prev.scalar_type());
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

torch::Tensor GptImpl::loss(const torch::Tensor& ids, const torch::Tensor& targets) {
  return cross_entropy(hidden(ids, 0, nullptr), targets);
}

LossTerms GptImpl::loss_terms(const torch::Tensor& ids, const torch::Tensor& targets, bool masked,
                              const SoftTokens* soft, const DocumentLayout* docs) {
  LossTerms t;
  HiddenTaps taps;
  t.ce = cross_entropy(hidden(ids, 0, nullptr, &taps, soft, docs), targets, masked);
  add_moe_terms(taps.moe, t);
  return t;
}

void GptImpl::add_moe_terms(const std::vector<MoeBalance>& moe, LossTerms& t) {
  for (const auto& layer : moe) {
    t.moe_objective =
        t.moe_objective.defined() ? t.moe_objective + layer.objective : layer.objective;
    t.moe_stats.push_back(layer.stats);
  }
  if (!moe.empty()) t.moe_objective = t.moe_objective / static_cast<double>(moe.size());
}

torch::Tensor GptImpl::cross_entropy(const torch::Tensor& x_in, const torch::Tensor& targets_in,
                                     bool masked) {
  if (loss_head_) return loss_head_(x_in, targets_in);
  const auto& w = head_weight();
  auto x = x_in.reshape({-1, x_in.size(-1)});  // (N, C)
  auto targets = targets_in.reshape({-1});     // (N,)
  if (masked) {
    // Keep the rows with a target; none left still gives a (zero) loss with a graph, so the
    // backward (and the gradient-sync hooks it fires) runs on every rank.
    auto keep = valid_target_rows(targets);
    if (keep.numel() == 0) return x.sum() * 0.0;
    x = x.index_select(0, keep);
    targets = targets.index_select(0, keep);
  }
  // A LoRA adapter on the head is not in `w`: then the head runs unfused. Otherwise the CPU's
  // fp32 kernel (no soft cap), or on a GPU (and under autocast on a CPU) the chunked path,
  // which never holds the whole (N, V) logits.
  if (!head_has_adapter()) {
    if (cfg_.logit_softcap <= 0 && fused_cross_entropy_supported(x, w)) {
      return fused_linear_cross_entropy(x, w, targets);
    }
    if (x.is_cuda() || at::autocast::is_autocast_enabled(x.device().type())) {
      return chunked_linear_cross_entropy(x, w, targets, cfg_.logit_softcap);
    }
  }
  return torch::cross_entropy_loss(head(x), targets);
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
