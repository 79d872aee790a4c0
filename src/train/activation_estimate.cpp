#include "train/activation_estimate.h"

#include <algorithm>

namespace lmtrain::train {
namespace {

// The MLP's hidden tensors per token for width h (see the header).
int64_t mlp_hidden_elements(model::MlpKind kind, int64_t h) {
  return kind == model::MlpKind::kSwiGlu ? 3 * h : 2 * h;
}

// Elements of the compute dtype one token keeps in block `layer` (the header's list).
int64_t block_elements(const model::GptConfig& s, int64_t layer) {
  const int64_t C = s.n_embd, Q = s.n_head * s.head_dim(), K = s.kv_heads() * s.head_dim();
  int64_t n = C + C + (Q + 2 * K) + (s.qk_norm ? Q + K : 0) + Q + C + C;
  if (s.moe.is_moe_layer(layer)) {
    const int64_t he = s.moe.expert_hidden > 0 ? s.moe.expert_hidden : s.hidden_dim();
    n += s.moe.top_k * (2 * C + mlp_hidden_elements(s.mlp, he));
    n += s.moe.shared_experts > 0 ? mlp_hidden_elements(s.mlp, s.moe.shared_experts * he) : 0;
    n += s.moe.num_experts;  // the router's scores
  } else {
    n += mlp_hidden_elements(s.mlp, s.hidden_dim());
  }
  return n;
}

}  // namespace

int64_t activation_bytes_per_sample(const model::ModelOptions& model, const ActivationShape& a,
                                    int tp) {
  const auto& s = model.shape;
  const int64_t T = a.seq_len;
  // The attention probabilities a CPU kernel keeps: n_head x T fp32 per token.
  const int64_t probs = a.attention_probs ? s.n_head * T * 4 : 0;
  int64_t blocks = 0, largest = 0;
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const int64_t full = T * (block_elements(s, l) * a.compute_bytes + probs) / tp;
    largest = std::max(largest, full);
    // A recomputed block keeps its input only; its full set lives while it is recomputed.
    blocks += model.checkpointing.applies_to(l) ? T * s.n_embd * a.compute_bytes / tp : full;
  }
  bool recomputes = false;
  for (int64_t l = 0; l < s.n_layer; ++l) recomputes |= model.checkpointing.applies_to(l);
  if (recomputes) blocks += largest;
  // The final norm's and the head's inputs, then the logits and the loss's exponentials.
  const int64_t head = T * 2 * s.n_embd * a.compute_bytes / tp + 2 * T * s.vocab_size * 4 / tp;
  return blocks + head;
}

}  // namespace lmtrain::train
