#include "parallel/frozen_shard.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <array>

#include "core/error.h"
#include "parallel/shard_units.h"

namespace lmtrain::parallel {
namespace {

constexpr int64_t kFrozenAlign = 16;  // elements, as the flat layout aligns its segments

int64_t frozen_round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

}  // namespace

int64_t frozen_param_bytes(const model::GptImpl& model) {
  return frozen_param_bytes(model,
                            [](const std::string&, const at::Tensor& p) { return p.numel(); });
}

int64_t frozen_param_bytes(
    const model::GptImpl& model,
    const std::function<int64_t(const std::string& name, const at::Tensor& p)>& numel_of) {
  const auto& tags = model.param_tags();
  int64_t n = 0;
  for (const auto& item : model.named_parameters()) {
    auto tag = tags.find(item.key());
    if (tag != tags.end() && !tag->second.trainable) {
      n += numel_of(item.key(), item.value()) * static_cast<int64_t>(item.value().element_size());
    }
  }
  return n;
}

FrozenShard::FrozenShard(model::GptImpl& model, dist::Group& group, size_t num_units,
                         std::optional<at::ScalarType> wire_dtype, const FrozenSource& source)
    : group_(group), wire_(wire_dtype), units_(num_units) {
  const auto& tags = model.param_tags();
  const int64_t n_layer = model.config().n_layer;
  // Each unit's frozen parameters in registration order, by part: [0] plain, [1] lowered (the
  // blocks' linear weights under a wire dtype; the root unit stays exact, as in FullyShard).
  std::vector<std::array<std::vector<at::Tensor>, 2>> params(num_units);
  std::vector<std::array<std::vector<std::string>, 2>> names(num_units);
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
    const bool lowered = wire_ && u > 0 && tag->second.block_matrix;
    params[u][lowered ? 1 : 0].push_back(p);
    names[u][lowered ? 1 : 0].push_back(item.key());
    whole_bytes_ += p.numel() * static_cast<int64_t>(p.element_size());
    ++num_params_;
  }
  if (num_params_ == 0) return;
  const int64_t ranks = group.size();
  int64_t shard_numel = 0;
  // Per unit, per part: each parameter's offset in the unit's buffer.
  std::vector<std::array<std::vector<int64_t>, 2>> offsets(num_units);
  for (size_t u = 0; u < num_units; ++u) {
    Unit& unit = units_[u];
    for (int k = 0; k < 2; ++k) {
      if (params[u][k].empty()) continue;
      Part part;
      part.offset = unit.numel;
      part.lowered = k == 1;
      int64_t at = part.offset;
      for (const auto& p : params[u][k]) {
        offsets[u][k].push_back(at);
        at = frozen_round_up(at + p.numel(), kFrozenAlign);
      }
      part.numel = frozen_round_up(at - part.offset, kFrozenAlign * ranks);
      part.piece = part.numel / ranks;
      part.shard_offset = shard_numel;
      shard_numel += part.piece;
      unit.numel += part.numel;
      unit.parts.push_back(part);
    }
  }
  if (source) opts = source.options.requires_grad(false);
  // From a source the shard is written piece by piece: its padding must be zeros.
  shard_ = source ? at::zeros({shard_numel}, opts) : at::empty({shard_numel}, opts);
  torch::NoGradGuard no_grad;
  // Unit by unit, so that at most one unit's buffer is held beside the whole parameters (from
  // a source, none: the buffer is only made to be viewed, then released untouched).
  for (size_t u = 0; u < num_units; ++u) {
    Unit& unit = units_[u];
    if (unit.numel == 0) continue;
    unit.buffer = source ? at::empty({unit.numel}, opts) : at::zeros({unit.numel}, opts);
    for (int k = 0; k < 2; ++k) {
      for (size_t i = 0; i < params[u][k].size(); ++i) {
        auto& p = params[u][k][i];
        auto view = unit.buffer.narrow(0, offsets[u][k][i], p.numel()).view(p.sizes());
        if (!source) view.copy_(p);
        // set_data keeps the parameter's identity: the module's member and its registration
        // see the view, and the old storage is freed once nothing else holds it.
        p.set_data(view);
      }
    }
    for (const Part& part : unit.parts) {
      const int64_t lo = part.offset + group.rank() * part.piece, hi = lo + part.piece;
      if (!source) {
        shard_.narrow(0, part.shard_offset, part.piece)
            .copy_(unit.buffer.narrow(0, lo, part.piece));
        continue;
      }
      // This rank's piece [lo, hi) of the buffer: the parts of the parameters it covers.
      const int k = part.lowered ? 1 : 0;
      for (size_t i = 0; i < params[u][k].size(); ++i) {
        const int64_t off = offsets[u][k][i];
        const int64_t a = std::max(off, lo), b = std::min(off + params[u][k][i].numel(), hi);
        if (a < b) {
          source.read(names[u][k][i], a - off, shard_.narrow(0, part.shard_offset + a - lo, b - a));
        }
      }
    }
    release_storage(unit.buffer);
  }
}

FrozenShard::~FrozenShard() {
  // A step that threw may leave a gather in flight: it must end before its buffer goes.
  for (auto& unit : units_) unit.gathering.wait_quietly();
}

void FrozenShard::issue(size_t u) {
  Unit& unit = units_[u];
  if (unit.numel == 0 || unit.held) return;
  restore_storage(unit.buffer, unit.numel * static_cast<int64_t>(unit.buffer.element_size()));
  unit.held = true;
  torch::NoGradGuard no_grad;
  for (const Part& part : unit.parts) {
    // Piece q of the part from rank q (equal pieces: one all-gather), in place into the
    // buffer, or into a wire-dtype copy of the part that wait() widens.
    const auto place = unit.buffer.narrow(0, part.offset, part.numel);
    at::Tensor into = place, mine = shard_.narrow(0, part.shard_offset, part.piece);
    if (part.lowered) {
      into = at::empty({part.numel}, place.options().dtype(*wire_));
      mine = mine.to(*wire_);
      unit.gathering.sources.push_back(mine);
      unit.gathering.widen.emplace_back(into, place);
    }
    std::vector<at::Tensor> outputs;
    for (int q = 0; q < group_.size(); ++q) {
      outputs.push_back(into.narrow(0, q * part.piece, part.piece));
    }
    unit.gathering.works.push_back(group_.allgather(outputs, mine));
  }
}

void FrozenShard::wait(size_t u) { units_[u].gathering.finish(); }

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
