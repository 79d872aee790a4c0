#include "optim/saved_tensors.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"

namespace lmtrain::optim {

at::Tensor SavedTensors::read_whole(size_t file, const std::string& name) const {
  const auto dims = shape(file, name);
  if (!dims) throw Error("optimizer state file " + std::to_string(file) + " has no '" + name + "'");
  int64_t numel = 1;
  for (int64_t d : *dims) numel *= d;
  return read(file, name, 0, numel).reshape(*dims);
}

// Saved elements are read at most this many at a time (4 MiB of fp32).
constexpr int64_t kSavedReadChunk = int64_t{1} << 20;

void SavedTensors::read_into(size_t file, const std::string& name, int64_t begin,
                             at::Tensor dst) const {
  for (int64_t off = 0; off < dst.numel(); off += kSavedReadChunk) {
    const int64_t n = std::min(kSavedReadChunk, dst.numel() - off);
    dst.narrow(0, off, n).copy_(read(file, name, begin + off, n));
  }
}

std::vector<NamedTensors> SavedTensors::read_all() const {
  std::vector<NamedTensors> out(files());
  for (size_t f = 0; f < out.size(); ++f) {
    for (const auto& name : names(f)) out[f].emplace_back(name, read_whole(f, name));
  }
  return out;
}

const at::Tensor* SavedTensorsInMemory::find(size_t file, const std::string& name) const {
  if (file >= files_.size()) return nullptr;
  for (const auto& [n, t] : files_[file]) {
    if (n == name) return &t;
  }
  return nullptr;
}

std::vector<std::string> SavedTensorsInMemory::names(size_t file) const {
  std::vector<std::string> out;
  for (const auto& [n, t] : files_.at(file)) out.push_back(n);
  return out;
}

std::optional<std::vector<int64_t>> SavedTensorsInMemory::shape(size_t file,
                                                                const std::string& name) const {
  const at::Tensor* t = find(file, name);
  if (!t) return std::nullopt;
  return t->sizes().vec();
}

at::Tensor SavedTensorsInMemory::read(size_t file, const std::string& name, int64_t begin,
                                      int64_t count) const {
  const at::Tensor* t = find(file, name);
  if (!t) throw Error("optimizer state file " + std::to_string(file) + " has no '" + name + "'");
  return t->reshape({-1}).narrow(0, begin, count);
}

}  // namespace lmtrain::optim
