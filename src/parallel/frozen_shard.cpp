#include "parallel/frozen_shard.h"

#include <torch/csrc/autograd/grad_mode.h>

#include "core/error.h"
#include "parallel/shard_units.h"

namespace lmtrain::parallel {
namespace {

constexpr int64_t kFrozenAlign = 16;  // elements, as the flat layout aligns its segments

int64_t frozen_round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

}  // namespace

int64_t frozen_param_bytes(const model::GptImpl& model) {
  const auto& tags = model.param_tags();
  int64_t n = 0;
  for (const auto& item : model.named_parameters()) {
    auto tag = tags.find(item.key());
    if (tag != tags.end() && !tag->second.trainable) {
      n += item.value().numel() * static_cast<int64_t>(item.value().element_size());
    }
  }
  return n;
}

FrozenShard::FrozenShard(model::GptImpl& model, dist::Group& group, size_t num_units)
    : group_(group), units_(num_units) {
  const auto& tags = model.param_tags();
  const int64_t n_layer = model.config().n_layer;
  // Each unit's frozen parameters, in registration order.
  std::vector<std::vector<at::Tensor>> params(num_units);
  at::TensorOptions opts;
  for (const auto& item : model.named_parameters()) {
    auto tag = tags.find(item.key());
    if (tag == tags.end() || tag->second.trainable) continue;
    const at::Tensor& p = item.value();
    if (num_params_ > 0 &&
        (p.scalar_type() != opts.dtype().toScalarType() || p.device() != opts.device())) {
      throw Error("internal: FrozenShard: frozen parameter '" + item.key() +
                  "' differs from the others in dtype or device");
    }
    opts = p.options().requires_grad(false);
    const size_t u = unit_of_name(item.key(), n_layer);
    if (u >= num_units) throw Error("internal: FrozenShard: unit out of range");
    params[u].push_back(p);
    whole_bytes_ += p.numel() * static_cast<int64_t>(p.element_size());
    ++num_params_;
  }
  if (num_params_ == 0) return;
  const int64_t ranks = group.size();
  int64_t shard_numel = 0;
  std::vector<std::vector<int64_t>> offsets(num_units);
  for (size_t u = 0; u < num_units; ++u) {
    int64_t at = 0;
    for (const auto& p : params[u]) {
      offsets[u].push_back(at);
      at = frozen_round_up(at + p.numel(), kFrozenAlign);
    }
    units_[u].numel = frozen_round_up(at, kFrozenAlign * ranks);
    units_[u].piece = units_[u].numel / ranks;
    units_[u].shard_offset = shard_numel;
    shard_numel += units_[u].piece;
  }
  shard_ = at::empty({shard_numel}, opts);
  torch::NoGradGuard no_grad;
  // Unit by unit, so that at most one unit's buffer is held beside the whole parameters.
  for (size_t u = 0; u < num_units; ++u) {
    Unit& unit = units_[u];
    if (unit.numel == 0) continue;
    unit.buffer = at::zeros({unit.numel}, opts);
    for (size_t i = 0; i < params[u].size(); ++i) {
      auto& p = params[u][i];
      auto view = unit.buffer.narrow(0, offsets[u][i], p.numel()).view(p.sizes());
      view.copy_(p);
      // set_data keeps the parameter's identity: the module's member and its registration
      // see the view, and the old storage is freed once nothing else holds it.
      p.set_data(view);
    }
    shard_.narrow(0, unit.shard_offset, unit.piece)
        .copy_(unit.buffer.narrow(0, group.rank() * unit.piece, unit.piece));
    release_storage(unit.buffer);
  }
}

FrozenShard::~FrozenShard() {
  // A step that threw may leave a gather in flight: it must end before its buffer goes.
  for (auto& unit : units_) {
    if (!unit.gathering) continue;
    try {
      unit.gathering->wait();
    } catch (const std::exception&) {
    }
  }
}

void FrozenShard::issue(size_t u) {
  Unit& unit = units_[u];
  if (unit.numel == 0 || unit.held) return;
  restore_storage(unit.buffer, unit.numel * static_cast<int64_t>(unit.buffer.element_size()));
  unit.held = true;
  torch::NoGradGuard no_grad;
  // Piece q of the unit from rank q, in place into the buffer (equal pieces: one all-gather).
  std::vector<at::Tensor> outputs;
  for (int q = 0; q < group_.size(); ++q) {
    outputs.push_back(unit.buffer.narrow(0, q * unit.piece, unit.piece));
  }
  unit.gathering = group_.allgather(outputs, shard_.narrow(0, unit.shard_offset, unit.piece));
}

void FrozenShard::wait(size_t u) {
  Unit& unit = units_[u];
  if (!unit.gathering) return;
  unit.gathering->wait();
  unit.gathering.reset();
}

void FrozenShard::release(size_t u) {
  Unit& unit = units_[u];
  if (!unit.held) return;
  wait(u);  // never free memory a collective still writes
  release_storage(unit.buffer);
  unit.held = false;
}

int64_t FrozenShard::shard_bytes() const {
  return shard_.defined() ? shard_.numel() * static_cast<int64_t>(shard_.element_size()) : 0;
}

int64_t FrozenShard::unit_bytes(size_t u) const {
  const Unit& unit = units_[u];
  return unit.numel == 0 ? 0 : unit.numel * static_cast<int64_t>(unit.buffer.element_size());
}

}  // namespace lmtrain::parallel
