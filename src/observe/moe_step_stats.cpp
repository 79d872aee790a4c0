#include "observe/moe_step_stats.h"

#include <ATen/ATen.h>

#include <cmath>

#include "distributed/group.h"
#include "model/gpt.h"

namespace lmtrain::train {

void MoeStepStats::add(const std::vector<model::MoeStats>& stats, double weight) {
  if (stats.empty()) return;
  std::vector<at::Tensor> rows;
  for (const auto& s : stats) {
    rows.push_back(at::cat({s.load.to(at::kDouble), s.dropped.to(at::kDouble).reshape({1}),
                            (s.aux.to(at::kDouble) * weight).reshape({1}),
                            (s.z.to(at::kDouble) * weight).reshape({1})}));
  }
  auto packed = at::stack(rows);  // (L, E + 3)
  packed_ = packed_.defined() ? packed_ + packed : packed;
}

void MoeStepStats::add(const MoeStepStats& other) {
  if (other.empty()) return;
  packed_ = packed_.defined() ? packed_ + other.packed_ : other.packed_.clone();
}

void MoeStepStats::finish(dist::Group& group, model::GptImpl& model, double bias_rate) {
  if (empty()) return;
  group.allreduce(packed_, dist::ReduceOp::kSum)->wait();
  const int64_t E = packed_.size(1) - 3;
  packed_.narrow(1, E + 1, 2).div_(static_cast<double>(group.size()));  // aux, z: rank mean
  if (bias_rate <= 0) return;
  at::NoGradGuard no_grad;
  const auto& layers = model.moe_layers();
  for (size_t l = 0; l < layers.size(); ++l) {
    auto load = packed_.select(0, static_cast<int64_t>(l)).narrow(0, 0, E);
    auto step = (load.mean() - load).sign() * bias_rate;  // + for underloaded experts
    auto& bias = layers[l]->expert_bias;
    bias.add_(step.to(bias.scalar_type()));
  }
}

std::vector<MoeLayerMetrics> summarize_moe(const at::Tensor& packed,
                                           const std::vector<int64_t>& layers) {
  std::vector<MoeLayerMetrics> out;
  if (!packed.defined()) return out;
  auto host = packed.cpu().contiguous();
  const int64_t L = host.size(0), E = host.size(1) - 3;
  const double* p = host.data_ptr<double>();
  for (int64_t l = 0; l < L; ++l) {
    const double* row = p + l * (E + 3);
    double total = 0, lo = INFINITY, hi = 0;
    for (int64_t e = 0; e < E; ++e) {
      total += row[e];
      lo = std::min(lo, row[e]);
      hi = std::max(hi, row[e]);
    }
    const double mean = total / static_cast<double>(E);
    double var = 0;
    for (int64_t e = 0; e < E; ++e) var += (row[e] - mean) * (row[e] - mean);
    var /= static_cast<double>(E);
    MoeLayerMetrics m;
    m.layer = l < static_cast<int64_t>(layers.size()) ? layers[l] : l;
    m.load_min = total > 0 ? lo / total : 0;
    m.load_max = total > 0 ? hi / total : 0;
    m.load_cv = mean > 0 ? std::sqrt(var) / mean : 0;
    m.dropped = total > 0 ? row[E] / total : 0;
    m.aux = row[E + 1];
    m.z = row[E + 2];
    out.push_back(m);
  }
  return out;
}

}  // namespace lmtrain::train
