#include "parallel/tensor_parallel_plan.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "parallel/tp_layers.h"
#include "parallel/tp_lora.h"
#include "parallel/tp_regions.h"
#include "parallel/tp_split_matrices.h"
#include "parallel/vocab_parallel_loss.h"

namespace lmtrain::parallel {
namespace {

bool name_ends_with(const std::string& s, const std::string& tail) {
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

// The local tensor of `whole` for a slice: its ranges along slice.dim, concatenated.
at::Tensor tp_local_piece(const at::Tensor& whole, const TpSlice& s) {
  std::vector<at::Tensor> parts;
  for (const auto& [b, e] : s.ranges) parts.push_back(whole.narrow(s.dim, b, e - b));
  return at::cat(parts, s.dim).contiguous();
}

at::Tensor tp_summed_grad(const at::Tensor& grad, dist::Group& g) {
  auto y = grad.contiguous().clone();
  const auto t0 = std::chrono::steady_clock::now();
  g.allreduce(y, dist::ReduceOp::kSum)->wait();
  train::add_tp_comm_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return y;
}

// Sums a whole parameter's gradient over the TP group before it accumulates.
class TpGradSumHook : public torch::autograd::FunctionPreHook {
 public:
  explicit TpGradSumHook(dist::Group* g) : g_(g) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    auto out = grads;
    if (!out.empty() && out[0].defined()) out[0] = tp_summed_grad(out[0], *g_);
    return out;
  }

 private:
  dist::Group* g_;
};

}  // namespace

TpGroups make_tp_groups(dist::Group& world, int tp) {
  const int w = world.size();
  if (tp < 1 || w % tp != 0) {
    throw UsageError(log::format(
        "config key 'dist.tp' = %d must divide the world of %d ranks (tp ranks split each layer, "
        "world / tp data-parallel replicas)",
        tp, w));
  }
  TpGroups out;
  for (int first = 0; first < w; first += tp) {
    std::vector<int> ranks;
    for (int r = first; r < first + tp; ++r) ranks.push_back(r);
    if (auto sub = world.split(ranks)) out.tp = std::move(sub);
  }
  if (w == tp) {
    out.dp = dist::make_single_rank_group();
    return out;
  }
  for (int i = 0; i < tp; ++i) {
    std::vector<int> ranks;
    for (int r = i; r < w; r += tp) ranks.push_back(r);
    if (auto sub = world.split(ranks)) out.dp = std::move(sub);
  }
  return out;
}

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
  must_divide("model.mlp_hidden", cfg.hidden_dim(), "(the MLP's width is split over the ranks)");
  must_divide("model.vocab_size", cfg.vocab_size,
              "(the token table and the LM head are split by vocabulary rows; pad the "
              "vocabulary to a multiple of dist.tp)");
  must_divide("data.seq_len", seq_len,
              "(sequence parallelism splits the positions between the blocks)");
  auto refuse = [tp](const std::string& what) {
    throw UsageError(what + " does not combine with dist.tp = " + std::to_string(tp) + " yet");
  };
  if (cfg.moe.num_experts > 0) refuse("config key 'model.moe.num_experts' > 0 (MoE)");
  if (cfg.value_embeds) refuse("config key 'model.value_embeds'");
  if (cfg.smear) refuse("config key 'model.smear'");
  if (cfg.backout) refuse("config key 'model.backout'");
  if (cfg.x0_lambdas) refuse("config key 'model.x0_lambdas'");
  if (cfg.embed_norm) refuse("config key 'model.embed_norm'");
}

TpSlice tensor_parallel_slice(const model::GptConfig& cfg, const std::string& name,
                              const std::vector<int64_t>& whole_shape, int rank, int tp) {
  if (auto adapter = tp_lora_slice(name, whole_shape, rank, tp)) return *adapter;
  TpSlice s;
  s.whole_shape = whole_shape;
  const int64_t D = cfg.head_dim(), H = cfg.n_head, K = cfg.kv_heads(), F = cfg.hidden_dim();
  const bool in_attn = name.find(".attn.") != std::string::npos;
  const bool in_mlp = name.find(".mlp.") != std::string::npos;
  if (name == "transformer.wte.weight" || name == "lm_head.weight") {
    s.dim = 0;  // vocabulary rows
    s.ranges = tp_part_ranges({whole_shape[0]}, rank, tp);
  } else if (in_attn &&
             (name_ends_with(name, "c_attn.weight") || name_ends_with(name, "c_attn.bias"))) {
    s.dim = 0;  // rows [q (H D); k (K D); v (K D)]: this rank's heads of each
    s.ranges = tp_part_ranges({H * D, K * D, K * D}, rank, tp);
  } else if (in_mlp && (name_ends_with(name, "c_fc.weight") || name_ends_with(name, "c_fc.bias"))) {
    s.dim = 0;  // rows [gate; up] (SwiGLU) or the hidden units
    s.ranges = cfg.mlp == model::MlpKind::kSwiGlu ? tp_part_ranges({F, F}, rank, tp)
                                                  : tp_part_ranges({F}, rank, tp);
  } else if ((in_attn || in_mlp) && name_ends_with(name, "c_proj.weight")) {
    s.dim = 1;  // input columns: this rank's heads or hidden units
    s.ranges = tp_part_ranges({whole_shape[1]}, rank, tp);
  }
  return s;
}

TensorParallel::TensorParallel(model::GptImpl& model, dist::Group& tp) : model_(model), tp_(tp) {
  const auto& cfg = model.config();
  const int T = tp.size(), rank = tp.rank();
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    auto& p = item.value();
    const auto s = tensor_parallel_slice(cfg, item.key(), p.sizes().vec(), rank, T);
    slices_[item.key()] = s;
    if (s.sharded()) {
      p.set_data(tp_local_piece(p, s));
    } else if (p.requires_grad()) {
      // A whole parameter sees this rank's positions or heads only: its gradient is a partial
      // sum, completed over the TP group before it accumulates.
      auto acc = torch::autograd::impl::grad_accumulator(p);
      if (!acc) throw Error("internal: tensor parallelism over a parameter that is not a leaf");
      acc->add_pre_hook(std::make_unique<TpGradSumHook>(&tp));
      accumulators_.push_back(std::move(acc));
    }
  }
  dist::Group* g = &tp;
  // A layer with LoRA adapters (tp_lora.h) runs them inside its product: a column-parallel
  // one on the gathered input, a row-parallel one before the reduce-scatter.
  auto column = [g, T](model::LinearImpl& layer) -> model::LinearImpl::Product {
    if (layer.adapters.empty()) {
      return [g](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
        return train::column_parallel_linear(x, w, b, *g, /*sequence_parallel=*/true);
      };
    }
    localize_adapter_rows(layer, T);
    const model::LinearImpl* l = &layer;
    return [g, l](const at::Tensor& x, const at::Tensor&, const at::Tensor&) {
      return column_parallel_lora_linear(x, *l, *g);
    };
  };
  auto row = [g](model::LinearImpl& layer) -> model::LinearImpl::Product {
    if (layer.adapters.empty()) {
      return [g](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
        return train::row_parallel_linear(x, w, b, *g, /*sequence_parallel=*/true);
      };
    }
    const model::LinearImpl* l = &layer;
    return [g, l](const at::Tensor& x, const at::Tensor&, const at::Tensor&) {
      return row_parallel_lora_linear(x, *l, *g);
    };
  };
  for (auto& block : model.transformer->blocks) {
    auto& attn = *block->attn;
    attn.c_attn->set_product(column(*attn.c_attn));
    attn.c_proj->set_product(row(*attn.c_proj));
    attn.n_head /= T;
    attn.n_kv_head /= T;
    auto* mlp = block->mlp->dense();
    if (!mlp) throw Error("internal: tensor parallelism over an MoE block");
    mlp->c_fc->set_product(column(*mlp->c_fc));
    mlp->c_proj->set_product(row(*mlp->c_proj));
    mlp->hidden /= T;
  }
  // The head's adapter (lora.targets has head) adds to this rank's vocabulary rows.
  const model::LinearImpl* head_lora = nullptr;
  if (model.lm_head && !model.lm_head->adapters.empty()) {
    localize_adapter_rows(*model.lm_head, T);
    head_lora = model.lm_head.get();
  }
  // Token ids (B, T_seq) -> this rank's positions (B, T_seq / T, C) of the summed lookups.
  model.transformer->wte->set_lookup([g](const at::Tensor& ids, const at::Tensor& table) {
    return train::vocab_parallel_embedding(ids, table, *g, /*sequence_parallel=*/true);
  });
  if (model.transformer->wpe) {
    // Positions (T_seq,) -> this rank's (T_seq / T, C): the rows its part of the sequence adds;
    // a document layout's per-row positions (B, T_seq) -> (B, T_seq / T, C).
    model.transformer->wpe->set_lookup([rank, T](const at::Tensor& pos, const at::Tensor& table) {
      const auto rows = at::embedding(table, pos);
      const int64_t dim = pos.dim() - 1, n = rows.size(dim) / T;
      return rows.narrow(dim, rank * n, n);
    });
  }
  const double softcap = cfg.logit_softcap;
  model::GptImpl* m = &model;
  // x (B, T_seq / T, C) -> gathered (B, T_seq, C) -> logits of this rank's vocabulary rows.
  model.set_loss_head([g, m, softcap, head_lora](const at::Tensor& x, const at::Tensor& targets) {
    const auto whole = train::gather_sequence(x, 1, *g);
    auto logits = at::linear(whole, m->head_weight());  // (B, T_seq, V / T)
    if (head_lora) logits = add_head_adapters(logits, whole, targets, *head_lora);
    if (softcap > 0) logits = softcap * at::tanh(logits / softcap);
    return train::vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                               targets.reshape({-1}), *g, model::kIgnoreIndex);
  });
}

at::Tensor TensorParallel::grad_norm(const optim::FlatParams& flat, int64_t begin, int64_t end,
                                     dist::Group* shard_group) const {
  torch::NoGradGuard no_grad;
  const double whole_weight = 1.0 / tp_.size();  // counted on every TP rank: once in the sum
  at::Tensor sq;
  for (const auto& seg : flat.segments()) {
    const int64_t lo = std::max(seg.offset, begin), hi = std::min(seg.offset + seg.numel, end);
    if (lo >= hi) continue;
    const auto it = slices_.find(seg.name);
    const double w = it != slices_.end() && it->second.sharded() ? 1.0 : whole_weight;
    auto part = flat.grad_slice(lo, hi - lo).to(torch::kFloat64).square().sum() * w;
    sq = sq.defined() ? sq + part : part;
  }
  if (!sq.defined()) sq = torch::zeros({}, flat.options().dtype(torch::kFloat64));
  sq = sq.reshape({1});
  if (shard_group) shard_group->allreduce(sq, dist::ReduceOp::kSum)->wait();
  tp_.allreduce(sq, dist::ReduceOp::kSum)->wait();
  return sq.sqrt().reshape({});
}

std::map<std::string, train::TpSplit> TensorParallel::checkpoint_splits() const {
  std::map<std::string, train::TpSplit> out;
  for (const auto& [name, s] : slices_) {
    if (!s.sharded()) continue;
    train::TpSplit split{s.whole_shape, s.dim, {}};
    for (int r = 0; r < tp_.size(); ++r) {
      split.ranges_by_rank.push_back(
          tensor_parallel_slice(model_.config(), name, s.whole_shape, r, tp_.size()).ranges);
    }
    out.emplace(name, std::move(split));
  }
  return out;
}

at::Tensor TensorParallel::local_piece(const std::string& name, const at::Tensor& whole) const {
  const auto it = slices_.find(name);
  if (it == slices_.end() || !it->second.sharded() ||
      whole.sizes().vec() != it->second.whole_shape) {
    return whole;
  }
  return tp_local_piece(whole, it->second);
}

void TensorParallel::gather_whole() {
  torch::NoGradGuard no_grad;
  const int T = tp_.size();
  for (auto& item : model_.named_parameters()) {
    const auto& s = slices_.at(item.key());
    if (!s.sharded()) continue;
    auto& p = item.value();
    const auto local = p.variable_data();
    std::vector<at::Tensor> pieces(T);
    for (auto& piece : pieces) piece = at::empty_like(local);
    tp_.allgather(pieces, local.contiguous())->wait();
    auto whole = assemble_tp_pieces(model_.config(), item.key(), s, pieces);
    held_.emplace_back(p, local);
    p.set_data(whole);
  }
}

void TensorParallel::release_whole() {
  torch::NoGradGuard no_grad;
  for (auto& [p, local] : held_) p.set_data(local);
  held_.clear();
}

}  // namespace lmtrain::parallel
