// The decoder family: GPT-2 (learned positions, pre-LayerNorm blocks, GELU-tanh MLP) and, by
// options (gpt_config.h), Llama / Qwen3 / nanochat blocks: RMSNorm, RoPE, SwiGLU or relu²,
// grouped-query attention, per-head QK-norm, logit soft-capping, untied head. GPT-2 init with
// scaled residual projections. Parameter names follow Hugging Face's GPT-2 for every member
// ("transformer.h.0.attn.c_attn.weight", Linear weights (out, in)): q, k, v live in one fused
// c_attn of (n_head + 2 n_kv_head) * head_dim rows, SwiGLU's gate and up in one c_fc of 2 *
// hidden rows; HF import/export maps other families' names onto these.
// Model code makes no collective calls; parallelism is applied from outside.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <functional>
#include <memory>
#include <vector>

#include "model/activation_checkpoint.h"
#include "model/block_hooks.h"
#include "model/expert_dispatcher.h"
#include "model/feed_forward.h"
#include "model/gpt_config.h"
#include "model/hidden_taps.h"
#include "model/kv_cache.h"
#include "model/layers.h"
#include "model/mlp.h"
#include "model/moe.h"
#include "model/param_tags.h"
#include "model/soft_tokens.h"

namespace lmtrain::model {

class DocumentLayout;  // model/document_mask.h

// Channels of its input nanochat's value-embedding gate and smear gate read (x[..., :12] and
// x[..., :24]).
inline constexpr int64_t kValueGateWidth = 12;
inline constexpr int64_t kSmearGateWidth = 24;

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  // layer: which block it is in (its window, cfg.window(layer)).
  CausalSelfAttentionImpl(const GptConfig& cfg, int64_t layer);
  // x: (B, T, C). With a cache, hands this call's keys/values to it (layer `layer`) and
  // attends over what it keeps; the queries sit at the cache's next_position().
  // ve: this layer's value embedding (B, T, K D) when it has one (model.value_embeds).
  // docs: packed rows (document_mask.h; without a cache): attention within each document, keys
  // and queries rotated at their positions in it.
  torch::Tensor forward(const torch::Tensor& x, KvCache* cache = nullptr, int64_t layer = 0,
                        const torch::Tensor& ve = {}, const DocumentLayout* docs = nullptr);
  Linear c_attn{nullptr}, c_proj{nullptr};
  Linear ve_gate{nullptr};  // (K, 12): the value embedding's per-head gate, 3 sigmoid(.)
  LayerNorm q_norm{nullptr}, k_norm{nullptr};  // per-head RMSNorm (qk_norm only)
  int64_t n_head, n_kv_head, head_dim, n_embd;
  double dropout;
  bool rope;
  RopeParams rope_params;
  int64_t window;   // > 0: sliding-window attention over the last `window` keys
  bool qk_norm;     // with or without weights (q_norm set only with them)
  double qk_scale;  // q and k times this after the QK-norm
  double norm_eps;
};
TORCH_MODULE(CausalSelfAttention);

// What a block's training or scoring forward hands out: the residual stream after the block,
// its feed-forward's output before the residual add (when asked for: feature distillation of
// MoE outputs), and an MoE layer's balance terms (objective undefined for a dense block).
struct BlockOutput {
  torch::Tensor y;        // (B, T, C)
  torch::Tensor ffn_out;  // (B, T, C) or undefined
  MoeBalance balance;

  // The defined tensors, in one fixed order, for activation checkpointing (which carries
  // tensors, not structs), and back: y, [ffn_out], [objective, load, dropped, aux, z].
  std::vector<torch::Tensor> to_tensors() const;
  static BlockOutput from_tensors(const std::vector<torch::Tensor>& t, bool has_ffn_out,
                                  bool has_balance);
};

// Attention, then the feed-forward slot "mlp" (feed_forward.h): the dense MLP, or in MoE layers
// the MoE layer.
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const GptConfig& cfg, int64_t layer, ExpertPlacement experts);
  // Inference (with or without a KV cache): the residual stream after the block.
  torch::Tensor forward(const torch::Tensor& x, KvCache* cache = nullptr, int64_t layer = 0,
                        const torch::Tensor& ve = {});
  // Training and scoring: everything BlockOutput holds.
  BlockOutput forward_train(const torch::Tensor& x, bool keep_ffn_out = false,
                            const torch::Tensor& ve = {}, const DocumentLayout* docs = nullptr);
  bool is_moe() { return mlp->moe_layer() != nullptr; }
  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  std::shared_ptr<FeedForwardImpl> mlp;  // the dense MLP or the MoE layer
  double dropout;

 private:
  // h + dropout(ffn output): the block's residual add.
  torch::Tensor residual(const torch::Tensor& h, const torch::Tensor& m);
};
TORCH_MODULE(Block);

// The "transformer" submodule of HF's GPT2LMHeadModel.
class TransformerImpl : public torch::nn::Module {
 public:
  TransformerImpl(const GptConfig& cfg, ExpertPlacement experts);
  Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList h{nullptr};  // the blocks, registered as "h.N"
  std::vector<Block> blocks;         // the same blocks, typed
  LayerNorm ln_f{nullptr};
};
TORCH_MODULE(Transformer);

// Target id that marks a position without a target (as PyTorch's and HF's ignore_index): it
// counts neither in a loss nor in the number of valid tokens the loss is normalised by.
inline constexpr int64_t kIgnoreIndex = -100;
// The positions (n,) int64 of flat targets (N,) that hold a target (not kIgnoreIndex).
inline torch::Tensor valid_target_rows(const torch::Tensor& targets) {
  return (targets != kIgnoreIndex).nonzero().squeeze(1);
}

// The loss of one training forward, split into its terms.
struct LossTerms {
  torch::Tensor ce;                 // mean cross-entropy over the valid targets (0 if none)
  torch::Tensor moe_objective;      // mean over MoE layers of their weighted balancing losses;
                                    // undefined for a dense model
  std::vector<MoeStats> moe_stats;  // one per MoE layer, in layer order
  torch::Tensor total() const { return moe_objective.defined() ? ce + moe_objective : ce; }
};

// nanochat's model-level extras (model.x0_lambdas, value_embeds, smear, backout), registered
// under "nanochat": resid_lambdas (L), x0_lambdas (L), smear_gate.weight (1, 24), smear_lambda
// (1), backout_lambda (1), value_embeds.{layer}.weight (V, K D).
class NanochatPartsImpl : public TaggedModule {
 public:
  explicit NanochatPartsImpl(const GptConfig& cfg);
  void init_weights(const GptConfig& cfg);  // nanochat's init_weights for these
  torch::Tensor resid_lambdas, x0_lambdas, smear_lambda, backout_lambda;
  Linear smear_gate{nullptr};
  std::vector<Embedding> value_embeds;  // by layer; null where a layer has none
};
TORCH_MODULE(NanochatParts);

class GptImpl : public torch::nn::Module {
 public:
  // init=false leaves the weights uninitialised (never-touched memory): for counting and
  // shape checks of models too big to fill, and before loading a checkpoint.
  // `experts`: the routed experts this process holds (default: all of them).
  explicit GptImpl(const GptConfig& cfg, bool init = true, ExpertPlacement experts = {});

  // ids (B, T) int64 -> logits (B, T, V). docs: packed rows (model/document_mask.h), every
  // document computed as if alone in its row.
  torch::Tensor forward(const torch::Tensor& ids, const DocumentLayout* docs = nullptr);
  // Mean cross-entropy of predicting targets (B, T) from ids (B, T).
  torch::Tensor loss(const torch::Tensor& ids, const torch::Tensor& targets);
  // The training objective's terms (cross-entropy, MoE balancing losses and statistics).
  // masked: targets may hold kIgnoreIndex (those positions are left out of the mean).
  // soft: soft tokens in the input (soft_tokens.h), or none. docs: packed rows, or none.
  LossTerms loss_terms(const torch::Tensor& ids, const torch::Tensor& targets, bool masked = false,
                       const SoftTokens* soft = nullptr, const DocumentLayout* docs = nullptr);
  // The final hidden states (B, T, C), after the last norm, of a training or scoring forward.
  // Objectives that need more than the cross-entropy (distillation) start from here and the
  // head; HiddenTaps::moe has the MoE layers' balance terms (add_moe_terms).
  torch::Tensor final_hidden(const torch::Tensor& ids) { return hidden(ids, 0, nullptr); }
  // The same, handing out the intermediate activations `taps` asks for (hidden_taps.h).
  torch::Tensor final_hidden(const torch::Tensor& ids, HiddenTaps& taps) {
    return hidden(ids, 0, nullptr, &taps);
  }
  // The same with soft tokens (soft_tokens.h): at soft.slots the input embeddings are
  // soft.values instead of the embeddings of ids there (whatever placeholder ids hold).
  torch::Tensor final_hidden(const torch::Tensor& ids, const SoftTokens& soft,
                             HiddenTaps* taps = nullptr) {
    return hidden(ids, 0, nullptr, taps, &soft);
  }
  static void add_moe_terms(const std::vector<MoeBalance>& moe, LossTerms& t);
  // Logits (..., V) of final hidden states (..., C).
  torch::Tensor logits(const torch::Tensor& hidden) const { return head(hidden); }
  // The output head: weight (V, C) and its soft-cap (0 = none): logits = cap tanh(x W^T / cap).
  // Whether the head carries a LoRA adapter (then head_weight() alone is not the head).
  bool head_has_adapter() const { return lm_head && !lm_head->adapters.empty(); }
  const torch::Tensor& head_weight() const {
    return cfg_.tie_embeddings ? transformer->wte->weight : lm_head->weight;
  }
  // Incremental decoding: ids (B, T_new) continue the sequence held in `cache`;
  // returns logits (B, T_new, V) and advances the cache by T_new. `soft`: soft tokens among
  // the new positions (a prompt's series), or none.
  torch::Tensor forward_cached(const torch::Tensor& ids, KvCache& cache,
                               const SoftTokens* soft = nullptr);
  // The exact cache (model/full_kv_cache.h) for up to min(max_len, block_size) tokens.
  std::unique_ptr<KvCache> make_cache(int64_t batch, int64_t max_len) const;
  // How this model rotates keys (for caches that store them unrotated).
  RopeSpec rope_spec() const { return {cfg_.pos == PosEncoding::kRope, cfg_.rope_params()}; }

  // GPT-2 init: N(0, init_std) weights, residual projections N(0, init_std/sqrt(2 n_layer)),
  // zero biases, unit LayerNorm weights. Uses the global torch generator. Frozen parameters are
  // left as they are (they come from a base checkpoint).
  void init_weights();
  // Tags of every parameter, set by the layers that registered them (param_tags.h).
  const ParamTags& param_tags() const { return tags_; }
  // Re-reads the tags after parameters were added or frozen (model/lora.h).
  void refresh_param_tags() { tags_ = collect_param_tags(*this); }
  bool decays(const std::string& name) const { return tags_.at(name).decay; }
  // Weights and persistent buffers (the MoE selection bias): what a checkpoint stores.
  std::vector<std::pair<std::string, torch::Tensor>> state_tensors() const;

  // The routed experts this process holds (all of them unless expert-parallel).
  const ExpertPlacement& expert_placement() const { return experts_; }
  // MoE layers in layer order (empty for a dense model), and their dispatcher (default local).
  const std::vector<MoeImpl*>& moe_layers() const { return moe_layers_; }
  void set_expert_dispatcher(const std::shared_ptr<ExpertDispatcher>& d);

  const GptConfig& config() const { return cfg_; }
  c10::Device device() const { return transformer->wte->weight.device(); }
  // Hooks around every block of a training or scoring forward (block_hooks.h), or none.
  void set_block_hooks(std::shared_ptr<BlockHooks> hooks) { block_hooks_ = std::move(hooks); }
  // The training and scoring loss of final hidden states x (B, T', C) against targets (B, T)
  // (kIgnoreIndex: no target), installed from outside the model in place of the head and
  // cross-entropy: tensor parallelism's vocabulary-parallel loss, whose x holds this rank's
  // T' = T / tp positions (parallel/tensor_parallel_plan.h). Null: the model's own.
  using LossHead =
      std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& targets)>;
  void set_loss_head(LossHead f) { loss_head_ = std::move(f); }
  // Under sequence parallelism the embeddings x hold this rank's piece (B, T / n, C) of the
  // positions, and model.smear needs the position before each: how to reach it, installed from
  // outside the model (parallel/tp_nanochat.h). Unset members: the whole sequence is here.
  struct SequencePiece {
    // x (B, T', C) -> (B, T', C): each position's predecessor (the previous piece's last for the
    // first; zeros before position 0).
    std::function<torch::Tensor(const torch::Tensor& x)> shift_right;
    // A whole per-position tensor (B, T) -> this piece's (B, T').
    std::function<torch::Tensor(const torch::Tensor& whole)> local;
  };
  void set_sequence_piece(SequencePiece p) { sequence_piece_ = std::move(p); }
  // Blocks recomputed in backward while training (see activation_checkpoint.h).
  void set_checkpointing(CheckpointPolicy policy) { checkpoint_ = policy; }
  const CheckpointPolicy& checkpointing() const { return checkpoint_; }
  Transformer transformer{nullptr};
  Linear lm_head{nullptr};          // only when embeddings are untied
  NanochatParts nanochat{nullptr};  // only with one of nanochat's newer parts on

 private:
  // taps: when given, what the caller wants besides the result (MoE terms, activations).
  // soft: embeddings that replace those of ids at its slots. docs: packed rows (no cache).
  torch::Tensor hidden(const torch::Tensor& ids, int64_t start, KvCache* cache,
                       HiddenTaps* taps = nullptr, const SoftTokens* soft = nullptr,
                       const DocumentLayout* docs = nullptr);
  torch::Tensor head(const torch::Tensor& x) const;
  // model.smear on embeddings x (B, T, C) at positions start..: x_t += lambda sigmoid(
  // smear_gate(x_t[:24])) x_{t-1}; in cached decoding x_{start-1} is the one the last call kept.
  // With docs, nothing is smeared into a document's first token.
  torch::Tensor smear(const torch::Tensor& x, int64_t start, KvCache* cache,
                      const DocumentLayout* docs = nullptr);
  torch::Tensor cross_entropy(const torch::Tensor& x, const torch::Tensor& targets,
                              bool masked = false);
  // model.smear in cached decoding: the last normalised embedding (B, 1, C) a call on
  // `smear_cache_` left, for the next call, which starts at `smear_next_`.
  torch::Tensor smear_prev_;
  const KvCache* smear_cache_ = nullptr;
  int64_t smear_next_ = -1;
  GptConfig cfg_;
  CheckpointPolicy checkpoint_;
  std::shared_ptr<BlockHooks> block_hooks_;
  LossHead loss_head_;
  SequencePiece sequence_piece_;
  ParamTags tags_;
  ExpertPlacement experts_;
  std::vector<MoeImpl*> moe_layers_;
};
TORCH_MODULE(Gpt);

}  // namespace lmtrain::model
