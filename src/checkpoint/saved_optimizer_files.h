// A checkpoint's optimizer state as optim::SavedTensors (optim/saved_tensors.h), read by range
// from the files on disk, so that a resuming rank reads only the elements of the state it keeps
// (ZeRO: its shard of the new flat layout) and never loads a file whole.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/sharded_reader.h"
#include "core/safetensors.h"
#include "optim/saved_tensors.h"

namespace lmtrain::train {

// Safetensors files (optim.rank<r>.safetensors of a checkpoint saved without model_shards),
// file r being paths[r]; each header is read once, each tensor by element range.
class SavedOptimizerFiles : public optim::SavedTensors {
 public:
  explicit SavedOptimizerFiles(std::vector<std::string> paths);
  size_t files() const override { return paths_.size(); }
  std::vector<std::string> names(size_t file) const override;
  std::optional<std::vector<int64_t>> shape(size_t file, const std::string& name) const override;
  at::Tensor read(size_t file, const std::string& name, int64_t begin,
                  int64_t count) const override;

 private:
  std::vector<std::string> paths_;
  std::vector<core::SafetensorsHeader> headers_;
};

// Adam moments of a checkpoint saved as shards (checkpoint/sharded_reader.h's model_shards):
//   flat():  `world` files of `shard` elements: file r's "exp_avg" / "exp_avg_sq" are elements
//            [r S, (r+1) S) of the flat moments (the saved flat layout regrouped at the reader's
//            shard size S: only the tail padding depends on the ranks), read by range from
//            whichever shard files cover them. With `experts` (a ZeRO run under expert
//            parallelism resuming its own dist.ep and layout), file 0 also holds
//            "<moment>.<segment>" of each expert stack: this rank's saved slices.
//   named(): one file of "<moment>.<segment>" per parameter: the whole tensor, or with `local`
//            (tensor or expert parallelism) this rank's part of it. A range of a tensor saved
//            in the flat space is read alone; a sliced one is read whole, one at a time.
// `dir` and `meta` must outlive the reader.
class SavedShardedMoments : public optim::SavedTensors {
 public:
  static SavedShardedMoments flat(const std::string& dir, const nlohmann::json& meta, int64_t world,
                                  int64_t shard, const TensorLocalizer* experts = nullptr);
  static SavedShardedMoments named(const std::string& dir, const nlohmann::json& meta,
                                   const TensorLocalizer& local = {});

  size_t files() const override { return static_cast<size_t>(world_); }
  std::vector<std::string> names(size_t file) const override;
  std::optional<std::vector<int64_t>> shape(size_t file, const std::string& name) const override;
  at::Tensor read(size_t file, const std::string& name, int64_t begin,
                  int64_t count) const override;

 private:
  struct Named {
    const nlohmann::json* entry;  // the parameter's "tensors" entry
    std::string moment;           // "exp_avg" / "exp_avg_sq"
    std::string segment;
    std::vector<int64_t> shape;  // as this reader gives it (local under `local_`)
  };
  SavedShardedMoments(const std::string& dir, const nlohmann::json& meta)
      : dir_(dir), meta_(meta) {}
  // Adds both moments of entry `t` (segment `seg`) by name.
  void add_named(const nlohmann::json& t, const std::string& seg);

  std::string dir_;
  const nlohmann::json& meta_;
  int64_t world_ = 1, shard_ = 0;
  bool flat_ = false;
  TensorLocalizer local_;
  std::map<std::string, Named> named_;
  std::vector<std::string> order_;  // named_'s keys in the checkpoint's order
  // The last tensor read whole (a sliced one): its ranges are asked for piece by piece.
  mutable std::string whole_name_;
  mutable at::Tensor whole_;
};

}  // namespace lmtrain::train
