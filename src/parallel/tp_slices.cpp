#include "parallel/tp_slices.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "core/log.h"
#include "parallel/tp_lora.h"
#include "parallel/tp_nanochat.h"

namespace lmtrain::parallel {
namespace {

bool tp_slice_name_ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Ranges [first + r n, first + (r+1) n) along a dim of `parts` consecutive parts of n * tp each.
std::vector<std::pair<int64_t, int64_t>> tp_part_ranges(const std::vector<int64_t>& part_sizes,
                                                        int rank, int tp) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t first = 0;
  for (int64_t size : part_sizes) {
    const int64_t n = size / tp;
    out.emplace_back(first + rank * n, first + (rank + 1) * n);
    first += size;
  }
  return out;
}

}  // namespace

void check_tensor_parallel(const model::GptConfig& cfg, int64_t seq_len, int tp) {
  if (tp <= 1) return;
  auto must_divide = [tp](const char* key, int64_t value, const char* why) {
    if (value % tp != 0) {
      throw UsageError(log::format("config key '%s' = %lld does not split over dist.tp = %d %s",
                                   key, (long long)value, tp, why));
    }
  };
  must_divide("model.n_head", cfg.n_head, "(each rank attends with n_head / tp query heads)");
  must_divide("model.n_kv_head", cfg.kv_heads(),
              "(each rank holds n_kv_head / tp key/value heads; they are not replicated: give "
              "n_kv_head a multiple of dist.tp)");
  bool any_dense = false;
  for (int64_t l = 0; l < cfg.n_layer; ++l) any_dense = any_dense || !cfg.moe.is_moe_layer(l);
  if (any_dense) {
    must_divide("model.mlp_hidden", cfg.hidden_dim(), "(the MLP's width is split over the ranks)");
  }
  must_divide("model.vocab_size", cfg.vocab_size,
              "(the token table and the LM head are split by vocabulary rows; pad the "
              "vocabulary to a multiple of dist.tp)");
  must_divide("data.seq_len", seq_len,
              "(sequence parallelism splits the positions between the blocks)");
  // nanochat's value embeddings, smear, backout, x0 lambdas and embed_norm split: tp_nanochat.h.
  // MoE layers are replicated over the TP group (tensor_parallel_plan.h).
}

TpSlice tensor_parallel_slice(const model::GptConfig& cfg, const std::string& name,
                              const std::vector<int64_t>& whole_shape, int rank, int tp) {
  if (auto adapter = tp_lora_slice(name, whole_shape, rank, tp)) return *adapter;
  if (auto part = tp_nanochat_slice(cfg, name, whole_shape, rank, tp)) return *part;
  TpSlice s;
  s.whole_shape = whole_shape;
  const int64_t D = cfg.head_dim(), H = cfg.n_head, K = cfg.kv_heads(), F = cfg.hidden_dim();
  const bool in_attn = name.find(".attn.") != std::string::npos;
  // A dense MLP's c_fc / c_proj; an MoE layer's router, expert stacks and shared experts
  // (mlp.router., mlp.experts., mlp.shared.) are replicated, not split (plan (a) in
  // tensor_parallel_plan.h).
  const bool in_mlp = name.find(".mlp.c_fc.") != std::string::npos ||
                      name.find(".mlp.c_proj.") != std::string::npos;
  if (name == "transformer.wte.weight" || name == "lm_head.weight") {
    s.dim = 0;  // vocabulary rows
    s.ranges = tp_part_ranges({whole_shape[0]}, rank, tp);
  } else if (in_attn && (tp_slice_name_ends_with(name, "c_attn.weight") ||
                         tp_slice_name_ends_with(name, "c_attn.bias"))) {
    s.dim = 0;  // rows [q (H D); k (K D); v (K D)]: this rank's heads of each
    s.ranges = tp_part_ranges({H * D, K * D, K * D}, rank, tp);
  } else if (in_mlp && (tp_slice_name_ends_with(name, "c_fc.weight") ||
                        tp_slice_name_ends_with(name, "c_fc.bias"))) {
    s.dim = 0;  // rows [gate; up] (SwiGLU) or the hidden units
    s.ranges = cfg.mlp == model::MlpKind::kSwiGlu ? tp_part_ranges({F, F}, rank, tp)
                                                  : tp_part_ranges({F}, rank, tp);
  } else if ((in_attn || in_mlp) && tp_slice_name_ends_with(name, "c_proj.weight")) {
    s.dim = 1;  // input columns: this rank's heads or hidden units
    s.ranges = tp_part_ranges({whole_shape[1]}, rank, tp);
  }
  return s;
}

at::Tensor tp_local_piece(const at::Tensor& whole, const TpSlice& s) {
  if (!s.sharded()) return whole;
  std::vector<at::Tensor> parts;
  for (const auto& [b, e] : s.ranges) parts.push_back(whole.narrow(s.dim, b, e - b));
  return at::cat(parts, s.dim).contiguous();
}

}  // namespace lmtrain::parallel
