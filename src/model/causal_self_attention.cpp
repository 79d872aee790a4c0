// A block's attention (model/gpt.h CausalSelfAttentionImpl): the packed q, k, v projection
// (grouped-query), rotary positions, QK norm, nanochat's value-embedding gate, and causal
// attention (sliding window, packed documents, KV cache), the fused kernels where they apply.
#include <tuple>

#include "core/error.h"
#include "model/attention.h"
#include "model/document_mask.h"
#include "model/dropout.h"
#include "model/fused_attention.h"
#include "model/fused_document_attention.h"
#include "model/fused_qkv_split.h"
#include "model/gpt.h"
#include "model/rope.h"

namespace lmtrain::model {

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

}  // namespace lmtrain::model
