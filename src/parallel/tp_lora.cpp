#include "parallel/tp_lora.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "model/dropout.h"
#include "model/gpt.h"
#include "parallel/tp_regions.h"

namespace lmtrain::parallel {
namespace {

bool tp_lora_name_ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool tp_row_parallel_linear(const std::string& linear) {
  return tp_lora_name_ends_with(linear, ".attn.c_proj") ||
         tp_lora_name_ends_with(linear, ".mlp.c_proj");
}

}  // namespace

bool tp_column_parallel_linear(const std::string& linear) {
  return tp_lora_name_ends_with(linear, ".attn.c_attn") ||
         tp_lora_name_ends_with(linear, ".mlp.c_fc") || linear == "lm_head";
}

std::optional<TpSlice> tp_lora_slice(const std::string& name,
                                     const std::vector<int64_t>& whole_shape, int rank, int tp) {
  const auto at = name.find(".lora");
  if (at == std::string::npos) return std::nullopt;
  const std::string linear = name.substr(0, at);
  TpSlice s;
  s.whole_shape = whole_shape;
  auto cut = [&](int64_t dim) {
    const int64_t n = whole_shape.at(dim) / tp;
    s.dim = dim;
    s.ranges = {{rank * n, (rank + 1) * n}};
  };
  if (tp_column_parallel_linear(linear) && tp_lora_name_ends_with(name, ".lora_B")) {
    cut(0);  // B (rows, rank): this rank's output rows of the adapted projection
  } else if (tp_row_parallel_linear(linear) && tp_lora_name_ends_with(name, ".lora_A")) {
    cut(1);  // A (rank, in): this rank's input features
  }
  return s;  // otherwise whole on every rank
}

void localize_adapter_rows(model::LinearImpl& layer, int tp) {
  for (auto& [name, a] : layer.adapters) {
    if (a->rows % tp != 0 || a->row_offset % tp != 0) {
      throw Error("internal: LoRA adapter '" + name + "' rows do not split over dist.tp");
    }
    a->rows /= tp;
    a->row_offset /= tp;
  }
}

at::Tensor tp_adapters_delta(const model::LinearImpl& layer, const at::Tensor& x,
                             int64_t dropout_dim, model::DropoutSplit dropout_split) {
  const int64_t out = layer.weight.size(0);  // this rank's output rows
  at::Tensor sum;
  for (const auto& [name, a] : layer.adapters) {
    // LoraAdapterImpl::delta's product, its dropout mask cut from one process's.
    const auto in = a->is_training() && a->dropout > 0
                        ? model::dropout_part(x, a->dropout, dropout_dim, dropout_split)
                        : x;
    auto d = at::linear(at::linear(in, a->lora_A), a->lora_B) * a->scaling;  // (.., rows)
    if (a->rows != out) d = at::constant_pad_nd(d, {a->row_offset, out - a->row_offset - a->rows});
    sum = sum.defined() ? sum + d : d;
  }
  return sum;
}

at::Tensor add_head_adapters(const at::Tensor& logits, const at::Tensor& hidden,
                             const at::Tensor& targets, const model::LinearImpl& head) {
  const auto keep = model::valid_target_rows(targets.reshape({-1}));              // (n,)
  const auto rows = hidden.reshape({-1, hidden.size(-1)}).index_select(0, keep);  // (n, C)
  const auto d = tp_adapters_delta(head, rows, 1, {});                            // (n, V / T)
  return logits.reshape({-1, logits.size(-1)}).index_add(0, keep, d).reshape(logits.sizes());
}

at::Tensor column_parallel_lora_linear(const at::Tensor& x, const model::LinearImpl& layer,
                                       dist::Group& group) {
  const auto input = train::gather_sequence(x, 1, group);  // (B, T_seq, in)
  auto y = at::linear(input, layer.weight, layer.bias);    // (B, T_seq, out / T)
  const auto d = tp_adapters_delta(layer, input, 1, {});   // the whole input: one mask
  return d.defined() ? y + d : y;
}

at::Tensor row_parallel_lora_linear(const at::Tensor& x, const model::LinearImpl& layer,
                                    dist::Group& group) {
  auto partial = at::linear(x, layer.weight);  // (B, T_seq, out): this rank's share
  // scaling * B (A_r x_r): also a share; x's features are part `rank` of one process's.
  const auto d = tp_adapters_delta(layer, x, -1, {group.size(), group.rank()});
  if (d.defined()) partial = partial + d;
  auto y = train::scatter_sequence(partial, 1, group);  // (B, T_seq / T, out)
  return layer.bias.defined() ? y + layer.bias : y;
}

}  // namespace lmtrain::parallel
