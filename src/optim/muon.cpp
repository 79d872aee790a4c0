#include "optim/muon.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::optim {

double MuonOptions::momentum_at(int64_t step) const {
  if (momentum_warmup <= 0) return momentum;
  const double frac = std::min(1.0, static_cast<double>(step) / momentum_warmup);
  return (1.0 - frac) * momentum_start + frac * momentum;
}

at::Tensor newton_schulz5(const at::Tensor& g, int steps) {
  const double a = 3.4445, b = -4.7750, c = 2.0315;
  const bool tall = g.size(0) > g.size(1);
  auto x = tall ? g.t() : g;  // (r, c) with r <= c: X Xᵀ is the small Gram matrix
  x = x / (x.norm() + 1e-7);
  for (int i = 0; i < steps; ++i) {
    auto A = at::mm(x, x.t());
    auto B = at::addmm(A, A, A, /*beta=*/b, /*alpha=*/c);  // b*A + c*A@A
    x = at::addmm(x, B, x, /*beta=*/a, /*alpha=*/1.0);     // a*X + B@X
  }
  return tall ? x.t() : x;
}

Muon::Muon(FlatParams& params, AdamWOptions adam, MuonOptions muon, double base_lr,
           dist::Group& group,
           const std::function<bool(const std::string&, const std::vector<int64_t>&)>& is_muon)
    : params_(params), adam_(adam), muon_(muon), base_lr_(base_lr), group_(group) {
  // The AdamW groups' peak rates, by the layer's tag (model/param_tags.h).
  auto peak_lr_of = [&](const ParamSegment& seg) {
    if (seg.lr_group == model::LrGroup::kEmbedding && muon.embedding_lr > 0) {
      return muon.embedding_lr;
    }
    if (seg.lr_group == model::LrGroup::kHead && muon.head_lr > 0) return muon.head_lr;
    return base_lr;
  };
  for (const auto& seg : params.segments()) {
    if (seg.shape.size() == 2 && is_muon(seg.name, seg.shape)) {
      matrices_.push_back({&seg, 0, {}});
      continue;
    }
    // Segments are in offset order: extend the previous range when it is adjacent and alike
    // (the 16-element alignment padding between them is zero and stays zero).
    AdamRange r{seg.offset, seg.offset + seg.numel, peak_lr_of(seg), seg.decay};
    if (!adam_ranges_.empty()) {
      auto& last = adam_ranges_.back();
      if (last.peak_lr == r.peak_lr && last.decay == r.decay && (r.begin - last.end) < 16) {
        last.end = r.end;
        continue;
      }
    }
    adam_ranges_.push_back(r);
  }
  // Block-cyclic ownership over the matrices sorted by shape (then name), so that every rank
  // gets a similar share of the Newton-Schulz work.
  std::vector<Matrix*> order;
  for (auto& m : matrices_) order.push_back(&m);
  std::stable_sort(order.begin(), order.end(), [](const Matrix* x, const Matrix* y) {
    if (x->seg->shape != y->seg->shape) return x->seg->shape > y->seg->shape;
    return x->seg->name < y->seg->name;
  });
  for (size_t i = 0; i < order.size(); ++i) {
    order[i]->owner = static_cast<int>(i % group.size());
    if (order[i]->owner == group.rank()) {
      order[i]->momentum = torch::zeros(order[i]->seg->shape, params.params().options());
    }
  }
  exp_avg_ = torch::zeros_like(params.params());
  exp_avg_sq_ = torch::zeros_like(params.params());
}

int Muon::owner(const std::string& name) const {
  for (const auto& m : matrices_) {
    if (m.seg->name == name) return m.owner;
  }
  return -1;
}

at::Tensor Muon::grad_norm() {
  if (group_.size() == 1 && !split_) return params_.grad_norm();
  const auto& g = params_.grads();
  const auto f64 = g.options().dtype(torch::kFloat64);
  if (split_) {
    // Segment by segment: a piece counts once, a parameter every TP rank holds whole 1 / T.
    const double whole_weight = 1.0 / split_->parts();
    auto shared = torch::zeros({1}, f64);
    auto owned = torch::zeros({1}, f64);
    for (const auto& seg : params_.segments()) {
      const int own = owner(seg.name);
      if (own >= 0 && own != group_.rank()) continue;
      const double w = split_->split(seg.name) ? 1.0 : whole_weight;
      (own >= 0 ? owned : shared) += params_.view(g, seg).pow(2).sum().to(torch::kFloat64) * w;
    }
    if (group_.size() > 1) group_.allreduce(owned, dist::ReduceOp::kSum)->wait();
    auto total = shared + owned;
    split_->sum(total);
    return total.sqrt().reshape({});
  }
  // Summed in float64, range by range: the same arithmetic on every device.
  auto shared = torch::zeros({}, f64);
  for (const auto& r : adam_ranges_) {
    shared += g.narrow(0, r.begin, r.end - r.begin).pow(2).sum().to(torch::kFloat64);
  }
  auto owned = torch::zeros({1}, f64);
  for (const auto& m : matrices_) {
    if (m.owner == group_.rank()) owned += params_.view(g, *m.seg).pow(2).sum().to(torch::kFloat64);
  }
  group_.allreduce(owned, dist::ReduceOp::kSum)->wait();
  return (shared + owned.reshape({})).sqrt();
}

void Muon::scale_grads(const at::Tensor& coef) {
  torch::NoGradGuard no_grad;
  params_.grads().mul_(coef);
}

void Muon::step(double lr) {
  torch::NoGradGuard no_grad;
  const double mu = muon_.momentum_at(step_);
  ++step_;
  auto p = params_.params();
  const auto& g = params_.grads();
  // AdamW groups: AdamW::step's operations on each range, at the range's group lr.
  const double schedule = base_lr_ > 0 ? lr / base_lr_ : 1.0;
  for (const auto& r : adam_ranges_) {
    const double lr_g = r.peak_lr * schedule;
    const int64_t n = r.end - r.begin;
    if (r.decay && adam_.weight_decay != 0)
      p.narrow(0, r.begin, n).mul_(1 - lr_g * adam_.weight_decay);
    adam_update(p.narrow(0, r.begin, n), g.narrow(0, r.begin, n), exp_avg_.narrow(0, r.begin, n),
                exp_avg_sq_.narrow(0, r.begin, n), step_, lr_g, adam_);
  }
  // Muon group: owners update their matrices, then every matrix is broadcast from its owner.
  const double lr_muon = muon_.lr * schedule;
  std::vector<std::shared_ptr<dist::Work>> works;
  for (auto& mat : matrices_) {
    auto w = params_.view(p, *mat.seg);
    if (mat.owner == group_.rank()) {
      auto grad = params_.view(g, *mat.seg);
      mat.momentum.lerp_(grad, 1.0 - mu);
      auto u = muon_.nesterov ? grad.lerp(mat.momentum, mu) : mat.momentum;
      // Under TP the update is orthogonalised whole: (rows, cols) are the whole matrix's.
      const bool piece = split_ && split_->split(mat.seg->name);
      if (piece) u = split_->gather(mat.seg->name, u);
      const double rows = static_cast<double>(u.size(0)), cols = static_cast<double>(u.size(1));
      auto x = newton_schulz5(u, muon_.ns_steps);
      if (piece) x = split_->piece(mat.seg->name, x);
      w.add_(x, -lr_muon * std::sqrt(std::max(1.0, rows / cols)));
    }
    if (group_.size() > 1) {
      auto flat_view = p.narrow(0, mat.seg->offset, mat.seg->numel);
      works.push_back(group_.broadcast(flat_view, mat.owner));
    }
  }
  for (auto& wk : works) wk->wait();
}

NamedTensors Muon::state_tensors() const {
  NamedTensors out;
  if (group_.rank() == 0) {
    for (const auto& seg : params_.segments()) {
      if (owner(seg.name) >= 0) continue;
      out.emplace_back("exp_avg." + seg.name, params_.view(exp_avg_, seg));
      out.emplace_back("exp_avg_sq." + seg.name, params_.view(exp_avg_sq_, seg));
    }
  }
  for (const auto& m : matrices_) {
    if (m.momentum.defined()) out.emplace_back("momentum." + m.seg->name, m.momentum);
  }
  return out;
}

nlohmann::json Muon::state_layout() const {
  return {{"kind", "muon"}, {"world_size", group_.size()}};
}

void Muon::load_state(const std::vector<NamedTensors>& rank_files, const nlohmann::json& layout,
                      int64_t step) {
  load_saved_state(SavedTensorsInMemory(rank_files), layout, step);
}

void Muon::load_saved_state(const SavedTensors& saved, const nlohmann::json& layout, int64_t step) {
  if (layout.value("kind", "") != "muon") {
    throw Error("optimizer state is " + layout.value("kind", std::string("named")) +
                ", not Muon's: resume with the optimizer the checkpoint was trained with");
  }
  // Which file holds each tensor, from the headers (a later file's name wins, as it did when
  // the files were merged whole).
  std::map<std::string, size_t> file_of;
  for (size_t f = 0; f < saved.files(); ++f) {
    for (const auto& n : saved.names(f)) file_of[n] = f;
  }
  auto checked_file = [&](const std::string& name, const std::vector<int64_t>& shape) {
    auto it = file_of.find(name);
    if (it == file_of.end()) throw Error("Muon state has no tensor '" + name + "'");
    if (saved.shape(it->second, name) != std::optional<std::vector<int64_t>>(shape)) {
      throw Error("Muon state tensor '" + name + "' has the wrong shape");
    }
    return it->second;
  };
  torch::NoGradGuard no_grad;
  for (const auto& seg : params_.segments()) {
    if (owner(seg.name) >= 0) continue;
    for (auto* buf : {&exp_avg_, &exp_avg_sq_}) {
      const std::string name = (buf == &exp_avg_ ? "exp_avg." : "exp_avg_sq.") + seg.name;
      saved.read_into(checked_file(name, seg.shape), name, 0,
                      buf->narrow(0, seg.offset, seg.numel));
    }
  }
  for (auto& m : matrices_) {
    const std::string name = "momentum." + m.seg->name;
    const size_t file = checked_file(name, m.seg->shape);
    if (m.momentum.defined()) saved.read_into(file, name, 0, m.momentum.view({-1}));
  }
  step_ = step;
}

std::vector<at::Tensor> Muon::replicated_state() const {
  if (group_.size() > 1) return {};
  return {exp_avg_, exp_avg_sq_};
}

int64_t Muon::state_bytes() const {
  int64_t n = 0;
  for (const auto& r : adam_ranges_) n += 2 * (r.end - r.begin);
  for (const auto& m : matrices_) {
    if (m.momentum.defined()) n += m.momentum.numel();
  }
  return n * static_cast<int64_t>(sizeof(float));
}

}  // namespace lmtrain::optim
