// The optimizer files of a checkpoint as an optimizer reads them back: tensor `name` of file
// `file` (one file per saving rank for a sharded layout, one file otherwise), asked for by
// element range, so that a rank reads only the part of the saved state it keeps (issue 42: a
// resume's memory follows this rank's shard, not the model). The checkpoint's files on disk
// (checkpoint/saved_optimizer_files.h) or, for tests and Muon, tensors held in memory.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lmtrain::optim {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class SavedTensors {
 public:
  virtual ~SavedTensors() = default;
  virtual size_t files() const = 0;
  // The tensors of file `file`, in file order.
  virtual std::vector<std::string> names(size_t file) const = 0;
  // The shape of tensor `name` of file `file`; nullopt when that file has no such tensor.
  virtual std::optional<std::vector<int64_t>> shape(size_t file, const std::string& name) const = 0;
  // Elements [begin, begin + count) of it, flattened: a (count,) tensor of the saved dtype,
  // on any device (the caller copies it where it goes).
  virtual at::Tensor read(size_t file, const std::string& name, int64_t begin,
                          int64_t count) const = 0;
  // The whole tensor in its shape (tests, and read_all()).
  at::Tensor read_whole(size_t file, const std::string& name) const;
  // Fills `dst` (1-D, any device) with elements [begin, begin + dst.numel()) of it, read at most
  // 4 MiB of fp32 at a time: the reader holds a bounded buffer beside what it fills, never a
  // second copy of it.
  void read_into(size_t file, const std::string& name, int64_t begin, at::Tensor dst) const;
  // Every file's tensors whole (Optimizer::load_saved_state's default).
  std::vector<NamedTensors> read_all() const;
};

// Tensors already in memory: one NamedTensors per file.
class SavedTensorsInMemory : public SavedTensors {
 public:
  explicit SavedTensorsInMemory(const std::vector<NamedTensors>& files) : files_(files) {}
  size_t files() const override { return files_.size(); }
  std::vector<std::string> names(size_t file) const override;
  std::optional<std::vector<int64_t>> shape(size_t file, const std::string& name) const override;
  at::Tensor read(size_t file, const std::string& name, int64_t begin,
                  int64_t count) const override;

 private:
  const at::Tensor* find(size_t file, const std::string& name) const;
  const std::vector<NamedTensors>& files_;
};

}  // namespace lmtrain::optim
