#include "parallel/shard_units.h"

#include <c10/core/StorageImpl.h>

#include <algorithm>

#include "core/error.h"

namespace lmtrain::parallel {

int64_t ShardUnit::buffer_offset(int64_t flat_offset) const {
  int64_t at = 0;
  for (const auto& [lo, hi] : ranges) {
    if (flat_offset >= lo && flat_offset < hi) return at + flat_offset - lo;
    at += hi - lo;
  }
  throw Error("internal: ShardUnit::buffer_offset: element outside the unit");
}

size_t unit_of_name(const std::string& name, int64_t n_layer) {
  static const std::string prefix = "transformer.h.";
  if (name.compare(0, prefix.size(), prefix) != 0) return 0;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return 0;
  int64_t i = -1;
  try {
    i = std::stoll(name.substr(prefix.size(), dot - prefix.size()));
  } catch (const std::exception&) {
    return 0;
  }
  return i >= 0 && i < n_layer ? static_cast<size_t>(1 + i) : 0;
}

std::vector<ShardUnit> plan_shard_units(const optim::FlatParams& flat, int64_t n_layer) {
  std::vector<ShardUnit> units(static_cast<size_t>(n_layer + 1));
  const auto& segs = flat.segments();
  for (size_t i = 0; i < segs.size(); ++i) {
    ShardUnit& u = units[unit_of_name(segs[i].name, n_layer)];
    // This segment, its padding and (for the last) the buffer's tail padding.
    const int64_t lo = i == 0 ? 0 : segs[i].offset;
    const int64_t hi = i + 1 < segs.size() ? segs[i + 1].offset : flat.numel();
    if (!u.ranges.empty() && u.ranges.back().second == lo) {
      u.ranges.back().second = hi;  // continues the unit's last run
    } else {
      u.ranges.emplace_back(lo, hi);
    }
    u.segments.push_back(i);
    u.numel += hi - lo;
  }
  return units;
}

std::pair<int64_t, int64_t> shard_piece(int64_t lo, int64_t hi, int q, int64_t shard) {
  const int64_t a = std::clamp(q * shard, lo, hi), b = std::clamp((q + 1) * shard, lo, hi);
  return {a, b};
}

void release_storage(const at::Tensor& t) {
  auto* impl = t.storage().unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(at::DataPtr(nullptr, impl->device()));
  impl->set_nbytes(size_t{0});
}

void restore_storage(const at::Tensor& t, int64_t nbytes) {
  auto* impl = t.storage().unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(impl->allocator()->allocate(static_cast<size_t>(nbytes)));
  impl->set_nbytes(static_cast<size_t>(nbytes));
}

bool storage_released(const at::Tensor& t) { return t.storage().nbytes() == 0; }

}  // namespace lmtrain::parallel
