#include "parallel/tensor_parallel_plan.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "parallel/tp_fp8.h"
#include "parallel/tp_layers.h"
#include "parallel/tp_local_init.h"
#include "parallel/tp_lora.h"
#include "parallel/tp_nanochat.h"
#include "parallel/tp_regions.h"
#include "parallel/tp_split_matrices.h"
#include "parallel/vocab_parallel_loss.h"

namespace lmtrain::parallel {
namespace {

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

TensorParallel::TensorParallel(model::GptImpl& model, dist::Group& tp,
                               const std::optional<TpFromSeed>& from_seed)
    : model_(model), tp_(tp) {
  const auto& cfg = model.config();
  const int T = tp.size(), rank = tp.rank();
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    slices_[item.key()] =
        tensor_parallel_slice(cfg, item.key(), item.value().sizes().vec(), rank, T);
  }
  // Placed before the hooks below: a change of device or dtype drops a grad accumulator.
  if (from_seed) init_tp_slices_from_seed(model, slices_, from_seed->device, from_seed->dtype);
  for (auto& item : model.named_parameters()) {
    auto& p = item.value();
    const auto& s = slices_.at(item.key());
    if (s.sharded()) {
      if (!from_seed) p.set_data(tp_local_piece(p, s));
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
  // train.precision=fp8 (LinearImpl::fp8, read per call: build_model sets it) takes tp_fp8.h's
  // layers, whose scales are the whole tensors'.
  const auto fp8 = make_tp_fp8_splits(tp);
  auto column = [g, T, fp8](model::LinearImpl& layer) -> model::LinearImpl::Product {
    if (layer.adapters.empty()) {
      const model::LinearImpl* l = &layer;
      return [g, l, fp8](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
        if (l->fp8) return column_parallel_fp8_linear(x, w, b, *g, *fp8);
        return train::column_parallel_linear(x, w, b, *g, /*sequence_parallel=*/true);
      };
    }
    localize_adapter_rows(layer, T);
    const model::LinearImpl* l = &layer;
    return [g, l](const at::Tensor& x, const at::Tensor&, const at::Tensor&) {
      return column_parallel_lora_linear(x, *l, *g);
    };
  };
  auto row = [g, fp8](model::LinearImpl& layer) -> model::LinearImpl::Product {
    if (layer.adapters.empty()) {
      const model::LinearImpl* l = &layer;
      return [g, l, fp8](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
        if (l->fp8) return row_parallel_fp8_linear(x, w, b, *g, *fp8);
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
    if (auto* moe = block->mlp->moe_layer()) {
      // Replicated experts (plan (a), tensor_parallel_plan.h): this rank routes its sequence
      // shard (B, T_seq / T, C) through all of them, locally; their gradients are partial sums
      // over its tokens, completed by the hook above. Only the balancing statistics cross, and
      // under a capacity the expert choices (model/moe_routing.h's plan_dispatch_sharded).
      model::TokenShards shards;
      shards.count = T;
      shards.index = rank;
      shards.sum = [g](const at::Tensor& x) { return train::reduce_from_tp(x, *g); };
      // The ranks' expert choices (B, T_seq / T, k) for a capacity's one-process plan.
      shards.gather = [g](const at::Tensor& x) {
        torch::NoGradGuard no_grad;
        return train::gather_sequence(x, 1, *g);
      };
      moe->set_token_shards(std::move(shards));
      continue;
    }
    auto* mlp = block->mlp->dense();
    if (!mlp) throw Error("internal: a block's feed-forward is neither dense nor MoE");
    mlp->c_fc->set_product(column(*mlp->c_fc));
    mlp->c_proj->set_product(row(*mlp->c_proj));
    mlp->hidden /= T;
  }
  install_tp_nanochat(model, tp);  // value-embedding gates, smear's halo
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

train::TensorLocalizer TensorParallel::localizer() const {
  train::TensorLocalizer localize;
  localize.cut = [this](const std::string& name, const at::Tensor& whole) {
    return local_piece(name, whole);
  };
  localize.rows = [this](const std::string& name) {
    const auto it = slices_.find(name);
    if (it == slices_.end() || !it->second.sharded()) return train::LocalRows{};
    return train::LocalRows{it->second.dim, it->second.ranges, it->second.whole_shape};
  };
  localize.tp_rank = tp_.rank();
  localize.tp = tp_.size();
  return localize;
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
